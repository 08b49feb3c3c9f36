"""Fluent builders for the Node and Pod objects a plugin test needs, as plain Kubernetes dicts.

Dicts (not records) so the same objects can be created in the embedded cluster and on a real API server.
"""

from __future__ import annotations

import copy
from typing import Any


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }

    def capacity(self, **resources: str | int) -> NodeBuilder:
        """`cpu="8", memory="32Gi", pods=110`; extended resources as `**{"example.com/gpu": 2}`."""
        for k, v in resources.items():
            self._obj["status"]["capacity"][k] = str(v)
            self._obj["status"]["allocatable"][k] = str(v)
        return self

    def label(self, key: str, value: str = "") -> NodeBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def annotate(self, key: str, value: str) -> NodeBuilder:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._obj["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self) -> NodeBuilder:
        self._obj["spec"]["unschedulable"] = True
        return self

    def image(self, name: str, size_bytes: int) -> NodeBuilder:
        self._obj["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size_bytes})
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {}}}]},
        }

    @property
    def _c(self) -> dict[str, Any]:
        return self._obj["spec"]["containers"][0]

    def req(self, **resources: str | int) -> PodBuilder:
        """Requests of the pod's container: `cpu="500m", memory="1Gi"`; extended: `**{"a.b/c": 1}`."""
        for k, v in resources.items():
            self._c["resources"]["requests"][k] = str(v)
            if "/" in k:  # extended resources need limits equal to requests
                self._c["resources"].setdefault("limits", {})[k] = str(v)
        return self

    def label(self, key: str, value: str = "") -> PodBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def annotate(self, key: str, value: str) -> PodBuilder:
        self._obj["metadata"]["annotations"][key] = value
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._obj["spec"].setdefault("nodeSelector", {}).update(labels)
        return self

    def toleration(self, key: str, value: str = "", effect: str = "NoSchedule",
                   operator: str = "Equal") -> PodBuilder:
        t: dict[str, Any] = {"key": key, "operator": operator, "effect": effect}
        if operator == "Equal":
            t["value"] = value
        self._obj["spec"].setdefault("tolerations", []).append(t)
        return self

    def priority(self, value: int) -> PodBuilder:
        self._obj["spec"]["priority"] = value
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._obj["spec"]["schedulerName"] = name
        return self

    def on_node(self, name: str) -> PodBuilder:
        """Already bound (an existing pod that takes room on the node)."""
        self._obj["spec"]["nodeName"] = name
        return self

    def host_port(self, port: int) -> PodBuilder:
        self._c["ports"] = [{"containerPort": port, "hostPort": port}]
        return self

    def spec(self, **fields: Any) -> PodBuilder:
        """Any other pod spec field, e.g. `affinity={...}`, `topologySpreadConstraints=[...]`."""
        self._obj["spec"].update(fields)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)

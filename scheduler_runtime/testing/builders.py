"""Fluent builders for the Node and Pod objects a plugin test needs, as plain Kubernetes dicts.

`build()` gives dicts, so the same objects can be created in the embedded cluster and on a real API server;
`record()` (and `NodeBuilder.node_info()`) give the runtime's parsed records, for calling a plugin method
directly without a scheduling cycle.
"""

from __future__ import annotations

import copy
from typing import Any

from ..framework.snapshot import Snapshot
from ..framework.types import NodeInfo
from ..objects import Node, Pod


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

    def record(self) -> Node:
        """The Node record plugins see as `node_info.node`."""
        return Node.from_dict(self.build())

    def node_info(self, *pods: dict[str, Any] | Pod) -> NodeInfo:
        """A NodeInfo of this node holding `pods` (dicts from `make_pod(...).build()` or Pod records), what
        `filter(state, pod, node_info)` and `score(...)` receive."""
        info = NodeInfo(self.record())
        for i, p in enumerate(pods):
            if not isinstance(p, Pod):
                raw = copy.deepcopy(p)
                raw["metadata"].setdefault("uid", f"{info.name}-pod-{i}")
                raw["spec"]["nodeName"] = info.name
                p = Pod.from_dict(raw)
            info.add_pod(p)
        return info


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

    def record(self) -> Pod:
        """The Pod record plugin methods receive as `pod`."""
        return Pod.from_dict(self.build())


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def snapshot_of(*nodes: Node, placed: dict[str, list[Pod]] | None = None) -> Snapshot:
    """A snapshot of parsed `nodes` with `placed` pods (by node name) already on them, for calling a plugin's
    PreFilter/Filter/Score directly the way a cycle would, without a scheduler around it."""
    snap = Snapshot()
    for node in nodes:
        info = NodeInfo(node)
        snap.add_node(info)
        for pod in (placed or {}).get(node.name, []):
            snap.add_pod(info, pod)
    return snap

"""No false positives: what the real kube-apiserver v1.36 stores and serves (defaults, status, managedFields)
has no field the kubernetes package's models lack, so `kubectl get -o yaml` snapshots load without warnings."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.cluster.fieldcheck import model_name, unknown_fields
from scheduler_runtime.cluster.kube import KubeClient, load_connection

pytestmark = pytest.mark.integration

POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rich", "labels": {"app": "x"}},
    "spec": {
        "containers": [{"name": "c", "image": "registry.example.com/x:1",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": {"app": "x"}}}],
        "schedulingGates": [{"name": "example.com/hold"}],
    },
}


def test_served_objects_have_no_unknown_fields(control_plane: Any, namespace: str) -> None:
    client = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    client.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=POD)
    served = [("v1", "Pod", client.call("GET", f"/api/v1/namespaces/{namespace}/pods/rich")),
              ("v1", "Namespace", client.call("GET", f"/api/v1/namespaces/{namespace}"))]
    served += [("v1", "Node", n) for n in client.call("GET", "/api/v1/nodes").get("items") or []]
    served += [("scheduling.k8s.io/v1", "PriorityClass", p)
               for p in client.call("GET", "/apis/scheduling.k8s.io/v1/priorityclasses").get("items") or []]
    assert "managedFields" in served[0][2]["metadata"] and served[0][2].get("status")
    for api, kind, obj in served:  # list items come without apiVersion/kind, as in a kubectl List's items
        name = model_name(api, kind)
        assert name is not None, (api, kind)
        assert unknown_fields(obj, name) == [], (kind, obj["metadata"]["name"])

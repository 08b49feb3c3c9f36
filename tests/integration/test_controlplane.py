"""The local control plane itself: it serves, binds and survives an API-server restart."""

from __future__ import annotations

import subprocess

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection

pytestmark = pytest.mark.integration


def _client(cp) -> KubeClient:
    return KubeClient(load_connection(str(cp.kubeconfig_path)))


def test_node_pod_bind_and_restart(control_plane, namespace):
    c = _client(control_plane)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"cp-node-{namespace}"},
            "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    created = c.call("POST", "/api/v1/nodes", body=node)
    assert created["metadata"]["name"] == node["metadata"]["name"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    p = c.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "p", "namespace": namespace, "uid": p["metadata"]["uid"]},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"]}}
    r = c.request("POST", f"/api/v1/namespaces/{namespace}/pods/p/binding", body=binding)
    assert r.status == 201
    control_plane.restart_apiserver()
    got = _client(control_plane).call("GET", f"/api/v1/namespaces/{namespace}/pods/p")
    assert got["spec"]["nodeName"] == node["metadata"]["name"]


def test_kube_scheduler_binary_runs(control_plane):
    out = subprocess.run([str(control_plane.bin_dir / "kube-scheduler"), "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "v1.36" in out.stdout

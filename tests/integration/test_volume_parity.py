"""The volume plugins against the real kube-scheduler on the same API server: a pod whose bound claim's PV
is pinned to one node lands on that node for both schedulers, and a pod whose Immediate claim is unbound
stays pending with the same reason."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.testing.kube import create_node, ksched_runner, kube_scheduler, scheduler_config, wait_decision

pytestmark = pytest.mark.integration
KUBE, OURS = "vol-kube-scheduler", "vol-ksched"
IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


def _all_nodes(c: KubeClient) -> list[dict]:
    return c.call("GET", "/api/v1/nodes")["items"]


def _pod(ns: str, name: str, scheduler: str, claim: str, group: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": scheduler, "nodeSelector": {"vol-group": group},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


def test_bound_pv_affinity_and_unbound_immediate_claim_match_kube_scheduler(control_plane, namespace,
                                                                            tmp_path: Path):
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:8]
    nodes = [f"vol-{group}-{i}" for i in range(3)]
    for n in nodes:
        create_node(c, n, labels={"vol-group": group})
    sc = f"imm-{group}"
    c.call("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc},
        "provisioner": "csi.example.com", "volumeBindingMode": "Immediate"})
    pv = f"pv-{group}"
    c.call("POST", "/api/v1/persistentvolumes", body={
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "csi": {"driver": "csi.example.com", "volumeHandle": pv},
                 "claimRef": {"namespace": ns, "name": "bound"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes[1]]}]}]}}}})
    c.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "bound", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    c.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "unbound"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                 "resources": {"requests": {"storage": "1Gi"}}}})

    cfg = tmp_path / "kube.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg = tmp_path / "ours.yaml"
    ours_cfg.write_text(scheduler_config(OURS))
    with ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            got = {}
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                for claim in ("bound", "unbound"):
                    name = f"{who}-{claim}"
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, name, sched, claim, group))
                    got[name] = wait_decision(c, ns, name, need_message=True)
    assert got["kube-bound"] == ("bound", nodes[1])
    assert got["ours-bound"] == got["kube-bound"]
    assert got["kube-unbound"][0] == "pending"
    assert "pod has unbound immediate PersistentVolumeClaims" in got["kube-unbound"][1]
    # the PostFilter part reads "not found": DynamicResources' PostFilter finds no state of its PreFilter,
    # which never ran since VolumeBinding rejected the pod first
    assert got["kube-unbound"][1] == f"0/{len(_all_nodes(c))} nodes are available: {IMMEDIATE}. not found"
    assert got["ours-unbound"] == got["kube-unbound"]

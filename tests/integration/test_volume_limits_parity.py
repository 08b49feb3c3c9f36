"""NodeVolumeLimits against the real kube-scheduler on the same API server: an in-tree inline AWS EBS volume
counts against ebs.csi.aws.com's CSINode limit (CSI migration), and a VolumeAttachment of the node counts too.

Each scheduler gets its own pair of identical nodes: one whose only ebs.csi.aws.com slot a VolumeAttachment
holds, one free. The first pod must land on the free node, the second (another disk) must stay pending with
the same message from both schedulers.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.testing.kube import create_node, ksched_runner, kube_scheduler, scheduler_config, wait_decision

pytestmark = pytest.mark.integration
KUBE, OURS = "nvl-kube-scheduler", "nvl-ksched"
EBS = "ebs.csi.aws.com"


def _pod(name: str, scheduler: str, group: str, volume_id: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "nodeSelector": {"nvl-group": group},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "volumes": [{"name": "disk", "awsElasticBlockStore": {"volumeID": volume_id}}]}}


def _node_pair(c: KubeClient, group: str) -> tuple[str, str]:
    """Two nodes with a CSINode allowing one ebs.csi.aws.com volume; the first's slot taken by an attachment."""
    full, free = f"nvl-{group}-full", f"nvl-{group}-free"
    for n in (full, free):
        create_node(c, n, labels={"nvl-group": group})
        c.call("POST", "/apis/storage.k8s.io/v1/csinodes", body={
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n},
            "spec": {"drivers": [{"name": EBS, "nodeID": n, "allocatable": {"count": 1}}]}})
    pv = f"nvl-{group}-attached"
    c.call("POST", "/api/v1/persistentvolumes", body={
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "csi": {"driver": EBS, "volumeHandle": f"vol-{group}"}}})
    c.call("POST", "/apis/storage.k8s.io/v1/volumeattachments", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": pv},
        "spec": {"attacher": EBS, "nodeName": full, "source": {"persistentVolumeName": pv}}})
    return full, free


def test_migrated_inline_volumes_and_volume_attachments_match_kube_scheduler(control_plane, namespace,
                                                                             tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, run = namespace, uuid.uuid4().hex[:6]
    groups = {"kube": f"k{run}", "ours": f"o{run}"}
    free = {who: _node_pair(c, g)[1] for who, g in groups.items()}

    cfg = tmp_path / "kube.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg = tmp_path / "ours.yaml"
    ours_cfg.write_text(scheduler_config(OURS))
    got: dict[str, Any] = {}
    with ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                for i, vol in enumerate(("vol-0a", "aws://us-east-1a/vol-0b")):
                    name = f"{who}-{i}"
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(name, sched, groups[who], vol))
                    got[name] = wait_decision(c, ns, name, need_message=True)
    assert got["kube-0"] == ("bound", free["kube"])
    assert got["ours-0"] == ("bound", free["ours"])
    assert got["kube-1"][0] == "pending" and "2 node(s) exceed max volume count" in got["kube-1"][1]
    assert got["ours-1"] == got["kube-1"]

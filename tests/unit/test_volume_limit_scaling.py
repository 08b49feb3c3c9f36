"""NodeVolumeLimits' VolumeLimitScaling, both gate settings: kube's TestVolumeLimitScalingGate cases
(kube-scheduler v1.37.2 nodevolumelimits/csi_test.go) as a table, plus the gate reaching the plugin through the
config loader."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.gates import PluginFeatures
from scheduler_runtime.plugins.volume.nodevolumelimits import NodeVolumeLimits

EBS = "ebs.csi.aws.com"
MISSING = (int(Code.Unschedulable), [f"{EBS} CSI driver is not installed on the node"])


def _objects(csinode_limit: int | None, driver: str) -> list[dict[str, Any]]:
    """A claim bound to a PV of the EBS CSI driver; the node's CSINode lists the driver (with `csinode_limit`)
    or, with None, lists none; `driver`: absent | plain | opt-in (preventPodSchedulingIfMissing)."""
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "c", "namespace": "default",
                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"volumeName": "v", "storageClassName": "sc", "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"},
         "spec": {"capacity": {"storage": "1Gi"}, "storageClassName": "sc",
                  "csi": {"driver": EBS, "volumeHandle": "h"}},
         "status": {"phase": "Bound"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node"}, "spec": {"drivers": (
            [] if csinode_limit is None else
            [{"name": EBS, "nodeID": "node", "allocatable": {"count": csinode_limit}}])}},
    ]
    if driver != "absent":
        spec = {"preventPodSchedulingIfMissing": True} if driver == "opt-in" else {}
        objs.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": EBS}, "spec": spec})
    return objs


def _filter(gate: bool | None, csinode_limit: int | None, driver: str) -> Any:
    cluster = MemoryCluster()
    for o in _objects(csinode_limit, driver):
        cluster.create(o, emit=False)
    snap = Snapshot()
    snap.add_node(NodeInfo(Node.from_dict({"metadata": {"name": "node"}})))
    args = None if gate is None else PluginFeatures({"VolumeLimitScaling": gate})
    pl = NodeVolumeLimits(args, Handle(snap, cluster=cluster))
    pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {
        "containers": [{"name": "c", "image": "x"}], "volumes": [{"name": "d", "persistentVolumeClaim": {
            "claimName": "c"}}]}})
    state = CycleState()
    assert pl.pre_filter(state, pod, NodeList(snap)) is None  # kube's test: PreFilter does not skip
    st = pl.filter(state, pod, snap.get("node"))
    return None if st is None else (int(st.code), st.reasons)


@pytest.mark.parametrize(("gate", "csinode_limit", "driver", "want"), [
    # gate enabled - allow scheduling when CSIDriver exists but PreventPodSchedulingIfMissing is not set
    (True, None, "plain", None),
    # gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true
    (True, None, "opt-in", MISSING),
    # gate disabled - skip driver presence check (regardless of CSIDriver presence)
    (False, None, "opt-in", None),
    # gate enabled - driver installed within limit
    (True, 2, "opt-in", None),
    # gate enabled - allow scheduling when CSIDriver object missing
    (True, None, "absent", None),
])
def test_kube_volume_limit_scaling_gate_cases(gate: bool, csinode_limit: int | None, driver: str, want: Any) -> None:
    assert _filter(gate, csinode_limit, driver) == want


def test_the_config_loader_hands_the_gate_to_the_plugin() -> None:
    from scheduler_runtime.config.loader import load_config
    from scheduler_runtime.plugins.registry import build_registry

    reg = build_registry()
    for value in (True, False):
        cfg = load_config(None, reg, feature_gates={"VolumeLimitScaling": value})
        args = cfg.profiles[0].args["NodeVolumeLimits"]
        assert NodeVolumeLimits(args, None).limit_scaling is value

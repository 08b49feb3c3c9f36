"""VolumeBinding's StorageCapacityScoring, both gate settings: the args defaulting and validation, and kube's
TestVolumeBinding capacity-scoring cases (kube-scheduler v1.37.2 volume_binding_test.go) as a table.

The table follows kube's cases: the same nodes, claims, PVs, CSIStorageCapacities, shapes and expected
Filter verdicts and scores; kube's test fixtures (the wait/wait-hdd classes, the capacity-tracking class and its
CSIDriver, nodes labelled nodeKey=<name>) are rebuilt here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.defaults import validate_args
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.volume.volumebinding import (
    REASON_BIND_CONFLICT,
    VolumeBinding,
    VolumeBindingArgs,
    broken_linear,
)

ON = {"StorageCapacityScoring": True}
OFF = {"StorageCapacityScoring": False}
SC = "wait-sc"
HDD = "wait-hdd-sc"
CAP_SC = "wait-sc-with-storage-capacity"
DRIVER = "driver-with-storage-capacity"
DEFAULT_SHAPE = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]


def _fixtures() -> list[dict[str, Any]]:
    sc = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": n},
           "provisioner": p, "volumeBindingMode": "WaitForFirstConsumer"}
          for n, p in ((SC, "kubernetes.io/no-provisioner"), (HDD, "kubernetes.io/no-provisioner"), (CAP_SC, DRIVER))]
    return [*sc, {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": DRIVER},
                  "spec": {"storageCapacity": True}}]


def _pvc(name: str, cls: str, size: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}}}


def _pv(name: str, cls: str, size: str, host: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"storageClassName": cls, "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
            "status": {"phase": "Available"}}


def _capacity(node: str, size: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": node, "namespace": "default"}, "storageClassName": CAP_SC, "capacity": size,
            "nodeTopology": {"matchLabels": {"nodeKey": node}}}


def _local_pvs(spec: dict[str, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    """{node: [(class, size), ...]} -> PVs pv-<n>-<i> pinned to node-<n>."""
    return [_pv(f"pv-{n}-{i}", cls, size, f"node-{n}")
            for n, vols in spec.items() for i, (cls, size) in enumerate(vols)]


FAIL = (int(Code.UnschedulableAndUnresolvable), [REASON_BIND_CONFLICT])
#: id -> (claims, objects, shape or None for the default, {node: filter verdict}, {node: score})
CASES: dict[str, tuple[list[tuple[str, str, str]], list[dict[str, Any]], list[dict[str, int]] | None,
                       dict[str, Any], dict[str, int]]] = {
    "local volumes with close capacity are preferred": (
        [("pvc-a", SC, "50Gi")], _local_pvs({"a": [(SC, "200Gi")] * 2, "b": [(SC, "100Gi")] * 2}), None,
        {"node-a": None, "node-b": None, "node-c": FAIL}, {"node-a": 75, "node-b": 50, "node-c": 0}),
    "local volumes with close capacity are preferred (multiple pvcs)": (
        [("pvc-0", SC, "50Gi"), ("pvc-1", HDD, "100Gi")],
        _local_pvs({"a": [(SC, "200Gi")] * 2 + [(HDD, "200Gi")] * 2, "b": [(SC, "100Gi")] * 2 + [(HDD, "100Gi")] * 2}),
        None, {"node-a": None, "node-b": None, "node-c": FAIL}, {"node-a": 63, "node-b": 25, "node-c": 0}),
    "storage capacity score": (
        [("pvc-dynamic", CAP_SC, "10Gi")], [_capacity("node-a", "100Gi"), _capacity("node-b", "50Gi"),
                                            _capacity("node-c", "10Gi")], None,
        {"node-a": None, "node-b": None, "node-c": None}, {"node-a": 90, "node-b": 80, "node-c": 0}),
    "storage capacity score with static binds": (
        [("pvc-dynamic", CAP_SC, "10Gi"), ("pvc-static", SC, "50Gi")],
        [_pv(f"pv-static-{n}", SC, "100Gi", f"node-{n}") for n in "abc"]
        + [_capacity("node-a", "100Gi"), _capacity("node-b", "50Gi"), _capacity("node-c", "10Gi")], None,
        {"node-a": None, "node-b": None, "node-c": None}, {"node-a": 50, "node-b": 50, "node-c": 50}),
    "dynamic provisioning with multiple PVCs of the same StorageClass": (
        [("pvc-dynamic-0", CAP_SC, "50Gi"), ("pvc-dynamic-1", CAP_SC, "50Gi")], [_capacity("node-a", "100Gi")],
        None, {"node-a": None}, {"node-a": 0}),
    "prefer node with least allocatable": (
        [("pvc-dynamic", CAP_SC, "10Gi")], [_capacity("node-a", "100Gi"), _capacity("node-b", "20Gi"),
                                            _capacity("node-c", "10Gi")],
        [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
        {"node-a": None, "node-b": None, "node-c": None}, {"node-a": 10, "node-b": 50, "node-c": 100}),
    "prefer node with maximum allocatable": (
        [("pvc-dynamic", CAP_SC, "10Gi")], [_capacity("node-a", "100Gi"), _capacity("node-b", "20Gi"),
                                            _capacity("node-c", "10Gi")], DEFAULT_SHAPE,
        {"node-a": None, "node-b": None, "node-c": None}, {"node-a": 90, "node-b": 50, "node-c": 0}),
}


def _run(case: str, gates: dict[str, bool]) -> tuple[dict[str, Any], Any, dict[str, int]]:
    claims, objs, shape, verdicts, _ = CASES[case]
    cluster = MemoryCluster()
    for o in [*_fixtures(), *[_pvc(*c) for c in claims], *objs]:
        cluster.create(o, emit=False)
    snap = Snapshot()
    for name in verdicts:
        snap.add_node(NodeInfo(Node.from_dict({"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "nodeKey": name}}})))
    raw: dict[str, Any] = {"bindTimeoutSeconds": 300}
    if shape is not None:
        raw["shape"] = shape
    pl = VolumeBinding(validate_args(VolumeBindingArgs, raw, gates), Handle(snap, cluster=cluster))
    pod = Pod.from_dict({"metadata": {"name": "pod-a", "namespace": "default", "uid": "u"}, "spec": {
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": c[0], "persistentVolumeClaim": {"claimName": c[0]}} for c in claims]}})
    state = CycleState()
    _, st = pl.pre_filter(state, pod, NodeList(snap))
    assert st is None, st
    got_filter = {}
    for ni in snap.node_infos:
        f = pl.filter(state, pod, ni)
        got_filter[ni.name] = None if f is None else (int(f.code), f.reasons)
    pre = pl.pre_score(state, pod, NodeList(snap))
    scores = {}
    if pre is None:
        for ni in snap.node_infos:
            score, sst = pl.score(state, pod, ni)
            assert sst is None
            scores[ni.name] = score
        # the batch form the runtime calls gives the same scores
        batch = pl.score_batch(state, pod, snap, np.arange(len(snap.node_infos), dtype=np.int64))
        assert dict(zip([ni.name for ni in snap.node_infos], batch.tolist(), strict=True)) == scores
    return got_filter, pre, scores


@pytest.mark.parametrize("case", list(CASES))
def test_kube_capacity_scoring_cases_with_the_gate_on(case: str) -> None:
    got_filter, pre, scores = _run(case, ON)
    assert got_filter == CASES[case][3]
    assert pre is None
    assert scores == CASES[case][4]


@pytest.mark.parametrize("case", ["local volumes with close capacity are preferred", "storage capacity score"])
def test_with_the_gate_off_volume_binding_does_not_score(case: str) -> None:
    """kube's "(StorageCapacityScoring disabled)" cases: the same Filter verdicts, PreScore skips."""
    claims, objs, _shape, verdicts, _ = CASES[case]
    CASES["_off"] = (claims, objs, None, verdicts, {})
    try:
        got_filter, pre, _ = _run("_off", OFF)
    finally:
        del CASES["_off"]
    assert got_filter == verdicts
    assert pre is not None and pre.code == Code.Skip


def test_args_default_and_validation_follow_the_gate() -> None:
    """SetDefaults_VolumeBindingArgs / ValidateVolumeBindingArgs: the default shape only with the gate on; a shape
    with the gate off is refused; with it on, the shape is validated as RequestedToCapacityRatio's."""
    on = validate_args(VolumeBindingArgs, {}, ON)
    assert on.model_dump(by_alias=True, mode="json", exclude_none=True) == {"bindTimeoutSeconds": 600,
                                                                            "shape": DEFAULT_SHAPE}
    assert on.storage_capacity_scoring
    off = validate_args(VolumeBindingArgs, {}, OFF)
    assert off.model_dump(by_alias=True, mode="json", exclude_none=True) == {"bindTimeoutSeconds": 600}
    assert not off.storage_capacity_scoring
    with pytest.raises(ValidationError, match=r"shape: Invalid value: .*unexpected field `shape`, remove it or turn "
                                              r"on the feature gate StorageCapacityScoring"):
        validate_args(VolumeBindingArgs, {"shape": DEFAULT_SHAPE}, OFF)
    custom = validate_args(VolumeBindingArgs, {"shape": [{"utilization": 50, "score": 3}]}, ON)
    assert [(p.utilization, p.score) for p in custom.shape or []] == [(50, 3)]
    with pytest.raises(ValidationError) as exc:
        validate_args(VolumeBindingArgs, {"shape": [{"utilization": 60, "score": 1}, {"utilization": 50, "score": 11},
                                                    {"utilization": 101, "score": 0}]}, ON)
    msg = str(exc.value)
    assert "shape[1].utilization: Invalid value: 50: values must be sorted in increasing order" in msg
    assert "shape[1].score: Invalid value: 11: not in valid range [0, 10]" in msg
    assert "shape[2].utilization: Invalid value: 101: not in valid range [0, 100]" in msg


def test_config_loader_defaults_the_shape_by_the_effective_gates() -> None:
    """The written (defaulted) configuration carries the shape only when StorageCapacityScoring is on."""
    from scheduler_runtime.config.loader import load_config
    from scheduler_runtime.plugins.registry import build_registry

    reg = build_registry()

    def vb_args(gates: dict[str, bool]) -> dict[str, Any]:
        cfg = load_config(None, reg, feature_gates=gates)
        pcs = cfg.raw["profiles"][0]["pluginConfig"]
        return next(pc["args"] for pc in pcs if pc["name"] == "VolumeBinding")

    assert vb_args(ON)["shape"] == DEFAULT_SHAPE
    assert "shape" not in vb_args(OFF)


def test_broken_linear_truncates_like_go() -> None:
    shape = [(0, 100), (30, 0), (100, 70)]
    assert [broken_linear(shape, p) for p in (0, 10, 29, 30, 31, 100, 120)] == [100, 67, 4, 0, 1, 70, 70]

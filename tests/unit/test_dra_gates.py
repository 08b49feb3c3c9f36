"""The beta DRA gates that are on by default, switched off with `--feature-gates` as kube-scheduler 1.37.2 has
them off: DRASchedulerFilterTimeout, DRADeviceBindingConditions, DRAPartitionableDevices and DRADeviceTaints.
Each case runs on the embedded cluster (or the plugin alone where the gate-on side would wait minutes) and shows
both settings, so it fails if ksched ignored the gate.

kube-apiserver keeps storing the fields these gates cover (its own gates stay on), so a cluster can hold
devices with binding conditions, counters or taints while the scheduler has the gate off: that is the case here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.config.defaults import validate_args
from scheduler_runtime.config.model import ConfigError
from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import FeatureGates, parse_feature_gates
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.dynamicresources import DynamicResources
from scheduler_runtime.plugins.dynamicresources.args import DynamicResourcesArgs
from scheduler_runtime.plugins.registry import build_registry

from .test_dra_consumable import _class, _message, _node, _pod, _run, _where

NS = "ml"
DRIVER = "gpu.example.com"
ON = parse_feature_gates([], "1.37")


def off(*names: str) -> FeatureGates:
    return parse_feature_gates([",".join(f"{n}=false" for n in names)], "1.37")


def _slice(name: str, pool: str, devices: list[dict[str, Any]], count: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}}
    body.update(spec if spec else {"nodeName": "n1"})
    if devices:
        body["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def _stored(m: MemoryCluster, name: str) -> dict[str, Any]:
    got = m.informer("resourceclaims").get(name, NS)
    assert got is not None, name
    return got


def _devices(m: MemoryCluster, name: str) -> list[str]:
    alloc = (_stored(m, name).get("status") or {}).get("allocation") or {}
    return [r["device"] for r in (alloc.get("devices") or {}).get("results") or []]


def _plugin(m: MemoryCluster, gates: FeatureGates) -> DynamicResources:
    """The plugin as the config loader builds it: args validated with the gates, the gates on the handle."""
    handle = Handle(Snapshot(), cluster=m)
    handle.feature_gates = gates
    return DynamicResources(validate_args(DynamicResourcesArgs, {}, gates), handle)


def _filter(pl: DynamicResources, m: MemoryCluster, pod: str) -> tuple[CycleState, Any]:
    """PreFilter and Filter on n1."""
    p = Pod.from_dict(m.get_pod(NS, pod))
    st = CycleState()
    _res, status = pl.pre_filter(st, p, None)  # type: ignore[arg-type]
    assert status is None or status.code == Code.Success, status
    return st, pl.filter(st, p, NodeInfo(Node.from_dict(_node("n1"))))


def _dra_args(cfg: Any) -> dict[str, Any]:
    pcs = cfg.raw["profiles"][0]["pluginConfig"]
    return dict(next(pc["args"] for pc in pcs if pc["name"] == "DynamicResources"))


def test_the_default_on_beta_dra_gates_can_be_switched_off() -> None:
    """ksched refused these settings before it implemented them; DRADeviceTaints needs DRADeviceTaintRules off
    too (kube's dependency check)."""
    for gate in ("DRASchedulerFilterTimeout", "DRADeviceBindingConditions", "DRAPartitionableDevices"):
        assert off(gate)[gate] is False
    assert off("DRADeviceTaints", "DRADeviceTaintRules")["DRADeviceTaints"] is False
    with pytest.raises(UsageError, match=r"DRADeviceTaintRules is enabled, but depends on features that are "
                                         r"disabled: \[DRADeviceTaints\]"):
        off("DRADeviceTaints")
    # alpha and off when emulating 1.35: switching them on is honoured too
    on_135 = parse_feature_gates(["DRADeviceBindingConditions=true,DRAPartitionableDevices=true,DRADeviceTaints=true"],
                                 "1.35")
    assert on_135["DRADeviceBindingConditions"] and on_135["DRAPartitionableDevices"] and on_135["DRADeviceTaints"]
    # the beta gate that is off by default (on only with --min-compatibility-version=1.37) can be switched on
    assert parse_feature_gates(["DRAFractionalCapacityRange=true"], "1.37")["DRAFractionalCapacityRange"]
    with pytest.raises(UsageError, match=r"DRAFractionalCapacityRange is enabled, but depends on features that are "
                                         r"disabled: \[DRAConsumableCapacity\]"):
        parse_feature_gates(["DRAFractionalCapacityRange=true,DRAConsumableCapacity=false"], "1.37")


# ----------------------------------------------------------------------------------- DRASchedulerFilterTimeout
def test_filter_timeout_is_neither_defaulted_nor_allowed_with_its_gate_off(tmp_path: Path) -> None:
    """SetDefaults_DynamicResourcesArgs sets filterTimeout only with the gate on, and kube's v1 type writes the
    unset field as null; ValidateDynamicResourcesArgs refuses a value with the gate off (kube's message names
    the gate DRASchedulingFilterTimeout); the plugin then bounds no search."""
    reg = build_registry([])
    assert _dra_args(load_config(None, reg, feature_gates=ON))["filterTimeout"] == "10s"
    gates = off("DRASchedulerFilterTimeout")
    args = _dra_args(load_config(None, reg, feature_gates=gates))
    assert "filterTimeout" in args and args["filterTimeout"] is None
    assert args["bindingTimeout"] == "10m0s"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                   "- pluginConfig:\n  - name: DynamicResources\n    args: {filterTimeout: 5s}\n")
    assert _dra_args(load_config(cfg, reg, feature_gates=ON))["filterTimeout"] == "5s"
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.pluginConfig\[0\]\.args\.filterTimeout: Forbidden: "
                                          r"DRASchedulingFilterTimeout feature gate is disabled"):
        load_config(cfg, reg, feature_gates=gates)
    m = MemoryCluster()
    assert _plugin(m, ON).filter_timeout == 10.0
    assert _plugin(m, gates).filter_timeout == 0.0



# ----------------------------------------------------------------------------------- DRADeviceBindingConditions
_BC = {"bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}


def _allocated_with_conditions(name: str, timestamp: str) -> dict[str, Any]:
    """A claim allocated (by an earlier scheduler) a device with binding conditions that never became true."""
    c = _claim(name)
    c["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0", **_BC}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        "allocationTimestamp": timestamp}}
    return c


def test_binding_timeout_is_neither_defaulted_nor_allowed_with_the_gate_off() -> None:
    """kube defaults and accepts bindingTimeout only with DRADeviceBindingConditions (and
    DRAResourceClaimDeviceStatus) on."""
    gates = off("DRADeviceBindingConditions")
    assert "bindingTimeout" not in _dra_args(load_config(None, build_registry([]), feature_gates=gates))
    with pytest.raises(ValidationError, match=r"bindingTimeout: Forbidden: DRADeviceBindingConditions or "
                                              r"DRAResourceClaimDeviceStatus feature gate is disabled"):
        validate_args(DynamicResourcesArgs, {"bindingTimeout": "5m"}, gates)
    assert validate_args(DynamicResourcesArgs, {"bindingTimeout": "5m"}, ON).binding_timeout == "5m0s"


def test_devices_with_binding_conditions_are_not_allocated_with_the_gate_off() -> None:
    """The allocator passes over a device with binding conditions when the gate is off (isSelectable), and
    the allocation gets no allocationTimestamp; with the gate on the device is allocated."""
    objects = [_node("n1"), _class(), _slice("n1-fabric", "n1", [{"name": "gpu-0", **_BC}]),
               _slice("n1-plain", "n1-plain", [{"name": "plain-0"}]), _claim("c1"), _claim("c2")]
    m = _run(objects, [_pod("a", "c1"), _pod("b", "c2")], off("DRADeviceBindingConditions"))
    assert (_where(m, "a"), _devices(m, "c1")) == ("n1", ["plain-0"])
    assert "allocationTimestamp" not in _stored(m, "c1")["status"]["allocation"]
    assert _where(m, "b") == "" and "cannot allocate all claims" in _message(m, "b")
    # with the gate on, once plain-0 is taken the device is allocated with its conditions (PreBind then waits
    # for them: here until the binding timeout, on a clock that jumps)
    m = MemoryCluster()
    for o in [*objects, _pod("b", "c2")]:
        m.create(o, emit=False)
    m.patch_object("resourceclaims", "c1", NS, {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1-plain", "device": "plain-0"}]}}}}, subresource="status")
    pl = _plugin(m, ON)
    pl.clock = _JumpingClock()
    st, status = _filter(pl, m, "b")
    assert status is None
    p = Pod.from_dict(m.get_pod(NS, "b"))
    assert pl.reserve(st, p, "n1") is None
    assert pl.pre_bind(st, p, "n1").message == "device binding timeout: context deadline exceeded"
    alloc = _stored(m, "c2")["status"]["allocation"]
    assert alloc["devices"]["results"] == [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
                                            **_BC}]
    assert alloc["allocationTimestamp"]


def test_a_claim_past_its_binding_timeout_is_usable_with_the_gate_off() -> None:
    """kube's Filter checks an allocated claim's binding conditions (a claim past bindingTimeout is not
    available, for PostFilter to deallocate) and PreBind waits for them, only with the gate on; with it off the
    pod binds at once on the claim as it is."""
    objects = [_node("n1"), _class(), _slice("n1-fabric", "n1", [{"name": "gpu-0", **_BC}]),
               _allocated_with_conditions("c", "2020-01-01T00:00:00Z")]
    m = _run(objects, [_pod("a", "c")], off("DRADeviceBindingConditions"))
    assert _where(m, "a") == "n1"
    stored = _stored(m, "c")["status"]
    assert [r["name"] for r in stored["reservedFor"]] == ["a"]
    assert stored["allocation"]["allocationTimestamp"] == "2020-01-01T00:00:00Z"
    m = MemoryCluster()
    for o in [*objects, _pod("a", "c")]:
        m.create(o, emit=False)
    _st, status = _filter(_plugin(m, ON), m, "a")
    assert status.code == Code.UnschedulableAndUnresolvable
    assert status.message == "resourceclaim not available on the node"


def test_prebind_does_not_wait_for_binding_conditions_with_the_gate_off() -> None:
    """A claim allocated with binding conditions that are not met yet: with the gate on PreBind waits (here until
    its binding timeout, on a clock that jumps), with it off PreBind returns at once."""
    objects = [_node("n1"), _class(), _slice("n1-fabric", "n1", [{"name": "gpu-0", **_BC}]),
               _allocated_with_conditions("c", "2030-01-01T00:00:00Z"), _pod("a", "c")]
    results = {}
    for label, gates in (("on", ON), ("off", off("DRADeviceBindingConditions"))):
        m = MemoryCluster()
        for o in objects:
            m.create(o, emit=False)
        pl = _plugin(m, gates)
        pl.clock = _JumpingClock()
        st, status = _filter(pl, m, "a")
        assert status is None
        p = Pod.from_dict(m.get_pod(NS, "a"))
        assert pl.reserve(st, p, "n1") is None
        got = pl.pre_bind(st, p, "n1")
        results[label] = (got.code, got.message) if got is not None else None, pl.clock.slept
        assert [r["name"] for r in _stored(m, "c")["status"]["reservedFor"]] == ["a"]
    assert results["on"] == ((Code.Error, "device binding timeout: context deadline exceeded"), 600.0)
    assert results["off"] == (None, 0.0)


class _JumpingClock:
    """The plugin's clock (wall time, monotonic time, sleeping) where sleeping only moves the time on."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # 2027, before the claim's allocation timestamp
        self.slept = 0.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


# ----------------------------------------------------------------------------------- DRAPartitionableDevices
def _partitioned() -> list[dict[str, Any]]:
    """Pool n1-parts: a counter slice (40Gi) and two partitions of 30Gi each; pool n1-whole: one plain device."""
    counters = _slice("n1-parts-counters", "n1-parts", [], count=2, nodeName="n1",
                      sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}])
    parts = _slice("n1-parts-devices", "n1-parts", [
        {"name": f"part-{i}", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}]}
        for i in range(2)], count=2)
    return [counters, parts, _slice("n1-whole", "n1-whole", [{"name": "whole"}])]


def test_devices_consuming_counters_are_not_allocated_with_the_gate_off() -> None:
    """With the gate on the first pool's partition is taken, the second partition does not fit the counters
    left, so the next pod gets the plain device. With it off kube skips slices with sharedCounters (the pool is
    still complete: its other slices count) and never allocates a device that consumes counters."""
    objects = [_node("n1"), _class(), *_partitioned(), _claim("c1"), _claim("c2"), _claim("c3")]
    pods = [_pod("a", "c1"), _pod("b", "c2"), _pod("c", "c3")]
    m = _run(objects, pods, ON)
    assert [(_where(m, p), _devices(m, c)) for p, c in (("a", "c1"), ("b", "c2"), ("c", "c3"))] == [
        ("n1", ["part-0"]), ("n1", ["whole"]), ("", [])]
    m = _run(objects, pods, off("DRAPartitionableDevices"))
    assert [(_where(m, p), _devices(m, c)) for p, c in (("a", "c1"), ("b", "c2"), ("c", "c3"))] == [
        ("n1", ["whole"]), ("", []), ("", [])]
    assert "cannot allocate all claims" in _message(m, "b")


def test_slices_with_per_device_node_selection_are_ignored_with_the_gate_off() -> None:
    """perDeviceNodeSelection is part of the same feature: kube's GatherPools skips such a slice when it is off."""
    sl = _slice("shared", "shared", [{"name": "d-0", "nodeName": "n1"}], perDeviceNodeSelection=True)
    objects = [_node("n1"), _class(), sl, _claim("c")]
    m = _run(objects, [_pod("a", "c")], ON)
    assert (_where(m, "a"), _devices(m, "c")) == ("n1", ["d-0"])
    m = _run(objects, [_pod("a", "c")], off("DRAPartitionableDevices"))
    assert _where(m, "a") == "" and "cannot allocate all claims" in _message(m, "a")


# ----------------------------------------------------------------------------------- DRADeviceTaints
def test_device_taints_are_ignored_with_the_gate_off() -> None:
    """A NoSchedule taint keeps the device from an untolerating claim with the gate on; with DRADeviceTaints
    (and DRADeviceTaintRules, which depends on it) off the allocator does not look at taints."""
    taint = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
    objects = [_node("n1"), _class(), _slice("n1-gpus", "n1", [{"name": "gpu-0", "taints": [taint]}]), _claim("c")]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == "" and "cannot allocate all claims" in _message(m, "a")
    m = _run(objects, [_pod("a", "c")], off("DRADeviceTaints", "DRADeviceTaintRules"))
    assert (_where(m, "a"), _devices(m, "c")) == ("n1", ["gpu-0"])


# ----------------------------------------------------------------------------------- DRAFractionalCapacityRange
def test_fractional_capacity_range_arithmetic_follows_the_gate() -> None:
    """kube's roundUpRange / violateValidRange: with the gate on, milli arithmetic when min, max and step all have
    exact milli values; a request without one then cannot be computed (kube aborts the allocation); a step finer
    than 1m keeps the integer path (Value(): fractions round up)."""
    from decimal import Decimal

    from scheduler_runtime.plugins.dynamicresources.capacity import CapacityError, consumed_one, fits, quantity

    milli = {"value": "1", "requestPolicy": {"default": "200m",
                                             "validRange": {"min": "200m", "step": "100m", "max": "1"}}}
    assert consumed_one(quantity("250m"), milli, fractional=True) == (Decimal("0.3"), "300m")
    assert consumed_one(quantity("250m"), milli) == (Decimal(1), "1")
    assert consumed_one(quantity("1.25"), milli, fractional=True) == (Decimal("1.3"), "1300m")
    assert consumed_one(quantity("950m"), milli, fractional=True) == (Decimal(1), "1")  # whole: written like step
    with pytest.raises(CapacityError, match="request 250500u is not a representable milli value"):
        consumed_one(quantity("250500u"), milli, fractional=True)
    micro = {"value": "1", "requestPolicy": {"validRange": {"min": "200m", "step": "1u"}}}
    assert consumed_one(quantity("250m"), micro, fractional=True) == (Decimal(1), "1")
    # 300m more fits next to 600m allocated, not next to 900m; 250m is off the steps, so it is rounded, not refused
    assert fits({"memory": quantity("250m")}, {"memory": milli}, {"memory": Decimal("0.6")}, None, fractional=True)
    assert not fits({"memory": quantity("250m")}, {"memory": milli}, {"memory": Decimal("0.9")}, None,
                    fractional=True)


def test_config_validate_applies_the_feature_gates_given(tmp_path: Path) -> None:
    """`ksched config validate --feature-gates` checks with those gates, as the run it stands in for would: a
    filterTimeout is valid by default and Forbidden with DRASchedulerFilterTimeout off; a bad gate is a usage
    error."""
    import subprocess
    import sys

    f = tmp_path / "dra.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                 "- schedulerName: default-scheduler\n  pluginConfig:\n  - name: DynamicResources\n"
                 "    args: {filterTimeout: 5s}\n")
    ksched = [sys.executable, "-m", "ksched_cli.main", "config", "validate", str(f)]
    runs = {gates: subprocess.run([*ksched, *(["--feature-gates", gates] if gates else [])],
                                  capture_output=True, text=True, timeout=120)
            for gates in ("", "DRASchedulerFilterTimeout=false", "NoSuchGate=true")}
    assert runs[""].returncode == 0, runs[""].stderr
    off = runs["DRASchedulerFilterTimeout=false"]
    assert off.returncode == 1 and "args.filterTimeout: Forbidden" in off.stderr
    assert runs["NoSuchGate=true"].returncode == 2
    assert "unrecognized feature gate: NoSuchGate" in runs["NoSuchGate=true"].stderr

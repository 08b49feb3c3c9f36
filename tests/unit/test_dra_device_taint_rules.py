"""DRADeviceTaintRules, both gate settings, on the embedded cluster: a DeviceTaintRule's taint keeps the devices
it selects (by driver, pool, device) from pods whose claims do not tolerate it, as a taint in the ResourceSlice
would; with the gate off the rules are not looked at (kube 1.36's default). A rule created, changed or deleted
while a pod waits requeues it."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.dynamicresources.taintrules import apply_taint_rules
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

NS = "ml"
DRIVER = "gpu.example.com"
ON = {"DRADeviceTaintRules": True}
OFF = {"DRADeviceTaintRules": False}
NO_DEVICE = "cannot allocate all claims"


def _slice(node: str, n: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(n)]}}


def _rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": "maintenance", "value": "yes", "effect": effect}}}


def _claim(name: str, tolerate: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": 1}
    if tolerate:
        exactly["tolerations"] = [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}


def _cluster(*extra: dict[str, Any]) -> MemoryCluster:
    m = MemoryCluster()
    for o in [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
               "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}} for n in ("n1", "n2")] + [
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
            _slice("n1", 2), _slice("n2", 1), *extra]:
        m.create(o, emit=False)
    return m


def _scheduler(m: MemoryCluster, gates: dict[str, bool]) -> Scheduler:
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=gates), reg, seed=1)
    s.start()
    return s


def _allocated(m: MemoryCluster, claim: str) -> list[tuple[str, str]]:
    got = m.informer("resourceclaims").get(claim, NS) or {}
    alloc = (got.get("status") or {}).get("allocation") or {}
    return [(r["pool"], r["device"]) for r in (alloc.get("devices") or {}).get("results") or []]


def _message(m: MemoryCluster, pod: str) -> str:
    conds = ((m.get_pod(NS, pod) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conds if c["type"] == "PodScheduled"), "")


def test_apply_taint_rules_selects_by_driver_pool_and_device() -> None:
    s = _slice("n1", 2)
    taint = _rule("r")["spec"]["taint"]
    assert apply_taint_rules(s, [{"spec": {"taint": taint}}]) is s  # no selector: nothing
    assert apply_taint_rules(s, [_rule("r", driver="other")]) is s
    assert apply_taint_rules(s, [_rule("r", pool="n2")]) is s
    one = apply_taint_rules(s, [_rule("r", driver=DRIVER, pool="n1", device="gpu-1")])
    assert [d.get("taints") for d in one["spec"]["devices"]] == [None, [taint]]
    assert "taints" not in s["spec"]["devices"][1]  # the slice itself is left alone
    both = apply_taint_rules(s, [_rule("a"), _rule("b", device="gpu-0")])  # empty selector: every device
    assert [len(d["taints"]) for d in both["spec"]["devices"]] == [2, 1]


def test_tainted_devices_are_skipped_with_the_gate_on() -> None:
    m = _cluster(_claim("c"), _rule("n1-gpu0", pool="n1", device="gpu-0"), _rule("all-n2", pool="n2"))
    s = _scheduler(m, ON)
    m.create(_pod("p", "c"))
    s.run(until_idle=True)
    # gpu-0 of n1 and n2's only device are tainted: gpu-1 of n1 is the one device left
    assert m.get_pod(NS, "p")["spec"].get("nodeName") == "n1"
    assert _allocated(m, "c") == [("n1", "gpu-1")]


@pytest.mark.parametrize(("gates", "scheduled"), [(ON, False), (OFF, True)])
def test_with_the_gate_off_rules_are_not_applied(gates: dict[str, bool], scheduled: bool) -> None:
    m = _cluster(_claim("c"), _rule("every-device"))
    s = _scheduler(m, gates)
    m.create(_pod("p", "c"))
    s.run(until_idle=True)
    assert bool(m.get_pod(NS, "p")["spec"].get("nodeName")) is scheduled
    assert (len(_allocated(m, "c")) == 1) is scheduled


def test_a_toleration_admits_the_tainted_device_and_none_effect_is_informational() -> None:
    rules = [_rule("every-device")]
    m = _cluster(_claim("plain"), _claim("tolerant", tolerate=True), *rules,
                 _rule("info", effect="None", pool="n1"))
    s = _scheduler(m, ON)
    m.create(_pod("plain", "plain"))
    m.create(_pod("tolerant", "tolerant"))
    s.run(until_idle=True)
    assert not m.get_pod(NS, "plain")["spec"].get("nodeName")
    assert NO_DEVICE in _message(m, "plain")
    assert len(_allocated(m, "tolerant")) == 1


def test_deleting_the_rule_requeues_the_waiting_pod() -> None:
    m = _cluster(_claim("c"), _rule("every-device"))
    s = _scheduler(m, ON)
    m.create(_pod("p", "c"))
    s.run(until_idle=True)
    assert not m.get_pod(NS, "p")["spec"].get("nodeName")
    m.delete("devicetaintrules", "every-device")
    s.run(until_idle=True)
    assert m.get_pod(NS, "p")["spec"].get("nodeName") in ("n1", "n2")


def test_a_rule_change_requeues_only_when_it_changes_some_devices_taints() -> None:
    """kube registers no DeviceTaintRule event: its slice tracker sends a ResourceSlice update (which requeues)
    only for slices whose devices' taints changed. A rule selecting no device, or an edit that leaves the
    taint as it was, moves nobody; changing the taint of selected devices does."""
    m = _cluster(_claim("c"), _rule("every-device"))
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=ON), reg, seed=1, clock=lambda: 0.0)
    s.start()
    m.create(_pod("p", "c"))
    s.run(until_idle=True)
    uid = m.get_pod(NS, "p")["metadata"]["uid"]
    assert s.queue.where(uid) == "unschedulable"
    m.create(_rule("elsewhere", driver="other.example.com"))
    s.drain_inbox()
    assert s.queue.where(uid) == "unschedulable"
    rule = m.informer("devicetaintrules").get("every-device")
    m.update({**rule, "metadata": {**rule["metadata"], "labels": {"team": "infra"}}})
    s.drain_inbox()
    assert s.queue.where(uid) == "unschedulable"
    rule = m.informer("devicetaintrules").get("every-device")
    m.update({**rule, "spec": {**rule["spec"], "taint": {**rule["spec"]["taint"], "effect": "None"}}})
    s.drain_inbox()
    assert s.queue.where(uid) in ("active", "backoff")


def test_the_rule_event_is_registered_with_the_gate_only() -> None:
    """Without DRADeviceTaintRules kube watches no rules (no slice tracker), so no rule change can requeue."""
    from scheduler_runtime.plugins.dynamicresources.claims import EV_TAINT_RULE

    for gates, registered in ((ON, True), (OFF, False)):
        reg = build_registry([])
        s = Scheduler(_cluster(), load_config(None, reg, feature_gates=gates), reg, seed=1)
        regs = s._events_for("default-scheduler", "DynamicResources")
        assert any(r.event.resource == EV_TAINT_RULE and r.hint is not None for r in regs) is registered

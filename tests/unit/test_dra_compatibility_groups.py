"""DRADeviceCompatibilityGroups (alpha, off by default in 1.37) on the embedded cluster: `--feature-gates` takes it
at emulated 1.37 (with its dependency DRAPartitionableDevices on), and devices drawing on one counter set are
allocated together only when their `compatibilityGroups` intersect, across the devices of one claim, of a pod's
claims and the devices other claims hold already, as kube's experimental allocator does. With the gate off a
slice declaring groups is ignored and its pool stays unusable, as before."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.plugins.dynamicresources.allocator import Features

from .test_dra_consumable import _class, _message, _node, _pod, _run, _where
from .test_dra_gates import _devices, _slice
from .test_dra_list_attributes import _claim

GATE = "DRADeviceCompatibilityGroups"
ON = parse_feature_gates([f"{GATE}=true"], "1.37")


def _gpu(name: str, *groups: str, counter_set: str = "gpu-mem") -> dict[str, Any]:
    """A partition drawing 2 of the counter set's 4 memory units, declaring `groups`."""
    use: dict[str, Any] = {"counterSet": counter_set, "counters": {"memory": {"value": "2"}}}
    if groups:
        use["compatibilityGroups"] = list(groups)
    return {"name": name, "consumesCounters": [use]}


def _pool(node: str, *devices: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's pool: one slice with the partitions, one with the counter set they share."""
    counters = _slice(f"{node}-counters", node, [], count=2, nodeName=node,
                      sharedCounters=[{"name": "gpu-mem", "counters": {"memory": {"value": "4"}}}])
    return [_slice(f"{node}-gpus", node, list(devices), count=2, nodeName=node), counters]


def test_the_gate_is_taken_at_emulated_1_37_with_its_dependencies() -> None:
    assert ON[GATE] is True
    f = Features.from_gates(ON)
    assert f.compatibility_groups and f.experimental_allocator and not f.stable_allocator
    assert not Features.from_gates(parse_feature_gates([], "1.37")).compatibility_groups
    with pytest.raises(UsageError, match=f"cannot set feature gate {GATE} to true, feature is PreAlpha at emulated "
                                         f"version 1.36"):
        parse_feature_gates([f"{GATE}=true"], "1.36")
    with pytest.raises(UsageError, match=rf"{GATE} is enabled, but depends on features that are disabled: "
                                         r"\[DRAPartitionableDevices\]"):
        parse_feature_gates([f"{GATE}=true,DRAPartitionableDevices=false"], "1.37")


def test_a_compatible_pair_is_allocated_together() -> None:
    objects = [_node("n1"), _class(), *_pool("n1", _gpu("gpu-0", "mig"), _gpu("gpu-1", "mig", "vgpu")),
               _claim("c", 2)]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == "n1"
    assert _devices(m, "c") == ["gpu-0", "gpu-1"]


def test_an_incompatible_pair_is_not() -> None:
    objects = [_node("n1"), _class(), *_pool("n1", _gpu("gpu-0", "mig"), _gpu("gpu-1", "vgpu")), _claim("c", 2)]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    assert _message(m, "a").startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_devices_without_groups_pair_only_with_each_other() -> None:
    """No groups at all: co-allocatable; one device without groups and one with: not."""
    plain = [_node("n1"), _class(), *_pool("n1", _gpu("gpu-0"), _gpu("gpu-1")), _claim("c", 2)]
    assert _where(_run(plain, [_pod("a", "c")], ON), "a") == "n1"
    mixed = [_node("n1"), _class(), *_pool("n1", _gpu("gpu-0"), _gpu("gpu-1", "mig")), _claim("c", 2)]
    assert _where(_run(mixed, [_pod("a", "c")], ON), "a") == ""


def test_different_counter_sets_are_never_compared() -> None:
    counters = _slice("n1-counters", "n1", [], count=2, nodeName="n1", sharedCounters=[
        {"name": "gpu-mem", "counters": {"memory": {"value": "4"}}},
        {"name": "gpu-mem-2", "counters": {"memory": {"value": "4"}}}])
    gpus = _slice("n1-gpus", "n1", [_gpu("gpu-0", "mig"), _gpu("gpu-1", "vgpu", counter_set="gpu-mem-2")], count=2)
    m = _run([_node("n1"), _class(), gpus, counters, _claim("c", 2)], [_pod("a", "c")], ON)
    assert _devices(m, "c") == ["gpu-0", "gpu-1"]


def test_a_device_another_claim_holds_narrows_the_next_pod() -> None:
    """a takes gpu-0 (mig): b's only free device, gpu-1, must share a group with it."""
    for second, fits in ((_gpu("gpu-1", "vgpu", "mig"), True), (_gpu("gpu-1", "vgpu"), False)):
        objects = [_node("n1"), _class(), *_pool("n1", _gpu("gpu-0", "mig"), second), _claim("c1", 1),
                   _claim("c2", 1)]
        m = _run(objects, [_pod("a", "c1"), _pod("b", "c2")], ON)
        assert _devices(m, "c1") == ["gpu-0"]
        assert _where(m, "b") == ("n1" if fits else ""), second


def test_nodes_are_searched_not_decided_by_the_batch_filter() -> None:
    """n1's two free partitions are incompatible, n2's are not: every node has enough free devices, so only the
    per-node search can tell them apart; the pod lands on n2, and with n1 alone it stays pending."""
    incompatible = _pool("n1", _gpu("gpu-0", "mig"), _gpu("gpu-1", "vgpu"))
    compatible = _pool("n2", _gpu("gpu-0", "mig"), _gpu("gpu-1", "mig"))
    m = _run([_node("n1"), _node("n2"), _class(), *incompatible, *compatible, _claim("c", 2)], [_pod("a", "c")], ON)
    assert _where(m, "a") == "n2"
    nodes = [_node(f"n{i}") for i in range(1, 6)]
    pools = [x for i in range(1, 6) for x in _pool(f"n{i}", _gpu("gpu-0", "mig"), _gpu("gpu-1", "vgpu"))]
    m = _run([*nodes, _class(), *pools, _claim("c", 2)], [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    assert _message(m, "a").startswith("0/5 nodes are available: 5 cannot allocate all claims.")


def test_with_the_gate_off_a_pool_declaring_groups_is_not_used() -> None:
    """kube's gate-off behaviour, unchanged: the grouped slice is ignored, its pool incomplete, so even the
    compatible pair (and a partition of the pool declaring no groups) stays unallocated; another pool serves."""
    grouped = _pool("n1", _gpu("gpu-0", "mig"), _gpu("gpu-1", "mig"))
    m = _run([_node("n1"), _class(), *grouped, _claim("c", 1)], [_pod("a", "c")])
    assert _where(m, "a") == ""
    assert "cannot allocate all claims" in _message(m, "a")
    other = _slice("n1-plain", "n1-plain", [{"name": "gpu-9"}], nodeName="n1")
    m = _run([_node("n1"), _class(), *grouped, other, _claim("c", 1)], [_pod("a", "c")])
    assert _devices(m, "c") == ["gpu-9"]

"""DRAListTypeAttributes (alpha, off by default in 1.37) on the embedded cluster: `--feature-gates` takes it at
emulated 1.37 only, and the same slices and claims schedule as kube-scheduler's do with the gate on (set
semantics for matchAttribute / distinctAttribute) and off (a list-typed value never matches)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.plugins.dynamicresources.allocator import Features

from .test_dra_consumable import NS, _class, _message, _node, _pod, _run, _where
from .test_dra_gates import _devices, _slice

ON = parse_feature_gates(["DRAListTypeAttributes=true"], "1.37")
NUMA = "gpu.example.com/numa"


def _claim(name: str, count: int, constraint: dict[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}
    if constraint:
        devices["constraints"] = [constraint]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": devices}}


def _gpus(*numa: Any) -> list[dict[str, Any]]:
    """One device per value: a list becomes `ints`, a number `int`."""
    return [{"name": f"gpu-{i}", "attributes": {"numa": {"ints": v} if isinstance(v, list) else {"int": v}}}
            for i, v in enumerate(numa)]


def test_the_gate_is_honoured_at_emulated_1_37_only() -> None:
    assert ON["DRAListTypeAttributes"] is True
    assert Features.from_gates(ON).list_type_attributes
    assert not Features.from_gates(parse_feature_gates([], "1.37")).list_type_attributes
    with pytest.raises(UsageError, match=r"DRAListTypeAttributes=true is not supported by ksched: it implements "
                                         r"kube-scheduler 1\.36's default"):
        parse_feature_gates(["DRAListTypeAttributes=true"], "1.36")
    with pytest.raises(UsageError) as exc:
        parse_feature_gates(["DRAListTypeAttributes=true"], "1.36")
    assert "DRAListTypeAttributes" not in str(exc.value).split("only ")[1]


def test_match_attribute_over_lists_needs_the_gate() -> None:
    """gpu-0 [0 1] and gpu-1 [1 2] share NUMA node 1: with the gate both are allocated; without it a list value
    never matches, so the claim does not fit."""
    objects = [_node("n1"), _class(), _slice("s", "n1", _gpus([0, 1], [1, 2])),
               _claim("c", 2, {"matchAttribute": NUMA})]
    m = _run(objects, [_pod("a", "c")], ON)
    assert (_where(m, "a"), _devices(m, "c")) == ("n1", ["gpu-0", "gpu-1"])
    m = _run(objects, [_pod("a", "c")])
    assert _where(m, "a") == "" and "cannot allocate all claims" in _message(m, "a")


def test_match_attribute_backtracks_to_a_wider_intersection() -> None:
    """gpu-0 [0 1], gpu-1 [0], gpu-2 [1], gpu-3 [1]: taking gpu-0 and gpu-1 narrows the set to {0}, so the
    search must drop gpu-1 and restore {0 1} before gpu-2 and gpu-3 fit."""
    objects = [_node("n1"), _class(), _slice("s", "n1", _gpus([0, 1], [0], [1], 1)),
               _claim("c", 3, {"matchAttribute": NUMA})]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _devices(m, "c") == ["gpu-0", "gpu-2", "gpu-3"]


def test_distinct_attribute_wants_disjoint_sets() -> None:
    """With the gate, gpu-0 [0 1] and gpu-1 [1 2] overlap while gpu-2 [2 3] is disjoint from gpu-0. Without it a
    list value compares as no value: the first device is taken, a later list-valued one refused, a scalar one
    (gpu-3) taken."""
    objects = [_node("n1"), _class(), _slice("s", "n1", _gpus([0, 1], [1, 2], [2, 3], 1)),
               _claim("c", 2, {"distinctAttribute": NUMA})]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _devices(m, "c") == ["gpu-0", "gpu-2"]
    m = _run(objects, [_pod("a", "c")])
    assert _devices(m, "c") == ["gpu-0", "gpu-3"]


def test_selectors_see_lists_and_includes_whatever_the_gate() -> None:
    """kube 1.37 compiles selectors in its stored-expressions environment: `includes` and list values are there
    with the gate off too."""
    cls = _class()
    cls["spec"]["selectors"].append({"cel": {"expression": 'device.attributes["gpu.example.com"].numa.includes(2)'}})
    objects = [_node("n1"), cls, _slice("s", "n1", _gpus([0, 1], [1, 2])), _claim("c", 1)]
    for gates in (ON, None):
        m = _run(objects, [_pod("a", "c")], gates)
        assert _devices(m, "c") == ["gpu-1"]


def test_a_slice_with_skip_node_operations_is_refused_with_the_gate() -> None:
    """kube's experimental allocator (the gate on) refuses the devices of a slice with skipNodeOperations, as
    DRAOptionalNodeOperations is off; the incubating one (default gates) does not look at the field."""
    objects = [_node("n1"), _class(), _slice("s", "n1", _gpus(0), nodeName="n1", skipNodeOperations=["*"]),
               _claim("c", 1)]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    m = _run(objects, [_pod("a", "c")])
    assert _devices(m, "c") == ["gpu-0"]

"""DRAOptionalNodeOperations (alpha, off by default in 1.37) on the embedded cluster, and the two alpha DRA gates
only the API server reads (DRAResourcePoolStatus, DRAPartitionableDevicesType), which ksched takes because
kube-scheduler takes them and changes nothing.

With the gate on kube runs its experimental allocator: a device of a slice with `skipNodeOperations` goes only to
a node whose status.declaredFeatures has DRAOptionalNodeOperations, and the allocation result copies the slice's
list; Filter then keeps pods using such an allocated claim to declaring nodes."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.plugins.dynamicresources.allocator import Features

from .test_dra_consumable import _class, _message, _pod, _results, _run, _where
from .test_dra_gates import _slice
from .test_dra_list_attributes import _claim

GATES = ["DRAOptionalNodeOperations=true"]  # its dependency NodeDeclaredFeatures is GA, locked on, in 1.37
ON = parse_feature_gates(GATES, "1.37")
FEATURE = "DRAOptionalNodeOperations"


def _node(name: str, *features: str) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
    if features:
        status["declaredFeatures"] = sorted(features)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": status}


def _skipping(node: str) -> dict[str, Any]:
    return _slice(f"{node}-gpus", node, [{"name": "gpu-0"}], nodeName=node, skipNodeOperations=["*"])


def test_the_gate_is_taken_with_its_dependencies() -> None:
    assert ON[FEATURE] is True
    f = Features.from_gates(ON)
    assert f.optional_node_operations and f.experimental_allocator and not f.stable_allocator
    assert not Features.from_gates(parse_feature_gates([], "1.37")).optional_node_operations
    with pytest.raises(UsageError, match="feature is PreAlpha at emulated version 1.36"):
        parse_feature_gates(["DRAOptionalNodeOperations=true"], "1.36")


def test_a_skipping_device_goes_only_to_a_node_declaring_the_feature() -> None:
    """n1 does not declare the feature, n2 does: the pod lands on n2 and the result carries the slice's list."""
    objects = [_node("n1"), _node("n2", FEATURE), _class(), _skipping("n1"), _skipping("n2"), _claim("c", 1)]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == "n2"
    assert _results(m, "c") == [{"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-0",
                                 "skipNodeOperations": ["*"]}]


def test_without_a_declaring_node_the_pod_stays_pending() -> None:
    objects = [_node("n1"), _class(), _skipping("n1"), _claim("c", 1)]
    m = _run(objects, [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    assert "cannot allocate all claims" in _message(m, "a")


def test_with_the_gate_off_the_incubating_allocator_ignores_the_field() -> None:
    """Default gates: kube's incubating allocator neither checks nor copies skipNodeOperations."""
    objects = [_node("n1"), _class(), _skipping("n1"), _claim("c", 1)]
    m = _run(objects, [_pod("a", "c")])
    assert _where(m, "a") == "n1"
    assert "skipNodeOperations" not in _results(m, "c")[0]


def test_an_allocated_skipping_claim_keeps_its_pods_on_declaring_nodes() -> None:
    """A claim allocated with skipNodeOperations and no node selector: a second pod sharing it is filtered off
    nodes that do not declare the feature (kube 1.37's Filter, whatever the gate)."""
    shared = _slice("shared", "shared", [{"name": "gpu-0"}], allNodes=True, skipNodeOperations=["*"])
    objects = [_node("n1"), _node("n2", FEATURE), _class(), shared, _claim("c", 1)]
    m = _run(objects, [_pod("a", "c"), _pod("b", "c")], ON)
    assert (_where(m, "a"), _where(m, "b")) == ("n2", "n2")


@pytest.mark.parametrize("gates", [["DRAResourcePoolStatus=true"],
                                   ["DRAResourcePoolStatus=true", "DRAPartitionableDevicesType=true"]])
def test_gates_only_the_api_server_reads_are_taken(gates: list[str]) -> None:
    got = parse_feature_gates(gates, "1.37")
    assert all(got[g.split("=")[0]] for g in gates)
    objects = [_node("n1"), _class(), _slice("s", "n1", [{"name": "gpu-0"}]), _claim("c", 1)]
    m = _run(objects, [_pod("a", "c")], got)
    assert _where(m, "a") == "n1"


def test_partitionable_devices_type_still_needs_its_dependencies() -> None:
    with pytest.raises(UsageError, match=r"DRAPartitionableDevicesType is enabled, but depends on features that "
                                         r"are disabled: \[DRAResourcePoolStatus\]"):
        parse_feature_gates(["DRAPartitionableDevicesType=true"], "1.37")

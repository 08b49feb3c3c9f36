"""Consumable capacity (DRAConsumableCapacity, beta on in 1.36 and 1.37) on the embedded cluster: pods whose
claims share one device's capacity, a pod refused once that capacity is used up, in-flight shares seen by the next
pod of a wave, and the gate switched off behaving as kube-scheduler's does."""

from __future__ import annotations

import uuid
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.describe import describe
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.dynamicresources import DynamicResources
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.quantity import parse_quantity
from scheduler_runtime.scheduler import Scheduler

NS = "ml"
DRIVER = "gpu.example.com"


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def _class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _slice(node: str, memory: str = "8Gi", policy: dict[str, Any] | None = None) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": memory}
    if policy:
        cap["requestPolicy"] = policy
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                                  "capacity": {"memory": cap}}]}}


def _claim(name: str, memory: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": "gpu", "count": 1}
    if memory is not None:
        body["capacity"] = {"requests": {"memory": memory}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": body}]}}}


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}


def _run(objects: list[dict[str, Any]], pods: list[dict[str, Any]], gates: Any = None) -> MemoryCluster:
    m = MemoryCluster()
    for o in objects:
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=gates), reg, seed=1, feature_gates=gates)
    s.start()
    for p in pods:
        m.create(p)
        s.run(until_idle=True)
    return m


def _where(m: MemoryCluster, name: str) -> str:
    return (m.get_pod(NS, name) or {}).get("spec", {}).get("nodeName") or ""


def _message(m: MemoryCluster, name: str) -> str:
    conds = ((m.get_pod(NS, name) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conds if c["type"] == "PodScheduled"), "")


def _results(m: MemoryCluster, name: str) -> list[dict[str, Any]]:
    got = m.informer("resourceclaims").get(name, NS)
    assert got is not None
    return list((((got.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])


def test_two_pods_share_one_devices_capacity_and_a_third_is_refused_when_it_is_used_up() -> None:
    m = _run([_node("n1"), _class(), _slice("n1"), _claim("c1", "4Gi"), _claim("c2", "4Gi"), _claim("c3", "4Gi")],
             [_pod("a", "c1"), _pod("b", "c2"), _pod("c", "c3")])
    assert _where(m, "a") == "n1" and _where(m, "b") == "n1"
    r1, r2 = _results(m, "c1"), _results(m, "c2")
    assert [(r["device"], parse_quantity(r["consumedCapacity"]["memory"])) for r in r1 + r2] == \
        [("gpu-0", parse_quantity("4Gi"))] * 2
    ids = {r1[0]["shareID"], r2[0]["shareID"]}
    assert len(ids) == 2 and all(str(uuid.UUID(i)) == i for i in ids)  # a fresh UUID per share, as kube's
    assert _where(m, "c") == "" and not _results(m, "c3")
    assert _message(m, "c").startswith("0/1 nodes are available: 1 cannot allocate all claims.")
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    lines = describe(m.get_pod(NS, "c"), [], nodes, m.list).summary
    assert any("ResourceClaim ml/c3, request gpu: no node has 1 free device of class gpu with 4Gi of memory "
               "capacity left (spec.devices.requests[0].exactly.capacity.requests)" in x for x in lines), lines


def test_request_policy_rounds_the_request_up_and_the_default_applies_without_one() -> None:
    policy = {"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi", "max": "6Gi"}}
    m = _run([_node("n1"), _class(), _slice("n1", "8Gi", policy), _claim("c1", "3Gi"), _claim("c2", None),
              _claim("c3", "3Gi"), _claim("c4", "1Gi")],
             [_pod("a", "c1"), _pod("b", "c2"), _pod("c", "c3"), _pod("d", "c4")])
    # 3Gi rounds up to 4Gi, no request takes the default 2Gi: 2Gi left, so c3 (4Gi) does not fit, c4 (2Gi) does
    assert [_where(m, p) for p in "abcd"] == ["n1", "n1", "", "n1"]
    assert parse_quantity(_results(m, "c1")[0]["consumedCapacity"]["memory"]) == parse_quantity("4Gi")
    assert parse_quantity(_results(m, "c2")[0]["consumedCapacity"]["memory"]) == parse_quantity("2Gi")
    assert parse_quantity(_results(m, "c4")[0]["consumedCapacity"]["memory"]) == parse_quantity("2Gi")


def test_a_share_in_flight_counts_for_the_next_pod_of_the_wave() -> None:
    m = MemoryCluster()
    for o in (_node("n1"), _class(), _slice("n1"), _claim("c1", "6Gi"), _claim("c2", "4Gi"),
              _pod("a", "c1"), _pod("b", "c2")):
        m.create(o, emit=False)
    pl = DynamicResources(None, Handle(Snapshot(), cluster=m))
    n1 = Node.from_dict(_node("n1"))
    pa, pb = (Pod.from_dict(m.get_pod(NS, x)) for x in ("a", "b"))

    def cycle(p: Pod) -> tuple[CycleState, Any]:
        st = CycleState()
        _res, status = pl.pre_filter(st, p, None)  # type: ignore[arg-type]
        assert status is None or status.code == Code.Success
        return st, pl.filter(st, p, NodeInfo(n1))

    sa, status = cycle(pa)
    assert status is None
    assert pl.reserve(sa, pa, "n1") is None
    _sb, status = cycle(pb)  # 6Gi of 8Gi in flight for c1
    assert status.code == Code.UnschedulableAndUnresolvable and status.message == "cannot allocate all claims"
    pl.unreserve(sa, pa, "n1")
    _sb, status = cycle(pb)
    assert status is None


def test_with_the_gate_off_capacity_requests_are_refused_and_a_shared_device_is_exclusive() -> None:
    gates = parse_feature_gates(["DRAConsumableCapacity=false"], "1.37")
    m = _run([_node("n1"), _class(), _slice("n1"), _claim("c1", "4Gi"), _claim("c2", None), _claim("c3", None)],
             [_pod("a", "c1"), _pod("b", "c2"), _pod("c", "c3")], gates)
    assert _where(m, "a") == ""
    assert "has capacity requests, but the DRAConsumableCapacity feature is disabled" in _message(m, "a")
    # allowMultipleAllocations means nothing with the gate off: one claim takes the device, without a share
    assert _where(m, "b") == "n1" and _where(m, "c") == ""
    assert "shareID" not in _results(m, "c2")[0] and "consumedCapacity" not in _results(m, "c2")[0]


def test_capacity_consumed_by_claims_allocated_earlier_counts() -> None:
    """A claim allocated before the scheduler started (its share in status.allocation) holds 6Gi of 8Gi."""
    held = _claim("c0", "6Gi")
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
         "shareID": "0b7f4d4e-5a55-4a8e-9d3c-1f2e3d4c5b6a", "consumedCapacity": {"memory": "6Gi"}}]}}}
    m = _run([_node("n1"), _class(), _slice("n1"), held, _claim("c1", "4Gi"), _claim("c2", "2Gi")],
             [_pod("a", "c1"), _pod("b", "c2")])
    assert _where(m, "a") == "" and _where(m, "b") == "n1"
    # with the gate off the share holds the whole device
    gates = parse_feature_gates(["DRAConsumableCapacity=false"], "1.37")
    m = _run([_node("n1"), _class(), _slice("n1"), held, _claim("c3", None)], [_pod("c", "c3")], gates)
    assert _where(m, "c") == ""


def test_fractional_capacity_ranges_round_on_milli_values_with_the_gate_on() -> None:
    """DRAFractionalCapacityRange (beta, off by default in 1.37): a range of min 200m, step 100m. Off, kube's
    integer arithmetic reads both as 1, so a 250m request consumes 1 (the whole device); on, it rounds up to
    300m, and three such shares fit in 1."""
    policy = {"default": "200m", "validRange": {"min": "200m", "step": "100m", "max": "1"}}
    objects = [_node("n1"), _class(), _slice("n1", "1", policy), *(_claim(f"c{i}", "250m") for i in range(4))]
    pods = [_pod(p, f"c{i}") for i, p in enumerate("abcd")]
    m = _run(objects, pods, parse_feature_gates(["DRAFractionalCapacityRange=true"], "1.37"))
    assert [_where(m, p) for p in "abcd"] == ["n1", "n1", "n1", ""]
    assert [_results(m, f"c{i}")[0]["consumedCapacity"] for i in range(3)] == [{"memory": "300m"}] * 3
    m = _run(objects, pods)
    assert [_where(m, p) for p in "abcd"] == ["n1", "", "", ""]
    assert _results(m, "c0")[0]["consumedCapacity"] == {"memory": "1"}


def test_the_shared_gpu_example_in_simulate() -> None:
    """examples/dra/shared*.yaml: placements, consumed capacity and the pending pod's reason, as its comments
    promise."""
    from pathlib import Path

    from scheduler_runtime.simulate import simulate

    root = Path(__file__).resolve().parents[2] / "examples" / "dra"
    reg = build_registry([])
    res = simulate([root / "cluster.yaml", root / "shared.yaml"], [root / "shared-pods.yaml"],
                   load_config(None, reg), reg, seed=0, keep_cluster=True)
    assert {k: v or "" for k, v in res.placements.items()} == {
        "ml/notebook-0": "gpu-3", "ml/notebook-1": "gpu-3", "ml/notebook-2": ""}
    m = res.cluster
    assert m is not None
    for p in ("notebook-0", "notebook-1"):
        claim = m.get_pod("ml", p)["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        (r,) = _results_in(m, "ml", claim)
        assert r["device"] == "gpu-0" and r["shareID"] and r["consumedCapacity"] == {"memory": "40Gi"}
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    text = "\n".join(describe(m.get_pod("ml", "notebook-2"), [], nodes, m.list).summary)
    assert "with 30Gi of memory capacity left" in text


def _results_in(m: MemoryCluster, ns: str, name: str) -> list[dict[str, Any]]:
    got = m.informer("resourceclaims").get(name, ns)
    assert got is not None
    return list(got["status"]["allocation"]["devices"]["results"])


def test_selectors_name_allow_multiple_allocations_whatever_the_gate() -> None:
    """kube's selector cache compiles in the StoredExpressions CEL environment, which declares the device with
    `allowMultipleAllocations` whatever DRAConsumableCapacity (kube-scheduler v1.37.2 binds such a pod with the
    gate off). The field reads the device's value under the incubating allocator (DRADeviceBindingConditions
    and DRAResourceClaimDeviceStatus still on) and false under the stable one (every such gate off)."""
    cls = _class()
    cls["spec"]["selectors"] = [{"cel": {"expression": "device.allowMultipleAllocations"}}]
    objects = [_node("n1"), cls, _slice("n1"), _claim("c1", None)]
    m = _run(objects, [_pod("a", "c1")], parse_feature_gates(["DRAConsumableCapacity=false"], "1.37"))
    assert _where(m, "a") == "n1"
    stable = parse_feature_gates(["DRAConsumableCapacity=false", "DRADeviceBindingConditions=false"], "1.37")
    m = _run(objects, [_pod("a", "c1")], stable)
    assert _where(m, "a") == "" and "cannot allocate all claims" in _message(m, "a")
    cls["spec"]["selectors"] = [{"cel": {"expression": "!device.allowMultipleAllocations"}}]
    m = _run(objects, [_pod("a", "c1")], stable)
    assert _where(m, "a") == "n1"
    m = _run(objects, [_pod("a", "c1")])
    assert _where(m, "a") == ""

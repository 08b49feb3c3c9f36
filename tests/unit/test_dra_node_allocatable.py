"""DRANodeAllocatableResources (alpha, off by default in 1.37) on the embedded cluster, and its building blocks.

With the gate on a ResourceSlice device may declare what it takes of its node's cpu, memory or hugepages
(`nodeAllocatableResources`): DynamicResources' Filter adds that to the pod's requests and checks them against the
node's free resources, refuses to share a claim whose device maps node resources, and PreBind writes the amounts to
the pod's `status.nodeAllocatableResourceClaimStatuses`, which node accounting then counts for the assigned pod.
With the gate off nothing of this happens (and a stored status is not counted)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.dynamicresources.nodeallocatable import (
    claim_statuses,
    node_fits,
    parse,
    pod_level_covers_claims,
    text,
)
from scheduler_runtime.podrequests import claim_resources, count_claim_statuses, pod_requests

from .test_dra_consumable import _run

GATES = ["DRANodeAllocatableResources=true"]
ON = parse_feature_gates(GATES, "1.37")
NS = "default"
DRIVER = "cpu.example.com"


@pytest.fixture(autouse=True)
def _reset_counting() -> Iterator[None]:
    """The accounting switch is process-wide (as kube's gate): leave it off for the tests that follow."""
    yield
    count_claim_statuses(False)


def _node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc}}


def _class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "cpus"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _slice(node: str, count: int, nar: dict[str, Any]) -> dict[str, Any]:
    devices = [{"name": f"cpu-{i}", "nodeAllocatableResources": nar} for i in range(count)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-cpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": devices}}


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "cpu", "exactly": {"deviceClassName": "cpus"}}]}}}


def _pod(name: str, claim: str | None, cpu: str = "500m") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    spec: dict[str, Any] = {"containers": [container]}
    if claim is not None:
        container["resources"]["claims"] = [{"name": "cpus"}]
        spec["resourceClaims"] = [{"name": "cpus", "resourceClaimName": claim}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _where(m: Any, name: str) -> str:
    return str(((m.get_pod(NS, name) or {}).get("spec") or {}).get("nodeName") or "")


def _message(m: Any, name: str) -> str:
    conds = ((m.get_pod(NS, name) or {}).get("status") or {}).get("conditions") or []
    return str(next((c.get("message") or "" for c in conds if c["type"] == "PodScheduled"), ""))


def _statuses(m: Any, name: str) -> Any:
    return ((m.get_pod(NS, name) or {}).get("status") or {}).get("nodeAllocatableResourceClaimStatuses")


FOUR_CPUS = {"cpu": {"mapping": {"deviceMultiplier": "4"}}}


def test_the_gate_is_taken_at_1_37_only() -> None:
    assert ON["DRANodeAllocatableResources"] is True
    assert parse_feature_gates([], "1.37")["DRANodeAllocatableResources"] is False
    with pytest.raises(UsageError, match="not supported by ksched"):  # kube 1.36.3's alpha differs from 1.37.2's
        parse_feature_gates(GATES, "1.36")
    with pytest.raises(UsageError, match="feature is PreAlpha at emulated version 1.35"):
        parse_feature_gates(GATES, "1.35")


def test_a_device_taking_more_cpu_than_the_node_has_keeps_the_pod_pending() -> None:
    """The device maps 4 cpus; the node has 2. Gate off: the pod's own 500m fits. Gate on: 4.5 cpus do not, and
    the node is unresolvable (more than its allocatable)."""
    objects = [_node("n1", "2"), _class(), _slice("n1", 1, FOUR_CPUS), _claim("c")]
    off = _run(objects, [_pod("a", "c")])
    assert _where(off, "a") == "n1" and _statuses(off, "a") is None
    on = _run(objects, [_pod("a", "c")], ON)
    assert _where(on, "a") == ""
    assert _message(on, "a").startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_prebind_writes_what_the_claims_take_and_the_node_counts_it() -> None:
    """Pod a's claim takes 4 of n1's 8 cpus (written to its status, naming the container using the claim); pod b
    then asks for 5 cpus: with the gate on n1 has only 3.5 left (a's 500m and its claim's 4), with it off 7.5."""
    objects = [_node("n1", "8"), _class(), _slice("n1", 1, FOUR_CPUS), _claim("c")]
    pods = [_pod("a", "c"), _pod("b", None, "5")]
    on = _run(objects, pods, ON)
    assert _where(on, "a") == "n1"
    assert _statuses(on, "a") == [{"resourceClaimName": "c", "containers": ["c"],
                                   "mapping": [{"name": "cpu", "quantity": "4"}]}]
    assert _where(on, "b") == ""
    assert "Insufficient cpu" in _message(on, "b")
    off = _run(objects, pods)
    assert _where(off, "a") == "n1" and _where(off, "b") == "n1" and _statuses(off, "a") is None


def test_a_claim_with_a_mapped_device_is_not_shared() -> None:
    """Pods a and b reference the same claim: gate off, both run on it; gate on, b is refused on every node."""
    objects = [_node("n1", "16"), _class(), _slice("n1", 1, FOUR_CPUS), _claim("c")]
    pods = [_pod("a", "c"), _pod("b", "c")]
    off = _run(objects, pods)
    assert _where(off, "a") == "n1" and _where(off, "b") == "n1"
    on = _run(objects, pods, ON)
    assert _where(on, "a") == "n1" and _where(on, "b") == ""
    assert "node allocatable resource claim c has a mapped device and cannot be shared across pods" in \
        _message(on, "b")


def test_an_overhead_only_claim_is_shared_and_counted_once_per_pod() -> None:
    """An overhead (not a mapping) may be shared: both pods run, each counted with the device's per-pod cpu."""
    nar = {"cpu": {"overhead": {"perPod": "1"}}}
    objects = [_node("n1", "3"), _class(), _slice("n1", 1, nar), _claim("c")]
    m = _run(objects, [_pod("a", "c"), _pod("b", "c"), _pod("x", None, "1")], ON)
    assert _where(m, "a") == "n1" and _where(m, "b") == "n1"
    assert _statuses(m, "b") == [{"resourceClaimName": "c", "containers": ["c"],
                                  "overhead": [{"name": "cpu", "perPod": "1"}]}]
    assert _where(m, "x") == ""  # 2 x (500m + 1) = 3 cpus taken


# ---------------------------------------------------------------------------- building blocks
def _spec(cpu: str = "100m") -> dict[str, Any]:
    return {"containers": [{"name": "c1", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                                                        "claims": [{"name": "node-allocatable-claim"}]}}],
            "resourceClaims": [{"name": "node-allocatable-claim", "resourceClaimName": "node-allocatable-claim"}]}


@pytest.mark.parametrize(("status", "cpu"), [
    # kube's noderesources testComputePodResourceRequestWithNodeAllocatableDRA (fit_test.go), gate on: the
    # requests of a pod whose claims' status is counted
    ({"mapping": [{"name": "cpu", "quantity": "50m"}]}, 150),
    ({"overhead": [{"name": "cpu", "perPod": "50m", "perContainer": "50m"}]}, 200),
    ({"mapping": [{"name": "cpu", "quantity": "50m"}],
      "overhead": [{"name": "cpu", "perPod": "50m", "perContainer": "50m"}]}, 250),
])
def test_requests_with_the_claims_status(status: dict[str, Any], cpu: int) -> None:
    statuses = [{"resourceClaimName": "node-allocatable-claim", "containers": ["c1"], **status}]
    assert pod_requests(_spec(), claims=claim_resources(statuses)) == {"cpu": cpu, "memory": 2**30}


def test_an_assigned_pod_counts_its_claims_status_only_with_the_gate() -> None:
    """kube's "EnableDRANodeAllocatableResources disabled" case: only the containers' 100m; with the gate the
    assigned pod's accounting adds the claim's 50m, while a pending pod's own requests (Fit's) never do."""
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
           "spec": {**_spec(), "nodeName": "n1"},
           "status": {"nodeAllocatableResourceClaimStatuses": [
               {"resourceClaimName": "node-allocatable-claim", "containers": ["c1"],
                "mapping": [{"name": "cpu", "quantity": "50m"}]}]}}
    assert Pod.from_dict(raw).requests["cpu"] == 100
    count_claim_statuses(True)
    p = Pod.from_dict(raw)
    assert p.requests["cpu"] == 150 and p.non_zero_requests["cpu"] == 150 and p.scoring_requests["cpu"] == 100
    pending = {**raw, "spec": _spec()}
    assert Pod.from_dict(pending).requests["cpu"] == 100


@pytest.mark.parametrize(("raw", "want"), [
    ("1", "1"), ("1Gi", "1Gi"), ("1024", "1024"), ("100", "100"), ("500m", "500m"), ("1000m", "1"),
    ("1500", "1500"), ("2000", "2k"), ("1536Mi", "1536Mi"), ("512", "512"), ("1e3", "1e3"),
])
def test_quantities_are_written_as_go_writes_them(raw: str, want: str) -> None:
    assert text(parse(raw)) == want


def _na_slice(*devices: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"driver": "dra.example.com", "pool": {"name": "pool1"}, "nodeName": "test-node",
                     "devices": list(devices)}}


def _alloc(device: str, consumed: dict[str, str] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"driver": "dra.example.com", "pool": "pool1", "device": device}
    if consumed is not None:
        r["consumedCapacity"] = consumed
    return {"devices": {"results": [r]}}


CLAIM = {"metadata": {"name": "node-allocatable-claim", "namespace": "test-ns", "uid": "claim-uid"}}
CPU_BY_CAPACITY = {"name": "cpu0", "nodeAllocatableResources": {
    "cpu": {"mapping": {"capacityKey": "dra.example.com/cpu"}}}}
COMBINED = {"name": "combined-device", "nodeAllocatableResources": {
    "cpu": {"mapping": {"deviceMultiplier": "2"}, "overhead": {"perPod": "1", "perContainer": "500m"}}}}


def test_claim_statuses_follow_kubes_build() -> None:
    """A few of kube's TestBuildNodeAllocatableDRAInfo cases: a capacity mapping, a device that maps nothing, a
    mapping with overheads, a missing consumed capacity key (ignored), a device not found (an error)."""
    pod = {"spec": _spec()}
    uids = {"node-allocatable-claim": "claim-uid"}
    got = claim_statuses(pod, [(CLAIM, _alloc("cpu0", {"dra.example.com/cpu": "30"}))], uids,
                         [_na_slice(CPU_BY_CAPACITY)], None)
    assert got == [{"resourceClaimName": "node-allocatable-claim", "containers": ["c1"],
                    "mapping": [{"name": "cpu", "quantity": "30"}]}]
    assert claim_statuses(pod, [(CLAIM, _alloc("gpu0"))], uids, [_na_slice({"name": "gpu0"})], None) == []
    got = claim_statuses(pod, [(CLAIM, _alloc("combined-device"))], uids, [_na_slice(COMBINED)], None)
    assert got == [{"resourceClaimName": "node-allocatable-claim", "containers": ["c1"],
                    "mapping": [{"name": "cpu", "quantity": "2"}],
                    "overhead": [{"name": "cpu", "perPod": "1", "perContainer": "500m"}]}]
    assert claim_statuses(pod, [(CLAIM, _alloc("cpu0", {"other": "1"}))], uids, [_na_slice(CPU_BY_CAPACITY)],
                          None) == []
    with pytest.raises(ValueError, match="ConsumedCapacity is nil"):
        claim_statuses(pod, [(CLAIM, _alloc("cpu0"))], uids, [_na_slice(CPU_BY_CAPACITY)], None)
    with pytest.raises(ValueError, match="device nonexistent-device not found in pool pool1"):
        claim_statuses(pod, [(CLAIM, _alloc("nonexistent-device"))], uids, [_na_slice(CPU_BY_CAPACITY)], None)


def test_node_fits_names_every_short_resource() -> None:
    """kube's TestNodeFitsNativeResources: Unschedulable when the node is only full, UnschedulableAndUnresolvable
    when the demand exceeds its allocatable."""
    assert node_fits({}, {}, {}) is None
    assert node_fits({"cpu": 1000, "memory": 2**30}, {"cpu": 2000, "memory": 2 * 2**30}, {}) is None
    st = node_fits({"cpu": 3000}, {"cpu": 2000}, {})
    assert st is not None and st.code.name == "UnschedulableAndUnresolvable" and st.message == "Insufficient cpu"
    st = node_fits({"memory": 3 * 2**30}, {"memory": 5 * 2**30}, {"memory": 4 * 2**30})
    assert st is not None and st.code.name == "Unschedulable" and st.message == "Insufficient memory"
    st = node_fits({"hugepages-2Mi": 4}, {"hugepages-2Mi": 2}, {})
    assert st is not None and st.message == "Insufficient hugepages-2Mi"


def test_pod_level_resources_must_cover_the_claims() -> None:
    """kube's TestValidatePodLevelResourcesCoverDRA: pod-level requests below containers plus claims refuse."""
    statuses = [{"resourceClaimName": "dra-claim", "containers": ["c1"],
                 "mapping": [{"name": "cpu", "quantity": "500m"}]}]
    pod = {"spec": {**_spec("1"), "resources": {"requests": {"cpu": "2"}}}}
    assert pod_level_covers_claims(pod, statuses, True) is None
    pod["spec"]["resources"]["requests"]["cpu"] = "1200m"
    st = pod_level_covers_claims(pod, statuses, True)
    assert st is not None and st.message == ("pod level request for cpu is insufficient to cover the aggregated "
                                             "container and node-allocatable DRA requests")
    assert pod_level_covers_claims(pod, statuses, False) is None
    pod = {"spec": {"containers": [{"name": "c1", "resources": {"limits": {"cpu": "1"}}}],
                    "resources": {"limits": {"cpu": "1200m"}}}}
    st = pod_level_covers_claims(pod, statuses, True)
    assert st is not None and st.message == ("pod level limit for cpu is insufficient to cover the limit and DRA "
                                             "overhead for container c1")


def test_the_node_counts_a_bound_pods_claims() -> None:
    """Both pods queued at once: the node's requested cpu is a's 500m plus its claim's 4, and b does not fit."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.config import load_config
    from scheduler_runtime.plugins.registry import build_registry
    from scheduler_runtime.scheduler import Scheduler

    m = MemoryCluster()
    for o in [_node("n1", "8"), _class(), _slice("n1", 1, FOUR_CPUS), _claim("c")]:
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=ON), reg, seed=1, feature_gates=ON)
    s.start()
    m.create(_pod("a", "c"))
    m.create(_pod("b", None, "5"))
    s.run(until_idle=True)
    assert _where(m, "a") == "n1" and _where(m, "b") == ""
    info = s.cache.snapshot.get("n1")
    assert info is not None and info.requested["cpu"] == 4500


def test_the_assumed_pod_carries_filters_statuses() -> None:
    """kube's assume: the pod the cache accounts carries what Filter found its claims take of the chosen node
    (nothing is added for another node, or with the gate off)."""
    from scheduler_runtime.framework.cycle_state import CycleState
    from scheduler_runtime.plugins.dynamicresources.plugin import NAME, _State
    from scheduler_runtime.schedule_one import _assumed

    statuses = [{"resourceClaimName": "c", "containers": ["c"], "mapping": [{"name": "cpu", "quantity": "4"}]}]
    state = CycleState()
    state.write(NAME, _State(na_statuses={"n1": statuses}))
    pod = Pod.from_dict(_pod("a", "c"))
    assert _assumed(state, pod, "n1") is pod  # gate off
    count_claim_statuses(True)
    got = _assumed(state, pod, "n1")
    assert got.requests["cpu"] == 4500 and got.non_zero_requests["cpu"] == 4500 and got.scoring_requests["cpu"] == 500
    assert got.raw["status"]["nodeAllocatableResourceClaimStatuses"] == statuses and "status" not in pod.raw
    assert _assumed(state, pod, "n2") is pod

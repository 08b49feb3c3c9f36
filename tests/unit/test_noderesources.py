"""NodeResourcesFit and BalancedAllocation: expected values computed by hand from kube-scheduler's formulas."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from scheduler_runtime.testing.builders import snapshot_of

MI = 1024 * 1024


def node(name: str, cpu: str = "4", mem: str = "8Gi", pods: str = "110", **extra: str) -> Node:
    alloc = {"cpu": cpu, "memory": mem, "pods": pods, **extra}
    return Node.from_dict({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def pod(name: str = "p", cpu: str | None = None, mem: str | None = None, **extra: str) -> Pod:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    req.update(extra)
    c: dict = {"name": "c"}
    if req:
        c["resources"] = {"requests": req}
    return Pod.from_dict({"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [c]}})


def fit(snap: Snapshot, **args) -> NodeResourcesFit:
    return NodeResourcesFit(NodeResourcesFitArgs.model_validate(args) if args else None, Handle(snap))


def run_filter(plugin, snap: Snapshot, p: Pod):
    state = CycleState()
    plugin.pre_filter(state, p, NodeList(snap))
    batch = plugin.filter_batch(state, p, snap)
    per_node = [plugin.filter(state, p, ni) for ni in snap.node_infos]
    return batch, per_node


def score(plugin, snap: Snapshot, p: Pod) -> list[int]:
    state = CycleState()
    rows = np.arange(len(snap))
    if hasattr(plugin, "pre_score"):
        plugin.pre_score(state, p, NodeList(snap))
    return plugin.score_batch(state, p, snap, rows).tolist()


# ------------------------------------------------------------------------------------------ Fit filter


def test_fit_lists_every_insufficient_resource_in_order():
    snap = snapshot_of(node("n1", cpu="1", mem="1Gi"), placed={"n1": [pod("a", cpu="800m", mem="900Mi")]})
    batch, per_node = run_filter(fit(snap), snap, pod(cpu="500m", mem="200Mi"))
    assert not batch.ok[0]
    st = batch.status_at(0)
    assert st.code == Code.Unschedulable
    assert st.reasons == ["Insufficient cpu", "Insufficient memory"]
    assert per_node[0] == st


def test_fit_request_above_total_allocatable_is_unresolvable():
    snap = snapshot_of(node("n1", cpu="2"))
    batch, _ = run_filter(fit(snap), snap, pod(cpu="3"))
    assert batch.status_at(0).code == Code.UnschedulableAndUnresolvable


def test_fit_too_many_pods_even_for_empty_requests():
    snap = snapshot_of(node("n1", pods="1"), placed={"n1": [pod("a")]})
    batch, per_node = run_filter(fit(snap), snap, pod())
    assert batch.status_at(0).reasons == ["Too many pods"]
    assert per_node[0].reasons == ["Too many pods"]


def test_fit_extended_resource_and_ignored_groups():
    snap = snapshot_of(node("gpu", **{"example.com/gpu": "2"}), node("plain"))
    p = pod(cpu="1", **{"example.com/gpu": "1"})
    batch, _ = run_filter(fit(snap), snap, p)
    assert batch.ok.tolist() == [True, False]
    assert batch.status_at(1).reasons == ["Insufficient example.com/gpu"]
    assert batch.status_at(1).code == Code.UnschedulableAndUnresolvable  # 0 allocatable on that node
    batch, _ = run_filter(fit(snap, ignoredResourceGroups=["example.com"]), snap, p)
    assert batch.ok.tolist() == [True, True]


# ------------------------------------------------------------------------------------------ Fit scores


def test_least_allocated_by_hand():
    # node 4000m / 8Gi with 1000m / 2Gi requested; pod 1000m / 2Gi
    # cpu: (4000-2000)*100/4000 = 50 ; memory: (8192-4096)*100/8192 = 50 ; (50+50)/2 = 50
    snap = snapshot_of(node("n1"), placed={"n1": [pod("a", cpu="1", mem="2Gi")]})
    assert score(fit(snap), snap, pod(cpu="1", mem="2Gi")) == [50]


def test_least_allocated_uses_non_zero_defaults_for_best_effort_pods():
    # pod without requests counts as 100m / 200Mi: cpu (4000-100)*100/4000 = 97 (97.5 truncated),
    # memory (8192-200)*100/8192 = 97 (97.55 truncated) -> 97
    snap = snapshot_of(node("n1"))
    assert score(fit(snap), snap, pod()) == [97]


def test_most_allocated_weights_by_hand():
    # cpu weight 3, memory weight 1; node 4 cpu / 8Gi; pod 3 cpu / 2Gi
    # cpu 3000*100/4000 = 75 ; memory 2048*100/8192 = 25 ; (75*3 + 25*1) / 4 = 62 (62.5 truncated)
    snap = snapshot_of(node("n1"))
    plugin = fit(snap, scoringStrategy={"type": "MostAllocated",
                                        "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]})
    assert score(plugin, snap, pod(cpu="3", mem="2Gi")) == [62]


def test_zero_allocatable_resource_is_left_out_of_the_weights():
    # memory allocatable 0 -> only cpu counts: (4000-1000)*100/4000 = 75
    snap = snapshot_of(node("n1", mem="0"))
    assert score(fit(snap), snap, pod(cpu="1", mem="1Gi")) == [75]


def test_requested_to_capacity_ratio_negative_slope_truncates_toward_zero():
    # shape (0,10),(100,0) scaled x10 -> (0,100),(100,0); utilisation 33% (1320m of 4000m):
    # 100 + (0-100)*(33-0)/(100-0) = 100 + (-3300/100) = 100 - 33 = 67
    # memory: 1Gi of 8Gi -> 12%: 100 + (-1200/100) = 88 ; round((67+88)/2 = 77.5) = 78 (half away from zero)
    snap = snapshot_of(node("n1"))
    plugin = fit(snap, scoringStrategy={"type": "RequestedToCapacityRatio",
                                        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                               {"utilization": 100, "score": 0}]}})
    assert score(plugin, snap, pod(cpu="1320m", mem="1Gi")) == [78]


def test_requested_to_capacity_ratio_go_truncation_not_floor():
    # shape (0,0),(30,10),(100,3) -> x10: (0,0),(30,100),(100,30); cpu only; 1240m/4000m = 31%:
    # 100 + (30-100)*(31-30)/(100-30) = 100 + (-70/70) = 99
    snap = snapshot_of(node("n1", mem="0"))
    plugin = fit(snap, scoringStrategy={"type": "RequestedToCapacityRatio",
                                        "resources": [{"name": "cpu", "weight": 1}],
                                        "requestedToCapacityRatio": {"shape": [
                                            {"utilization": 0, "score": 0}, {"utilization": 30, "score": 10},
                                            {"utilization": 100, "score": 3}]}})
    assert score(plugin, snap, pod(cpu="1240m")) == [99]  # 31%
    # shape (0,10),(100,7) -> (0,100),(100,70); 40m/4000m = 1%: 100 + (-30*1)/100; Go truncates -0.3 to 0
    # -> 100, where Python's floor division would give 99
    plugin = fit(snap, scoringStrategy={"type": "RequestedToCapacityRatio",
                                        "resources": [{"name": "cpu", "weight": 1}],
                                        "requestedToCapacityRatio": {"shape": [
                                            {"utilization": 0, "score": 10}, {"utilization": 100, "score": 7}]}})
    assert score(plugin, snap, pod(cpu="40m")) == [100]


def test_rtcr_shape_validation():
    with pytest.raises(ValueError, match="sorted in increasing order"):
        NodeResourcesFitArgs.model_validate({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                             "requestedToCapacityRatio": {"shape": [
                                                 {"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}})


# ------------------------------------------------------------------------------------------ Balanced


def test_balanced_allocation_136_formula_by_hand():
    # node 4000m / 8Gi, already 1000m / 4Gi: without pod fractions 0.25, 0.5 -> std 0.125 -> 87
    # pod 1000m / 0: with pod 0.5, 0.5 -> std 0 -> 100 ; score = 50 + (50 + 100 - 87) // 2 = 50 + 31 = 81
    snap = snapshot_of(node("n1"), placed={"n1": [pod("a", cpu="1", mem="4Gi")]})
    plugin = NodeResourcesBalancedAllocation(None, Handle(snap))
    assert score(plugin, snap, pod(cpu="1")) == [81]


def test_balanced_allocation_no_change_is_75_and_best_effort_skips():
    snap = snapshot_of(node("n1"))
    plugin = NodeResourcesBalancedAllocation(None, Handle(snap))
    # empty node, pod 1 cpu / 2Gi: fractions .25/.25 with pod (std 0 -> 100), 0/0 without (100): 50+(50+0)//2 = 75
    assert score(plugin, snap, pod(cpu="1", mem="2Gi")) == [75]
    st = plugin.pre_score(CycleState(), pod(), NodeList(snap))
    assert st is not None and st.code == Code.Skip


def test_balanced_args_weights_must_be_one():
    with pytest.raises(ValueError, match="must be 1"):
        NodeResourcesBalancedAllocationArgs.model_validate({"resources": [{"name": "cpu", "weight": 2}]})


# ------------------------------------------------------------------------------------------ batch == per node


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_batch_equals_per_node_on_random_clusters(strategy: str):
    rng = random.Random(7)
    nodes = [node(f"n{i}", cpu=f"{rng.choice([1, 2, 4, 8])}", mem=f"{rng.choice([2, 4, 16])}Gi",
                  pods=str(rng.choice([3, 110]))) for i in range(30)]
    placed = {n.name: [pod(f"{n.name}-{j}", cpu=f"{rng.randint(0, 900)}m", mem=f"{rng.randint(0, 900)}Mi")
                       for j in range(rng.randint(0, 4))] for n in nodes}
    snap = snapshot_of(*nodes, placed=placed)
    plugin = fit(snap, scoringStrategy={"type": strategy})
    for _ in range(20):
        p = pod(cpu=f"{rng.randint(0, 3000)}m", mem=f"{rng.randint(0, 3000)}Mi")
        batch, per_node = run_filter(plugin, snap, p)
        for i, st in enumerate(per_node):
            assert bool(batch.ok[i]) == (st is None)
            if st is not None:
                assert batch.status_at(i) == st and batch.status_at(i).code == st.code
        state = CycleState()
        batch_scores = plugin.score_batch(state, p, snap, np.arange(len(snap))).tolist()
        one_by_one = [plugin.score(state, p, ni) for ni in snap.node_infos]
        assert batch_scores == one_by_one
        bal = NodeResourcesBalancedAllocation(None, Handle(snap))
        assert bal.score_batch(state, p, snap, np.arange(len(snap))).tolist() == \
            [bal.score(state, p, ni) for ni in snap.node_infos]


def test_fit_batch_keys_group_rows_exactly_by_their_status():
    """Rows with equal `keys` must get equal statuses (the framework asks once per key), rows with different
    statuses different keys; and the per-node filter reading PreFilter's state agrees with it without state."""
    big = pod("big", cpu="3", mem="6Gi", **{"example.com/gpu": "1"})
    nodes = [node("full-cpu", cpu="4"), node("full-mem", mem="8Gi"), node("tiny", cpu="2", mem="1Gi"),
             node("gpu", **{"example.com/gpu": "2"}), node("pods", pods="1"), node("gpu2", **{"example.com/gpu": "1"})]
    placed = {"full-cpu": [pod("a", cpu="2")], "full-mem": [pod("b", mem="4Gi")], "pods": [pod("c")],
              "gpu2": [pod("d", **{"example.com/gpu": "1"})]}
    snap = snapshot_of(*nodes, placed=placed)
    plugin = fit(snap)
    batch, per_node = run_filter(plugin, snap, big)
    keys = batch.row_keys()
    assert keys is not None
    by_key: dict[int, tuple] = {}
    seen: dict[tuple, int] = {}
    for row, ni in enumerate(snap.node_infos):
        if batch.ok[row]:
            continue
        st = batch.status_at(row)
        sig = (st.code, tuple(st.reasons))
        assert sig == (per_node[row].code, tuple(per_node[row].reasons))
        assert by_key.setdefault(int(keys[row]), sig) == sig
        assert seen.setdefault(sig, int(keys[row])) == int(keys[row])
        assert plugin.filter(CycleState(), big, ni).reasons == st.reasons  # no PreFilter state: same verdict
    assert len(seen) >= 4


def test_rows_failing_only_through_nominated_pods_are_not_filtered_twice() -> None:
    """The batch filter's nominated-pods check gives those rows their Status; recording the failures reuses
    it (the preemption-heavy workloads filtered every such node twice per cycle)."""
    import numpy as np

    from scheduler_runtime.framework.runtime import Diagnosis, Framework
    from scheduler_runtime.framework.status import Status

    snap = snapshot_of(node("n1"), node("n2"))
    fw = Framework.__new__(Framework)

    def no_second_pass(*a, **k):
        raise AssertionError("filtered again")
    fw.run_filter_with_nominated_pods = no_second_pass  # type: ignore[method-assign]
    d = Diagnosis()
    st = Status(Code.Unschedulable, "Insufficient cpu", plugin="NodeResourcesFit")
    fw._record_batch_failures(CycleState(), pod(), snap, [], np.array([1]), d, {"n2"}, {1: st})
    assert d.node_statuses == {"n2": st} and d.unschedulable_plugins == {"NodeResourcesFit"}


def _fresh_scores(make, snap: Snapshot, p: Pod, rows: np.ndarray) -> np.ndarray:
    """Scores from a plugin with no handle: nothing kept between calls."""
    plugin = make(None)
    return plugin.score_batch(CycleState(), p, snap, rows)


@pytest.mark.parametrize("kind", ["least", "most", "balanced"])
def test_scores_kept_across_cycles_follow_every_table_change(kind: str) -> None:
    """Per-row scores kept between cycles (node_table.RowValues) equal scores computed afresh after pods are
    added and removed, a node's allocatable changes, and nodes are added and removed (rows move)."""
    rng = random.Random(7)
    snap = snapshot_of(*(node(f"n{i}", cpu=str(rng.choice([2, 4, 8])), mem=f"{rng.choice([4, 8, 16])}Gi")
                         for i in range(12)))

    def make(handle: Handle | None):
        if kind == "balanced":
            return NodeResourcesBalancedAllocation(None, handle)
        args = None if kind == "least" else NodeResourcesFitArgs.model_validate(
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2},
                                                                       {"name": "memory", "weight": 1}]}})
        return NodeResourcesFit(args, handle)

    kept = make(Handle(snap))
    placed: list[tuple[NodeInfo, Pod]] = []
    for step in range(40):
        p = pod(f"q{step % 3}", cpu=f"{(step % 3 + 1) * 300}m", mem=f"{(step % 3 + 1) * 512}Mi")
        rows = np.asarray(sorted(rng.sample(range(len(snap)), k=min(len(snap), 7))), dtype=np.int64)
        got = kept.score_batch(CycleState(), p, snap, rows)
        assert got.tolist() == _fresh_scores(make, snap, p, rows).tolist(), step
        what = step % 8
        if what < 4:  # a pod lands on some node
            ni = snap.node_infos[rng.randrange(len(snap))]
            q = pod(f"placed{step}", cpu=f"{rng.randrange(1, 9) * 250}m", mem=f"{rng.randrange(1, 9)}Gi")
            snap.add_pod(ni, q)
            placed.append((ni, q))
        elif what < 6 and placed:  # one leaves
            ni, q = placed.pop(rng.randrange(len(placed)))
            if ni.row >= 0:
                snap.remove_pod(ni, q)
        elif what == 6:  # a node's allocatable changes
            ni = snap.node_infos[rng.randrange(len(snap))]
            snap.update_node(ni, node(ni.name, cpu=str(rng.choice([3, 6])), mem="12Gi"))
        else:  # a node goes and another comes: rows move
            gone = snap.node_infos[rng.randrange(len(snap))].name
            snap.remove_node(gone)
            placed = [(ni, q) for ni, q in placed if ni.name != gone]
            snap.add_node(NodeInfo(node(f"new{step}", cpu="8", mem="32Gi")))


def test_fit_state_kept_per_request_shape_follows_the_table() -> None:
    """PreFilter's state is kept per request shape, but only for the node table it was made for: another
    snapshot's table numbers its resource columns in its own order (here hugepages-2Mi)."""
    from scheduler_runtime.plugins.noderesources import NodeResourcesFit
    from scheduler_runtime.testing.builders import make_node, make_pod

    fit = NodeResourcesFit()
    huge = make_node("huge").capacity(**{"hugepages-2Mi": "4Mi"}).record()
    gpu_first = snapshot_of(make_node("gpu").capacity(**{"example.com/gpu": 1}).record(), huge)
    huge_first = snapshot_of(huge, make_node("plain").record())
    assert gpu_first.table.column("hugepages-2Mi") != huge_first.table.column("hugepages-2Mi")
    pods = [make_pod(f"p{i}").req(cpu="1", **{"hugepages-2Mi": "2Mi"}).record() for i in range(3)]
    verdicts = []
    for pod, snap in zip(pods, (gpu_first, huge_first, gpu_first), strict=True):
        state = CycleState()
        assert fit.pre_filter(state, pod, NodeList(snap)) is None
        verdicts.append(fit.filter_batch(state, pod, snap).ok.tolist())
    assert verdicts == [[False, True], [True, False], [False, True]]


def test_recorded_batch_failures_count_each_shared_status_in_order_of_its_first_node() -> None:
    """Failures recorded from a keyed batch (more rows than are asked one by one) are counted per distinct
    Status as they are recorded; the counts and their order equal a pass over every failed node."""
    from scheduler_runtime.framework.runtime import Diagnosis, Framework
    from scheduler_runtime.framework.status import distinct_statuses

    shapes = [{"cpu": "2"}, {"mem": "1Gi"}, {"cpu": "1", "mem": "1Gi"}, {}]
    nodes = [node(f"n{i}", **shapes[(i * 7) % 5 % 4]) for i in range(60)]
    snap = snapshot_of(*nodes)
    plugin = fit(snap)
    big = pod("big", cpu="3", mem="6Gi")
    state = CycleState()
    plugin.pre_filter(state, big, NodeList(snap))
    batch = plugin.filter_batch(state, big, snap)
    cp = type("CP", (), {"name": "NodeResourcesFit"})()
    failed = np.flatnonzero(~batch.ok)
    assert len(failed) > 16 and batch.row_keys() is not None
    fw = Framework.__new__(Framework)
    d = Diagnosis()
    fw._record_batch_failures(state, big, snap, [(cp, batch)], failed[::-1].copy(), d, {})
    want = distinct_statuses(d.node_statuses.values())
    assert len(want) == 3 and d._tallied == len(d.node_statuses)
    assert [(id(s), n) for s, n in d.status_counts()] == [(id(s), n) for s, n in want]

"""Framework: each status code at each extension point behaves as kube-scheduler's runtime does."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.runtime import (
    CycleError,
    Diagnosis,
    FitError,
    Framework,
    num_feasible_nodes_to_find,
)
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code, Status
from scheduler_runtime.framework.types import NodeInfo, PreFilterResult
from scheduler_runtime.objects import Node, Pod


def nodes(n: int) -> Snapshot:
    s = Snapshot()
    for i in range(n):
        s.add_node(NodeInfo(Node.from_dict({"metadata": {"name": f"n{i}"},
                                            "status": {"allocatable": {"cpu": "4", "pods": "110"}}})))
    return s


POD = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}})


def fw(snap: Snapshot, plan: dict, seed: int = 1, pct: int | None = None) -> Framework:
    handle = Handle(snap)
    built = {point: [(p, w) for p, w in entries] for point, entries in plan.items()}
    return Framework("default-scheduler", handle, built, pct, rng=random.Random(seed))


def plugin(name: str, **methods) -> Plugin:
    cls = type(name, (Plugin,), {"name": name, **{k: (lambda f: lambda self, *a: f(*a))(v)
                                                  for k, v in methods.items()}})
    return cls()


# ------------------------------------------------------------------------------------------ PreFilter


def test_prefilter_skip_disables_the_plugins_filter():
    calls = []
    p = plugin("P", pre_filter=lambda s, pod, n: Status.skip(), filter=lambda s, pod, ni: calls.append(1))
    snap = nodes(3)
    keep = plugin("S", score=lambda s, pod, ni: 0)  # with no score plugin kube stops at the first feasible node
    f = fw(snap, {"preFilter": [(p, 0)], "filter": [(p, 0)], "score": [(keep, 1)]})
    state = CycleState()
    _, st, _ = f.run_pre_filter(state, POD, NodeList(snap))
    assert st is None and "P" in state.skip_filter_plugins
    feasible = f.find_nodes_that_pass_filters(state, POD, snap, None, Diagnosis())
    assert len(feasible) == 3 and calls == []


def test_prefilter_unresolvable_stops_at_once_unschedulable_lets_others_run():
    seen = []
    a = plugin("A", pre_filter=lambda s, pod, n: (seen.append("A"), Status.unresolvable("no"))[1])
    b = plugin("B", pre_filter=lambda s, pod, n: seen.append("B"))
    snap = nodes(1)
    _, st, rej = fw(snap, {"preFilter": [(a, 0), (b, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.code == Code.UnschedulableAndUnresolvable and seen == ["A"] and rej == {"A"}
    seen.clear()
    c = plugin("C", pre_filter=lambda s, pod, n: (seen.append("C"), Status.unschedulable("maybe"))[1])
    _, st, rej = fw(snap, {"preFilter": [(c, 0), (b, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.code == Code.Unschedulable and seen == ["C", "B"] and rej == {"C"}


def test_prefilter_results_intersect_and_empty_intersection_message():
    a = plugin("A", pre_filter=lambda s, pod, n: PreFilterResult({"n0", "n1"}))
    b = plugin("B", pre_filter=lambda s, pod, n: (PreFilterResult({"n1", "n2"}), None))
    c = plugin("C", pre_filter=lambda s, pod, n: PreFilterResult({"n2"}))
    snap = nodes(3)
    res, st, _ = fw(snap, {"preFilter": [(a, 0), (b, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st is None and res.node_names == {"n1"}
    _, st, _ = fw(snap, {"preFilter": [(a, 0), (c, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.code == Code.UnschedulableAndUnresolvable
    assert st.message == "node(s) didn't satisfy plugin(s) [A C] simultaneously"
    d = plugin("D", pre_filter=lambda s, pod, n: PreFilterResult(set()))
    _, st, _ = fw(snap, {"preFilter": [(d, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.message == "node(s) didn't satisfy plugin D"


def test_prefilter_error_and_exceptions_name_the_plugin():
    snap = nodes(1)
    e = plugin("E", pre_filter=lambda s, pod, n: Status.wait())
    _, st, _ = fw(snap, {"preFilter": [(e, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.code == Code.Error and 'running PreFilter plugin "E"' in st.message

    def boom(*a):
        raise RuntimeError("kaboom")

    x = plugin("X", pre_filter=boom)
    _, st, _ = fw(snap, {"preFilter": [(x, 0)]}).run_pre_filter(CycleState(), POD, NodeList(snap))
    assert st.code == Code.Error and "kaboom" in st.message and st.plugin == "X"


# ------------------------------------------------------------------------------------------ Filter


def test_filter_stops_at_first_failing_plugin_per_node():
    calls = []
    a = plugin("A", filter=lambda s, pod, ni: Status.unschedulable("a says no") if ni.name == "n0" else None)
    b = plugin("B", filter=lambda s, pod, ni: calls.append(ni.name))
    snap = nodes(2)
    d = Diagnosis()
    feasible = fw(snap, {"filter": [(a, 0), (b, 0)], "score": []}).find_nodes_that_pass_filters(
        CycleState(), POD, snap, None, d)
    assert [snap.node_infos[r].name for r in feasible] == ["n1"]
    assert calls == ["n1"]
    assert d.node_statuses["n0"].plugin == "A" and d.unschedulable_plugins == {"A"}


@pytest.mark.parametrize("bad", [Status.wait(), Status.skip(), Status.as_error("broken")])
def test_filter_non_rejection_aborts_the_cycle(bad: Status):
    a = plugin("A", filter=lambda s, pod, ni: bad)
    snap = nodes(2)
    with pytest.raises(CycleError) as exc:
        fw(snap, {"filter": [(a, 0)]}).find_nodes_that_pass_filters(CycleState(), POD, snap, None, Diagnosis())
    assert exc.value.status.code == Code.Error
    assert 'running "A" filter plugin' in exc.value.status.message


def test_fit_error_message_sorts_whole_strings():
    d = Diagnosis()
    for i in range(10):
        d.node_statuses[f"a{i}"] = Status.unschedulable("Insufficient cpu")
    for i in range(3):
        d.node_statuses[f"b{i}"] = Status.unresolvable("node(s) had untolerated taint(s)")
    msg = FitError(POD, 13, d).message
    assert msg == "0/13 nodes are available: 10 Insufficient cpu, 3 node(s) had untolerated taint(s)."
    d.post_filter_msg = "preemption: 0/13 nodes are available: 13 Preemption is not helpful for scheduling."
    assert FitError(POD, 13, d).message.endswith(". preemption: 0/13 nodes are available: 13 Preemption is "
                                                 "not helpful for scheduling.")


# ------------------------------------------------------------------------------------------ sampling


@pytest.mark.parametrize("n, want", [(99, 99), (200, 100), (500, 230), (1000, 420), (5000, 500), (6000, 300)])
def test_num_feasible_nodes_to_find(n: int, want: int):
    assert num_feasible_nodes_to_find(0, n) == want


def test_explicit_percentage_and_floor_of_100():
    assert num_feasible_nodes_to_find(50, 1000) == 500
    assert num_feasible_nodes_to_find(1, 1000) == 100


def test_rotating_start_index_and_processed_count():
    # 300 nodes, 50% -> stop after 150 feasible; every 3rd node fails, so 150 feasible need 225 processed
    fail = plugin("F", filter=lambda s, pod, ni: Status.unschedulable("x") if int(ni.name[1:]) % 3 == 0 else None)
    keep = plugin("S", score=lambda s, pod, ni: 0)
    snap = nodes(300)
    f = fw(snap, {"filter": [(fail, 0)], "score": [(keep, 1)]}, pct=50)
    d = Diagnosis()
    feasible = f.find_nodes_that_pass_filters(CycleState(), POD, snap, None, d)
    assert len(feasible) == 150 and len(d.node_statuses) == 75
    assert f.next_start_node_index == 225
    feasible2 = f.find_nodes_that_pass_filters(CycleState(), POD, snap, None, Diagnosis())
    assert snap.node_infos[int(feasible2[0])].name == "n226"  # n225 fails (225 % 3 == 0)


# ------------------------------------------------------------------------------------------ Score


def test_scores_are_normalized_checked_and_weighted():
    s1 = plugin("S1", score=lambda s, pod, ni: int(ni.name[1:]) * 10)
    s2 = plugin("S2", score=lambda s, pod, ni: 100 - int(ni.name[1:]),
                normalize_score=lambda s, pod, scores: [setattr(x, "score", x.score // 2) for x in scores] and None)
    snap = nodes(3)
    f = fw(snap, {"score": [(s1, 2), (s2, 1)]})
    res = f.run_score(CycleState(), POD, snap, np.arange(3), keep_breakdown=True)
    # S1: 0,10,20 x2 = 0,20,40 ; S2 normalised: 50,49,49 x1 ; totals 50, 69, 89
    assert res.totals.tolist() == [50, 69, 89]
    bad = plugin("Bad", score=lambda s, pod, ni: 101)
    with pytest.raises(CycleError) as exc:
        fw(snap, {"score": [(bad, 1)]}).run_score(CycleState(), POD, snap, np.arange(3))
    assert exc.value.status.message == ('plugin "Bad" returns an invalid score 101, it should in the range of '
                                        '[0, 100] after normalizing')
    wrong = plugin("Wrong", score=lambda s, pod, ni: "high")
    with pytest.raises(CycleError):
        fw(snap, {"score": [(wrong, 1)]}).run_score(CycleState(), POD, snap, np.arange(3))


def test_prescore_skip_skips_score():
    called = []
    p = plugin("P", pre_score=lambda s, pod, n: Status.skip(), score=lambda s, pod, ni: called.append(1) or 0)
    snap = nodes(2)
    f = fw(snap, {"preScore": [(p, 0)], "score": [(p, 1)]})
    state = CycleState()
    assert f.run_pre_score(state, POD, NodeList(snap)) is None
    f.run_score(state, POD, snap, np.arange(2))
    assert called == []


def test_ties_broken_uniformly_with_seeded_rng():
    snap = nodes(4)
    f = fw(snap, {}, seed=42)
    picks = [f.select_host(np.array([5, 9, 9, 9])) for _ in range(3000)]
    assert 0 not in picks
    for i in (1, 2, 3):
        assert 850 < picks.count(i) < 1150
    g = fw(snap, {}, seed=42)
    assert [g.select_host(np.array([5, 9, 9, 9])) for _ in range(3000)] == picks


# ------------------------------------------------------------------------------------------ Reserve / Permit / Bind


def test_reserve_failure_unreserves_all_in_reverse_order():
    order = []
    a = plugin("A", reserve=lambda s, pod, n: None, unreserve=lambda s, pod, n: order.append("A"))
    b = plugin("B", reserve=lambda s, pod, n: Status.unschedulable("full"),
               unreserve=lambda s, pod, n: order.append("B"))
    c = plugin("C", reserve=lambda s, pod, n: None, unreserve=lambda s, pod, n: order.append("C"))
    f = fw(nodes(1), {"reserve": [(a, 0), (b, 0), (c, 0)]})
    st = f.run_reserve(CycleState(), POD, "n0")
    assert st.code == Code.Unschedulable and st.plugin == "B"
    f.run_unreserve(CycleState(), POD, "n0")
    assert order == ["C", "B", "A"]


def test_permit_wait_allow_reject_and_timeout():
    w = plugin("W", permit=lambda s, pod, n: (Status.wait(), 5.0))
    f = fw(nodes(1), {"permit": [(w, 0)]})
    assert f.run_permit(CycleState(), POD, "n0").code == Code.Wait
    threading.Timer(0.05, lambda: f.waiting_pods.get(POD.uid).allow("W")).start()
    assert f.wait_on_permit(POD) is None
    assert f.run_permit(CycleState(), POD, "n0").code == Code.Wait
    threading.Timer(0.05, lambda: f.waiting_pods.get(POD.uid).reject("W", "gang incomplete")).start()
    st = f.wait_on_permit(POD)
    assert st.code == Code.Unschedulable and st.message == "gang incomplete" and st.plugin == "W"
    quick = plugin("Q", permit=lambda s, pod, n: (Status.wait(), 0.2))
    g = fw(nodes(1), {"permit": [(quick, 0)]})
    t0 = time.monotonic()  # before the deadline is set: a stall between the two calls cannot shorten the wait
    g.run_permit(CycleState(), POD, "n0")
    st = g.wait_on_permit(POD)
    assert time.monotonic() - t0 >= 0.2
    assert st.message == "rejected due to timeout after waiting 0.2s at plugin Q"
    huge = plugin("H", permit=lambda s, pod, n: (Status.wait(), 3600))
    h = fw(nodes(1), {"permit": [(huge, 0)]})
    h.run_permit(CycleState(), POD, "n0")
    assert h.waiting_pods.get(POD.uid)._timeouts["H"] == 900  # capped at 15 minutes


def test_bind_skip_tries_next_and_all_skip_is_skip():
    seen = []
    a = plugin("A", bind=lambda s, pod, n: (seen.append("A"), Status.skip())[1])
    b = plugin("B", bind=lambda s, pod, n: seen.append("B"))
    f = fw(nodes(1), {"bind": [(a, 0), (b, 0)]})
    assert f.run_bind(CycleState(), POD, "n0") is None and seen == ["A", "B"]
    g = fw(nodes(1), {"bind": [(a, 0)]})
    assert g.run_bind(CycleState(), POD, "n0").code == Code.Skip


def test_post_bind_exceptions_are_ignored():
    def boom(*a):
        raise RuntimeError("x")

    f = fw(nodes(1), {"postBind": [(plugin("P", post_bind=boom), 0)]})
    f.run_post_bind(CycleState(), POD, "n0")  # must not raise
    assert f.post_bind[0].name == "P"


def test_diagnosis_counts_statuses_as_recorded_and_falls_back_when_a_node_is_recorded_twice():
    """`status_counts` equals a pass over every node's Status, whichever way the nodes were recorded."""
    from scheduler_runtime.framework.status import distinct_statuses
    rng = random.Random(7)
    for trial in range(300):
        pool = [Status.unschedulable(f"r{k}") for k in range(3)]
        d = Diagnosis(node_statuses={"given": pool[0]} if trial % 10 == 0 else {})
        names = iter(range(10_000))
        for _ in range(rng.randint(0, 6)):
            new = [f"n{next(names)}" for _ in range(rng.randint(1, 5))]
            if rng.random() < 0.05:  # a node recorded again replaces its Status
                new[0] = rng.choice(list(d.node_statuses) or new)
            how = rng.randrange(3)
            if how == 0:
                d.record(new[0], rng.choice(pool))
            elif how == 1:
                d.record_many(new, rng.choice(pool))
            else:
                each = [rng.choice(pool) for _ in new]
                d.record_each(new, each, distinct_statuses(each))
        got = [(id(s), n) for s, n in d.status_counts()]
        assert got == [(id(s), n) for s, n in distinct_statuses(d.node_statuses.values())], trial


def test_recorded_top_scores_keep_the_node_order_of_ties_and_each_plugins_columns():
    """describe-pod's top nodes: highest total first, ties in feasible order, each plugin's raw, normalized,
    weight and weighted score of that node."""
    from scheduler_runtime.framework.outcomes import ScoreResult
    from scheduler_runtime.schedule_one import _top_scores
    snap = nodes(6)
    rows = np.array([5, 3, 1, 0, 2])
    a_raw, a_norm = np.array([1, 2, 3, 4, 5]), np.array([10, 20, 30, 40, 50])
    b_raw, b_norm = np.array([9, 9, 0, 9, 0]), np.array([90, 90, 0, 90, 0])
    totals = a_norm * 2 + b_norm
    r = ScoreResult(rows, [], totals, {"A": (a_raw, a_norm, 2), "B": (b_raw, b_norm, 1)})
    top = _top_scores(r, 3, snap)
    assert [(t["node"], t["total"]) for t in top] == [("n0", 170), ("n3", 130), ("n5", 110)]
    assert top[1]["plugins"] == {"A": {"raw": 2, "normalized": 20, "weight": 2, "weighted": 40},
                                 "B": {"raw": 9, "normalized": 90, "weight": 1, "weighted": 90}}
    tied = ScoreResult(rows, [], np.zeros(5, dtype=np.int64))
    assert [t["node"] for t in _top_scores(tied, 5, snap)] == ["n5", "n3", "n1", "n0", "n2"]
    assert all(type(t["total"]) is int for t in top)

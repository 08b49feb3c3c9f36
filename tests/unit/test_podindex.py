"""The snapshot's incremental indexes (podindex) against a from-scratch computation, after random sequences
of binds, assumes, forgets, deletions, relabels, node and namespace changes; and the plugins that read them
(PodTopologySpread, InterPodAffinity) against the scans they replaced: same counts, same verdicts, same
scores, so decisions stay identical."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_runtime.cache import Cache
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.podindex import ANTI_REQUIRED, _pod_terms, term_key
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import PodList
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.interpodaffinity import _PRE_FILTER as IPA_PF
from scheduler_runtime.plugins.interpodaffinity import _PRE_SCORE as IPA_PS
from scheduler_runtime.plugins.interpodaffinity import InterPodAffinity, _ScoreState
from scheduler_runtime.plugins.podtopologyspread import _PRE_FILTER as PTS_PF
from scheduler_runtime.plugins.podtopologyspread import _PRE_SCORE as PTS_PS
from scheduler_runtime.plugins.podtopologyspread import (
    HOSTNAME,
    PodTopologySpread,
    _count_matching,
    _has_keys,
    _included,
)

ZONE = "topology.kubernetes.io/zone"
NODES = 6


def node(i: int, zone: str | None = "z", taint: bool = False) -> Node:
    labels = {HOSTNAME: f"n{i}"}
    if zone is not None:
        labels[ZONE] = f"{zone}{i % 3}"
    spec: dict[str, Any] = {"taints": [{"key": "k", "effect": "NoSchedule"}]} if taint else {}
    return Node.from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": labels},
                           "spec": spec, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})


def term(color: str, key: str, namespaces: list[str] | None = None, ns_selector: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key}
    if namespaces:
        t["namespaces"] = namespaces
    if ns_selector:
        t["namespaceSelector"] = {"matchLabels": {"team": "x"}}
    return t


POD_SHAPES = st.fixed_dictionaries({
    "color": st.sampled_from(["a", "b", "c"]),
    "ns": st.sampled_from(["ns0", "ns1"]),
    "terminating": st.booleans(),
    "anti": st.sampled_from([None, HOSTNAME, ZONE]),
    "affinity": st.sampled_from([None, ZONE, HOSTNAME]),
    "preferred": st.sampled_from([None, "aff", "anti"]),
    "ns_selector": st.booleans(),
    "spread": st.sampled_from([None, (ZONE, "DoNotSchedule"), (HOSTNAME, "DoNotSchedule"), (ZONE, "ScheduleAnyway"),
                               (HOSTNAME, "ScheduleAnyway")]),
    "min_domains": st.sampled_from([None, 2, 5]),
    "honor_taints": st.booleans(),
    "selector": st.sampled_from([None, "ns0-zone"]),
})


def make_pod(uid: str, shape: dict[str, Any], node_name: str = "") -> Pod:
    aff: dict[str, Any] = {}
    nss = None if shape["ns_selector"] else ["ns0", "ns1"]
    if shape["anti"]:
        aff.setdefault("podAntiAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term("a", shape["anti"], nss, shape["ns_selector"])]
    if shape["affinity"]:
        aff.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term("b", shape["affinity"])]
    if shape["preferred"] == "aff":
        aff.setdefault("podAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 3, "podAffinityTerm": term("c", HOSTNAME, nss)}]
    elif shape["preferred"] == "anti":
        aff.setdefault("podAntiAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 2, "podAffinityTerm": term("a", ZONE, None, shape["ns_selector"])}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if aff:
        spec["affinity"] = aff
    if shape["spread"]:
        key, when = shape["spread"]
        c: dict[str, Any] = {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
                             "labelSelector": {"matchLabels": {"color": "a"}}}
        if shape["min_domains"] and when == "DoNotSchedule":
            c["minDomains"] = shape["min_domains"]
        if shape["honor_taints"]:
            c["nodeTaintsPolicy"] = "Honor"
        spec["topologySpreadConstraints"] = [c]
    if shape["selector"]:
        spec["nodeSelector"] = {ZONE: "z0"}
    if node_name:
        spec["nodeName"] = node_name
    meta: dict[str, Any] = {"name": uid, "namespace": shape["ns"], "uid": uid, "labels": {"color": shape["color"]}}
    if shape["terminating"]:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


OPS = st.lists(st.tuples(st.sampled_from(["bind", "assume", "assume", "forget", "remove", "relabel", "node_remove",
                                          "node_add", "ns_label"]),
                         st.integers(0, 5), st.integers(0, NODES - 1), POD_SHAPES), min_size=1, max_size=40)


# --------------------------------------------------------------------------- from-scratch references


def scratch_terms(cache: Cache) -> dict[Any, np.ndarray]:
    snap = cache.snapshot
    out: dict[Any, np.ndarray] = {}
    for ni in snap.node_infos:
        for p in ni.pods:
            for kind, t in _pod_terms(p):
                key = (kind, term_key(t), t.topology_key, t.weight, p.namespace)
                arr = out.setdefault(key, np.zeros(len(snap), dtype=np.int64))
                arr[ni.row] += 1
    return out


def pts_reference_filter(plugin: PodTopologySpread, pod: Pod, snap: Any) -> list[dict[str, int]]:
    """The scan PodTopologySpread's PreFilter did before the indexes."""
    constraints = plugin._constraints(pod, "DoNotSchedule")
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for ni in snap.node_infos:
        if not _has_keys(ni.node, constraints):
            continue
        for i, c in enumerate(constraints):
            if not _included(c, pod, ni.node):
                continue
            val = ni.node.labels[c.topology_key]
            counts[i][val] = counts[i].get(val, 0) + _count_matching(ni.pods, c.selector, pod.namespace)
    return counts


def pts_reference_score(plugin: PodTopologySpread, pod: Pod, snap: Any, rows: list[int]) -> list[int]:
    """The PreScore scan and per-node Score before the indexes."""
    constraints = plugin._constraints(pod, "ScheduleAnyway")
    require_all = bool(pod.spread_constraints) or not plugin.system_defaulted
    nodes = [snap.node_infos[r] for r in rows]
    ignored, counts, sizes = set(), [{} for _ in constraints], [0] * len(constraints)
    for ni in nodes:
        if require_all and not _has_keys(ni.node, constraints):
            ignored.add(ni.name)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key == HOSTNAME or c.topology_key not in ni.node.labels:
                continue
            val = ni.node.labels[c.topology_key]
            if val not in counts[i]:
                counts[i][val] = 0
                sizes[i] += 1
    weights = [math.log((len(nodes) - len(ignored) if c.topology_key == HOSTNAME else sizes[i]) + 2)
               for i, c in enumerate(constraints)]
    for ni in snap.node_infos:
        if require_all and not _has_keys(ni.node, constraints):
            continue
        for i, c in enumerate(constraints):
            if c.topology_key == HOSTNAME or not _included(c, pod, ni.node):
                continue
            val = ni.node.labels.get(c.topology_key)
            if val is not None and val in counts[i]:
                counts[i][val] += _count_matching(ni.pods, c.selector, pod.namespace)
    out = []
    for ni in nodes:
        if ni.name in ignored:
            out.append(0)
            continue
        total = 0.0
        for i, c in enumerate(constraints):
            val = ni.node.labels.get(c.topology_key)
            if val is None:
                continue
            cnt = (_count_matching(ni.pods, c.selector, pod.namespace) if c.topology_key == HOSTNAME
                   else counts[i].get(val, 0))
            total += cnt * weights[i] + (c.max_skew - 1)
        out.append(int(math.copysign(math.floor(abs(total) + 0.5), total)))
    return out


# --------------------------------------------------------------------------- the property


def apply(cache: Cache, ops: list[tuple[str, int, int, dict[str, Any]]], all_nodes: list[Node]) -> None:
    pods: dict[int, Pod] = {}
    for op, pi, ni, shape in ops:
        uid = f"p{pi}"
        name = all_nodes[ni].name
        present = cache.snapshot.get(name) is not None
        if op == "bind":
            if cache.is_assumed(uid):
                cache.add_pod(make_pod(uid, shape, cache.pod_node(uid) or name))  # the bind confirms it
            elif cache.pod_node(uid) is None:
                cache.add_pod(make_pod(uid, shape, name))
        elif op == "assume" and cache.pod_node(uid) is None:
            p = make_pod(uid, shape)
            cache.assume_pod(p, name)
            pods[pi] = p
        elif op == "forget" and pi in pods:
            cache.forget_pod(pods.pop(pi))
        elif op == "remove":
            cache.remove_pod(make_pod(uid, shape))
        elif op == "relabel" and cache.pod_node(uid) is not None and not cache.is_assumed(uid):
            cache.update_pod(make_pod(uid, shape, cache.pod_node(uid) or name))
        elif op == "node_remove" and present:
            cache.remove_node(name)
        elif op == "node_add" and not present:
            cache.add_node(all_nodes[ni])
        elif op == "ns_label":
            cache.set_namespace(shape["ns"], {"team": "x"} if shape["terminating"] else {})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, POD_SHAPES, st.booleans())
def test_indexes_and_plugins_match_from_scratch(ops: list[Any], probe_shape: dict[str, Any],
                                                 warm: bool) -> None:
    cache = Cache()
    all_nodes = [node(i, zone=None if i == NODES - 1 else "z", taint=i == 2) for i in range(NODES)]
    for n in all_nodes[:-1]:
        cache.add_node(n)
    snap = cache.snapshot
    handle = Handle(snap)
    pts, ipa = PodTopologySpread(handle=handle), InterPodAffinity(handle=handle)
    probe = make_pod("probe", probe_shape)
    if warm:  # register predicates before the events, so they are maintained incrementally
        for plugin in (pts, ipa):
            plugin.pre_filter(CycleState(), probe, NodeList(snap))
            plugin.pre_score(CycleState(), probe, NodeList(snap))
    apply(cache, ops, all_nodes)

    # the indexes themselves
    for ni in snap.node_infos:
        assert isinstance(ni.pods, PodList)
        for p in ni.pods:
            assert snap.pod_nodes[p.uid] is ni
    assert len(snap.pod_nodes) == sum(len(ni.pods) for ni in snap.node_infos)
    for key in (HOSTNAME, ZONE):
        top = snap.topology(key)
        assert [top.values[i] if i >= 0 else None for i in top.ids.tolist()] == \
               [ni.node.labels.get(key) for ni in snap.node_infos]
    scratch = scratch_terms(cache)
    for e in snap.terms.entries(snap.node_infos):
        key = (e.kind, term_key(e.term), e.term.topology_key, e.term.weight, e.owner_ns)
        assert e.counts.tolist() == scratch.pop(key).tolist()
    assert not scratch
    for key, (pred, arr) in list(snap.matches._entries.items()):
        assert arr.tolist() == [sum(1 for p in ni.pods if pred(p)) for ni in snap.node_infos], key

    if not len(snap):
        return
    all_rows = NodeList(snap)
    # InterPodAffinity: the indexed PreFilter state equals the scan's; the batch verdicts equal per-node ones
    state = CycleState()
    st_ = ipa.pre_filter(state, probe, all_rows)
    needs_all = bool(probe.affinity_required or probe.anti_affinity_required)
    if st_ is None:
        s = state.get(IPA_PF)
        ref = ipa._pre_filter_scan(probe, snap, needs_all)
        assert (s.existing_anti, s.affinity, s.anti) == (ref.existing_anti, ref.affinity, ref.anti)
        fb = ipa.filter_batch(state, probe, snap)
        for ni in snap.node_infos:
            one = ipa.filter(state, probe, ni)
            assert bool(fb.ok[ni.row]) == (one is None)
            if one is not None:
                batch = fb.status_at(ni.row)
                assert (batch.code, batch.reasons) == (one.code, one.reasons)
    else:
        assert st_.code == Code.Skip
        if needs_all or snap.num_required_anti_affinity_pods:
            ref = ipa._pre_filter_scan(probe, snap, needs_all)
            assert not any(v > 0 for v in ref.existing_anti.values())
    state = CycleState()
    st_ = ipa.pre_score(state, probe, all_rows)
    has_constraints = bool(probe.affinity_preferred or probe.anti_affinity_preferred)
    if st_ is None:
        ref_scores = _ScoreState.from_pairs(snap, ipa._pre_score_scan(probe, snap, has_constraints))
        s = state.get(IPA_PS)
        batch = ipa.score_batch(state, probe, snap, all_rows.rows)
        assert batch.tolist() == [ref_scores.node_score(ni.node) for ni in snap.node_infos]
        assert batch.tolist() == [ipa.score(state, probe, ni) for ni in snap.node_infos]
        assert s.touched
    elif not ipa.args.ignore_preferred_terms_of_existing_pods and (has_constraints or snap.num_affinity_pods):
        assert not ipa._pre_score_scan(probe, snap, has_constraints)

    # PodTopologySpread: the indexed counts equal the scan's; batch verdicts and scores equal per-node ones
    state = CycleState()
    if pts.pre_filter(state, probe, all_rows) is None:
        s = state.get(PTS_PF)
        ref_counts = pts_reference_filter(pts, probe, snap)
        for i in range(len(s.constraints)):
            got = {s.topologies[i].values[d]: int(s.counts[i][d]) for d in np.flatnonzero(s.present[i]).tolist()}
            assert got == ref_counts[i]
            c = s.constraints[i]
            ref_min = 0 if not ref_counts[i] or (c.min_domains is not None and len(ref_counts[i]) < c.min_domains) \
                else min(ref_counts[i].values())
            assert s.min_match(i) == ref_min
        fb = pts.filter_batch(state, probe, snap)
        for ni in snap.node_infos:
            one = pts.filter(state, probe, ni)
            assert bool(fb.ok[ni.row]) == (one is None)
            if one is not None:
                assert (fb.status_at(ni.row).code, fb.status_at(ni.row).reasons) == (one.code, one.reasons)
    state = CycleState()
    feasible = np.asarray([r for r in range(len(snap)) if r % 2 == 0 or len(snap) < 3], dtype=np.int64)
    if pts.pre_score(state, probe, NodeList(snap, feasible)) is None:
        batch = pts.score_batch(state, probe, snap, feasible)
        assert batch.tolist() == pts_reference_score(pts, probe, snap, feasible.tolist())
        assert batch.tolist() == [pts.score(state, probe, snap.node_infos[r]) for r in feasible.tolist()]
    s = state.get(PTS_PS)
    assert s is None or isinstance(s.weights, list)
    assert ANTI_REQUIRED == 0


def test_podlist_reads_like_a_list() -> None:
    pods = [make_pod(f"u{i}", {"color": "a", "ns": "ns0", "terminating": False, "anti": None, "affinity": None,
                                 "preferred": None, "ns_selector": False, "spread": None, "min_domains": None,
                                 "honor_taints": False, "selector": None}) for i in range(3)]
    pl = PodList(pods)
    assert pl == pods and list(pl) == pods and pl[1] is pods[1] and pl[-1] is pods[2] and len(pl) == 3
    assert pods[0] in pl and pl.pop_uid("u1") is pods[1] and pl == [pods[0], pods[2]]
    pl.append(pods[1])
    assert [p.uid for p in pl] == ["u0", "u2", "u1"] and PodList() == [] and not PodList()


def test_namespace_selector_terms_follow_namespace_label_changes() -> None:
    """Terms with a namespaceSelector read namespace labels: cached matches must not outlive a label change."""
    shape = {"color": "a", "ns": "ns0", "terminating": False, "anti": HOSTNAME, "affinity": None,
             "preferred": "anti", "ns_selector": True, "spread": None, "min_domains": None, "honor_taints": False,
             "selector": None}
    cache = Cache()
    for i in range(3):
        cache.add_node(node(i))
    snap = cache.snapshot
    ipa = InterPodAffinity(handle=Handle(snap))
    cache.add_pod(make_pod("e1", {**shape, "ns": "ns1"}, "n0"))
    probe = make_pod("probe", shape)
    for labels, expect_anti in (({}, False), ({"team": "x"}, True), ({}, False)):
        cache.set_namespace("ns0", labels)
        cache.set_namespace("ns1", labels)
        state = CycleState()
        st_ = ipa.pre_filter(state, probe, NodeList(snap))
        s = state.get(IPA_PF)
        ref = ipa._pre_filter_scan(probe, snap, True)
        assert st_ is None and (s.existing_anti, s.anti) == (ref.existing_anti, ref.anti)
        assert bool(s.existing_anti) == expect_anti and bool(s.anti) == expect_anti
        state = CycleState()
        if ipa.pre_score(state, probe, NodeList(snap)) is None:
            ref_scores = _ScoreState.from_pairs(snap, ipa._pre_score_scan(probe, snap, True))
            assert ipa.score_batch(state, probe, snap, NodeList(snap).rows).tolist() == \
                [ref_scores.node_score(ni.node) for ni in snap.node_infos]
        else:
            assert not ipa._pre_score_scan(probe, snap, True)


def _naive_group(node_statuses: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, s in node_statuses.items():
        for reason in s.all_reasons:
            g = out.setdefault(reason, {"count": 0, "nodes": [], "plugin": s.plugin})
            g["count"] += 1
            if len(g["nodes"]) < 20:
                g["nodes"].append(name)
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=60))
def test_filter_reason_grouping_with_shared_statuses(picks: list[tuple[int, bool]]) -> None:
    """Shared (batch) and per-node Status objects group exactly as a walk over every node would."""
    from scheduler_runtime.framework.status import Status
    from scheduler_runtime.results import group_filter_reasons
    shared = [Status(Code.Unschedulable, "r0", plugin="P0"), Status(Code.Unschedulable, "r1", "r0", plugin="P1"),
              Status(Code.UnschedulableAndUnresolvable, "r2", plugin="P2"),
              Status(Code.Unschedulable, "r1", plugin="P3")]
    statuses = {f"n{i}": (shared[k] if share else Status(shared[k].code, *shared[k].reasons, plugin=f"Q{k}"))
                for i, (k, share) in enumerate(picks)}
    got = group_filter_reasons(statuses)
    assert got == _naive_group(statuses) and list(got) == list(_naive_group(statuses))
    # the same nodes recorded into a Diagnosis in runs (one Status for a run, or each its own): its tally
    # groups them as the walk does, without walking
    from scheduler_runtime.framework.outcomes import Diagnosis
    from scheduler_runtime.framework.status import distinct_statuses
    d = Diagnosis()
    items = list(statuses.items())
    i = 0
    while i < len(items):
        run = items[i:i + 1 + (i % 4)]
        names, each = [n for n, _ in run], [s for _, s in run]
        if len({id(s) for s in each}) == 1:
            d.record_many(names, each[0])
        elif len(run) == 2:
            d.record(names[0], each[0])
            d.record(names[1], each[1])
        else:
            d.record_each(names, each, distinct_statuses(each))
        i += len(run)
    tally = d.tally()
    assert tally is not None
    got = group_filter_reasons(d.node_statuses, tally=tally)
    assert got == _naive_group(statuses) and list(got) == list(_naive_group(statuses))


def _port_pod(uid: str, port: int | None, cpu: str) -> Pod:
    c: dict[str, Any] = {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}
    if port is not None:
        c["ports"] = [{"containerPort": port, "hostPort": port}]
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": uid, "namespace": "d", "uid": uid},
                          "spec": {"containers": [c]}})


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.sampled_from([None, 80, 81]),
                          st.sampled_from(["0", "100m", "1"])), max_size=30))
def test_node_info_clone_equals_readding_every_pod(ops: list[tuple[bool, int, int | None, str]]) -> None:
    """The preemption dry run's clone: what adding every pod to a fresh NodeInfo would give."""
    from scheduler_runtime.framework.types import NodeInfo
    ni = NodeInfo(node(0))
    for add, i, port, cpu in ops:
        if add and ni.pods.get_uid(f"u{i}") is None:
            ni.add_pod(_port_pod(f"u{i}", port, cpu))
        elif not add:
            ni.remove_pod(_port_pod(f"u{i}", port, cpu))
    ref = NodeInfo(ni.node)
    for p in ni.pods:
        ref.add_pod(p)
    c = ni.clone()
    assert list(c.pods) == list(ref.pods) and list(c.pods_with_affinity) == list(ref.pods_with_affinity)
    assert {k: v for k, v in ref.requested.items() if v} == c.requested
    assert c.non_zero_requested == ref.non_zero_requested and c.used_ports == ref.used_ports
    assert c.row == -1 and c.table is None and c.generation == ref.generation

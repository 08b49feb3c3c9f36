"""Differences from kube-scheduler v1.36.3 found by its plugin tables and the differential test, one test each.

Each test states the kube-scheduler behaviour it pins (file of pkg/scheduler it comes from).
"""

from __future__ import annotations

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo, NodeScore
from scheduler_runtime.objects import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, Node, Pod
from scheduler_runtime.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from scheduler_runtime.plugins.nodeaffinity import NodeAffinity
from scheduler_runtime.plugins.noderesources import NodeResourcesFit
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing.builders import snapshot_of

MB = 1024 * 1024


def _node(name: str, labels: dict | None = None, cpu: str = "4", memory: str = "8Gi") -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                           "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})


def _pod(name: str = "p", labels: dict | None = None, ns: str = "ns", **spec) -> Pod:
    spec.setdefault("containers", [{"name": "c"}])
    return Pod.from_dict({"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec})


# ----------------------------------------------------------------------------- requests (types.go, resource helpers)

def test_explicit_zero_request_stays_zero_only_unset_gets_default():
    zero = _pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "0", "memory": "0"}}}])
    assert zero.non_zero_requests["cpu"] == 0 and zero.non_zero_requests["memory"] == 0
    assert zero.scoring_requests == {"cpu": 0, "memory": 0}
    unset = _pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "250m"}}}])
    assert unset.non_zero_requests["cpu"] == 250
    assert unset.non_zero_requests["memory"] == DEFAULT_MEMORY_REQUEST
    # limits defaulted into requests by the API server count as set
    lim = _pod(containers=[{"name": "c", "resources": {"limits": {"cpu": "0"}}}])
    assert lim.non_zero_requests["cpu"] == 0


def test_explicit_zero_changes_least_allocated_score():
    snap = snapshot_of(_node("n", cpu="1", memory="1000Mi"))
    plugin = NodeResourcesFit(None, Handle(snap))
    zero = _pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "0", "memory": "500Mi"}}}])
    # cpu (1000-0)*100/1000 = 100, memory (1000-500)*100/1000 = 50: (100+50)/2 = 75
    assert plugin.score(CycleState(), zero, snap.node_infos[0]) == 75


def test_pod_without_containers_scores_without_crashing():
    snap = snapshot_of(_node("n"))
    empty = _pod(containers=[])
    assert empty.non_zero_requests == {"cpu": 0, "memory": 0}
    assert NodeResourcesFit(None, Handle(snap)).score(CycleState(), empty, snap.node_infos[0]) == 100
    NodeInfo(_node("m")).add_pod(empty)


def test_pod_level_resources_include_hugepages_and_default_only_what_is_missing():
    p = _pod(resources={"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}},
             containers=[{"name": "c", "resources": {"requests": {"cpu": "500m"}}}])
    assert p.requests["cpu"] == 1000 and p.requests["hugepages-2Mi"] == 4 * MB
    # cpu is set at pod level, memory nowhere: node accounting defaults memory only
    assert (p.non_zero_requests["cpu"], p.non_zero_requests["memory"]) == (1000, DEFAULT_MEMORY_REQUEST)
    assert DEFAULT_MILLI_CPU_REQUEST == 100


# ----------------------------------------------------------------------------- selectors (labels, nodeaffinity helper)

def test_interpodaffinity_invalid_label_value_rejects_pod_in_prefilter_and_errors_in_prescore():
    bad = _pod(affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["not valid!"]}]}}}]}})
    assert bad.affinity_error.startswith("preferredAffinityTerms: values[0][app]: Invalid value: \"not valid!\"")
    snap = snapshot_of(_node("n", {"zone": "a"}), placed={"n": [_pod("e", {"app": "x"})]})
    plugin = InterPodAffinity(None, Handle(snap))
    st = plugin.pre_filter(CycleState(), bad, NodeList(snap))
    assert st is not None and st.code == Code.UnschedulableAndUnresolvable
    assert st.message.startswith("parsing pod: preferredAffinityTerms: ")
    ps = plugin.pre_score(CycleState(), bad, NodeList(snap))
    assert ps is not None and ps.code == Code.Error and ps.message.startswith("failed to parse pod: ")


def test_existing_pod_with_invalid_terms_has_those_terms_dropped():
    e = _pod("e", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"bad key!": "x"}}}]}})
    assert e.anti_affinity_required == () and "requiredAntiAffinityTerms: " in e.affinity_error


def test_node_affinity_invalid_required_term_matches_nothing_but_other_terms_still_do():
    p = _pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}})
    term_bad, term_ok = p.required_node_affinity.terms
    assert term_bad.error and not term_bad.matches(_node("n", {"zone": "a b"}))
    assert term_ok.matches(_node("n", {"zone": "a"}))
    only_bad = _pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["x"]}]}]}}})
    snap = snapshot_of(_node("n", {"zone": "5"}))
    st = NodeAffinity(None, Handle(snap)).filter(CycleState(), only_bad, snap.node_infos[0])
    assert st is not None and st.code == Code.UnschedulableAndUnresolvable


def test_node_affinity_invalid_preferred_term_is_a_prescore_error():
    p = _pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a/b"]}]}}]}})
    snap = snapshot_of(_node("n"))
    st = NodeAffinity(None, Handle(snap)).pre_score(CycleState(), p, NodeList(snap))
    assert st is not None and st.code == Code.Error
    assert st.message.startswith('[0].matchExpressions[0].values[0][zone]: Invalid value: "a/b"')


def test_two_metadata_name_requirements_in_one_term_intersect():
    p = _pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                         {"key": "metadata.name", "operator": "In", "values": ["b", "c"]}]}]}}})
    snap = snapshot_of(_node("a"), _node("b"), _node("c"))
    res, st = NodeAffinity(None, Handle(snap)).pre_filter(CycleState(), p, NodeList(snap))
    assert st is None and res.node_names == {"b"}
    disjoint = _pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                                               {"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}})
    res, st = NodeAffinity(None, Handle(snap)).pre_filter(CycleState(), disjoint, NodeList(snap))
    assert res is None and st.code == Code.UnschedulableAndUnresolvable and st.message == "pod affinity terms conflict"


# ----------------------------------------------------------------------------- interpodaffinity scoring

def test_interpodaffinity_normalize_divides_before_multiplying():
    plugin = InterPodAffinity()
    scores = [NodeScore("a", 0), NodeScore("b", 29), NodeScore("c", 100)]
    plugin.normalize_score(CycleState(), _pod(), scores)
    # float64(100) * (float64(29) / float64(100)) = 28.999999999999996 -> 28
    assert [s.score for s in scores] == [0, 28, 100]


def test_ignore_preferred_terms_of_existing_pods_only_skips_pods_without_own_preferred_terms():
    existing = _pod("e", {"app": "db"}, affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}}]}})
    incoming = _pod("in", {"app": "web"}, affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}}]}})
    snap = snapshot_of(_node("a", {"zone": "z1"}), _node("b", {"zone": "z2"}), placed={"a": [existing]})
    plugin = InterPodAffinity(InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True), Handle(snap))
    state = CycleState()
    assert plugin.pre_score(state, incoming, NodeList(snap)) is None
    # the existing pod's preferred term (7) still counts with the incoming pod's own (2)
    assert plugin.score(state, incoming, snap.node_infos[0]) == 9
    plain = _pod("plain", {"app": "web"})
    st = plugin.pre_score(CycleState(), plain, NodeList(snap))
    assert st is not None and st.code == Code.Skip


# ----------------------------------------------------------------------------- preemption message (preemption.go)

def _cpod(name: str, cpu: str, priority: int, node_name: str = "", **spec) -> dict:
    s = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], "priority": priority, **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": s}


def _cnode(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def test_preemption_reports_the_filter_reason_when_evicting_every_lower_pod_is_not_enough():
    m = MemoryCluster()
    for o in (_cnode("a", "2"), _cnode("b", "2"), _cpod("low", "1", 1, "a"), _cpod("high", "1", 500, "a"),
              _cpod("top", "1500m", 900, "b")):
        m.create(o)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    m.create(_cpod("urgent", "1500m", 100))
    s.run(until_idle=True)
    msg = m.get_pod("ns", "urgent")["status"]["conditions"][-1]["message"]
    # on a, evicting "low" leaves 1 cpu < 1.5: the dry run's Filter status; on b nothing has lower priority
    assert msg == ("0/2 nodes are available: 2 Insufficient cpu. "
                   "preemption: 0/2 nodes are available: "
                   "1 Insufficient cpu, 1 No preemption victims found for incoming pod.")


def test_preemption_treats_a_pod_without_start_time_as_starting_now():
    # util.GetPodStartTime: no status.startTime reads as time.Now(), so the started pod is more important
    # than the bound-but-not-started one even if that one was created earlier; the latter is evicted
    m = MemoryCluster()
    started = _cpod("started", "1", 1, "a")
    started["status"] = {"startTime": "2025-01-01T00:00:00Z"}
    started["metadata"]["creationTimestamp"] = "2024-12-31T00:00:00Z"
    waiting = _cpod("waiting", "1", 1, "a")
    waiting["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    for o in (_cnode("a", "2"), started, waiting):
        m.create(o)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    m.create(_cpod("urgent", "1", 100))
    s.run(until_idle=True)
    assert m.deleted == ["ns/waiting"]

"""Cache accounting (assume/forget, foreign pods, numpy table mirror) and DefaultPreemption end to end."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_runtime.cache import Cache
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.node_table import CPU, MEMORY, PODS
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def node(name: str, cpu: str = "4") -> Node:
    return Node.from_dict({"metadata": {"name": name},
                           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def pod(name: str, cpu: str = "1", node_name: str = "", priority: int = 0, **meta) -> Pod:
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            "priority": priority}
    if node_name:
        spec["nodeName"] = node_name
    return Pod.from_dict({"metadata": {"name": name, "namespace": "ns", **meta}, "spec": spec})


def test_assume_confirm_forget_and_foreign_pods():
    c = Cache()
    c.add_node(node("a"))
    p = pod("p")
    c.assume_pod(p, "a")
    ni = c.snapshot.get("a")
    assert ni.requested["cpu"] == 1000 and c.is_assumed(p.uid)
    # the informer delivers the bound pod: confirmed, not counted twice
    c.add_pod(pod("p", node_name="a"))
    assert ni.requested["cpu"] == 1000 and not c.is_assumed(p.uid)
    q = pod("q")
    c.assume_pod(q, "a")
    c.forget_pod(q)
    assert ni.requested["cpu"] == 1000
    # bound by another scheduler, and one on a node not seen yet
    c.add_pod(pod("other", cpu="2", node_name="a"))
    c.add_pod(pod("early", cpu="3", node_name="b"))
    assert ni.requested["cpu"] == 3000
    c.add_node(node("b"))
    assert c.snapshot.get("b").requested["cpu"] == 3000
    assert c.snapshot.table.requested[c.snapshot.get("b").row, CPU] == 3000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "node_rm", "node_add"]), st.integers(0, 5),
                          st.integers(0, 30)), max_size=60))
def test_table_mirrors_node_infos(ops):
    c = Cache()
    for i in range(4):
        c.add_node(node(f"n{i}", cpu=str(2 + i)))
    pods: dict[int, Pod] = {}
    for op, n, k in ops:
        name = f"n{n % 6}"
        if op == "add" and k not in pods:
            p = pod(f"p{k}", cpu=f"{100 + k}m", node_name=name)
            pods[k] = p
            c.add_pod(p)
        elif op == "remove" and k in pods:
            c.remove_pod(pods.pop(k))
        elif op == "node_rm":
            c.remove_node(name)
        elif op == "node_add":
            c.add_node(node(name))
    t = c.snapshot.table
    for ni in c.snapshot.node_infos:
        assert t.requested[ni.row, CPU] == ni.requested.get("cpu", 0)
        assert t.requested[ni.row, MEMORY] == ni.requested.get("memory", 0)
        assert t.requested[ni.row, PODS] == len(ni.pods)
        assert t.allocatable[ni.row, CPU] == ni.allocatable["cpu"]
        assert c.snapshot.node_infos[ni.row] is ni
    assert len(c.snapshot) == t.n


def _cluster(objs: list[dict]) -> MemoryCluster:
    m = MemoryCluster()
    for o in objs:
        m.create(o, emit=False)
    return m


def _node(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def _pod(name: str, cpu: str, priority: int, node_name: str = "", labels: dict | None = None, **spec) -> dict:
    s = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], "priority": priority, **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": s}


def _run(cluster: MemoryCluster, new: dict) -> Scheduler:
    reg = build_registry([])
    s = Scheduler(cluster, load_config(None, reg), reg, seed=1)
    s.start()
    cluster.create(new)
    s.run(until_idle=True)
    return s


def test_preemption_evicts_lowest_priority_and_respects_pdb():
    # two full nodes: "a" holds a PDB-protected pod, "b" an unprotected one of the same priority
    m = _cluster([_node("a", "2"), _node("b", "2"),
                  _pod("protected", "2", 1, "a", {"app": "db"}), _pod("plain", "2", 1, "b", {"app": "batch"}),
                  {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "db", "namespace": "ns"},
                   "spec": {"selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 0}}])
    _run(m, _pod("urgent", "2", 100))
    assert m.deleted == ["ns/plain"]
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "b"
    ev = [e for e in m.events_for("ns", "plain") if e.reason == "Preempted"]
    assert ev and "on node b" in ev[0].note


def test_preemption_policy_never_and_no_lower_priority():
    m = _cluster([_node("a", "1"), _pod("busy", "1", 500, "a")])
    _run(m, _pod("never", "1", 1000, preemptionPolicy="Never"))
    assert m.deleted == []
    assert m.get_pod("ns", "never")["status"]["conditions"][-1]["message"].endswith(
        "preemption: not eligible due to preemptionPolicy=Never.")
    m2 = _cluster([_node("a", "1"), _pod("busy", "1", 500, "a")])
    _run(m2, _pod("low", "1", 10))
    msg = m2.get_pod("ns", "low")["status"]["conditions"][-1]["message"]
    assert msg == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes "
                   "are available: 1 No preemption victims found for incoming pod.")


def test_preemption_picks_node_with_fewest_and_lowest_victims():
    rng = random.Random(3)
    objs = [_node("a", "2"), _node("b", "2"), _pod("a1", "1", 5, "a"), _pod("a2", "1", 5, "a"),
            _pod("b1", "2", 1, "b")]
    rng.shuffle(objs)
    m = _cluster(objs)
    _run(m, _pod("urgent", "2", 100))
    # a needs two victims of priority 5, b one of priority 1: the lower highest-victim priority wins
    assert m.deleted == ["ns/b1"]


def test_memory_cluster_marks_gated_pods_like_kube_apiserver() -> None:
    from scheduler_runtime.cluster.memory import MemoryCluster

    m = MemoryCluster()
    made = m.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"},
                     "spec": {"schedulingGates": [{"name": "x/y"}], "containers": [{"name": "c"}]}})
    cond = made["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    plain = m.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c"}]}})
    assert "conditions" not in (plain.get("status") or {})


def _rich_pod(name: str, node_name: str = "", app: str = "x") -> Pod:
    """A pod with everything the snapshot accounts: requests, a host port, labels and affinity terms."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                  "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                  "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                               "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                   {"weight": 5, "podAffinityTerm": term}]}}}
    if node_name:
        spec["nodeName"] = node_name
    return Pod.from_dict({"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"app": app},
                                       "resourceVersion": "2" if node_name else "1"}, "spec": spec})


def _cache_state(c: Cache) -> list:
    snap = c.snapshot
    snap.terms.entries(snap.node_infos)  # build the term index, so pod events update it
    pred_key = ("test", "app")
    snap.match_counts(pred_key, lambda p: p.labels.get("app") == "x")
    out = []
    for ni in snap.node_infos:
        out.append((ni.name, [p.uid for p in ni.pods], [p.uid for p in ni.pods_with_affinity],
                    [p.uid for p in ni.pods_with_required_anti_affinity], dict(ni.requested),
                    dict(ni.non_zero_requested), {k: set(v) for k, v in ni.used_ports.items()}, ni.port_pods,
                    ni.generation, snap.table.requested[ni.row].tolist(), snap.table.non_zero[ni.row].tolist()))
    terms = sorted((repr(k), e.counts.tolist(), e.total) for k, e in (snap.terms._entries or {}).items())
    return [out, terms, snap.match_counts(pred_key, lambda p: False).tolist(), snap.generation,
            snap.num_affinity_pods, snap.num_required_anti_affinity_pods,
            {u: ni.name for u, ni in snap.pod_nodes.items()}, [(p.uid, p.resource_version) for p in c.pods()]]


def test_confirming_an_assumed_pod_swaps_it_in_with_the_state_of_remove_and_add(monkeypatch):
    """The bound pod replaces the assumed one without re-accounting it when nothing the snapshot derives from
    it changed; the result must equal the full remove-and-add path's, and a changed pod takes that path."""
    import scheduler_runtime.cache as cache_mod

    swaps: list[str] = []
    real = cache_mod.same_accounting

    def run(swap: bool) -> list:
        def counted(a: Pod, b: Pod) -> bool:
            same = swap and real(a, b)
            if same:
                swaps.append(a.name)
            return same
        monkeypatch.setattr(cache_mod, "same_accounting", counted)
        c = Cache()
        c.add_node(node("a"))
        c.add_node(node("b"))
        _cache_state(c)  # indexes built before the pods arrive
        for name in ("p", "q", "r"):
            c.assume_pod(_rich_pod(name), "a")
        c.add_pod(_rich_pod("p", node_name="a"))  # the same pod, bound: swapped in (or remove and add)
        c.add_pod(_rich_pod("q", node_name="a", app="y"))  # labels and terms changed: remove and add
        c.add_pod(_rich_pod("r", node_name="b"))  # bound elsewhere than assumed: remove and add
        monkeypatch.undo()
        return _cache_state(c)

    swapped, full = run(True), run(False)
    assert swaps == ["p"]
    assert swapped == full
    assert swapped[-1] == [("u-p", "2"), ("u-q", "2"), ("u-r", "2")]


def test_same_accounting_compares_every_accounted_field():
    from scheduler_runtime.framework.snapshot import same_accounting
    a = _rich_pod("p")
    assert same_accounting(a, _rich_pod("p", node_name="n"))
    assert not same_accounting(a, _rich_pod("p", app="y"))
    assert not same_accounting(pod("p", uid="u-p"), pod("p", cpu="2", uid="u-p"))
    assert not same_accounting(pod("p", uid="u-p"), pod("p", uid="u-p", deletionTimestamp="2020-01-01T00:00:00Z"))
    assert not same_accounting(pod("p", uid="u-p"), _rich_pod("p"))

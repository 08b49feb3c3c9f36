"""Default plugins other than resources: verdicts, reasons and scores computed by hand."""

from __future__ import annotations

import numpy as np

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo, NodeScore
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.imagelocality import ImageLocality
from scheduler_runtime.plugins.interpodaffinity import InterPodAffinity
from scheduler_runtime.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from scheduler_runtime.plugins.nodeports import NodePorts
from scheduler_runtime.plugins.nodeunschedulable import NodeUnschedulable
from scheduler_runtime.plugins.podtopologyspread import PodTopologySpread
from scheduler_runtime.plugins.schedulinggates import SchedulingGates
from scheduler_runtime.plugins.tainttoleration import TaintToleration
from scheduler_runtime.testing.builders import snapshot_of

MB = 1024 * 1024


def node(name: str, labels: dict | None = None, taints: list | None = None, unschedulable: bool = False,
         images: list | None = None) -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                           "spec": {"taints": taints or [], "unschedulable": unschedulable},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                      "images": images or []}})


def pod(name: str = "p", labels: dict | None = None, ns: str = "ns", **spec) -> Pod:
    spec.setdefault("containers", [{"name": "c", "image": "app:1"}])
    return Pod.from_dict({"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec})


def normalize(plugin, state, p, snap, raw: list[int]) -> list[int]:
    scores = [NodeScore(ni.name, v) for ni, v in zip(snap.node_infos, raw, strict=True)]
    plugin.normalize_score(state, p, scores)
    return [s.score for s in scores]


# ------------------------------------------------------------------------------------------ taints


def test_taint_filter_and_prefer_no_schedule_scores():
    snap = snapshot_of(
        node("clean"),
        node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node("soft1", taints=[{"key": "a", "effect": "PreferNoSchedule"}]),
        node("soft2", taints=[{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]))
    plugin = TaintToleration(None, Handle(snap))
    p = pod()
    state = CycleState()
    fb = plugin.filter_batch(state, p, snap)
    assert fb.ok.tolist() == [True, False, True, True]
    assert fb.status_at(1).code == Code.UnschedulableAndUnresolvable
    assert fb.status_at(1).reasons == ["node(s) had untolerated taint(s)"]
    plugin.pre_score(state, p, NodeList(snap))
    raw = plugin.score_batch(state, p, snap, np.arange(4)).tolist()
    assert raw == [0, 0, 1, 2]
    # reverse normalisation: 100 - 100*s/max -> 100, 100, 50, 0
    assert plugin.normalize_score_batch(state, p, np.arange(4), np.array(raw)).tolist() == [100, 100, 50, 0]
    # a toleration with empty key and Exists tolerates every taint
    q = pod(tolerations=[{"operator": "Exists"}])
    assert plugin.filter_batch(CycleState(), q, snap).ok.all()
    # a PreferNoSchedule toleration with key "a" removes that taint from the count
    r = pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}])
    st = CycleState()
    plugin.pre_score(st, r, NodeList(snap))
    assert plugin.score_batch(st, r, snap, np.arange(4)).tolist() == [0, 0, 0, 1]


def test_unschedulable_node_unless_tolerated():
    snap = snapshot_of(node("cordoned", unschedulable=True), node("ok"))
    plugin = NodeUnschedulable(None, Handle(snap))
    fb = plugin.filter_batch(CycleState(), pod(), snap)
    assert fb.ok.tolist() == [False, True]
    assert fb.status_at(0).reasons == ["node(s) were unschedulable"]
    tol = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                            "effect": "NoSchedule"}])
    assert plugin.filter_batch(CycleState(), tol, snap).ok.all()


# ------------------------------------------------------------------------------------------ node affinity


def test_node_affinity_selector_expressions_and_scores():
    snap = snapshot_of(node("a", {"zone": "z1", "gen": "3"}), node("b", {"zone": "z2", "gen": "5"}),
                       node("c", {"zone": "z3"}))
    plugin = NodeAffinity(None, Handle(snap))
    p = pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z3"]},
                                  {"key": "gen", "operator": "Gt", "values": ["2"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}},
            {"weight": 30, "preference": {"matchExpressions": [{"key": "zone", "operator": "In",
                                                                 "values": ["z2"]}]}}]}})
    state = CycleState()
    _, st = plugin.pre_filter(state, p, NodeList(snap))
    assert st is None
    fb = plugin.filter_batch(state, p, snap)
    assert fb.ok.tolist() == [True, True, False]
    assert fb.status_at(2).reasons == ["node(s) didn't match Pod's node affinity/selector"]
    raw = plugin.score_batch(state, p, snap, np.arange(3)).tolist()
    assert raw == [10, 30, 0]
    assert plugin.normalize_score_batch(state, p, np.arange(3), np.array(raw)).tolist() == [33, 100, 0]


def test_node_affinity_skip_match_fields_and_added_affinity():
    snap = snapshot_of(node("a", {"zone": "z1"}), node("b", {"zone": "z2"}))
    plugin = NodeAffinity(None, Handle(snap))
    _, st = plugin.pre_filter(CycleState(), pod(), NodeList(snap))
    assert st is not None and st.code == Code.Skip
    by_name = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}})
    res, st = plugin.pre_filter(CycleState(), by_name, NodeList(snap))
    assert st is None and res.node_names == {"b"}
    enforced = NodeAffinity(NodeAffinityArgs.model_validate({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}), Handle(snap))
    st2 = CycleState()
    enforced.pre_filter(st2, pod(), NodeList(snap))
    fb = enforced.filter_batch(st2, pod(), snap)
    assert fb.ok.tolist() == [True, False]
    assert fb.status_at(1).reasons == ["node(s) didn't match scheduler-enforced node affinity"]


def test_node_affinity_on_hostname_is_per_node():
    snap = snapshot_of(node("a"), node("b"))
    p = pod(nodeSelector={"kubernetes.io/hostname": "b"})
    fb = NodeAffinity(None, Handle(snap)).filter_batch(CycleState(), p, snap)
    assert fb.ok.tolist() == [False, True]


# ------------------------------------------------------------------------------------------ ports, gates


def test_host_ports_conflict_and_wildcard_ip():
    used = pod("u", containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}])
    snap = snapshot_of(node("a"), node("b"), placed={"a": [used]})
    plugin = NodePorts(None, Handle(snap))
    p = pod(containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]}])
    assert plugin.pre_filter(CycleState(), p, NodeList(snap)) is None
    assert plugin.filter(CycleState(), p, snap.node_infos[0]).reasons == [
        "node(s) didn't have free ports for the requested pod ports"]
    assert plugin.filter(CycleState(), p, snap.node_infos[1]) is None
    assert plugin.pre_filter(CycleState(), pod(), NodeList(snap)).code == Code.Skip


def _port_pod(name: str, ports: list[tuple[str, int, str]]) -> Pod:
    return pod(name, containers=[{"name": "c", "ports": [
        {"containerPort": 80, "hostPort": port, "protocol": proto, **({"hostIP": ip} if ip else {})}
        for proto, port, ip in ports]}])


def test_host_ports_batch_equals_per_node_filter_through_churn():
    """The batch verdict reads the table's per-port rows: they must follow pods added, replaced and removed
    (two pods on one port, the last one leaving), nodes added with pods on them and nodes removed (the last row
    moving into the hole), and agree with `filter` on every node."""
    import random
    rng = random.Random(7)
    keys = [("TCP", 80, ""), ("TCP", 80, "10.0.0.1"), ("TCP", 80, "10.0.0.2"), ("UDP", 80, ""), ("TCP", 81, ""),
            ("TCP", 80, "0.0.0.0")]
    snap = snapshot_of(*(node(f"n{i}") for i in range(6)))
    plugin = NodePorts(None, Handle(snap))
    placed: list[tuple[str, Pod]] = []
    serial = 0
    for step in range(400):
        serial += 1
        op = rng.random()
        infos = snap.node_infos
        if op < 0.45 and infos:
            ni = rng.choice(infos)
            p = _port_pod(f"p{serial}", rng.sample(keys, rng.randint(1, 2)))
            snap.add_pod(ni, p)
            placed.append((ni.name, p))
        elif op < 0.75 and placed:
            name, p = placed.pop(rng.randrange(len(placed)))
            ni = snap.get(name)
            if ni is not None:
                snap.remove_pod(ni, p)
        elif op < 0.85 and len(infos) > 2:
            gone = rng.choice(infos).name
            snap.remove_node(gone)
            placed = [(n, p) for n, p in placed if n != gone]
        else:
            info = NodeInfo(node(f"m{serial}"))
            for k in range(rng.randint(0, 2)):
                p = _port_pod(f"q{serial}-{k}", rng.sample(keys, 1))
                info.add_pod(p)
            snap.add_node(info)
            placed += [(info.name, p) for p in info.pods]
        want = _port_pod("want", rng.sample(keys, rng.randint(1, 2)))
        fb = plugin.filter_batch(CycleState(), want, snap)
        expect = [plugin.filter(CycleState(), want, ni) is None for ni in snap.node_infos]
        assert fb.ok.tolist() == expect, step
        assert not fb.ok.all() or fb.all_pass or all(expect)
    assert any(not plugin.filter_batch(CycleState(), _port_pod("x", [k]), snap).ok.all() for k in keys)


def test_scheduling_gates_message():
    st = SchedulingGates().pre_enqueue(pod(schedulingGates=[{"name": "a"}, {"name": "b"}]))
    assert st.code == Code.UnschedulableAndUnresolvable
    assert st.message == "waiting for scheduling gates: [a b]"


# ------------------------------------------------------------------------------------------ image locality


def test_image_locality_by_hand():
    # image of 500 MB on 1 of 2 nodes: sum = int(500MB * 1/2) = 250MB; one container -> max 1000MB
    # score = 100 * (250MB - 23MB) / (1000MB - 23MB) = 100 * 227 / 977 = 23 (truncated)
    snap = snapshot_of(node("a", images=[{"names": ["app:1"], "sizeBytes": 500 * MB}]), node("b"))
    plugin = ImageLocality(None, Handle(snap))
    p = pod()
    assert plugin.score_batch(CycleState(), p, snap, np.arange(2)).tolist() == [23, 0]
    assert plugin.score(CycleState(), p, snap.node_infos[0]) == 23
    # "app" normalises to "app:latest", which node a does not have
    q = pod(containers=[{"name": "c", "image": "app"}])
    assert plugin.score_batch(CycleState(), q, snap, np.arange(2)).tolist() == [0, 0]


# ------------------------------------------------------------------------------------------ topology spread


def spread_pod(name: str, zone_skew: int = 1, when: str = "DoNotSchedule") -> Pod:
    return pod(name, {"app": "web"}, topologySpreadConstraints=[
        {"maxSkew": zone_skew, "topologyKey": "zone", "whenUnsatisfiable": when,
         "labelSelector": {"matchLabels": {"app": "web"}}}])


def test_spread_filter_skew_and_missing_label():
    web = [pod(f"w{i}", {"app": "web"}) for i in range(3)]
    snap = snapshot_of(node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), node("nolabel"),
                       placed={"a": web[:2], "b": web[2:]})
    plugin = PodTopologySpread(None, Handle(snap))
    p = spread_pod("new")
    state = CycleState()
    assert plugin.pre_filter(state, p, NodeList(snap)) is None
    # counts z1=2, z2=1, min=1: z1 -> 2+1-1 = 2 > 1 rejected; z2 -> 1+1-1 = 1 ok
    assert plugin.filter(state, p, snap.node_infos[0]).reasons == [
        "node(s) didn't match pod topology spread constraints"]
    assert plugin.filter(state, p, snap.node_infos[1]) is None
    st = plugin.filter(state, p, snap.node_infos[2])
    assert st.code == Code.UnschedulableAndUnresolvable
    assert st.reasons == ["node(s) didn't match pod topology spread constraints (missing required label)"]
    # add_pod on z2 (preemption dry-run): z2 becomes 2, min 2 -> z1 ok now (2+1-2 = 1)
    plugin.add_pod(state, p, pod("w9", {"app": "web"}), snap.node_infos[1])
    assert plugin.filter(state, p, snap.node_infos[0]) is None


def test_spread_min_domains_forces_global_min_zero():
    snap = snapshot_of(node("a", {"zone": "z1"}), placed={"a": [pod("w0", {"app": "web"})]})
    plugin = PodTopologySpread(None, Handle(snap))
    p = pod("new", {"app": "web"}, topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
         "labelSelector": {"matchLabels": {"app": "web"}}}])
    state = CycleState()
    plugin.pre_filter(state, p, NodeList(snap))
    # one domain < minDomains 2 -> min 0: 1 + 1 - 0 = 2 > 1
    assert plugin.filter(state, p, snap.node_infos[0]).code == Code.Unschedulable


def test_spread_soft_scores_with_log_weights():
    # zones z1 (2 matching pods), z2 (0): 2 domains -> weight ln(4) = 1.386; maxSkew 1 -> +0
    # raw: a = round(2*1.386) = 3, b = 0 ; normalise: max 3, min 0 -> a = 100*(3+0-3)/3 = 0, b = 100*(3+0-0)/3 = 100
    web = [pod(f"w{i}", {"app": "web"}) for i in range(2)]
    snap = snapshot_of(node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), placed={"a": web})
    plugin = PodTopologySpread(None, Handle(snap))
    p = spread_pod("new", when="ScheduleAnyway")
    state = CycleState()
    assert plugin.pre_score(state, p, NodeList(snap)) is None
    raw = [plugin.score(state, p, ni) for ni in snap.node_infos]
    assert raw == [3, 0]
    assert normalize(plugin, state, p, snap, raw) == [0, 100]


def test_spread_system_defaults_from_service_selector():
    cluster = MemoryCluster()
    cluster.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ns"},
                    "spec": {"selector": {"app": "web"}}})
    snap = snapshot_of(node("a", {"topology.kubernetes.io/zone": "z1"}),
                       node("b", {"topology.kubernetes.io/zone": "z1"}), placed={"a": [pod("w0", {"app": "web"})]})
    handle = Handle(snap, cluster=cluster)
    plugin = PodTopologySpread(None, handle)
    p = pod("new", {"app": "web"})
    state = CycleState()
    assert plugin.pre_filter(state, p, NodeList(snap)).code == Code.Skip  # defaults are ScheduleAnyway only
    assert plugin.pre_score(state, p, NodeList(snap)) is None
    raw = [plugin.score(state, p, ni) for ni in snap.node_infos]
    # hostname (skew 3, 2 nodes -> ln 4): a has 1 -> 1.386 + 2; zone (skew 5, 1 domain -> ln 3 = 1.0986): 1 pod
    # in z1 -> 1.0986 + 4 on both. a = round(3.386 + 5.0986) = 8, b = round(2 + 5.0986) = 7
    assert raw == [8, 7]
    assert plugin.pre_score(CycleState(), pod("other", {"app": "db"}), NodeList(snap)).code == Code.Skip


# ------------------------------------------------------------------------------------------ inter-pod affinity


def test_inter_pod_anti_affinity_and_existing_anti_affinity():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "api"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    existing = pod("api-0", {"app": "api"}, affinity=anti)
    snap = snapshot_of(node("a"), node("b"), placed={"a": [existing]})
    plugin = InterPodAffinity(None, Handle(snap))
    p = pod("api-1", {"app": "api"}, affinity=anti)
    state = CycleState()
    assert plugin.pre_filter(state, p, NodeList(snap)) is None
    assert plugin.filter(state, p, snap.node_infos[0]).reasons == ["node(s) didn't match pod anti-affinity rules"]
    assert plugin.filter(state, p, snap.node_infos[1]) is None
    # a plain pod matching the existing pod's anti-affinity selector is kept away by symmetry
    plain = pod("plain", {"app": "api"})
    st = CycleState()
    assert plugin.pre_filter(st, plain, NodeList(snap)) is None
    assert plugin.filter(st, plain, snap.node_infos[0]).reasons == [
        "node(s) didn't satisfy existing pods anti-affinity rules"]


def test_inter_pod_affinity_first_pod_may_self_match():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}]}}
    snap = snapshot_of(node("a", {"zone": "z1"}), node("b"))
    plugin = InterPodAffinity(None, Handle(snap))
    first = pod("c0", {"app": "cache"}, affinity=aff)
    state = CycleState()
    plugin.pre_filter(state, first, NodeList(snap))
    assert plugin.filter(state, first, snap.node_infos[0]) is None
    assert plugin.filter(state, first, snap.node_infos[1]).code == Code.UnschedulableAndUnresolvable
    other = pod("x", {"app": "other"}, affinity=aff)  # does not match its own term: nowhere to go
    st = CycleState()
    plugin.pre_filter(st, other, NodeList(snap))
    assert plugin.filter(st, other, snap.node_infos[0]).reasons == ["node(s) didn't match pod affinity rules"]


def test_inter_pod_preferred_scores_and_hard_weight():
    db = pod("db", {"app": "db"})
    snap = snapshot_of(node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), node("c", {"zone": "z3"}),
                       placed={"a": [db]})
    plugin = InterPodAffinity(None, Handle(snap))
    p = pod("r", {"app": "reports"}, affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 80, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}}]}})
    state = CycleState()
    assert plugin.pre_score(state, p, NodeList(snap)) is None
    raw = [plugin.score(state, p, ni) for ni in snap.node_infos]
    assert raw == [80, 0, 0]
    assert normalize(plugin, state, p, snap, raw) == [100, 0, 0]
    # an existing pod's required affinity to the incoming pod adds hardPodAffinityWeight (1)
    follower = pod("f", {"app": "f"}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "leader"}}, "topologyKey": "zone"}]}})
    snap2 = snapshot_of(node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), placed={"b": [follower]})
    plugin2 = InterPodAffinity(None, Handle(snap2))
    leader = pod("l", {"app": "leader"})
    st2 = CycleState()
    assert plugin2.pre_score(st2, leader, NodeList(snap2)) is None
    assert [plugin2.score(st2, leader, ni) for ni in snap2.node_infos] == [0, 1]

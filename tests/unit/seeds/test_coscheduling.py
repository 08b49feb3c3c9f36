"""Coscheduling (seed tutorial 04): gang scheduling with PodGroups, upstream scheduler-plugins behaviour.

Direct calls pin down each extension point's upstream semantics; the Scheduler tests run whole gangs
through the real scheduling loop on a MemoryCluster.
"""

from __future__ import annotations

import functools
import threading
import time

import pydantic
import pytest
import yaml

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NOMINATING_NOOP, ActionType, ClusterEvent, QueuedPodInfo
from scheduler_runtime.framework.waiting import WaitingPod
from scheduler_runtime.objects import Pod
from scheduler_runtime.scheduler import Scheduler

from .conftest import (
    REPO,
    PodCountFit,
    TestBinder,
    example_config,
    framework_for,
    handle_for,
    node,
    parsed_pod,
    pod,
    registry_with,
    scheduler_config,
)

LABEL = "scheduling.x-k8s.io/pod-group"


@pytest.fixture
def cls(plugin_classes):
    return plugin_classes["Coscheduling"]


def pg(name: str, min_member: int, *, namespace: str = "default", min_resources: dict | None = None,
       timeout: int | None = None, created: str = "2024-01-01T00:00:00Z") -> dict:
    spec: dict = {"minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = min_resources
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created}, "spec": spec}


def member(name: str, group: str, **kw) -> dict:
    return pod(name, labels={LABEL: group}, **kw)


class Env:
    """A MemoryCluster, a handle over it, a Framework holding the plugin (for waiting pods)."""

    def __init__(self, cls, nodes=("n1",), objects=(), args: dict | None = None) -> None:
        self.mc = MemoryCluster()
        for n in nodes:
            self.mc.create(node(n) if isinstance(n, str) else n)
        for o in objects:
            self.mc.create(o)
        self.handle, self.cache = handle_for(self.mc)
        self.activated: list[Pod] = []
        self.handle.activate = lambda pods: self.activated.extend(pods)
        self.plugin = cls(cls.args_model.model_validate(args or {}), self.handle)
        self.fw = framework_for(self.handle, {"permit": [self.plugin], "reserve": [self.plugin]})

    def pod(self, namespace: str, name: str) -> Pod:
        return Pod.from_dict(self.mc.get_pod(namespace, name))

    def park(self, p: Pod, timeout: float = 30.0) -> WaitingPod:
        wp = WaitingPod(p, {"Coscheduling": timeout})
        self.fw.waiting_pods.add(wp)
        return wp

    def nodes(self) -> NodeList:
        return NodeList(self.handle.snapshot)


# --------------------------------------------------------------------------- args, RBAC, events


def test_args_defaults_and_validation(cls):
    m = cls.args_model
    assert m.__name__ == "CoschedulingArgs"
    a = m()
    assert (a.permit_waiting_time_seconds, a.pod_group_backoff_seconds, a.pod_group_reject_percentage) == (60, 0, 10)
    a = m.model_validate({"permitWaitingTimeSeconds": 1, "podGroupBackoffSeconds": 5, "podGroupRejectPercentage": 100})
    assert a.permit_waiting_time_seconds == 1
    for bad in ({"permitWaitingTimeSeconds": -1}, {"podGroupBackoffSeconds": -1},
                {"podGroupRejectPercentage": 101}, {"podGroupRejectPercentage": -1},
                {"deniedPGExpirationTimeSeconds": 3}):
        with pytest.raises(pydantic.ValidationError):
            m.model_validate(bad)


def test_rbac_and_events(cls):
    assert cls.rbac == [{"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"],
                         "verbs": ["get", "list", "watch"]}]
    evs = [e.event for e in cls(None, None).events_to_register()]
    assert any(e.matches(ClusterEvent("Pod", ActionType.Add)) for e in evs)
    assert any(e.matches(ClusterEvent("scheduling.x-k8s.io/PodGroup", ActionType.Update)) for e in evs)
    assert not any(e.matches(ClusterEvent("Pod", ActionType.Delete)) for e in evs)


def test_implements_upstream_extension_points(cls):
    assert not callable(getattr(cls, "pre_enqueue", None)), "upstream Coscheduling has no PreEnqueue"
    for m in ("less", "pre_filter", "post_filter", "permit", "reserve", "unreserve"):
        assert callable(getattr(cls, m))


# --------------------------------------------------------------------------- QueueSort


def _qpi(p: Pod, ts: float) -> QueuedPodInfo:
    return QueuedPodInfo(p, timestamp=ts, initial_attempt_timestamp=ts)


def test_less_priority_then_group_time_then_pod_name(cls):
    env = Env(cls, objects=[pg("old", 2, created="2024-01-01T00:00:00Z"),
                            pg("new", 2, created="2024-06-01T00:00:00Z")])
    now = time.monotonic()
    a_new = _qpi(parsed_pod("a", labels={LABEL: "new"}), now - 100)
    z_old = _qpi(parsed_pod("z", labels={LABEL: "old"}), now)
    y_old = _qpi(parsed_pod("y", labels={LABEL: "old"}), now + 5)
    vip = _qpi(parsed_pod("vip", priority=10), now + 50)
    lone = _qpi(parsed_pod("lone"), now - 10)  # no group: its initial attempt time (now) is after both groups
    order = sorted([a_new, z_old, vip, y_old, lone],
                   key=functools.cmp_to_key(lambda x, y: -1 if env.plugin.less(x, y) else 1))
    assert [q.pod.name for q in order] == ["vip", "y", "z", "a", "lone"]
    # pods of one group share its creation time: ties go to namespace/name
    assert env.plugin.less(y_old, z_old) and not env.plugin.less(z_old, y_old)


def test_less_recent_failure_moves_group_back(cls):
    env = Env(cls, objects=[pg("old", 2, created="2024-01-01T00:00:00Z"),
                            pg("new", 2, created="2024-06-01T00:00:00Z")])
    old = _qpi(parsed_pod("o", labels={LABEL: "old"}), time.monotonic())
    new = _qpi(parsed_pod("n", labels={LABEL: "new"}), time.monotonic())
    assert env.plugin.less(old, new)
    env.plugin.mgr.mark_failure("default/old")  # head-of-line blocking fix: failure time replaces creation
    assert env.plugin.less(new, old)
    env.plugin.mgr.clear_failure("default/old")
    assert env.plugin.less(old, new)


def test_less_group_not_found_uses_pod_time(cls):
    env = Env(cls, objects=[pg("known", 1, created="2024-01-01T00:00:00Z")])
    t = time.monotonic()
    ghost = _qpi(parsed_pod("ghost", labels={LABEL: "missing"}), t - 1000)
    known = _qpi(parsed_pod("k", labels={LABEL: "known"}), t)
    assert env.plugin.less(known, ghost)  # 2024 is before "now - 1000 s"


# --------------------------------------------------------------------------- PreFilter


def test_prefilter_not_in_group_or_group_missing_passes(cls):
    env = Env(cls, objects=[member("orphan", "nope")])
    assert env.plugin.pre_filter(CycleState(), parsed_pod("plain"), env.nodes()) is None
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "orphan"), env.nodes()) is None


def test_prefilter_needs_min_member_pods(cls):
    env = Env(cls, objects=[pg("g", 3), member("p1", "g"), member("p2", "g")])
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes())
    assert st.code == Code.UnschedulableAndUnresolvable
    assert st.message == ("pre-filter pod p1 cannot find enough sibling pods, current pods number: 2, "
                          "minMember of group: 3")
    env.mc.create(member("p3", "g"))  # the pod informer keeps the member count current
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is None
    env.mc.delete("pods", "p3")
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is not None


def test_prefilter_counts_members_in_same_namespace_only(cls):
    env = Env(cls, objects=[pg("g", 2), member("p1", "g"), member("p2", "g", namespace="other")])
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is not None


def test_prefilter_gated_members(cls):
    env = Env(cls, objects=[pg("g", 2), member("p1", "g"), member("p2", "g"), member("p3", "g", gates=["wait"])])
    # 3 pods, 1 gated: quorum gap 2 - 3 + 1 = 0 -> ok
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is None
    # 2 pods, 1 gated: 2 - 2 + 1 > 0 -> the ungated member is turned away until the gate is lifted
    env.mc.create(pg("h", 2))
    env.mc.create(member("h1", "h"))
    gated = env.mc.create(member("h2", "h", gates=["wait"]))
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "h1"), env.nodes())
    assert st.code == Code.UnschedulableAndUnresolvable
    assert st.message == "pre-filter pod h1 cannot proceed due to gated pods in the same PodGroup"
    del gated["spec"]["schedulingGates"]
    env.mc.update(gated)
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "h1"), env.nodes()) is None


def test_prefilter_min_resources_and_permitted_cache(cls):
    clock = [1000.0]
    env = Env(cls, nodes=(node("n1", cpu="2", pods=10), node("n2", cpu="2", pods=10)),
              objects=[pg("g", 2, min_resources={"cpu": "3"}), member("p1", "g"), member("p2", "g"),
                       pg("big", 2, min_resources={"cpu": "5", "memory": "1Gi"}), member("b1", "big"),
                       member("b2", "big")],
              args={"permitWaitingTimeSeconds": 10})
    env.plugin.mgr.permitted._clock = lambda: clock[0]
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is None
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "b1"), env.nodes())
    assert st.code == Code.UnschedulableAndUnresolvable and st.message == "resource gap: map[cpu:1]"
    # fill the nodes: the group stays permitted for permitWaitingTimeSeconds, then is checked again
    for i, n in enumerate(("n1", "n2")):
        hog = Pod.from_dict(pod(f"hog{i}", requests={"cpu": "2"}, node_name=n, uid=f"hog{i}"))
        env.cache.add_pod(hog)
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is None
    clock[0] += 10
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes())
    assert st is not None and st.message == "resource gap: map[cpu:3]"


def test_prefilter_min_resources_ignores_the_groups_own_pods(cls):
    env = Env(cls, nodes=(node("n1", cpu="2", pods=10),),
              objects=[pg("g", 2, min_resources={"cpu": "2"}), member("p1", "g"), member("p2", "g")])
    env.cache.add_pod(Pod.from_dict(member("p0", "g", requests={"cpu": "2"}, node_name="n1", uid="p0")))
    assert env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes()) is None


def test_prefilter_pods_quantity_uses_min_member(cls):
    env = Env(cls, nodes=(node("n1", pods=2),),
              objects=[pg("g", 3, min_resources={}), *(member(f"p{i}", "g") for i in range(3))])
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes())
    assert st is not None and st.message == "resource gap: map[pods:1]"


def test_prefilter_backoff(cls):
    env = Env(cls, objects=[pg("g", 2), member("p1", "g"), member("p2", "g")])
    env.plugin.mgr.backoff_pod_group("default/g", 30)
    st = env.plugin.pre_filter(CycleState(), env.pod("default", "p1"), env.nodes())
    assert st.message == "podGroup default/g failed recently"


# --------------------------------------------------------------------------- Permit


def test_permit_without_group(cls):
    env = Env(cls, objects=[member("orphan", "nope")])
    assert env.plugin.permit(CycleState(), parsed_pod("plain"), "n1") == (None, 0.0)
    st, t = env.plugin.permit(CycleState(), env.pod("default", "orphan"), "n1")
    assert st.code == Code.Unschedulable and st.message == "PodGroup not found" and t == 0


def test_permit_waits_then_allows_all_at_quorum(cls):
    env = Env(cls, objects=[pg("g", 3), *(member(f"p{i}", "g") for i in range(1, 4))],
              args={"permitWaitingTimeSeconds": 7})
    p1, p2, p3 = (env.pod("default", f"p{i}") for i in range(1, 4))
    state = CycleState()
    st, t = env.plugin.permit(state, p1, "n1")
    assert st.code == Code.Wait and t == 7
    assert sorted(p.name for p in env.activated) == ["p2", "p3"], "the first assumed member activates siblings"
    w1 = env.park(p1)
    env.activated.clear()
    st, t = env.plugin.permit(CycleState(), p2, "n1")
    assert st.code == Code.Wait and env.activated == [], "only the first member activates"
    w2 = env.park(p2)
    other = env.park(parsed_pod("x", labels={LABEL: "other"}))
    assert env.plugin.permit(CycleState(), p3, "n1") == (None, 0.0)
    assert w1.wait().code == Code.Success and w2.wait().code == Code.Success
    assert other.get_pending_plugins() == ["Coscheduling"], "other groups keep waiting"
    assert env.plugin.mgr.assigned("default/g") == {"p1", "p2", "p3"}


def test_permit_wait_time_from_pod_group(cls):
    env = Env(cls, objects=[pg("g", 2, timeout=3), member("p1", "g"), member("p2", "g"),
                            pg("z", 2, timeout=0), member("z1", "z"), member("z2", "z")])
    assert env.plugin.permit(CycleState(), env.pod("default", "p1"), "n1")[1] == 3
    # scheduleTimeoutSeconds: 0 counts as unset for the wait (upstream keeps permitWaitingTimeSeconds)
    assert env.plugin.permit(CycleState(), env.pod("default", "z1"), "n1")[1] == 60


def test_bound_pods_count_as_assigned(cls):
    env = Env(cls, objects=[pg("g", 2), member("p1", "g", node_name="n1"), member("p2", "g")])
    assert env.plugin.mgr.assigned_count("default/g") == 1
    assert env.plugin.permit(CycleState(), env.pod("default", "p2"), "n1") == (None, 0.0)
    env.mc.delete("pods", "p1")
    assert env.plugin.mgr.assigned("default/g") == {"p2"}


def test_finished_pods_are_not_members_nor_assigned(cls):
    # kube-scheduler's pod informer leaves out Succeeded/Failed pods; Coscheduling's lister sees the same
    done = member("p0", "g", node_name="n1")
    done["status"] = {"phase": "Succeeded"}
    env = Env(cls, objects=[pg("g", 2), done, member("p1", "g", node_name="n1"), member("p2", "g")])
    assert env.plugin.mgr.assigned("default/g") == {"p1"}
    assert len(env.plugin.mgr.members("default/g")) == 2
    running = env.mc.get_pod("default", "p1")
    finished = {**running, "status": {"phase": "Failed"}}
    env.mc.update(finished)  # a bound member finishing counts as its deletion
    assert env.plugin.mgr.assigned("default/g") == set()
    assert [m.name for m in env.plugin.mgr.members("default/g")] == ["p2"]


# --------------------------------------------------------------------------- PostFilter


def test_postfilter_without_group(cls):
    env = Env(cls)
    r, st = env.plugin.post_filter(CycleState(), parsed_pod("plain"), {})
    assert st.code == Code.Unschedulable and st.message == "can not find pod group"
    assert r.mode == NOMINATING_NOOP and not r.nominated_node_name


def test_postfilter_rejects_gang_when_gap_is_large(cls):
    env = Env(cls, objects=[pg("g", 4), *(member(f"p{i}", "g") for i in range(1, 5)),
                            pg("h", 1), member("h1", "h")],
              args={"podGroupBackoffSeconds": 20})
    waiting = []
    for i in (1, 2):
        p = env.pod("default", f"p{i}")
        env.plugin.permit(CycleState(), p, "n1")
        waiting.append(env.park(p))
    bystander = env.park(env.pod("default", "h1"))
    r, st = env.plugin.post_filter(CycleState(), env.pod("default", "p4"), {})
    assert st.code == Code.Unschedulable
    assert st.message == "PodGroup default/g gets rejected due to Pod p4 is unschedulable even after PostFilter"
    for w in waiting:
        res = w.wait()
        assert res.code == Code.Unschedulable and res.message == "optimistic rejection in PostFilter"
    assert bystander.get_pending_plugins() == ["Coscheduling"]
    assert "default/g" in env.plugin.mgr.last_failed
    assert "default/g" in env.plugin.mgr.backed_off


def test_postfilter_small_gap_or_quorum_keeps_waiting(cls):
    env = Env(cls, objects=[pg("g", 10), *(member(f"p{i}", "g") for i in range(10))])
    for i in range(9):
        env.plugin.permit(CycleState(), env.pod("default", f"p{i}"), "n1")
    w = env.park(env.pod("default", "p0"))
    _, st = env.plugin.post_filter(CycleState(), env.pod("default", "p9"), {})
    assert st.code == Code.Unschedulable and st.message == ""  # (10 - 9) / 10 <= 10%
    assert w.get_pending_plugins() == ["Coscheduling"]
    assert "default/g" not in env.plugin.mgr.last_failed


def test_postfilter_backoff_only_with_enough_pods(cls):
    env = Env(cls, objects=[pg("g", 3), member("p1", "g"), member("p2", "g")],
              args={"podGroupBackoffSeconds": 20})
    env.plugin.post_filter(CycleState(), env.pod("default", "p1"), {})
    assert "default/g" not in env.plugin.mgr.backed_off


# --------------------------------------------------------------------------- Unreserve


def test_unreserve_rejects_waiting_siblings(cls):
    env = Env(cls, objects=[pg("g", 3), *(member(f"p{i}", "g") for i in range(1, 4))])
    p1, p2 = env.pod("default", "p1"), env.pod("default", "p2")
    env.plugin.permit(CycleState(), p1, "n1")
    w1 = env.park(p1)
    env.plugin.permit(CycleState(), p2, "n1")
    env.plugin.unreserve(CycleState(), p2, "n1")
    assert w1.wait().message == "rejection in Unreserve"
    assert env.plugin.mgr.assigned("default/g") == {"p1"}
    assert "default/g" in env.plugin.mgr.last_failed
    env.plugin.unreserve(CycleState(), parsed_pod("plain"), "n1")  # not in a group: no-op


# --------------------------------------------------------------------------- the real scheduler

PLAN = {
    "queueSort": [("Coscheduling", 0)],
    "preFilter": [("Coscheduling", 0)],
    "filter": [("TestPodCountFit", 0)],
    "postFilter": [("Coscheduling", 0)],
    "reserve": [("Coscheduling", 0)],
    "permit": [("Coscheduling", 0)],
    "bind": [("TestBinder", 0)],
}


def gang_cluster(slots: list[int], size: int, min_member: int | None = None) -> MemoryCluster:
    mc = MemoryCluster()
    for i, n in enumerate(slots):
        mc.create(node(f"n{i}", pods=n))
    mc.create(pg("gang", min_member or size))
    for i in range(size):
        mc.create(member(f"w{i}", "gang"))
    return mc


def run_scheduler(cls, mc: MemoryCluster, args: dict) -> tuple[Scheduler, float]:
    reg = registry_with(cls, PodCountFit, TestBinder)
    config = scheduler_config(PLAN, {"Coscheduling": cls.args_model.model_validate(args)})
    sched = Scheduler(mc, config, reg, seed=1)
    sched.start()
    t0 = time.monotonic()
    done = threading.Event()
    th = threading.Thread(target=lambda: (sched.run(until_idle=True), done.set()), daemon=True)
    th.start()
    assert done.wait(30), "scheduler did not go idle"
    return sched, time.monotonic() - t0


def test_gang_of_four_with_room_for_four_binds_all(cls):
    mc = gang_cluster([2, 2], 4)
    sched, _ = run_scheduler(cls, mc, {"permitWaitingTimeSeconds": 10})
    assert sorted(k for k, _ in mc.bindings) == [f"default/w{i}" for i in range(4)]
    assert sched.scheduled == 4


def test_gang_of_four_with_room_for_three_is_rejected_by_postfilter(cls):
    mc = gang_cluster([3], 4)
    _, elapsed = run_scheduler(cls, mc, {"permitWaitingTimeSeconds": 10})
    assert mc.bindings == []
    assert elapsed < 5, "PostFilter releases the waiting members at once, long before the 10 s timeout"
    notes = [e.note for i in range(4) for e in mc.events_for("default", f"w{i}") if e.reason == "FailedScheduling"]
    assert any("PodGroup default/gang gets rejected due to Pod w3 is unschedulable even after PostFilter" in n
               for n in notes)
    assert sum("optimistic rejection in PostFilter" in n for n in notes) == 3


def test_gang_of_four_with_room_for_three_times_out(cls):
    # a reject percentage above 25% keeps PostFilter optimistic: the three assumed members wait at Permit
    # until permitWaitingTimeSeconds, then the first timeout's Unreserve releases the others
    mc = gang_cluster([3], 4)
    sched, elapsed = run_scheduler(cls, mc, {"permitWaitingTimeSeconds": 1, "podGroupRejectPercentage": 50})
    assert mc.bindings == []
    assert 0.9 <= elapsed < 5, elapsed
    notes = [e.note for i in range(3) for e in mc.events_for("default", f"w{i}") if e.reason == "FailedScheduling"]
    assert any("rejected due to timeout after waiting 1s at plugin Coscheduling" in n for n in notes), notes
    assert sched.frameworks["default-scheduler"].waiting_pods.all() == []
    plugin = sched.frameworks["default-scheduler"].plugins["Coscheduling"]
    assert plugin.mgr.assigned_count("default/gang") == 0
    assert sched.cache.snapshot.get("n0").pods == [], "assumed pods are forgotten"


def test_two_gangs_compete_one_wins(cls):
    # 4 slots, two gangs of 3: the older group goes first and binds; the other is turned away whole
    mc = MemoryCluster()
    mc.create(node("n0", pods=4))
    mc.create(pg("first", 3, created="2024-01-01T00:00:00Z"))
    mc.create(pg("second", 3, created="2024-02-01T00:00:00Z"))
    for i in range(3):  # create the later group's pods first: QueueSort still puts the older group ahead
        mc.create(member(f"s{i}", "second"))
    for i in range(3):
        mc.create(member(f"f{i}", "first"))
    run_scheduler(cls, mc, {"permitWaitingTimeSeconds": 10})
    assert sorted(k for k, _ in mc.bindings) == ["default/f0", "default/f1", "default/f2"]


def test_podgroup_manifest_and_example(cls):
    crd = yaml.safe_load((REPO / "examples" / "crds" / "podgroup-crd.yaml").read_text())
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    spec = crd["spec"]
    assert spec["scope"] == "Namespaced" and spec["names"]["kind"] == "PodGroup"
    v = spec["versions"][0]
    assert v["name"] == "v1alpha1" and v["served"] and v["storage"] and v["subresources"] == {"status": {}}
    props = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(props) == {"minMember", "minResources", "scheduleTimeoutSeconds"}
    ex = yaml.safe_load((REPO / "examples" / "crds" / "podgroup-example.yaml").read_text())
    mc = MemoryCluster()
    mc.create(ex)
    env_pg = mc.informer("podgroups").get("trainer", "default")
    assert env_pg is not None and env_pg["spec"]["minMember"] == 3


# --------------------------------------------------------------------------- the shipped example config


def run_example(mc: MemoryCluster, tmp_path, args: dict | None = None) -> tuple[Scheduler, float]:
    cfg, reg = example_config("coscheduling.yaml", tmp_path, {"Coscheduling": args or {}})
    sched = Scheduler(mc, cfg, reg, seed=2)
    sched.start()
    t0 = time.monotonic()
    done = threading.Event()
    threading.Thread(target=lambda: (sched.run(until_idle=True), done.set()), daemon=True).start()
    assert done.wait(30), "scheduler did not go idle"
    return sched, time.monotonic() - t0


def cpu_gang(cpus: list[str], size: int) -> MemoryCluster:
    """Nodes with the given CPUs; a gang of `size` pods asking 1 CPU each (the in-tree fit decides room)."""
    mc = MemoryCluster()
    for i, c in enumerate(cpus):
        mc.create(node(f"n{i}", cpu=c))
    mc.create(pg("gang", size))
    for i in range(size):
        mc.create(member(f"w{i}", "gang", requests={"cpu": "1"}))
    return mc


def test_example_config_gang_fits(cls, tmp_path):
    mc = cpu_gang(["2", "2"], 4)
    sched, _ = run_example(mc, tmp_path)
    assert sorted(k for k, _ in mc.bindings) == [f"default/w{i}" for i in range(4)]
    plan = sched.frameworks["default-scheduler"]
    assert [cp.name for cp in plan.queue_sort] == ["Coscheduling"]


def test_example_config_gang_too_big_binds_none(cls, tmp_path):
    mc = cpu_gang(["2", "1"], 4)
    _, elapsed = run_example(mc, tmp_path)
    assert mc.bindings == [] and elapsed < 5
    notes = [e.note for i in range(4) for e in mc.events_for("default", f"w{i}") if e.reason == "FailedScheduling"]
    assert any("Insufficient cpu" in n and "gets rejected due to Pod" in n for n in notes), notes


def test_example_config_gang_too_big_released_by_timeout(cls, tmp_path):
    mc = cpu_gang(["2", "1"], 4)
    _, elapsed = run_example(mc, tmp_path, {"permitWaitingTimeSeconds": 1, "podGroupRejectPercentage": 50})
    assert mc.bindings == []
    assert 0.9 <= elapsed < 5, elapsed

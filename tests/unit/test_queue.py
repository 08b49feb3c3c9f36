"""Scheduling queue with an injectable clock: ordering, backoff, requeue on events, gating."""

from __future__ import annotations

from typing import Any

from scheduler_runtime.framework.status import Status
from scheduler_runtime.framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint
from scheduler_runtime.objects import Pod
from scheduler_runtime.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def pod(name: str, priority: int = 0, gates: list[str] | None = None, **labels: str) -> Pod:
    spec: dict = {"containers": [{"name": "c"}], "priority": priority}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return Pod.from_dict({"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec})


def queue(clock: Clock, **kw) -> SchedulingQueue:
    kw.setdefault("pop_from_backoff", False)
    return SchedulingQueue(clock=clock, **kw)


def test_priority_then_timestamp_order():
    c = Clock()
    q = queue(c)
    q.add(pod("low", 1))
    c.t += 1
    q.add(pod("high", 10))
    c.t += 1
    q.add(pod("low2", 1))
    assert [q.pop(0).pod.name for _ in range(3)] == ["high", "low", "low2"]
    assert q.pop(0) is None


def test_backoff_doubles_to_the_cap():
    c = Clock()
    q = queue(c, initial_backoff=1, max_backoff=10)
    q.add(pod("p"))
    for expected in (1, 2, 4, 8, 10, 10):
        qpi = q.pop(0)
        assert qpi is not None
        q.add_unschedulable_if_not_present(qpi, set())  # an error: straight to backoff
        assert q.backoff_duration(qpi) == expected
        c.t += expected - 0.5
        assert q.pop(0) is None  # still backing off
        c.t += 0.5


def test_backoff_disabled_when_max_is_zero():
    c = Clock()
    q = queue(c, initial_backoff=1, max_backoff=0)
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, set())
    assert q.pop(0) is not None


def test_unschedulable_waits_for_a_registered_event():
    c = Clock()
    regs = {"Fit": [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))],
            "Hinted": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete),
                                            lambda p, old, new: QUEUE if old.name == "victim" else QUEUE_SKIP)],
            "Broken": [ClusterEventWithHint(ClusterEvent("Node", ActionType.UpdateNodeLabel),
                                            lambda p, old, new: 1 / 0)]}
    q = queue(c, events_for=lambda profile, plugin: regs.get(plugin))
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, {"Fit"})
    assert q.where(qpi.pod.uid) == "unschedulable"
    assert q.move_on_event(ClusterEvent("Pod", ActionType.Add)) == 0
    c.t += 5
    assert q.move_on_event(ClusterEvent("Node", ActionType.Add)) == 1
    assert q.pop(0).pod.name == "p"
    # a hint that says QueueSkip keeps the pod; Queue moves it; an exception counts as Queue
    q.add_unschedulable_if_not_present(qpi, {"Hinted"})
    assert q.move_on_event(ClusterEvent("Pod", ActionType.Delete), pod("bystander"), None) == 0
    assert q.move_on_event(ClusterEvent("Pod", ActionType.Delete), pod("victim"), None) == 1
    q.flush_backoff_completed()
    c.t += 100
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, {"Broken"})
    assert q.move_on_event(ClusterEvent("Node", ActionType.UpdateNodeLabel)) == 1


def test_plugin_without_registrations_gets_every_event_and_pending_goes_straight_to_active():
    c = Clock()
    q = queue(c, events_for=lambda profile, plugin: None)
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, set(), pending={"Gang"})
    assert q.where(qpi.pod.uid) == "unschedulable"
    q.move_on_event(ClusterEvent("scheduling.x-k8s.io/PodGroup", ActionType.Add))
    assert q.where(qpi.pod.uid) == "active"  # no backoff for Pending


def test_event_during_flight_is_not_lost():
    c = Clock()
    q = queue(c, events_for=lambda profile, plugin: [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))])
    q.add(pod("p"))
    q.add(pod("other"))
    qpi = q.pop(0)
    q.move_on_event(ClusterEvent("Node", ActionType.Add))  # arrives while p is being scheduled
    q.add_unschedulable_if_not_present(qpi, {"Fit"})
    assert q.where(qpi.pod.uid) in ("backoff", "active")


def test_leftover_flush_after_five_minutes():
    c = Clock()
    q = queue(c, events_for=lambda profile, plugin: [])
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, {"Fit"})
    c.t += 299
    assert q.flush_unschedulable_leftover() == 0
    c.t += 2
    assert q.flush_unschedulable_leftover() == 1
    assert q.where(qpi.pod.uid) in ("active", "backoff")


def test_gated_pods_wait_for_gate_removal():
    c = Clock()

    def gates(p: Pod) -> Status | None:
        return Status.unresolvable("gated").with_plugin("SchedulingGates") if p.scheduling_gates else None

    q = queue(c, pre_enqueue=gates)
    gated = pod("g", gates=["quota"])
    q.add(gated)
    assert q.pop(0) is None and q.pending_counts()["gated"] == 1
    q.update(gated, pod("g"))
    assert q.pop(0).pod.name == "g"


def test_delete_and_activate():
    c = Clock()
    q = queue(c, events_for=lambda profile, plugin: [])
    a, b = pod("a"), pod("b")
    q.add(a)
    q.add(b)
    q.delete(a)
    qpi = q.pop(0)
    assert qpi.pod.name == "b" and q.pop(0) is None
    q.add_unschedulable_if_not_present(qpi, {"Fit"})
    q.activate([b])
    assert q.pop(0).pod.name == "b"


def test_pop_from_backoff_when_active_is_empty():
    c = Clock()
    q = SchedulingQueue(clock=c, pop_from_backoff=True)
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, {"Fit"})
    assert q.move_on_event(ClusterEvent("Node", ActionType.Add)) == 1  # still backing off: to backoffQ
    assert q.where(qpi.pod.uid) == "backoff"
    assert q.pop(0).pod.name == "p"  # kube 1.33+ (SchedulerPopFromBackoffQ) pops early when idle


def test_pods_that_failed_with_an_error_wait_out_their_backoff():
    c = Clock()
    q = SchedulingQueue(clock=c, pop_from_backoff=True)
    q.add(pod("p"))
    qpi = q.pop(0)
    q.add_unschedulable_if_not_present(qpi, set())  # no rejecting plugin: an error
    assert q.pop(0) is None and q.pending_counts()["backoffError"] == 1
    c.t += 1.01
    assert q.pop(0).pod.name == "p"
    for _ in range(2000):  # backoff stays bounded however many errors a pod collects
        qpi.consecutive_errors_count += 1
    assert q.backoff_duration(qpi) == q.max_backoff


def _pop_in_thread(q: SchedulingQueue) -> tuple[Any, dict[str, Any]]:
    import threading

    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("got", q.pop(None)), daemon=True)
    t.start()
    return t, out


def test_pop_returns_at_once_while_its_interrupt_says_there_is_other_work():
    q = queue(Clock())
    q.add(pod("p"))
    q.interrupt = lambda: True
    assert q.pop(None).pod.name == "p"  # a pod first
    t, out = _pop_in_thread(q)  # empty: no blocking, even without a timeout
    t.join(30)
    assert not t.is_alive() and out["got"] is None


def test_wake_rouses_a_blocked_pop_to_ask_its_interrupt_again():
    """The scheduler's inbox of cluster events: a blocked pop hands the loop back as soon as one arrives,
    not after its timeout."""
    import time

    q = queue(Clock())
    pending: list[str] = []
    q.interrupt = lambda: bool(pending)
    q.wake()  # nobody waiting: nothing to do
    t, out = _pop_in_thread(q)
    for _ in range(3000):
        if q.waiting:
            break
        time.sleep(0.01)
    assert q.waiting and t.is_alive()
    pending.append("event")
    q.wake()
    t.join(30)
    assert not t.is_alive() and out["got"] is None and not q.waiting

"""A replica that lost its lease sends no binding: queued and in-flight binding cycles are dropped, the
assumed pods are forgotten, and nothing (event, status, result) is written for them."""

from __future__ import annotations

import threading
import time
from typing import Any

from scheduler_runtime.cluster.base import LeadershipLost
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.loader import build
from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing import config_for


class _BlockingPreBind(Plugin):
    name = "BlockingPreBind"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.release = threading.Event()
        self.entered = threading.Event()

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> None:
        if pod.name == "blocked":
            self.entered.set()
            self.release.wait(20)


def _wait(cond: Any, what: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}


def test_binds_queued_or_in_prebind_when_leadership_is_lost_are_never_sent() -> None:
    reg = build_registry([])
    reg.register(_BlockingPreBind, "test")
    cfg = build(config_for(_BlockingPreBind, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a"), emit=False)
    leading = threading.Event()
    leading.set()
    m.leader_gate = leading.is_set  # what Runner wires to the elector
    # one worker and no replacement: "blocked" holds it in PreBind, the others wait in the pool's queue
    s = Scheduler(m, cfg, reg, seed=1, bind_async=True, bind_workers=1, bind_deadline=0)
    s.start()
    plugin = s.frameworks["default-scheduler"].plugins["BlockingPreBind"]
    names = ["blocked", "q1", "q2", "q3"]
    m.create(_pod("blocked"))
    stop = threading.Event()
    t = threading.Thread(target=s.run, kwargs={"until_idle": False, "stop": stop, "active": leading}, daemon=True)
    t.start()
    try:
        _wait(plugin.entered.is_set, "the first pod to block in PreBind")
        for n in names[1:]:
            m.create(_pod(n))
        _wait(lambda: s._inflight_bindings == 4, "four binding cycles (one in PreBind, three queued)")
        uids = {n: m.get_pod("ns", n)["metadata"]["uid"] for n in names}
        assert all(s.cache.is_assumed(u) for u in uids.values())

        leading.clear()  # the lease is lost
        plugin.release.set()
        _wait(lambda: s._inflight_bindings == 0 and s.binds_abandoned == 4, "every binding cycle to be dropped")
        _wait(lambda: not any(s.cache.is_assumed(u) for u in uids.values()), "the assumed pods to be forgotten")
        assert m.bindings == [], "no binding may be sent after the lease is lost"
        assert all(not m.get_pod("ns", n)["spec"].get("nodeName") for n in names)
        assert not [e for e in m.events if e.reason in ("Scheduled", "FailedScheduling")]
        assert all(RESULT_ANNOTATION not in (m.get_pod("ns", n)["metadata"].get("annotations") or {})
                   for n in names)
        assert s.scheduled == 0

        plugin.entered.clear()
        leading.set()  # leading again (or a new leader): every pod is still there to be scheduled, once
        _wait(lambda: all(m.get_pod("ns", n)["spec"].get("nodeName") == "a" for n in names), "the pods to bind")
        assert sorted(k for k, _ in m.bindings) == sorted(f"ns/{n}" for n in names)
    finally:
        plugin.release.set()
        stop.set()
        t.join(10)


def test_the_backend_refuses_writes_while_the_gate_is_closed() -> None:
    m = MemoryCluster()
    m.create(_node("a"), emit=False)
    m.create(_pod("p"), emit=False)
    pod = Pod.from_dict(m.get_pod("ns", "p"))
    m.leader_gate = lambda: False
    try:
        m.bind(pod, "a")
    except LeadershipLost as exc:
        assert "leader lease" in str(exc)
    else:
        raise AssertionError("bind was sent without the lease")
    m.patch_pod_status(pod, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "x"})
    m.annotate_pod(pod, {RESULT_ANNOTATION: "{}"})
    raw = m.get_pod("ns", "p")
    assert m.bindings == [] and not raw["spec"].get("nodeName")
    assert not (raw.get("status") or {}).get("conditions") and RESULT_ANNOTATION not in (
        raw["metadata"].get("annotations") or {})
    m.leader_gate = None
    m.bind(pod, "a")
    assert m.bindings == [("ns/p", "a")]


def test_an_elector_past_its_renew_deadline_closes_the_gate_even_if_its_thread_is_stuck() -> None:
    """The gate Runner wires is the elector's own clock-based view: once no renewal succeeded for
    renewDeadline, queued binding cycles are dropped, whether or not the elector's thread noticed."""
    from scheduler_runtime.cluster.kube import Connection, KubeClient
    from scheduler_runtime.leaderelection import LeaderElector

    now = [100.0]
    elector = LeaderElector(KubeClient(Connection(host="https://127.0.0.1:1")), name="l", namespace="ns",
                            lease_duration=15, renew_deadline=10, retry_period=2, clock=lambda: now[0])
    elector._leading, elector._last_renew = True, now[0]  # as after a successful renewal (never started)
    reg = build_registry([])
    reg.register(_BlockingPreBind, "test")
    cfg = build(config_for(_BlockingPreBind, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a"), emit=False)
    m.leader_gate = lambda: elector.is_leader
    s = Scheduler(m, cfg, reg, seed=1, bind_async=True, bind_workers=1, bind_deadline=0)
    s.start()
    plugin = s.frameworks["default-scheduler"].plugins["BlockingPreBind"]
    stop = threading.Event()
    t = threading.Thread(target=s.run, kwargs={"until_idle": False, "stop": stop}, daemon=True)
    t.start()
    try:
        m.create(_pod("blocked"))
        _wait(plugin.entered.is_set, "the first pod to block in PreBind")
        m.create(_pod("queued"))
        _wait(lambda: s._inflight_bindings == 2, "a second binding cycle queued")
        now[0] += 9.9
        assert elector.is_leader
        now[0] += 0.2  # renewDeadline passed without a renewal
        assert not elector.is_leader
        plugin.release.set()
        _wait(lambda: s._inflight_bindings == 0 and s.binds_abandoned == 2, "both binding cycles to be dropped")
        time.sleep(0.3)
        assert s.binds_abandoned == 2 and s.attempts == 2, "no new attempt while the gate is closed"
        assert m.bindings == []
        now[0] += 0.1
        elector._last_renew = now[0]  # renewed again: the queued pods are attempted and bound
        _wait(lambda: len(m.bindings) == 2, "both pods to bind")
    finally:
        plugin.release.set()
        stop.set()
        t.join(10)

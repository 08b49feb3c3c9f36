"""SchedulerAsyncPreemption: victims deleted off the scheduling cycle, the preemptor held by PreEnqueue."""

from __future__ import annotations

import threading
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.featuregates import HONOURED, parse_feature_gates
from scheduler_runtime.framework.status import Code
from scheduler_runtime.metrics import SchedulerMetrics
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.defaultpreemption import WAITING
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def _node(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def _pod(name: str, cpu: str, priority: int, node_name: str = "") -> dict:
    s: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], "priority": priority}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": s}


class _Cluster(MemoryCluster):
    """The embedded cluster, with a hook run before each victim deletion (and deletions that can fail)."""

    def __init__(self) -> None:
        super().__init__()
        self.before_delete: Any = None
        self.fail_deletes = 0  # how many deletions fail next

    def delete_pod(self, pod: Pod, reason: str = "", by: str = "") -> None:
        if self.before_delete is not None:
            self.before_delete(pod)
        if self.fail_deletes:
            self.fail_deletes -= 1
            raise RuntimeError(f"pods {pod.name!r} is forbidden")
        super().delete_pod(pod, reason, by)


def _scheduler(gates: list[str], **kw: Any) -> tuple[_Cluster, Scheduler]:
    m = _Cluster()
    for o in (_node("a", "2"), _pod("v1", "1", 1, "a"), _pod("v2", "1", 1, "a")):
        m.create(o, emit=False)
    fg = parse_feature_gates(gates)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=fg), reg, seed=1, feature_gates=fg, **kw)
    s.start()
    return m, s


def _preemption(s: Scheduler) -> Any:
    return next(cp.plugin for cp in s.frameworks["default-scheduler"].post_filter if cp.name == "DefaultPreemption")


def test_async_preemption_holds_the_preemptor_until_the_victims_are_gone() -> None:
    assert "SchedulerAsyncPreemption" in HONOURED
    metrics = SchedulerMetrics()
    m, s = _scheduler([], metrics=metrics)
    seen: list[tuple[str, Any]] = []
    pl = _preemption(s)
    urgent: list[Pod] = []

    def before(victim: Pod) -> None:  # runs while the API calls are in flight
        st = pl.pre_enqueue(urgent[0])
        seen.append((victim.name, st))

    m.before_delete = before
    urgent.append(Pod.from_dict(m.create(_pod("urgent", "2", 100))))
    s.run(until_idle=True)
    assert sorted(m.deleted) == ["ns/v1", "ns/v2"]
    # both deletions were made while PreEnqueue held the preemptor, with kube's status
    assert [st.code for _, st in seen] == [Code.UnschedulableAndUnresolvable] * 2
    assert {st.message for _, st in seen} == {WAITING}
    # finished: no longer held, and scheduled onto the node it was nominated to
    assert pl.pre_enqueue(urgent[0]) is None
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    text = _text(metrics)
    assert 'scheduler_preemption_goroutines_execution_total{result="success"} 1.0' in text
    assert 'scheduler_preemption_goroutines_duration_seconds_count{result="success"} 1.0' in text
    # kube's buckets: ExponentialBuckets(0.01, 2, 20)
    assert 'scheduler_preemption_goroutines_duration_seconds_bucket{le="5242.88",result="success"} 1.0' in text
    s.stop()


def _text(metrics: SchedulerMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()


def test_gate_off_deletes_inside_post_filter() -> None:
    m, s = _scheduler(["SchedulerAsyncPreemption=false"])
    pl = _preemption(s)
    held: list[Any] = []
    urgent: list[Pod] = []
    m.before_delete = lambda victim: held.append(pl.pre_enqueue(urgent[0]))
    urgent.append(Pod.from_dict(m.create(_pod("urgent", "2", 100))))
    s.run(until_idle=True)
    assert sorted(m.deleted) == ["ns/v1", "ns/v2"]
    assert held == [None, None] and not pl._preempting
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    s.stop()


def test_failed_deletion_releases_and_activates_the_preemptor() -> None:
    metrics = SchedulerMetrics()
    m, s = _scheduler([], metrics=metrics)
    m.fail_deletes = 1
    pl = _preemption(s)
    activated: list[str] = []
    handle = s.frameworks["default-scheduler"].handle
    activate = handle.activate
    handle.activate = lambda pods: (activated.extend(p.name for p in pods), activate(pods))
    urgent = Pod.from_dict(m.create(_pod("urgent", "2", 100)))
    s.run(until_idle=True)
    # the first attempt failed (the preemptor was activated at once), the next one preempted and bound
    assert activated == ["urgent"]
    assert pl.pre_enqueue(urgent) is None
    assert sorted(m.deleted) == ["ns/v1", "ns/v2"]
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    text = _text(metrics)
    assert 'scheduler_preemption_goroutines_execution_total{result="error"} 1.0' in text
    assert 'scheduler_preemption_goroutines_execution_total{result="success"} 1.0' in text
    s.stop()


def test_async_preemption_on_the_binding_workers() -> None:
    """As `ksched run` schedules (asynchronous binding): the deletions run on the binding workers."""
    import threading

    m, s = _scheduler([], bind_async=True, bind_workers=2)
    threads: list[str] = []
    m.before_delete = lambda victim: threads.append(threading.current_thread().name)
    m.create(_pod("urgent", "2", 100))
    for _ in range(50):
        s.run(until_idle=True)
        if (m.get_pod("ns", "urgent") or {}).get("spec", {}).get("nodeName"):
            break
        threading.Event().wait(0.05)
    assert sorted(m.deleted) == ["ns/v1", "ns/v2"]
    assert threads and all(t.startswith("bind-") for t in threads)
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    s.stop()


def _preemption_in_flight() -> tuple[Any, Any, Pod, list[Any]]:
    """A preemptor whose asynchronous preemption was decided but whose API calls (in `pending`) have not run."""
    m, s = _scheduler([])
    handle = s.frameworks["default-scheduler"].handle
    pending: list[Any] = []
    handle.run_in_background = pending.append  # the API calls have not run yet
    urgent = Pod.from_dict(m.create(_pod("urgent", "2", 100)))
    s.run(until_idle=True)
    assert len(pending) == 1 and s.queue.where(urgent.uid) == "unschedulable"
    return m, s, urgent, pending


def test_an_event_does_not_move_the_preemptor_while_its_preemption_is_in_flight() -> None:
    m, s, urgent, pending = _preemption_in_flight()
    # a victim goes away on its own: NodeResourcesFit would requeue the pod, PreEnqueue keeps it back
    m.delete("pods", "v1", "ns")
    s.run(until_idle=True)
    assert s.queue.where(urgent.uid) == "unschedulable" and len(pending) == 1  # no second preemption
    pending.pop()()  # the API calls run: the last victim's deletion moves the preemptor
    s.run(until_idle=True)
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    s.stop()


def test_a_preemption_whose_victims_were_already_gone_still_releases_the_preemptor() -> None:
    """kubernetes#141694 (present in v1.37.2, seen in PreemptionBasic e2e runs of both schedulers): the victims'
    deletion events reach the queue while the preemptor's asynchronous preemption is in flight (PreEnqueue holds
    it), and the preemption's own deletions find the pods gone, so no event is left to move the preemptor. It
    must not wait for the unschedulable pool's five-minute flush."""
    m, s, urgent, pending = _preemption_in_flight()
    # the victims go away on their own meanwhile: their events come while PreEnqueue holds the preemptor
    m.delete("pods", "v1", "ns")
    m.delete("pods", "v2", "ns")
    s.run(until_idle=True)
    assert s.queue.where(urgent.uid) == "unschedulable"
    pending.pop()()  # the preemption's deletions find nothing to delete: no event will follow
    s.run(until_idle=True)
    assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a"
    s.stop()


def test_a_preemptors_failure_waits_for_its_status_writes() -> None:
    """Every failure, the one that nominates a node included, has its status writes sent before the next pod
    is popped (kube with SchedulerAsyncAPICalls off, its default): that paces a wave of preemptions to the API
    server, which must carry each one's deletions before its preemptor can bind."""
    class _Waiting(_Cluster):
        def __init__(self) -> None:
            super().__init__()
            self.waited: list[str] = []

        def send_pod_writes(self, pod: Pod) -> None:
            self.waited.append(pod.name)

    m = _Waiting()
    for o in (_node("a", "2"), _pod("v1", "1", 1, "a"), _pod("v2", "1", 1, "a")):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    m.create(_pod("urgent", "2", 100))
    m.create(_pod("too-big", "3", 1))  # fits nowhere, preempts nothing
    s.run(until_idle=True)
    assert m.waited == ["urgent", "too-big"]
    assert sorted(m.deleted) == ["ns/v1", "ns/v2"]



def _three_victims(gates: list[str], concurrent: bool) -> tuple[_Cluster, Scheduler]:
    """Node a (3 CPUs) full of three 1-CPU victims, and a preemptor that needs all of it."""
    m = _Cluster()
    m.concurrent_deletes = concurrent
    for o in (_node("a", "3"), _pod("v1", "1", 1, "a"), _pod("v2", "1", 1, "a"), _pod("v3", "1", 1, "a")):
        m.create(o, emit=False)
    fg = parse_feature_gates(gates)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=fg), reg, seed=1, feature_gates=fg)
    s.start()
    return m, s


def test_victims_are_deleted_concurrently_on_an_api_server() -> None:
    """kube's executor deletes a candidate's victims in parallel: all of them in PostFilter with async
    preemption off; all but the last, then the last, with it on. The first `together` deletions wait for each
    other at a barrier, which deletions made one by one break (its timeout), failing the preemption."""
    for gates, together in ((["SchedulerAsyncPreemption=false"], 3), ([], 2)):
        m, s = _three_victims(gates, concurrent=True)
        barrier = threading.Barrier(together, timeout=5)
        calls: list[str] = []
        lock = threading.Lock()

        def before(victim: Pod, b: threading.Barrier = barrier, n: int = together, seen: list[str] = calls,
                   guard: threading.Lock = lock) -> None:
            with guard:
                seen.append(victim.name)
                k = len(seen)
            if k <= n:
                b.wait()

        m.before_delete = before
        m.create(_pod("urgent", "3", 100))
        s.run(until_idle=True)
        assert not barrier.broken, gates
        assert sorted(m.deleted) == ["ns/v1", "ns/v2", "ns/v3"], gates
        assert m.get_pod("ns", "urgent")["spec"]["nodeName"] == "a", gates
        s.stop()


def test_the_embedded_cluster_deletes_one_by_one() -> None:
    """No concurrency on the embedded cluster: its runs stay repeatable."""
    m, s = _three_victims(["SchedulerAsyncPreemption=false"], concurrent=False)
    threads: set[str] = set()
    m.before_delete = lambda victim: threads.add(threading.current_thread().name)
    m.create(_pod("urgent", "3", 100))
    s.run(until_idle=True)
    assert len(m.deleted) == 3 and threads == {threading.current_thread().name}
    s.stop()

"""kube-scheduler's state gauges and preemption metrics on /metrics: pending and unschedulable pods (gated
too), preemption attempts and victims, in-flight events, cache size, binding threads, event handling, and no
`*_created` series."""

from __future__ import annotations

import threading
import time

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.types import ActionType, ClusterEvent
from scheduler_runtime.metrics import SchedulerMetrics, event_labels
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def _node(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, cpu: str, priority: int = 0, node_name: str = "", **spec) -> dict:
    s = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], "priority": priority, **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": s}


def _samples(m: SchedulerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _get(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def _scheduler(objs: list[dict]) -> tuple[MemoryCluster, Scheduler, SchedulerMetrics]:
    cluster = MemoryCluster()
    for o in objs:
        cluster.create(o, emit=False)
    reg = build_registry([])
    metrics = SchedulerMetrics()
    s = Scheduler(cluster, load_config(None, reg), reg, seed=1, metrics=metrics)
    s.start()
    return cluster, s, metrics


def test_unschedulable_and_gated_pods_tracked_like_the_queue() -> None:
    cluster, s, m = _scheduler([_node("a", "2"), _node("b", "2")])
    for name in ("big-1", "big-2"):
        cluster.create(_pod(name, "3"))
    cluster.create(_pod("fits", "1"))
    cluster.create(_pod("held", "1", schedulingGates=[{"name": "example.com/hold"}]))
    s.run(until_idle=True)
    got = _samples(m)
    assert _get(got, "scheduler_pending_pods", queue="unschedulable") == 2
    assert _get(got, "scheduler_pending_pods", queue="gated") == 1
    assert _get(got, "scheduler_pending_pods", queue="active") == 0
    assert _get(got, "scheduler_pending_pods", queue="backoff") == 0
    # kube 1.37's per-entity twins: every ksched entity is a pod
    assert _get(got, "scheduler_queued_entities", queue="unschedulable", type="pod") == 2
    assert _get(got, "scheduler_queued_entities", queue="gated", type="pod") == 1
    incoming = _get(got, "scheduler_queue_incoming_entities_total", queue="active", event="PodAdd", type="pod")
    assert incoming is not None and incoming >= 3
    assert incoming == _get(got, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd")
    assert _get(got, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="default-scheduler") == 2
    assert _get(got, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile="default-scheduler") == 1
    assert _get(got, "scheduler_cache_size", type="nodes") == 2
    assert _get(got, "scheduler_cache_size", type="pods") == 1
    assert _get(got, "scheduler_cache_size", type="assumed_pods") == 0
    assert _get(got, "scheduler_goroutines", operation="binding") == 0
    assert _get(got, "scheduler_inflight_events", event="PodPopped") == 0
    assert _get(got, "scheduler_event_handling_duration_seconds_count", event="UnschedulablePodAdd") == 4
    assert _get(got, "scheduler_event_handling_duration_seconds_count", event="AssignedPodAdd") == 1
    assert _get(got, "scheduler_event_handling_duration_seconds_count", event="NodeAdd") == 2
    # no preemption victims for priority-0 pods, but each PostFilter run is an attempt
    assert _get(got, "scheduler_preemption_attempts_total") == 2
    assert _get(got, "scheduler_preemption_victims_count") == 0

    # the gate is lifted and a node grows: both leave the queue, the series stay at 0
    held = cluster.get_pod("ns", "held")
    cluster.update({**held, "spec": {**held["spec"], "schedulingGates": []}})
    cluster.update(_node("a", "8"))
    s.drain_inbox()
    got = _samples(m)
    assert _get(got, "scheduler_pending_pods", queue="gated") == 0
    assert _get(got, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile="default-scheduler") == 1
    assert _get(got, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="default-scheduler") == 2
    assert _get(got, "scheduler_event_handling_duration_seconds_count", event="NodeUpdateNodeAllocatable") == 1
    s.run(until_idle=True)
    got = _samples(m)
    assert sum(_get(got, "scheduler_pending_pods", queue=q) for q in ("active", "backoff", "unschedulable",
                                                                        "gated")) == 0
    assert _get(got, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="default-scheduler") == 0
    assert _get(got, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile="default-scheduler") == 0
    assert _get(got, "scheduler_cache_size", type="pods") == 4


def test_preemption_attempt_and_victims() -> None:
    cluster, s, m = _scheduler([_node("a", "2"), _pod("low-1", "1", 1, "a"), _pod("low-2", "1", 1, "a")])
    s.run(until_idle=True)
    cluster.create(_pod("urgent", "2", 100))
    s.run(until_idle=True)
    got = _samples(m)
    assert _get(got, "scheduler_preemption_attempts_total") == 1
    assert _get(got, "scheduler_preemption_victims_count") == 1
    assert _get(got, "scheduler_preemption_victims_sum") == 2
    assert _get(got, "scheduler_preemption_victims_bucket", le="2.0") == 1
    assert _get(got, "scheduler_preemption_victims_bucket", le="1.0") == 0


def test_no_created_series_and_kube_names() -> None:
    _, s, m = _scheduler([_node("a", "2")])
    s.run(until_idle=True)
    text = generate_latest(m.registry).decode()
    assert "_created" not in text
    for name in ("scheduler_schedule_attempts_total", "scheduler_preemption_attempts_total",
                 "scheduler_pending_pods", "scheduler_cache_size", "scheduler_goroutines",
                 "scheduler_inflight_events", "scheduler_queue_incoming_pods_total"):
        assert f"# TYPE {name} " in text, name


def test_inflight_events_while_a_pod_is_in_flight() -> None:
    _, s, m = _scheduler([_node("a", "2")])
    s.queue.add(Pod.from_dict(_pod("p", "1")))
    qpi = s.queue.pop(timeout=0)
    assert qpi is not None
    s.queue.move_on_event(ClusterEvent("Node", ActionType.Add))
    s.queue.move_on_event(ClusterEvent("Pod", ActionType.Delete))
    got = _samples(m)
    assert _get(got, "scheduler_inflight_events", event="PodPopped") == 1
    assert _get(got, "scheduler_inflight_events", event="NodeAdd") == 1
    assert _get(got, "scheduler_inflight_events", event="AssignedPodDelete") == 1
    s.queue.done(qpi.pod.uid)
    got = _samples(m)
    assert _get(got, "scheduler_inflight_events", event="PodPopped") == 0
    assert _get(got, "scheduler_inflight_events", event="NodeAdd") == 0


class _HeldPreBind(Plugin):
    name = "HeldPreBind"
    gate = threading.Event()

    def pre_bind(self, state: object, pod: object, node_name: str) -> None:
        self.gate.wait(10)


def test_binding_threads_in_flight() -> None:
    """A binding cycle held in PreBind on a worker counts as one binding goroutine until it returns."""
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    cluster = MemoryCluster()
    cluster.create(_node("a", "2"), emit=False)
    reg = build_registry([])
    reg.register(_HeldPreBind, "test")
    m = SchedulerMetrics()
    s = Scheduler(cluster, build(config_for(_HeldPreBind, scheduler_name="default-scheduler"), reg), reg, seed=1,
                  metrics=m, bind_async=True)
    s.start()
    cluster.create(_pod("p", "1"))
    stop = threading.Event()
    t = threading.Thread(target=s.run, kwargs={"until_idle": False, "stop": stop}, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _get(_samples(m), "scheduler_goroutines", operation="binding") != 1:
            time.sleep(0.02)
        assert _get(_samples(m), "scheduler_goroutines", operation="binding") == 1
    finally:
        _HeldPreBind.gate.set()
        stop.set()
        t.join(10)
    assert cluster.get_pod("ns", "p")["spec"].get("nodeName") == "a"
    assert _get(_samples(m), "scheduler_goroutines", operation="binding") == 0


def test_event_labels() -> None:
    old = _node("a", "2")
    new = {**old, "metadata": {"name": "a", "labels": {"x": "y"}},
           "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert event_labels("nodes", "MODIFIED", old, new) == ["NodeUpdateNodeLabel", "NodeUpdateNodeTaint"]
    assert event_labels("nodes", "MODIFIED", old, old) == []
    assert event_labels("nodes", "DELETED", old, None) == ["NodeDelete"]
    unbound, bound = _pod("p", "1"), _pod("p", "1", node_name="a")
    assert event_labels("pods", "MODIFIED", unbound, bound) == ["AssignedPodAdd"]
    assert event_labels("pods", "MODIFIED", bound, bound) == ["AssignedPodUpdate"]
    assert event_labels("pods", "DELETED", unbound, None) == ["UnschedulablePodDelete"]
    other = _pod("o", "1", schedulerName="other")
    assert event_labels("pods", "ADDED", None, other, {"default-scheduler": None}) == []
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}}
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}}
    assert event_labels("persistentvolumeclaims", "ADDED", None, pvc) == ["PersistentVolumeClaimAdd"]
    assert event_labels("storageclasses", "MODIFIED", sc, sc) == ["storage.k8s.io/StorageClassUpdate"]
    assert event_labels("namespaces", "ADDED", None, {}) == []

"""Prometheus metrics with kube-scheduler's names, labels and buckets, so existing dashboards work.

Gauges that mirror scheduler state (pending and unschedulable pods, in-flight events, cache size, binding
threads) are read from the queue and the cache when /metrics is scraped, so the scheduling cycle pays nothing
for them and they are exact at scrape time.
"""

from __future__ import annotations

import bisect
import functools
import json
import random
import threading
import time
from collections import Counter as _Tally
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric

from .framework.status import Status

# kube-scheduler's registry exposes no `*_created` series; prometheus_client's documented switch turns them off
# (the same as PROMETHEUS_DISABLE_CREATED_SERIES=True). It is process-wide, read when samples are produced.
disable_created_metrics()

QUEUES = ("active", "backoff", "unschedulable", "gated")
#: kube-scheduler's in-flight marker for a popped pod in scheduler_inflight_events
POD_POPPED = "PodPopped"


#: kube-scheduler 1.37.2's stability level and HELP text per family (names without a counter's _total)
_HELP_DATA = Path(__file__).resolve().parent / "data" / "kube-metric-help.json"


@functools.cache
def _kube_help_table() -> dict[str, dict[str, str]]:
    families: dict[str, dict[str, str]] = json.loads(_HELP_DATA.read_text())["families"]
    return families


def kube_help(family: str) -> str:
    """The HELP text kube-scheduler prints for `family` (name without a counter's _total): component-base
    prefixes the stability level ("[ALPHA] ..."), so dashboards and `curl /metrics` read the same."""
    entry = _kube_help_table()[family]
    return f"[{entry['stability']}] {entry['help']}"


def _exp(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ExponentialBuckets as Go computes them (repeated multiplication), so each `le` label is
    the same float kube-scheduler prints (1.5000000000000002e-05, not 1.5e-05)."""
    out, b = [], start
    for _ in range(count):
        out.append(b)
        b *= factor
    return out


class _Queued:
    """A labelled Histogram or Counter child for metrics taken several times per pod: an observation (or
    increment) is a deque append, and `_Fold`, the registry's first collector, folds them into the child
    whenever the registry is read (/metrics, tests). prometheus_client's own observe takes two locks and walks
    the buckets, about 2 µs: some forty per pod were a tenth of a pod's CPU on an API server. A deque's append
    and popleft are atomic, so no observation is lost to a fold running at the same time."""

    __slots__ = ("child", "pending", "observe")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.pending: deque[float] = deque()
        self.observe = self.pending.append

    def inc(self, amount: float = 1) -> None:
        self.pending.append(amount)

    def fold(self) -> None:
        pending, child = self.pending, self.child
        if not pending:
            return
        values = []
        try:
            while True:
                values.append(pending.popleft())
        except IndexError:
            pass
        if not isinstance(child, Histogram):  # a Counter: its increments summed (whole numbers here, so exactly)
            child.inc(sum(values))
            return
        bounds = child._upper_bounds
        counts = [0] * len(bounds)
        total = child._sum.get()
        for v in values:  # as Histogram.observe: the first bucket whose bound is >= v; the sum in order
            counts[bisect.bisect_left(bounds, v)] += 1
            total += v
        child._sum.set(total)
        for i, n in enumerate(counts):
            if n:
                child._buckets[i].inc(n)


class _Fold:
    """Registered first, so every read of the registry sees the queued observations folded in; also folded
    every FOLD_EVERY scheduling attempts, so an unscraped scheduler holds a bounded queue."""

    FOLD_EVERY = 256

    def __init__(self) -> None:
        self.queued: list[_Queued] = []
        self._lock = threading.Lock()  # one fold at a time: a child's sum is read, then set
        self._attempts = 0

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        self.fold()
        return iter(())

    def fold(self) -> None:
        with self._lock:
            for q in list(self.queued):
                q.fold()

    def attempted(self) -> None:
        self._attempts += 1  # a lost increment under a race only delays a fold
        if self._attempts >= self.FOLD_EVERY:
            self._attempts = 0
            self.fold()

    def wrap(self, child: Any) -> _Queued:
        q = _Queued(child)
        self.queued.append(q)
        return q


class SchedulerMetrics:
    """One registry per scheduler instance (tests run several in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None, plugin_sample_rate: float = 0.1,
                 dra_binding_conditions: bool = True) -> None:
        """`dra_binding_conditions`: the DRADeviceBindingConditions gate; kube registers its two families only
        with the gate on, so with it off /metrics does not list them."""
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._fold = _Fold()
        r.register(self._fold)
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts", kube_help("scheduler_schedule_attempts"),
            ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            kube_help("scheduler_scheduling_attempt_duration_seconds"),
            ["result", "profile"], buckets=_exp(0.001, 2, 15), registry=r)
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            kube_help("scheduler_scheduling_algorithm_duration_seconds"),
            buckets=_exp(0.001, 2, 15), registry=r)
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            kube_help("scheduler_pod_scheduling_sli_duration_seconds"),
            ["attempts"], buckets=_exp(0.01, 2, 20), registry=r)
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts", kube_help("scheduler_pod_scheduling_attempts"),
            buckets=_exp(1, 2, 5), registry=r)
        self.incoming_pods = Counter(
            "scheduler_queue_incoming_pods", kube_help("scheduler_queue_incoming_pods"),
            ["queue", "event"], registry=r)
        # kube 1.37: the same count by entity type; every ksched entity is a pod (no PodGroups)
        self.incoming_entities = Counter(
            "scheduler_queue_incoming_entities",
            kube_help("scheduler_queue_incoming_entities"), ["queue", "event", "type"], registry=r)
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            kube_help("scheduler_framework_extension_point_duration_seconds"),
            ["extension_point", "status", "profile"], buckets=_exp(0.0001, 2, 12), registry=r)
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            kube_help("scheduler_plugin_execution_duration_seconds"),
            ["plugin", "extension_point", "status"], buckets=_exp(0.00001, 1.5, 20), registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", kube_help("scheduler_preemption_attempts"), registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", kube_help("scheduler_preemption_victims"), buckets=_exp(1, 2, 7),
            registry=r)
        # kube's async preemption (SchedulerAsyncPreemption): the background API calls of each preemption
        self.preemption_goroutines_duration = Histogram(
            "scheduler_preemption_goroutines_duration_seconds",
            kube_help("scheduler_preemption_goroutines_duration_seconds"), ["result"],
            buckets=_exp(0.01, 2, 20), registry=r)
        self.preemption_goroutines_total = Counter(
            "scheduler_preemption_goroutines_execution", kube_help("scheduler_preemption_goroutines_execution"),
            ["result"], registry=r)
        self.event_handling = Histogram(
            "scheduler_event_handling_duration_seconds",
            kube_help("scheduler_event_handling_duration_seconds"), ["event"],
            buckets=_exp(0.0001, 2, 12), registry=r)
        self._event_children: dict[str, Any] = {}
        self.permit_wait = Histogram(
            "scheduler_permit_wait_duration_seconds", kube_help("scheduler_permit_wait_duration_seconds"), ["result"],
            buckets=_exp(0.001, 2, 15), registry=r)
        self.plugin_evaluation = Counter(
            "scheduler_plugin_evaluation",
            kube_help("scheduler_plugin_evaluation"), ["plugin", "extension_point", "profile"], registry=r)
        self._evaluation_children: dict[tuple[str, str, str], Any] = {}
        self._point_children: dict[tuple[str, str, str], Any] = {}
        self._children: dict[tuple[Any, ...], Any] = {}  # per-pod metrics' labelled children, see child
        self.queueing_hint_duration = Histogram(
            "scheduler_queueing_hint_execution_duration_seconds",
            kube_help("scheduler_queueing_hint_execution_duration_seconds"), ["plugin", "event", "hint"],
            buckets=_exp(0.00001, 1.5, 20), registry=r)
        # claims DynamicResources creates for extended resources (DRAExtendedResource); kube-scheduler 1.37 shares
        # this family with kube-controller-manager (1.36's was scheduler_resourceclaim_creates_total{status})
        self.resourceclaim_creates = Counter(
            "dynamic_resource_allocation_resourceclaim_creates",
            kube_help("dynamic_resource_allocation_resourceclaim_creates"),
            ["status", "admin_access", "owner_api_group", "owner_api_kind"], registry=r)
        # opportunistic batching (batching.py) and the unschedulable-pods flush
        self.batch_attempts = Counter(
            "scheduler_batch_attempts", kube_help("scheduler_batch_attempts"), ["profile", "result"],
            registry=r)
        self.batch_cache_flushed = Counter(
            "scheduler_batch_cache_flushed",
            kube_help("scheduler_batch_cache_flushed"), ["profile", "reason"], registry=r)
        self.get_node_hint_duration = Histogram(
            "scheduler_get_node_hint_duration_seconds",
            kube_help("scheduler_get_node_hint_duration_seconds"), ["hinted", "profile"],
            buckets=_exp(0.00001, 2, 12), registry=r)
        self.store_schedule_results_duration = Histogram(
            "scheduler_store_schedule_results_duration_seconds",
            kube_help("scheduler_store_schedule_results_duration_seconds"), ["profile"],
            buckets=_exp(0.00001, 2, 12), registry=r)
        # kube-scheduler 1.37: the rescore of the node just chosen
        self.batch_rescore_attempts = Counter(
            "scheduler_batch_rescore_attempts", kube_help("scheduler_batch_rescore_attempts"),
            ["profile"], registry=r)
        self.batch_rescore_duration_seconds = Histogram(
            "scheduler_batch_rescore_duration_seconds",
            kube_help("scheduler_batch_rescore_duration_seconds"), ["profile"],
            buckets=_exp(0.00001, 2, 12), registry=r)
        self.pod_scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            kube_help("scheduler_pod_scheduled_after_flush"), registry=r)
        # DynamicResources PreBind's wait for device binding conditions (DRADeviceBindingConditions, beta on)
        if dra_binding_conditions:
            self._binding_condition_families(r)
        self.plugin_sample_rate = plugin_sample_rate
        self._rng = random.Random()
        self._scheduler: Any = None
        self._state = _StateCollector(self)
        r.register(self._state)

    def _binding_condition_families(self, r: CollectorRegistry) -> None:
        self.dra_binding_conditions = Counter(
            "scheduler_dra_bindingconditions_allocations",
            kube_help("scheduler_dra_bindingconditions_allocations"),
            ["profile", "driver", "status"], registry=r)
        self.dra_binding_conditions_wait = Histogram(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            kube_help("scheduler_dra_bindingconditions_wait_duration_seconds"),
            ["profile", "driver", "status"], buckets=_exp(0.1, 2, 14), registry=r)

    def sample_plugins(self) -> bool:
        """Whether this cycle records per-plugin durations: kube samples 10% of cycles."""
        return self._rng.random() < self.plugin_sample_rate

    def init_plugin_evaluations(self, profile: str, by_point: dict[str, list[str]]) -> None:
        """kube creates every (plugin, extension point, profile) series at 0 when a profile is built."""
        for point, names in by_point.items():
            for name in names:
                key = (name, point, profile)
                if key not in self._evaluation_children:
                    self._evaluation_children[key] = self._fold.wrap(self.plugin_evaluation.labels(*key))

    def plugin_evaluated(self, profile: str, point: str, plugin: str, n: int = 1) -> None:
        key = (plugin, point, profile)
        child = self._evaluation_children.get(key)
        if child is None:
            child = self._evaluation_children[key] = self._fold.wrap(self.plugin_evaluation.labels(*key))
        child.inc(n)

    def batch_attempt(self, profile: str, result: str) -> None:
        self.child(self.batch_attempts, profile, result).inc()

    def batch_flushed(self, profile: str, reason: str) -> None:
        self.child(self.batch_cache_flushed, profile, reason).inc()

    def node_hint_duration(self, hinted: str, profile: str, seconds: float) -> None:
        self.child(self.get_node_hint_duration, hinted, profile).observe(seconds)

    def store_results_duration(self, profile: str, seconds: float) -> None:
        self.child(self.store_schedule_results_duration, profile).observe(seconds)

    def batch_rescore_attempt(self, profile: str) -> None:
        self.child(self.batch_rescore_attempts, profile).inc()

    def batch_rescore_duration(self, profile: str, seconds: float) -> None:
        self.child(self.batch_rescore_duration_seconds, profile).observe(seconds)

    def queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        self.child(self.queueing_hint_duration, plugin, event, hint).observe(seconds)

    def bind(self, scheduler: Any) -> None:
        """The scheduler whose queue, cache and binding threads the state gauges report."""
        self._scheduler = scheduler

    def preemption(self, post_filter_plugins: Iterable[str], victims: int) -> None:
        """After PostFilter ran: DefaultPreemption counts one attempt per run (whatever its outcome) and,
        when it preempted, the number of victims of the chosen candidate."""
        if "DefaultPreemption" in post_filter_plugins:
            self.preemption_attempts.inc()
        if victims:
            self.preemption_victims.observe(victims)

    def preemption_goroutine(self, result: str, seconds: float) -> None:
        """One background preemption finished ("success" or "error")."""
        self.child(self.preemption_goroutines_duration, result).observe(seconds)
        self.child(self.preemption_goroutines_total, result).inc()

    def event_handled(self, resource: str, action: str, old: dict | None, new: dict | None, seconds: float,
                      profiles: Any = ()) -> None:
        """One informer event applied to the cache and queue, labelled as kube-scheduler's handlers do."""
        for label in event_labels(resource, action, old, new, profiles):
            child = self._event_children.get(label)
            if child is None:
                child = self._event_children[label] = self._fold.wrap(self.event_handling.labels(label))
            child.observe(seconds)

    def extension_point(self, profile: str, point: str, status: Status | None, seconds: float) -> None:
        code = "Success" if status is None else status.code.name
        key = (point, code, profile)
        child = self._point_children.get(key)
        if child is None:  # labels() takes a lock and builds a key each time: keep the children
            child = self._point_children[key] = self._fold.wrap(self.extension_point_duration.labels(*key))
        child.observe(seconds)

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, kept: labels() takes a lock and builds its key on every call, which
        per pod costs more than the observation itself."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._fold.wrap(metric.labels(*labels))
        return child

    def attempt(self, profile: str, result: str, seconds: float, qpi: Any) -> None:
        self.child(self.schedule_attempts, result, profile).inc()
        self.child(self.attempt_duration, result, profile).observe(seconds)
        if result == "scheduled":
            self.pod_attempts.observe(qpi.attempts)
            if qpi.flushed_from_unschedulable:
                self.pod_scheduled_after_flush.inc()
            if qpi.initial_attempt_timestamp is not None:
                label = str(qpi.attempts) if qpi.attempts < 15 else "15+"
                self.child(self.sli_duration, label).observe(
                    max(0.0, time.monotonic() - qpi.initial_attempt_timestamp))
        self._fold.attempted()

    def incoming(self, queue: str, event: str) -> None:
        self.child(self.incoming_pods, queue, event).inc()
        self.child(self.incoming_entities, queue, event, "pod").inc()


def _meta(raw: dict | None) -> dict:
    return (raw or {}).get("metadata") or {}


def _node_update_actions(old: dict | None, new: dict | None) -> list[str]:
    """The node properties that changed, as kube-scheduler's node-update events (one observation each)."""
    o, n = old or {}, new or {}
    os_, ns = o.get("status") or {}, n.get("status") or {}
    osp, nsp = o.get("spec") or {}, n.get("spec") or {}
    out = []
    if os_.get("allocatable") != ns.get("allocatable"):
        out.append("UpdateNodeAllocatable")
    if _meta(o).get("labels") != _meta(n).get("labels"):
        out.append("UpdateNodeLabel")
    if osp.get("taints") != nsp.get("taints") or bool(osp.get("unschedulable")) != bool(nsp.get("unschedulable")):
        out.append("UpdateNodeTaint")
    conds = [{c.get("type"): c.get("status") for c in s.get("conditions") or []} for s in (os_, ns)]
    if conds[0] != conds[1]:
        out.append("UpdateNodeCondition")
    if _meta(o).get("annotations") != _meta(n).get("annotations"):
        out.append("UpdateNodeAnnotation")
    if (os_.get("declaredFeatures") or []) != (ns.get("declaredFeatures") or []):
        out.append("UpdateNodeDeclaredFeature")
    return out


_VERB = {"ADDED": "Add", "DELETED": "Delete"}


def event_labels(resource: str, action: str, old: dict | None, new: dict | None, profiles: Any = ()) -> list[str]:
    """kube-scheduler's event labels for one watch event (empty when its handlers would not observe it)."""
    verb = _VERB.get(action, "Update")
    if resource == "pods":
        pod = new or old or {}
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            was_bound = bool(((old or {}).get("spec") or {}).get("nodeName"))
            return ["AssignedPod" + ("Add" if verb == "Update" and not was_bound else verb)]
        if profiles and (spec.get("schedulerName") or "default-scheduler") not in profiles:
            return []
        return ["UnschedulablePod" + verb]
    if resource == "nodes":
        if verb != "Update":
            return ["Node" + verb]
        return ["Node" + a for a in _node_update_actions(old, new)]
    if resource == "namespaces":
        return []
    from .scheduler import _event_resource

    return [_event_resource(new or old or {}) + verb]


def _event_label(ev: Any) -> str:
    """A queue event's label; the queue's Pod events are about assigned pods, as kube-scheduler names them."""
    label = str(ev)
    return "Assigned" + label if label.startswith("Pod") else label


class _StateCollector:
    """Gauges computed from the bound scheduler at scrape time. Series once seen stay, at 0, as kube's do."""

    def __init__(self, m: SchedulerMetrics) -> None:
        self.m = m
        self._seen_reasons: set[tuple[str, str]] = set()
        self._seen_events: set[str] = set()

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def _families(self) -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily("scheduler_pending_pods",
                              kube_help("scheduler_pending_pods"), labels=["queue"]),
            GaugeMetricFamily("scheduler_queued_entities",
                              kube_help("scheduler_queued_entities"),
                              labels=["queue", "type"]),
            GaugeMetricFamily("scheduler_unschedulable_pods",
                              kube_help("scheduler_unschedulable_pods"), labels=["plugin", "profile"]),
            GaugeMetricFamily("scheduler_inflight_events",
                              kube_help("scheduler_inflight_events"), labels=["event"]),
            GaugeMetricFamily("scheduler_goroutines",
                              kube_help("scheduler_goroutines"),
                              labels=["operation"]),
            GaugeMetricFamily("scheduler_cache_size",
                              kube_help("scheduler_cache_size"),
                              labels=["type"]),
        )

    def collect(self) -> Iterator[Metric]:
        sched = self.m._scheduler
        if sched is None:
            return
        pending, reasons, inflight, events = self._queue_state(sched.queue)
        fam = self._families()
        for q in QUEUES:
            fam[0].add_metric([q], pending.get(q, 0))
            fam[1].add_metric([q, "pod"], pending.get(q, 0))
        self._seen_reasons.update(reasons)
        for key in sorted(self._seen_reasons):
            fam[2].add_metric(list(key), reasons.get(key, 0))
        fam[3].add_metric([POD_POPPED], inflight)
        self._seen_events.update(events)
        for label in sorted(self._seen_events):
            fam[3].add_metric([label], events.get(label, 0))
        binding = getattr(sched, "_inflight_bindings", 0) + len(getattr(sched, "detached_bindings", {}))
        fam[4].add_metric(["binding"], binding)
        ext = getattr(sched, "extenders", None)
        if ext is not None and ext.has_prioritizers:  # kube's label exists once a prioritizer is configured
            fam[4].add_metric(["prioritizing_extender"], ext.prioritizing)
        cache = sched.cache
        states = list(cache._pods.values())
        fam[5].add_metric(["nodes"], len(cache.snapshot) + len(cache._orphans))
        fam[5].add_metric(["pods"], len(states))
        fam[5].add_metric(["assumed_pods"], sum(1 for s in states if s.assumed))
        yield from fam

    @staticmethod
    def _queue_state(queue: Any) -> tuple[dict[str, int], dict[tuple[str, str], int], int, dict[str, int]]:
        """One consistent read of the queue under its lock."""
        pending: _Tally[str] = _Tally()
        reasons: _Tally[tuple[str, str]] = _Tally()
        with queue._cond:
            for kind, obj in queue._where.values():
                pending[kind] += 1
                qpi = getattr(obj, "qpi", obj)
                plugins = qpi.unschedulable_plugins | qpi.pending_plugins
                # a PreEnqueue plugin gates only a pod not attempted yet, and (as in kube) it counts until the
                # pod's first attempt, even once the gate is lifted
                if qpi.gating_plugin and qpi.attempts == 0:
                    plugins = plugins | {qpi.gating_plugin}
                profile = qpi.pod.scheduler_name
                for plugin in plugins:
                    reasons[(plugin, profile)] += 1
            inflight = len(queue._in_flight)
            events = _Tally(_event_label(ev) for _, ev, _, _ in queue._event_log)
        return pending, reasons, inflight, events

"""Prometheus metrics with kube-scheduler's names, labels and buckets, so existing dashboards work."""

from __future__ import annotations

import random
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .framework.status import Status


def _exp(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    """One registry per scheduler instance (tests run several in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None, plugin_sample_rate: float = 0.1) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
            ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"], buckets=_exp(0.001, 2, 15), registry=r)
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in seconds.",
            buckets=_exp(0.001, 2, 15), registry=r)
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue.",
            ["attempts"], buckets=_exp(0.01, 2, 20), registry=r)
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
            buckets=_exp(1, 2, 5), registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"], registry=r)
        self.incoming_pods = Counter(
            "scheduler_queue_incoming_pods", "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=r)
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=_exp(0.0001, 2, 12), registry=r)
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=_exp(0.00001, 1.5, 20), registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims", buckets=_exp(1, 2, 7),
            registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods", "The number of unschedulable pods broken down by plugin name.",
            ["plugin", "profile"], registry=r)
        self.permit_wait = Histogram(
            "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.", ["result"],
            buckets=_exp(0.001, 2, 15), registry=r)
        self.plugin_sample_rate = plugin_sample_rate
        self._rng = random.Random()

    def extension_point(self, profile: str, point: str, status: Status | None, seconds: float) -> None:
        code = "Success" if status is None else status.code.name
        self.extension_point_duration.labels(point, code, profile).observe(seconds)

    def attempt(self, profile: str, result: str, seconds: float, qpi: Any) -> None:
        self.schedule_attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)
        if result == "scheduled":
            self.pod_attempts.observe(qpi.attempts)
            if qpi.initial_attempt_timestamp is not None:
                label = str(qpi.attempts) if qpi.attempts < 15 else "15+"
                self.sli_duration.labels(label).observe(max(0.0, time.monotonic() - qpi.initial_attempt_timestamp))

    def incoming(self, queue: str, event: str) -> None:
        self.incoming_pods.labels(queue, event).inc()

    def set_pending(self, counts: dict[str, int]) -> None:
        for q, n in counts.items():
            self.pending_pods.labels(q).set(n)

"""The per-pod metrics' queued observations: what a read of the registry shows is what prometheus_client's own
observe/inc would have recorded, none is lost to a fold running beside the observers, and an unscraped scheduler
folds every few hundred attempts instead of holding every observation."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from scheduler_runtime.metrics import SchedulerMetrics, _exp, _Fold

#: below, inside, on a bound, past every bound, and repeats
VALUES = [0.0, 0.00005, 0.0001, 0.00015, 0.0004, 0.0004, 0.003, 0.05, 0.2, 3.0, 1e-9, 0.0008]


def _families(registry: CollectorRegistry, name: str) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if line.startswith(name)]


def test_a_read_shows_exactly_what_direct_observations_give() -> None:
    m = SchedulerMetrics()
    plain = CollectorRegistry()
    direct = Histogram("scheduler_framework_extension_point_duration_seconds", "h",
                       ["extension_point", "status", "profile"], buckets=_exp(0.0001, 2, 12),
                       registry=plain).labels("Filter", "Success", "p")
    for v in VALUES:
        m.extension_point("p", "Filter", None, v)
        direct.observe(v)
    got = _families(m.registry, "scheduler_framework_extension_point_duration_seconds")
    assert got == _families(plain, "scheduler_framework_extension_point_duration_seconds")
    assert any('le="0.0001"' in line and line.endswith(" 4.0") for line in got)  # 0, 5e-05, 1e-09 and 0.0001


def test_counters_sum_their_increments() -> None:
    m = SchedulerMetrics()
    for n in (1, 3, 0, 5):
        m.plugin_evaluated("p", "Filter", "NodeName", n)
    m.incoming("active", "PodAdd")
    m.incoming("active", "PodAdd")
    r = m.registry
    assert r.get_sample_value("scheduler_plugin_evaluation_total",
                              {"plugin": "NodeName", "extension_point": "Filter", "profile": "p"}) == 9
    assert r.get_sample_value("scheduler_queue_incoming_pods_total", {"queue": "active", "event": "PodAdd"}) == 2


class _QPI:
    attempts = 1
    flushed_from_unschedulable = False
    initial_attempt_timestamp = None


def test_no_observation_is_lost_to_concurrent_folds() -> None:
    m = SchedulerMetrics()
    per_thread, threads = 20000, 4
    done = threading.Event()

    def observe() -> None:
        for _ in range(per_thread):
            m.extension_point("p", "Score", None, 0.001)
            m.plugin_evaluated("p", "Score", "X", 1)
            m.attempt("p", "scheduled", 0.01, _QPI())  # every 256th folds here, beside the reader's folds

    def read() -> None:
        while not done.is_set():
            m.registry.get_sample_value("scheduler_plugin_evaluation_total",
                                        {"plugin": "X", "extension_point": "Score", "profile": "p"})

    reader = threading.Thread(target=read)
    reader.start()
    workers = [threading.Thread(target=observe) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    done.set()
    reader.join()
    r = m.registry
    want = per_thread * threads
    assert r.get_sample_value("scheduler_plugin_evaluation_total",
                              {"plugin": "X", "extension_point": "Score", "profile": "p"}) == want
    assert r.get_sample_value("scheduler_framework_extension_point_duration_seconds_count",
                              {"extension_point": "Score", "status": "Success", "profile": "p"}) == want
    total = 0.0
    for _ in range(want):  # folds add in order from the stored sum, so no fold's update was lost
        total += 0.001
    assert r.get_sample_value("scheduler_framework_extension_point_duration_seconds_sum",
                              {"extension_point": "Score", "status": "Success", "profile": "p"}) == total


def test_an_unscraped_scheduler_folds_every_few_hundred_attempts() -> None:
    m = SchedulerMetrics()
    queued = m._fold.queued
    for _ in range(_Fold.FOLD_EVERY - 1):
        m.extension_point("p", "Filter", None, 0.001)
        m.attempt("p", "scheduled", 0.01, _QPI())
    assert sum(len(q.pending) for q in queued) > 0
    m.attempt("p", "scheduled", 0.01, _QPI())
    assert sum(len(q.pending) for q in queued) == 0

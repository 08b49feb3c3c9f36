"""The secure port's other paths: z-pages, /metrics/resources, /metrics/slis, /debug/pprof, --disabled-metrics."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from scheduler_runtime.server.endpoints import Endpoints
from scheduler_runtime.server.profiling import Profiling
from scheduler_runtime.server.resource_metrics import HealthSLIs, pod_totals, resources_registry
from scheduler_runtime.server.serving import Request
from scheduler_runtime.server.zpages import ZPages


def _req(path: str, accept: str | None = None, method: str = "GET", body: bytes = b"") -> Request:
    headers = {"accept": [accept]} if accept else {}
    return Request(method, path, "HTTP/1.1", headers, None, "127.0.0.1", body)


def _endpoints(**zkw: Any) -> Endpoints:
    ep = Endpoints(CollectorRegistry())
    ep.zpages = ZPages({"kind": "KubeSchedulerConfiguration", "parallelism": 16}, {"v": "2", "config": "/c.yaml"},
                       "1.36.3-ksched.0", "1.36", rng=random.Random(3), clock=lambda: 1000.0, **zkw)
    return ep


def test_configz_is_the_componentconfig_document() -> None:
    r = _endpoints()(_req("/configz"))
    assert r.status == 200 and r.content_type == "application/json"
    assert json.loads(r.body) == {"componentconfig": {"kind": "KubeSchedulerConfiguration", "parallelism": 16}}


def test_flagz_text_and_structured() -> None:
    ep = _endpoints()
    sep = ep.zpages.sep  # type: ignore[union-attr]
    r = ep(_req("/flagz"))
    lines = r.body.decode().split("\n")
    assert r.status == 200 and r.content_type == "text/plain; charset=utf-8"
    assert lines[:2] == ["", "kube-scheduler flagz"] and lines[2].startswith("Warning: This endpoint is not meant")
    assert lines[3:5] == [f"config{sep}/c.yaml", f"v{sep}2"]
    r = ep(_req("/flagz", "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"))
    assert r.content_type == "application/json;g=config.k8s.io;v=v1beta1;as=Flagz" and "Warning" not in r.headers
    assert json.loads(r.body) == {"kind": "Flagz", "apiVersion": "config.k8s.io/v1beta1",
                                  "metadata": {"name": "kube-scheduler"}, "flags": {"config": "/c.yaml", "v": "2"}}
    r = ep(_req("/flagz", "application/json;g=config.k8s.io;v=v1alpha1;as=Flagz"))
    assert r.status == 200 and r.headers["Warning"].startswith("299 - ")
    r = ep(_req("/flagz", "application/json"))
    assert r.status == 406 and json.loads(r.body)["reason"] == "NotAcceptable"


def test_statusz_lists_kube_schedulers_paths() -> None:
    ep = _endpoints()
    ep.zpages.clock = lambda: 1000.0 + 3725  # type: ignore[union-attr]
    sep = ep.zpages.sep  # type: ignore[union-attr]
    text = ep(_req("/statusz")).body.decode()
    assert f"Up{sep} 1 hr 02 min 05 sec" in text
    assert f"Paths{sep} /configz /flagz /healthz /livez /metrics /readyz" in text
    doc = json.loads(ep(_req("/statusz", "application/json;g=config.k8s.io;v=v1beta1;as=Statusz")).body)
    assert (doc["kind"], doc["uptimeSeconds"], doc["binaryVersion"], doc["emulationVersion"]) == \
        ("Statusz", 3725, "1.36.3-ksched.0", "1.36")


def test_gates_off_make_flagz_and_statusz_404() -> None:
    ep = _endpoints(flagz=False, statusz=False)
    assert ep(_req("/flagz")).status == 404 and ep(_req("/statusz")).status == 404
    assert ep(_req("/configz")).status == 200


def test_pod_totals_follow_component_helpers() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Gi"},
                                          "limits": {"cpu": "200m"}}},
                           {"resources": {"requests": {"cpu": "50m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
                               {"restartPolicy": "Always", "resources": {"requests": {"cpu": "10m"},
                                                                         "limits": {"cpu": "20m"}}}],
            "overhead": {"cpu": "5m", "memory": "1Mi"}}
    req = {k: float(v) for k, v in pod_totals(spec, "requests").items()}
    assert req == {"cpu": 1.005, "memory": 2**30 + 2**20, "nvidia.com/gpu": 1.0}
    lim = {k: float(v) for k, v in pod_totals(spec, "limits").items()}
    assert lim == {"cpu": 0.225}  # overhead only on a set limit; no memory limit, so none added
    assert float(pod_totals({**spec, "resources": {"requests": {"cpu": "3"}}}, "requests")["cpu"]) == 3.005


def test_metrics_resources_series() -> None:
    pods = [
        {"metadata": {"namespace": "a", "name": "p"}, "spec": {"nodeName": "n1", "schedulerName": "s", "priority": 7,
                                                               "containers": [{"resources": {
                                                                   "requests": {"cpu": "250m", "example.com/x": "2"},
                                                                   "limits": {"memory": "1Mi"}}}]}},
        {"metadata": {"namespace": "a", "name": "pending"}, "spec": {"containers": [{"resources": {
            "requests": {"cpu": "1"}}}]}},
        {"metadata": {"namespace": "a", "name": "done"}, "status": {"phase": "Succeeded"},
         "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]}},
        {"metadata": {"namespace": "a", "name": "nothing"}, "spec": {"nodeName": "n1", "containers": [{}]}},
    ]
    ep = Endpoints(CollectorRegistry())
    ep.resources = resources_registry(lambda: pods)
    got = {}
    for fam in text_string_to_metric_families(ep(_req("/metrics/resources")).body.decode()):
        for s in fam.samples:
            got[(fam.name, s.labels["pod"], s.labels["resource"])] = (s.value, s.labels)
    assert set(got) == {("kube_pod_resource_request", "p", "cpu"), ("kube_pod_resource_request", "p", "example.com/x"),
                        ("kube_pod_resource_limit", "p", "memory"), ("kube_pod_resource_request", "pending", "cpu")}
    value, labels = got[("kube_pod_resource_request", "p", "cpu")]
    assert value == 0.25 and labels == {"namespace": "a", "pod": "p", "node": "n1", "scheduler": "s",
                                        "priority": "7", "resource": "cpu", "unit": "cores"}
    assert got[("kube_pod_resource_limit", "p", "memory")][1]["unit"] == "bytes"
    assert got[("kube_pod_resource_request", "p", "example.com/x")][1]["unit"] == ""
    assert got[("kube_pod_resource_request", "pending", "cpu")][1]["priority"] == ""


def test_metrics_slis_record_every_health_check() -> None:
    ep = Endpoints(CollectorRegistry())
    ep.slis = HealthSLIs(start_time=5.0)
    ep.live_checks = {"ping": lambda: None}
    ep.checks = {"ping": lambda: None, "informer-sync": lambda: "not yet"}
    assert ep(_req("/livez")).status == 200 and ep(_req("/readyz")).status == 500
    ep.checks["informer-sync"] = lambda: None
    ep(_req("/readyz"))
    text = ep(_req("/metrics/slis")).body.decode()
    assert 'kubernetes_healthcheck{name="informer-sync",type="readyz"} 1.0' in text
    assert 'kubernetes_healthchecks_total{name="informer-sync",status="error",type="readyz"} 1.0' in text
    assert 'kubernetes_healthchecks_total{name="informer-sync",status="success",type="readyz"} 1.0' in text
    assert 'kubernetes_healthchecks_total{name="ping",status="success",type="livez"} 1.0' in text
    assert "process_start_time_seconds 5.0" in text


def test_disabled_metrics_are_left_out() -> None:
    reg = CollectorRegistry()
    Counter("scheduler_schedule_attempts", "x", registry=reg).inc()
    Counter("scheduler_other", "y", registry=reg).inc()
    ep = Endpoints(reg)
    ep.disabled_metrics = {"scheduler_schedule_attempts_total"}
    text = ep(_req("/metrics")).body.decode()
    assert "scheduler_other_total" in text and "scheduler_schedule_attempts" not in text


def _parked(ready: threading.Event, stop: threading.Event) -> None:
    ready.set()
    stop.wait()


def test_pprof_paths() -> None:
    levels: list[int] = []
    ep = Endpoints(CollectorRegistry())
    ep.profiling = Profiling(contention=True, set_verbosity=levels.append)
    r = ep(_req("/debug/pprof"))
    assert (r.status, r.headers["Location"]) == (302, "/debug/pprof/")
    assert ep(_req("/debug/pprof/")).status == 200
    assert ep(_req("/debug/pprof/cmdline")).status == 404
    assert ep(_req("/debug/pprof/profile?seconds=-1")).status == 400
    ready, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=_parked, args=(ready, stop), name="parked-thread")
    t.start()
    try:
        ready.wait(5)
        prof = ep(_req("/debug/pprof/profile?seconds=0.05")).body.decode()
        lines = [ln for ln in prof.splitlines() if ln.startswith("parked-thread;")]
        assert lines and "test_secure_port_pages.py:_parked:" in lines[0] and int(lines[0].rsplit(" ", 1)[1]) >= 1
        block = ep(_req("/debug/pprof/block?seconds=0.05")).body.decode()
        assert any(ln.startswith("parked-thread;") and "threading.py:wait:" in ln for ln in block.splitlines())
        assert "(parked-thread)" in ep(_req("/debug/pprof/goroutine")).body.decode()
    finally:
        stop.set()
        t.join(5)
    assert ep(_req("/debug/pprof/heap")).body.startswith(b"heap profile: ")
    assert ep(_req("/debug/flags/v")).status == 406
    assert ep(_req("/debug/flags/v", method="PUT", body=b"x")).status == 400
    assert ep(_req("/debug/flags/v", method="PUT", body=b"4")).status == 200 and levels == [4]
    off = Endpoints(CollectorRegistry())
    off.profiling = Profiling(contention=False)
    assert off(_req("/debug/pprof/block?seconds=5")).body == b""  # an empty profile, as Go's with rate 0
    assert Endpoints(CollectorRegistry())(_req("/debug/pprof/")).status == 404  # profiling off: not served

"""`/metrics/resources` (kube_pod_resource_request / kube_pod_resource_limit) and `/metrics/slis`.

`/metrics/resources` follows kube-scheduler's pod resources collector: at scrape time, every pod the
scheduler's informer holds (all schedulers' pods, not only this one's) that is not terminal gives one series
per non-zero resource, labelled namespace, pod, node (empty while pending), scheduler, priority (empty when
the pod has none) and resource, with the unit `cores` (cpu), `bytes` (memory, storage, ephemeral-storage,
hugepages-*), `integer` (attachable-volumes-*) or empty (extended resources). Requests and limits are the
pod's effective ones as the scheduler and kubelet see them (component-helpers PodRequests/PodLimits):
containers and sidecars summed, the largest init-container step, pod-level resources when set, overhead.

`/metrics/slis` holds component-base's health-check SLIs: `kubernetes_healthcheck{name,type}` (1 when the
check last passed) and `kubernetes_healthchecks_total{name,status,type}`, recorded each time /healthz,
/livez or /readyz runs a check, and `process_start_time_seconds`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..quantity import parse_quantity

_HELP = ("{what} This shows the resource usage the scheduler and kubelet expect per pod for resources along with "
         "the unit for the resource if any.")
REQUEST_HELP = "[STABLE] " + _HELP.format(what="Resources requested by workloads on the cluster, broken down by pod.")
LIMIT_HELP = "[STABLE] " + _HELP.format(what="Resources limit for workloads on the cluster, broken down by pod.")
LABELS = ["namespace", "pod", "node", "scheduler", "priority", "resource", "unit"]


def unit_of(resource: str) -> str:
    if resource == "cpu":
        return "cores"
    if resource in ("memory", "storage", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "bytes"
    if resource.startswith("attachable-volumes-"):
        return "integer"
    return ""


def _list(c: Mapping[str, Any], key: str) -> dict[str, Decimal]:
    raw = ((c.get("resources") or {}).get(key)) or {}
    out: dict[str, Decimal] = {}
    for k, v in raw.items():
        try:
            out[str(k)] = parse_quantity(v)
        except Exception:  # noqa: BLE001 - the API server validated it; a bad value is skipped, not fatal
            continue
    return out


def _add(into: dict[str, Decimal], src: Mapping[str, Decimal]) -> None:
    for k, v in src.items():
        into[k] = into.get(k, Decimal(0)) + v


def _max(into: dict[str, Decimal], src: Mapping[str, Decimal]) -> None:
    for k, v in src.items():
        if v > into.get(k, Decimal(0)):
            into[k] = v


def pod_totals(spec: Mapping[str, Any], key: str) -> dict[str, Decimal]:
    """component-helpers PodRequests (`key`="requests") or PodLimits ("limits") with default options."""
    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        _add(total, _list(c, key))
    sidecars: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for c in spec.get("initContainers") or []:
        r = _list(c, key)
        if c.get("restartPolicy") == "Always":
            _add(total, r)
            _add(sidecars, r)
            _max(init_max, sidecars)
        else:
            step = dict(r)
            _add(step, sidecars)
            _max(init_max, step)
    _max(total, init_max)
    pod_level = _list(spec, key)  # pod-level resources (PodLevelResources, on in 1.36): cpu and memory
    for k in ("cpu", "memory"):
        if k in pod_level:
            total[k] = pod_level[k]
    overhead = {str(k): parse_quantity(v) for k, v in (spec.get("overhead") or {}).items()}
    for k, v in overhead.items():
        if key == "requests" or k in total and total[k] != 0:  # limits: overhead only on a set, non-zero limit
            total[k] = total.get(k, Decimal(0)) + v
    return total


class PodResourcesCollector:
    """Reads the pods at scrape time; `pods()` returns the informer's pod objects."""

    def __init__(self, pods: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self.pods = pods

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kube_pod_resource_request", REQUEST_HELP, labels=LABELS)
        yield GaugeMetricFamily("kube_pod_resource_limit", LIMIT_HELP, labels=LABELS)

    def collect(self) -> Iterator[Metric]:
        req = GaugeMetricFamily("kube_pod_resource_request", REQUEST_HELP, labels=LABELS)
        lim = GaugeMetricFamily("kube_pod_resource_limit", LIMIT_HELP, labels=LABELS)
        try:
            pods = list(self.pods())
        except Exception:  # noqa: BLE001 - kube returns no samples when the lister fails
            pods = []
        for p in pods:
            spec = p.get("spec") or {}
            node = spec.get("nodeName") or ""
            if node and (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue  # terminal pods hold nothing
            meta = p.get("metadata") or {}
            prio = spec.get("priority")
            base = [meta.get("namespace") or "", meta.get("name") or "", node,
                    spec.get("schedulerName") or "", "" if prio is None else str(int(prio))]
            for fam, key in ((req, "requests"), (lim, "limits")):
                for res, val in pod_totals(spec, key).items():
                    if val != 0:
                        fam.add_metric([*base, res, unit_of(res)], float(val))
        yield req
        yield lim


def resources_registry(pods: Callable[[], Iterable[Mapping[str, Any]]]) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(PodResourcesCollector(pods))  # type: ignore[arg-type]
    return reg


class HealthSLIs:
    """component-base's health-check SLI metrics, fed by every check /healthz, /livez and /readyz run."""

    def __init__(self, start_time: float | None = None) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], int] = {}
        self._total: dict[tuple[str, str, str], int] = {}
        self.start_time = time.time() if start_time is None else start_time
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # type: ignore[arg-type]

    def record(self, root: str, name: str, ok: bool) -> None:
        with self._lock:
            self._last[(name, root)] = 1 if ok else 0
            key = (name, "success" if ok else "error", root)
            self._total[key] = self._total.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            last, total = dict(self._last), dict(self._total)
        if last:
            g = GaugeMetricFamily("kubernetes_healthcheck", "[STABLE] This metric records the result of a single "
                                  "healthcheck.", labels=["name", "type"])
            for (name, root), v in sorted(last.items()):
                g.add_metric([name, root], v)
            yield g
            c = CounterMetricFamily("kubernetes_healthchecks", "[STABLE] This metric records the results of all "
                                    "healthcheck.", labels=["name", "status", "type"])
            for (name, status, root), v in sorted(total.items()):
                c.add_metric([name, status, root], v)
            yield c
        p = GaugeMetricFamily("process_start_time_seconds",
                              "[ALPHA] Start time of the process since unix epoch in seconds.")
        p.add_metric([], self.start_time)
        yield p

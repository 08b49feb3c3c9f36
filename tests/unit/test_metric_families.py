"""ksched's scheduler_* metric families against kube-scheduler v1.37.2's (names, types, labels, buckets), and
kube's counting rule for scheduler_plugin_evaluation_total.

tests/data/kube-scheduler-1.37.2-metric-families.json was taken from the real binary's /metrics after it
scheduled pods on the test control plane (hack/kube_scheduler_reference.py; tests/integration/test_serving_parity.py
compares live)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.kubeversion import KUBE_VERSION
from scheduler_runtime.metrics import SchedulerMetrics
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

DATA = Path(__file__).resolve().parents[1] / "data" / f"kube-scheduler-{KUBE_VERSION}-metric-families.json"
#: families kube-scheduler exports only once observed (no Permit wait happened in the reference run, no claim was
#: created for extended resources backed by DRA; the batch rescore families are kube-scheduler 1.37's, observed
#: only when ksched follows 1.37)
NOT_IN_REFERENCE_RUN = {"scheduler_permit_wait_duration_seconds", "scheduler_batch_rescore_attempts_total",
                        "scheduler_batch_rescore_duration_seconds",
                        "dynamic_resource_allocation_resourceclaim_creates_total",
                        # vectors kube exposes once a preemption ran (the reference run preempts nothing)
                        "scheduler_preemption_goroutines_duration_seconds",
                        "scheduler_preemption_goroutines_execution_total",
                        # DynamicResources PreBind waiting on device binding conditions (none in the reference run)
                        "scheduler_dra_bindingconditions_allocations_total",
                        "scheduler_dra_bindingconditions_wait_duration_seconds"}


def kube_families() -> dict[str, dict[str, Any]]:
    return json.loads(DATA.read_text())["families"]


def declared_families(m: SchedulerMetrics) -> dict[str, dict[str, Any]]:
    """Every scheduler_* family ksched registers (and the DRA family kube-scheduler 1.37 shares with
    kube-controller-manager), with its label names and finite buckets, samples or not."""
    out: dict[str, dict[str, Any]] = {}
    for collector in list(m.registry._collector_to_names):  # noqa: SLF001 - the declared structure, not samples
        describe = getattr(collector, "describe", None)
        for fam in describe() if callable(describe) else []:
            name = fam.name + ("_total" if fam.type == "counter" else "")
            labels = getattr(collector, "_labelnames", None)
            if labels is None:  # a scrape-time collector: labels come from its samples
                labels = sorted({k for s in fam.samples for k in s.labels})
                for f in collector.collect() if m._scheduler is not None else []:  # noqa: SLF001
                    if f.name == fam.name:
                        labels = sorted({k for s in f.samples for k in s.labels})
            bounds = getattr(collector, "_upper_bounds", None)
            out[name] = {"type": fam.type, "labels": sorted(labels),
                         "buckets": [b for b in bounds if b != float("inf")] if bounds else None}
    return {k: v for k, v in out.items() if k.startswith(("scheduler_", "dynamic_resource_allocation_"))}


def _node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def _pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def _run(pods: list[dict]) -> SchedulerMetrics:
    cluster = MemoryCluster()
    for o in [_node("n1"), _node("n2"), *pods]:
        cluster.create(o, emit=False)
    reg = build_registry([])
    metrics = SchedulerMetrics()
    s = Scheduler(cluster, load_config(None, reg), reg, seed=1, metrics=metrics)
    s.start()
    s.run(until_idle=True)
    return metrics


def test_families_labels_and_buckets_match_kube_scheduler() -> None:
    ours = declared_families(_run([_pod("a", "1"), _pod("too-big", "100")]))
    kube = kube_families()
    assert set(kube) - set(ours) == set()
    assert set(ours) - set(kube) == NOT_IN_REFERENCE_RUN
    for name in sorted(set(kube) & set(ours)):
        assert ours[name]["type"] == kube[name]["type"], name
        assert ours[name]["labels"] == kube[name]["labels"], name
        if kube[name]["buckets"] is not None:
            assert ours[name]["buckets"] == kube[name]["buckets"], name


def test_resourceclaim_creates_has_kubes_name_and_labels() -> None:
    """kube-scheduler 1.37.2 (dynamic-resource-allocation resourceclaim/metrics, always registered): the claims
    created for extended resources count in dynamic_resource_allocation_resourceclaim_creates_total with
    status, admin_access, owner_api_group and owner_api_kind (1.36.3's scheduler_resourceclaim_creates_total
    had only status)."""
    fams = declared_families(SchedulerMetrics())
    assert "scheduler_resourceclaim_creates_total" not in fams
    assert fams["dynamic_resource_allocation_resourceclaim_creates_total"] == {
        "type": "counter", "labels": ["admin_access", "owner_api_group", "owner_api_kind", "status"], "buckets": None}


def test_plugin_evaluation_counts_like_kube() -> None:
    """PreFilter/PreScore count a run unless it returned Skip; Filter counts each node a plugin evaluated
    (a node stops at its first rejecting plugin); Score counts each node scored. Every series of the
    profile's plugins at the four points exists from the start, at 0."""
    m = _run([_pod("fits", "1"), _pod("too-big", "100")])
    got: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        if fam.name == "scheduler_plugin_evaluation":
            for s in fam.samples:
                if s.name.endswith("_total"):
                    assert s.labels["profile"] == "default-scheduler"
                    got[(s.labels["extension_point"], s.labels["plugin"])] = s.value
    assert got[("PreFilter", "NodeResourcesFit")] == 2  # both pods
    assert got[("PreFilter", "NodeAffinity")] == 0  # skipped: no affinity
    assert got[("Filter", "NodeAffinity")] == 0
    assert got[("Filter", "NodeName")] == 4  # 2 pods x 2 nodes
    assert got[("Filter", "NodeResourcesFit")] == 4
    assert got[("Score", "NodeResourcesFit")] == 2  # only "fits" reaches Score, on 2 nodes
    assert got[("PreScore", "NodeAffinity")] == 0 and got[("Score", "NodeAffinity")] == 0
    assert got[("PreScore", "TaintToleration")] == 1
    assert ("Filter", "VolumeBinding") in got and ("Score", "ImageLocality") in got


def test_extension_point_durations_cover_every_point_ksched_runs() -> None:
    """kube's extension_point values seen after a pod binds and one fails (the reference run also shows
    PreBindPreFlight: the pre-flight of asynchronous PreBind, not in ksched)."""
    m = _run([_pod("fits", "1"), _pod("too-big", "100")])
    seen = set()
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        if fam.name == "scheduler_framework_extension_point_duration_seconds":
            seen |= {(s.labels["extension_point"], s.labels["status"]) for s in fam.samples}
    assert {("PreEnqueue", "Success"), ("PreFilter", "Success"), ("Filter", "Success"), ("PreScore", "Success"),
            ("Score", "Success"), ("Reserve", "Success"), ("Permit", "Success"), ("PreBind", "Success"),
            ("Bind", "Success"), ("PostBind", "Success"), ("PostFilter", "Unschedulable"), ("Sign", "Success")} <= seen


def test_dra_binding_conditions_families_as_kube_declares_them() -> None:
    """pkg/scheduler/metrics (1.36.3 and 1.37.2): labels profile, driver, status; ExponentialBuckets(0.1, 2, 14)."""
    fams = declared_families(SchedulerMetrics())
    assert fams["scheduler_dra_bindingconditions_allocations_total"] == {
        "type": "counter", "labels": ["driver", "profile", "status"], "buckets": None}
    wait = fams["scheduler_dra_bindingconditions_wait_duration_seconds"]
    assert wait["labels"] == ["driver", "profile", "status"]
    assert wait["buckets"][0] == 0.1 and len(wait["buckets"]) == 14 and wait["buckets"][-1] == 0.1 * 2 ** 13


def test_help_text_is_kube_schedulers() -> None:
    """Every family's HELP reads as kube-scheduler 1.37.2 prints it (component-base's `[STABLE]`/`[BETA]`/`[ALPHA]`
    prefix and kube's wording): the families of the reference run from the real binary, the rest from the
    table taken from kube's metrics.go."""
    m = _run([_pod("a", "1"), _pod("too-big", "100")])
    text = generate_latest(m.registry).decode()
    ours = {f.name + ("_total" if f.type == "counter" else ""): f.documentation
            for f in text_string_to_metric_families(text)}
    kube = kube_families()
    compared = 0
    for name, fam in kube.items():
        if name in ours:
            assert ours[name] == fam["help"], name
            compared += 1
    assert compared == len(kube)
    assert all(h.startswith(("[ALPHA] ", "[BETA] ", "[STABLE] ")) for n, h in ours.items()
               if n.startswith(("scheduler_", "dynamic_resource_allocation_"))), ours


def test_dra_binding_conditions_families_only_with_the_gate() -> None:
    """kube-scheduler registers the two families only when DRADeviceBindingConditions is on (metrics.Register)."""
    text = generate_latest(SchedulerMetrics(dra_binding_conditions=False).registry).decode()
    assert "scheduler_dra_bindingconditions" not in text
    assert "scheduler_dra_bindingconditions_allocations" in generate_latest(SchedulerMetrics().registry).decode()
    assert "scheduler_dra_bindingconditions_allocations_total" not in declared_families(
        SchedulerMetrics(dra_binding_conditions=False))

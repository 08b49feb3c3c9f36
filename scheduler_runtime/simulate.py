"""Offline replay: schedule pods onto a cluster snapshot with a given config and report the outcome."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster import apishape, fieldcheck
from .cluster.memory import MemoryCluster, load_objects
from .config.profiles import DEFAULT_SCHEDULER, not_served_message, profile_names
from .errors import InputError
from .framework.registry import Registry
from .quantity import format_amount
from .results import AttemptResult, ResultStore
from .scheduler import Decision, Scheduler


@dataclass
class NodeUsage:
    name: str
    allocatable: dict[str, int]
    requested: dict[str, int]
    pods: int

    def percent(self, resource: str) -> float:
        alloc = self.allocatable.get(resource, 0)
        return 100.0 * self.requested.get(resource, 0) / alloc if alloc else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.name, "pods": self.pods,
                "cpu": {"requested": format_amount("cpu", self.requested.get("cpu", 0)),
                        "allocatable": format_amount("cpu", self.allocatable.get("cpu", 0)),
                        "percent": round(self.percent("cpu"), 1)},
                "memory": {"requested": format_amount("memory", self.requested.get("memory", 0)),
                           "allocatable": format_amount("memory", self.allocatable.get("memory", 0)),
                           "percent": round(self.percent("memory"), 1)}}


@dataclass
class SimulationResult:
    label: str
    pods: list[str]  # pod keys in input order
    placements: dict[str, str | None]
    results: dict[str, AttemptResult]
    usage: list[NodeUsage]
    preempted: list[str] = field(default_factory=list)
    cluster: MemoryCluster | None = None

    @property
    def pending(self) -> list[str]:
        return [p for p in self.pods if not self.placements.get(p)]

    def to_dict(self) -> dict[str, Any]:
        out_pods = []
        for key in self.pods:
            r = self.results.get(key)
            node = self.placements.get(key)
            entry: dict[str, Any] = {"pod": key, "node": node}
            if not node:
                entry["status"] = "preempted" if key in self.preempted else "Pending"
                if r is not None:
                    entry["message"] = r.message
            if r is not None and r.extenders:
                entry["extenders"] = r.extenders
            out_pods.append(entry)
        return {"variant": self.label, "pods": out_pods, "pending": len(self.pending),
                "preempted": self.preempted, "nodes": [u.to_dict() for u in self.usage]}


def load_pods_in_order(paths: Sequence[str | Path]) -> list[tuple[dict[str, Any], str]]:
    out = []
    for p in paths:
        for raw, where in load_objects(Path(p)):
            if raw.get("kind") not in (None, "Pod"):
                raise InputError(f'expected kind "Pod", got {raw.get("kind")!r}', file=where, field="kind", usage=False)
            if raw.get("kind") is None:  # checked by load_objects when it had a kind
                fieldcheck.check_object({**raw, "kind": "Pod"}, where)
            raw.setdefault("kind", "Pod")
            raw.setdefault("apiVersion", "v1")
            try:
                apishape.check_object(raw)  # a Pod written without `kind` was not checked on load
            except InputError as exc:
                raise InputError(exc.detail, file=where, field=exc.field, usage=False) from None
            out.append((raw, where))
    return out


def create_pods(cluster: MemoryCluster, pods: Sequence[tuple[dict[str, Any], str]], emit: bool = True) -> list[str]:
    """Create the pods in order; a bad one is reported with the file it came from. Returns their keys."""
    keys = []
    for raw, where in pods:
        try:
            created = cluster.create(raw, emit=emit)
        except InputError as exc:
            raise InputError(exc.detail, file=where, field=exc.field, usage=exc.usage) from None
        meta = created["metadata"]
        keys.append(f"{meta['namespace']}/{meta['name']}")
    return keys


def simulate(cluster_paths: Sequence[str | Path], pod_paths: Sequence[str | Path], config: Any, registry: Registry,
             seed: int = 0, label: str = "default",
             on_decision: Callable[[Decision], None] | None = None, keep_cluster: bool = False,
             plugin_deadline: float = 30.0) -> SimulationResult:
    """Schedule `pod_paths` (in order) on the snapshot in `cluster_paths`; pods bound there stay put."""
    cluster = MemoryCluster.from_paths(cluster_paths)
    pods = load_pods_in_order(pod_paths)
    results = ResultStore()
    sched = Scheduler(cluster, config, registry, seed=seed, results=results, observer=on_decision,
                      bind_deadline=plugin_deadline)
    sched.start()
    keys = create_pods(cluster, pods)
    sched.run(until_idle=True)
    placements: dict[str, str | None] = {}
    for key in keys:
        ns, name = key.split("/", 1)
        raw = cluster.get_pod(ns, name)
        spec = (raw or {}).get("spec") or {}
        placements[key] = spec.get("nodeName") or None
        gates = [g.get("name", "") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
        if gates and not placements[key] and results.get(key) is None:
            results.put(AttemptResult(key, spec.get("schedulerName") or "default-scheduler", 0, "gated", message=(
                f"Scheduling is blocked due to non-empty scheduling gates: {', '.join(gates)}")))
        wanted = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if not placements[key] and results.get(key) is None and wanted not in profile_names(config):
            # kube-scheduler never takes such a pod: it is left for a scheduler serving that name
            results.put(AttemptResult(key, wanted, 0, "not-served", message=not_served_message(wanted, config)))
    usage = [NodeUsage(ni.name, dict(ni.allocatable), dict(ni.requested), len(ni.pods))
             for ni in sorted(sched.cache.snapshot.node_infos, key=lambda n: n.name)]
    return SimulationResult(label, keys, placements, results.all(), usage, list(cluster.deleted),
                            cluster if keep_cluster else None)

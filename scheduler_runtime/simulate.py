"""Offline replay: schedule pods onto a cluster snapshot with a given config and report the outcome.

Pods bound in the snapshot stay where they are. Pods the snapshot holds without a node (what a
`kubectl get pods -o yaml` of a live cluster contains) are scheduled with the `--pods` ones, and every one
of them gets an outcome: scheduled to a node, pending with kube-scheduler's reason, preempted (by whom),
or not for this scheduler (another schedulerName, or being deleted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster import apishape, fieldcheck
from .cluster.memory import MemoryCluster, load_objects
from .config.profiles import DEFAULT_SCHEDULER, not_served_message, profile_names
from .errors import InputError
from .framework.registry import Registry
from .objects import Pod
from .quantity import format_amount
from .results import AttemptResult, ResultStore
from .scheduler import Decision, Scheduler
from .simdevices import DeviceUsage, device_usage

_PREEMPTED_BY = re.compile(r"^Preempted by pod (\S+) on node (\S+)")


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


@dataclass(frozen=True)
class Outcome:
    """What happened to one pod: `status` is Scheduled, Pending, Preempted or Skipped; `detail` says why."""

    status: str
    node: str | None = None
    detail: str = ""
    by: str = ""  # Preempted: the preemptor's namespace/name


@dataclass
class Preemption:
    victim: str
    by: str
    node: str


@dataclass
class SimulationResult:
    label: str
    pods: list[str]  # pod keys: the snapshot's unbound pods (file order), then --pods (input order)
    placements: dict[str, str | None]
    results: dict[str, AttemptResult]
    usage: list[NodeUsage]
    preempted: list[str] = field(default_factory=list)
    cluster: MemoryCluster | None = None
    #: pods the profiles do not schedule (another schedulerName, being deleted): key -> why
    skipped: dict[str, str] = field(default_factory=dict)
    #: keys of `pods` that came unbound in the snapshot rather than from --pods
    from_snapshot: list[str] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    #: per node before anything was scheduled (the snapshot's bound pods only)
    usage_before: list[NodeUsage] = field(default_factory=list)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: DRA devices per node (ResourceSlices), allocated before and after
    devices: dict[str, DeviceUsage] = field(default_factory=dict)
    #: pods bound in the snapshot: key -> node (they stay, unless preempted)
    snapshot_bound: dict[str, str] = field(default_factory=dict)
    #: pending pods with ResourceClaims or DRA-backed extended resources: key -> plain-words lines (the
    #: explanation describe-pod gives: which class, how many free matching devices, which object and field)
    explanations: dict[str, list[str]] = field(default_factory=dict)

    @property
    def pending(self) -> list[str]:
        """Pods left without a node (preempted ones included), not counting those for other schedulers."""
        return [p for p in self.pods if not self.placements.get(p) and p not in self.skipped]

    def outcome(self, key: str) -> Outcome:
        node = self.placements.get(key)
        if node:
            return Outcome("Scheduled", node)
        if key in self.snapshot_bound and key not in self.preempted:
            return Outcome("Scheduled", self.snapshot_bound[key], f"stays on {self.snapshot_bound[key]} (bound in "
                                                                  "the snapshot)")
        if key in self.skipped:
            return Outcome("Skipped", None, self.skipped[key])
        if key in self.preempted:
            p = next((x for x in self.preemptions if x.victim == key), None)
            if p is not None:
                return Outcome("Preempted", None, f"preempted by {p.by} on {p.node}", by=p.by)
            return Outcome("Preempted", None, "deleted to make room for a higher-priority pod")
        r = self.results.get(key)
        if r is not None and r.message:
            return Outcome("Pending", None, r.message)
        return Outcome("Pending", None, "no scheduling attempt was made")

    def to_dict(self) -> dict[str, Any]:
        out_pods = []
        for key in self.pods:
            r = self.results.get(key)
            node = self.placements.get(key)
            entry: dict[str, Any] = {"pod": key, "node": node}
            if key in self.from_snapshot:
                entry["source"] = "snapshot"
            if not node:
                oc = self.outcome(key)
                entry["status"] = oc.status
                if oc.status == "Preempted":
                    entry["status"] = "preempted"  # the spelling `-o json` has always used
                    if oc.by:
                        entry["preemptedBy"] = oc.by
                if oc.status == "Skipped" or (oc.status == "Preempted" and oc.by):
                    entry["message"] = oc.detail
                elif r is not None:
                    entry["message"] = r.message
                if self.explanations.get(key):
                    entry["explanation"] = self.explanations[key]
            if r is not None and r.extenders:
                entry["extenders"] = r.extenders
            out_pods.append(entry)
        return {"variant": self.label, "pods": out_pods, "pending": len(self.pending),
                "preempted": self.preempted,
                "preemptions": [{"pod": p.victim, "by": p.by, "node": p.node} for p in self.preemptions],
                "nodes": [u.to_dict() for u in self.usage],
                "nodesBefore": [u.to_dict() for u in self.usage_before],
                **({"devices": {n: d.to_dict() for n, d in self.devices.items()}} if self.devices else {})}


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


def _usage(sched: Scheduler) -> list[NodeUsage]:
    return [NodeUsage(ni.name, dict(ni.allocatable), dict(ni.requested), len(ni.pods))
            for ni in sorted(sched.cache.snapshot.node_infos, key=lambda n: n.name)]


def _unbound_in_snapshot(cluster: MemoryCluster, profiles: set[str]) -> tuple[list[str], dict[str, str]]:
    """The snapshot's pods without a node that are not finished: (keys this scheduler will try, in file
    order; key -> why the others are left alone)."""
    keys: list[str] = []
    skipped: dict[str, str] = {}
    for raw in cluster.list("pods"):
        spec = raw.get("spec") or {}
        meta = raw.get("metadata") or {}
        if spec.get("nodeName") or (raw.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        name = spec.get("schedulerName") or "default-scheduler"
        if meta.get("deletionTimestamp"):
            skipped[key] = "being deleted (metadata.deletionTimestamp is set): no scheduler places it"
        elif name not in profiles:
            skipped[key] = (f"not for this scheduler: schedulerName={name}, the config's profiles are "
                            f"{', '.join(sorted(profiles))}")
        keys.append(key)
    return keys, skipped


def _preemptions(cluster: MemoryCluster) -> list[Preemption]:
    """Who preempted whom, from the Preempted events the victims got (they name the preemptor's UID)."""
    uid_to_key = {str((p.get("metadata") or {}).get("uid")): f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
                  for p in cluster.list("pods")}
    out: list[Preemption] = []
    for victim in cluster.deleted:
        ns, name = victim.split("/", 1)
        by, node = "", ""
        for ev in cluster.events_for(ns, name):
            m = _PREEMPTED_BY.match(ev.note) if ev.reason == "Preempted" else None
            if m:
                by, node = uid_to_key.get(m.group(1), f"pod with uid {m.group(1)} (since deleted)"), m.group(2)
        out.append(Preemption(victim, by, node))
    return out


def never_attempted(sched: Scheduler, raw: dict[str, Any]) -> str:
    """Why a pod left pending never reached a scheduling cycle: its scheduling gates (kube-apiserver's
    SchedulingGated message), or the PreEnqueue plugin that keeps it out of the active queue."""
    spec = raw.get("spec") or {}
    gates = [g.get("name", "") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
    if gates:
        return f"Scheduling is blocked due to non-empty scheduling gates: {', '.join(gates)}"
    fw = sched.frameworks.get(spec.get("schedulerName") or "default-scheduler")
    st = fw.run_pre_enqueue(Pod.from_dict(raw)) if fw is not None else None
    if st is not None:
        return f"not attempted: PreEnqueue plugin {st.plugin or '?'} holds it back: {st.message}"
    return ""


def simulate(cluster_paths: Sequence[str | Path], pod_paths: Sequence[str | Path], config: Any, registry: Registry,
             seed: int = 0, label: str = "default",
             on_decision: Callable[[Decision], None] | None = None, keep_cluster: bool = False,
             plugin_deadline: float = 30.0) -> SimulationResult:
    """Schedule the snapshot's unbound pods and `pod_paths` (in order) on the snapshot in `cluster_paths`;
    pods bound there stay put."""
    cluster = MemoryCluster.from_paths(cluster_paths)
    pods = load_pods_in_order(pod_paths)
    results = ResultStore()
    sched = Scheduler(cluster, config, registry, seed=seed, results=results, observer=on_decision,
                      bind_deadline=plugin_deadline)
    unbound, skipped = _unbound_in_snapshot(cluster, set(sched.frameworks))
    devices_before = device_usage(cluster)
    bound = {f"{(p.get('metadata') or {}).get('namespace') or 'default'}/{p['metadata']['name']}": node
             for p in cluster.list("pods") if (node := (p.get("spec") or {}).get("nodeName"))}
    sched.start()
    before = _usage(sched)
    keys = unbound + create_pods(cluster, pods)
    sched.run(until_idle=True)
    placements: dict[str, str | None] = {}
    for key in keys:
        ns, name = key.split("/", 1)
        raw = cluster.get_pod(ns, name)
        spec = (raw or {}).get("spec") or {}
        placements[key] = spec.get("nodeName") or None
        wanted = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if not placements[key] and key not in skipped and results.get(key) is None \
                and wanted not in profile_names(config):
            # kube-scheduler never takes such a pod: it is left for a scheduler serving that name
            skipped[key] = not_served_message(wanted, config)
        if not placements[key] and raw is not None and results.get(key) is None and key not in skipped:
            blocked = never_attempted(sched, raw)
            if blocked:
                results.put(AttemptResult(key, spec.get("schedulerName") or "default-scheduler", 0, "gated",
                                          message=blocked))
    labels = {n["metadata"]["name"]: dict((n.get("metadata") or {}).get("labels") or {})
              for n in cluster.list("nodes")}
    devices = device_usage(cluster, devices_before)
    pending = [k for k in keys if not placements[k] and k not in skipped]
    return SimulationResult(label, keys, placements, results.all(), _usage(sched), list(cluster.deleted),
                            cluster if keep_cluster else None, skipped=skipped, from_snapshot=unbound,
                            preemptions=_preemptions(cluster), usage_before=before, node_labels=labels,
                            devices=devices, snapshot_bound=bound, explanations=explain_devices(cluster, pending))


def explain_devices(cluster: MemoryCluster, keys: list[str]) -> dict[str, list[str]]:
    """describe-pod's plain-words DRA explanation for each pending pod that has claims or extended resources
    a DeviceClass may back (in the cluster's state after the run)."""
    from .describe import needs_device_explanation
    from .objects import Node
    from .plugins.dynamicresources.explain import explain_claims

    out: dict[str, list[str]] = {}
    nodes: dict[str, Node] | None = None
    for key in keys:
        ns, name = key.split("/", 1)
        raw = cluster.get_pod(ns, name)
        if raw is None or not needs_device_explanation(raw):
            continue
        if nodes is None:
            nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in cluster.list("nodes")}
        lines = explain_claims(raw, cluster.list, nodes)  # never raises: a failure is a line of its own
        if lines:
            out[key] = lines
    return out

"""PodGroup bookkeeping for Coscheduling: groups, their members, assigned pods, TTL'd group states.

Mirrors the behaviour of scheduler-plugins' PodGroupManager (pkg/coscheduling/core) at 903da7d:
`permittedPG` and `backedOffPG` are TTL sets, `lastFailedSchedulePG` a time per group, and
`assignedPodsByPG` the pod names assumed or bound per group, fed by Permit and by the pod informer.
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from scheduler_runtime.api import CycleState, InputError, NodeInfo, Pod, format_amount, resource_amount

log = logging.getLogger("ksched.plugins.Coscheduling")

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PODGROUPS = f"podgroups.{GROUP}"
PODGROUP_EVENT_RESOURCE = f"{GROUP}/PodGroup"
PERMIT_STATE_KEY = "PermitCoscheduling"
DEFAULT_WAIT_SECONDS = 60.0
#: go-cache's default expiration of permittedPG, used when an entry is added with a zero TTL
PERMITTED_DEFAULT_TTL = 3.0
_ZERO_TIME = -62135596800.0  # Go's zero time.Time (year 1) as a Unix timestamp: before everything
_TERMINAL = ("Succeeded", "Failed")


def _terminal(raw: dict[str, Any]) -> bool:
    return (raw.get("status") or {}).get("phase") in _TERMINAL


class PermitStatus(Enum):
    NOT_SPECIFIED = "PodGroup not specified"
    NOT_FOUND = "PodGroup not found"
    SUCCESS = "Success"
    WAIT = "Wait"


@dataclass(slots=True)
class PermitState:
    """Written at Permit by a group's first assigned pod: it must activate its siblings."""

    activate: bool = False

    def clone(self) -> PermitState:
        return PermitState(self.activate)


def pod_group_label(pod: Pod) -> str:
    return pod.labels.get(POD_GROUP_LABEL, "")


def pod_group_full_name(pod: Pod) -> str:
    name = pod_group_label(pod)
    return f"{pod.namespace}/{name}" if name else ""


def parse_time(ts: str | None) -> float:
    """RFC 3339 (metav1.Time) to a Unix timestamp; empty gives Go's zero time."""
    if not ts:
        return _ZERO_TIME
    return _dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class PodGroup:
    """The fields of a scheduling.x-k8s.io/v1alpha1 PodGroup the plugin reads."""

    __slots__ = ("name", "namespace", "full_name", "min_member", "min_resources", "schedule_timeout_seconds",
                 "creation_timestamp", "resource_version")

    def __init__(self, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        self.name: str = meta.get("name", "")
        self.namespace: str = meta.get("namespace") or "default"
        self.full_name = f"{self.namespace}/{self.name}"
        mm = spec.get("minMember", 0)
        if isinstance(mm, bool) or not isinstance(mm, int):
            raise InputError(f"Invalid value: {mm!r}: must be an integer", field="spec.minMember")
        self.min_member: int = mm
        mr = spec.get("minResources")
        self.min_resources: dict[str, int] | None = None
        if mr is not None:
            if not isinstance(mr, dict):
                raise InputError("must be a map of resource quantities", field="spec.minResources")
            self.min_resources = {str(k): resource_amount(str(k), v, f"spec.minResources.{k}") for k, v in mr.items()}
        st = spec.get("scheduleTimeoutSeconds")
        if st is not None and (isinstance(st, bool) or not isinstance(st, int)):
            raise InputError(f"Invalid value: {st!r}: must be an integer", field="spec.scheduleTimeoutSeconds")
        self.schedule_timeout_seconds: int | None = st
        self.creation_timestamp = parse_time(meta.get("creationTimestamp"))
        self.resource_version = str(meta.get("resourceVersion") or "")

    def __repr__(self) -> str:
        return f"PodGroup({self.full_name}, minMember={self.min_member})"


def wait_time_seconds(pg: PodGroup | None, schedule_timeout: float | None) -> float:
    """util.GetWaitTimeDuration: the group's scheduleTimeoutSeconds, else the plugin's, else 60 s."""
    if pg is not None and pg.schedule_timeout_seconds is not None:
        return float(pg.schedule_timeout_seconds)
    if schedule_timeout is not None and schedule_timeout != 0:
        return schedule_timeout
    return DEFAULT_WAIT_SECONDS


class TTLSet:
    """Keys that expire, like the go-cache instances upstream uses (expiry is checked on read)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, key: str, ttl: float) -> None:
        with self._lock:
            self._until[key] = self._clock() + ttl

    def __contains__(self, key: str) -> bool:
        with self._lock:
            until = self._until.get(key)
            if until is None:
                return False
            if self._clock() >= until:
                del self._until[key]
                return False
            return True

    def delete(self, key: str) -> None:
        with self._lock:
            self._until.pop(key, None)


@dataclass(slots=True)
class _Member:
    name: str
    gated: bool
    raw: dict[str, Any]


def _is_scalar(name: str) -> bool:
    """framework.Resource keeps these as ScalarResources (extended, hugepages, prefixed native, volumes)."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def node_leftover(info: NodeInfo, pg_full_name: str) -> dict[str, int]:
    """Allocatable minus requested on a node, as if the pods of `pg_full_name` were not there."""
    alloc = info.allocatable
    requested = dict(info.requested)
    npods = 0
    for p in info.pods:
        if pod_group_full_name(p) == pg_full_name:
            for k, v in p.requests.items():
                requested[k] = requested.get(k, 0) - v
        else:
            npods += 1
    left = {
        "cpu": alloc.get("cpu", 0) - requested.get("cpu", 0),
        "memory": alloc.get("memory", 0) - requested.get("memory", 0),
        "ephemeral-storage": alloc.get("ephemeral-storage", 0) - requested.get("ephemeral-storage", 0),
        "pods": alloc.get("pods", 0) - npods,
    }
    for k, v in alloc.items():
        if _is_scalar(k):
            left[k] = v - requested.get(k, 0)
    return left


def check_cluster_resource(nodes: Iterable[NodeInfo], request: dict[str, int], pg_full_name: str) -> str | None:
    """Greedily cover `request` with the nodes' leftovers; None when covered, else the gap message."""
    remaining = dict(request)
    for info in nodes:
        if info is None or info.node is None:
            continue
        left = node_leftover(info, pg_full_name)
        for name in list(remaining):
            q = remaining[name] - left.get(name, 0)
            if q <= 0:
                del remaining[name]
            else:
                remaining[name] = q
        if not remaining:
            return None
    gap = " ".join(f"{k}:{format_amount(k, v)}" for k, v in sorted(remaining.items()))
    return f"resource gap: map[{gap}]"


class PodGroupManager:
    """Group state shared by the plugin's extension points; thread-safe (binding threads feed the informer)."""

    def __init__(self, handle: Any, schedule_timeout: float, *, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.handle = handle
        self.schedule_timeout = schedule_timeout
        self.clock = clock
        self.wall_clock = wall_clock
        self.permitted = TTLSet(clock)
        self.backed_off = TTLSet(clock)
        self.last_failed: dict[str, float] = {}
        self._lock = threading.RLock()
        self._assigned: dict[str, set[str]] = {}
        self._members: dict[str, dict[str, _Member]] = {}  # pgFullName -> uid -> member
        self._member_of: dict[str, str] = {}  # uid -> pgFullName
        self._pgs: dict[str, PodGroup] = {}  # pgFullName -> parsed PodGroup, kept current by the store
        self._started = False

    # ------------------------------------------------------------------ informers
    def start(self) -> None:
        """Watch pods (members, assigned) and open the PodGroup store; idempotent."""
        with self._lock:
            if self._started:
                return
            cluster = getattr(self.handle, "cluster", None)
            if cluster is None:
                raise RuntimeError("Coscheduling needs a cluster backend (handle.cluster) to read PodGroups")
            pg_store = self.handle.informer(PODGROUPS)
            pg_store.add_handler(self.on_pod_group_event)
            for raw in pg_store.list():
                self.on_pod_group_event("ADDED", None, raw)
            pods = self.handle.informer("pods")
            pods.add_handler(self.on_pod_event)  # handler first, then the listing: nothing falls in between
            for raw in pods.list():
                self.on_pod_event("ADDED", None, raw)
            self._started = True

    def on_pod_event(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Mirror kube-scheduler's pod informer, which leaves out Succeeded and Failed pods: a pod that
        finishes is a deletion for it, one that is created finished is never seen."""
        if new is not None and _terminal(new):
            if action == "ADDED" or old is None or _terminal(old):
                return
            action, old, new = "DELETED", old, None
        if action == "DELETED":
            if old is None:
                return
            self._forget_member(old)
            spec = old.get("spec") or {}
            if spec.get("nodeName"):
                self.unreserve_raw(old)
            return
        if new is None:
            return
        self._record_member(new)
        if action == "ADDED" and (new.get("spec") or {}).get("nodeName"):
            full = _raw_full_name(new)
            if full:
                with self._lock:
                    self._assigned.setdefault(full, set()).add(new["metadata"]["name"])

    def _record_member(self, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        full = _raw_full_name(raw)
        with self._lock:
            prev = self._member_of.get(uid)
            if prev is not None and prev != full:
                self._members.get(prev, {}).pop(uid, None)
                del self._member_of[uid]
            if not full:
                return
            gated = bool((raw.get("spec") or {}).get("schedulingGates"))
            self._members.setdefault(full, {})[uid] = _Member(meta.get("name", ""), gated, raw)
            self._member_of[uid] = full

    def _forget_member(self, raw: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        with self._lock:
            full = self._member_of.pop(uid, None)
            if full is not None:
                members = self._members.get(full)
                if members is not None:
                    members.pop(uid, None)
                    if not members:
                        del self._members[full]

    def members(self, pg_full_name: str) -> list[_Member]:
        """Every pod (any phase, bound or not) labelled into the group, as the pod lister returns them."""
        if not self._started:
            self.start()
        with self._lock:
            return list(self._members.get(pg_full_name, {}).values())

    # ------------------------------------------------------------------ PodGroups
    def get_pod_group(self, pod: Pod) -> tuple[str, PodGroup | None]:
        """(pgFullName, PodGroup or None); ("", None) for a pod without the label."""
        name = pod_group_label(pod)
        if not name:
            return "", None
        full = f"{pod.namespace}/{name}"
        return full, self.pod_group(pod.namespace, name)

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        if not self._started:
            self.start()
        return self._pgs.get(f"{namespace}/{name}")

    def on_pod_group_event(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Parse each PodGroup once per change (QueueSort reads it on every comparison)."""
        if action == "DELETED" or new is None:
            meta = (old or {}).get("metadata") or {}
            self._pgs.pop(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", None)
            return
        meta = new.get("metadata") or {}
        full = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        try:
            self._pgs[full] = PodGroup(new)
        except (InputError, ValueError) as exc:
            log.warning("PodGroup %s is invalid, treating it as absent: %s", full, exc)
            self._pgs.pop(full, None)

    # ------------------------------------------------------------------ state
    def assigned_count(self, pg_full_name: str) -> int:
        with self._lock:
            return len(self._assigned.get(pg_full_name, ()))

    def assigned(self, pg_full_name: str) -> set[str]:
        with self._lock:
            return set(self._assigned.get(pg_full_name, ()))

    def backoff_pod_group(self, pg_full_name: str, seconds: float) -> None:
        if seconds == 0:
            return
        self.backed_off.add(pg_full_name, seconds)

    def mark_failure(self, pg_full_name: str) -> None:
        self.last_failed[pg_full_name] = self.wall_clock()

    def clear_failure(self, pg_full_name: str) -> None:
        self.last_failed.pop(pg_full_name, None)

    def delete_permitted(self, pg_full_name: str) -> None:
        self.permitted.delete(pg_full_name)

    def creation_timestamp(self, pod: Pod, ts: float) -> float:
        """The time QueueSort orders a pod by: its group's last failure, else the group's creation time."""
        name = pod_group_label(pod)
        if not name:
            return ts
        full = f"{pod.namespace}/{name}"
        failed = self.last_failed.get(full)
        if failed is not None:
            return failed
        pg = self.pod_group(pod.namespace, name)
        if pg is None:
            return ts
        return pg.creation_timestamp

    # ------------------------------------------------------------------ extension-point logic
    def pre_filter(self, pod: Pod, nodes: Iterable[NodeInfo]) -> str | None:
        """None when the pod may go on; else the reason (the plugin makes it UnschedulableAndUnresolvable)."""
        full, pg = self.get_pod_group(pod)
        if pg is None:
            return None
        if full in self.backed_off:
            return f"podGroup {full} failed recently"
        members = self.members(full)
        quorum_gap = pg.min_member - len(members)
        if quorum_gap > 0:
            return (f"pre-filter pod {pod.name} cannot find enough sibling pods, current pods number: "
                    f"{len(members)}, minMember of group: {pg.min_member}")
        for m in members:
            if m.gated:
                quorum_gap += 1
            if quorum_gap > 0:
                return f"pre-filter pod {pod.name} cannot proceed due to gated pods in the same PodGroup"
        if pg.min_resources is None:
            return None
        if full in self.permitted:
            return None
        request = dict(pg.min_resources)
        request["pods"] = pg.min_member
        gap = check_cluster_resource(nodes, request, full)
        if gap is not None:
            log.debug("PreFilter of pod group %s failed: %s", full, gap)
            return gap
        self.permitted.add(full, self.schedule_timeout or PERMITTED_DEFAULT_TTL)
        return None

    def permit(self, state: CycleState, pod: Pod) -> PermitStatus:
        full, pg = self.get_pod_group(pod)
        if not full:
            return PermitStatus.NOT_SPECIFIED
        if pg is None:
            return PermitStatus.NOT_FOUND
        with self._lock:
            assigned = self._assigned.setdefault(full, set())
            assigned.add(pod.name)
            n = len(assigned)
        if n >= pg.min_member:
            return PermitStatus.SUCCESS
        if n == 1:
            # The group's first assumed pod: its siblings may be parked in the unschedulable pool
            # (for example after a failed attempt); it asks for them to be moved to activeQ.
            state.write(PERMIT_STATE_KEY, PermitState(activate=True))
        return PermitStatus.WAIT

    def siblings_to_activate(self, state: CycleState, pod: Pod) -> list[Pod]:
        """The other pods of the group, when this pod's Permit asked for activation; else []."""
        ps = state.get(PERMIT_STATE_KEY)
        if not isinstance(ps, PermitState) or not ps.activate:
            return []
        full = pod_group_full_name(pod)
        if not full:
            return []
        out = []
        for m in self.members(full):
            if (m.raw.get("metadata") or {}).get("uid") == pod.uid or (m.raw.get("spec") or {}).get("nodeName"):
                continue  # itself, or bound: not in the queue, nothing to activate
            try:
                out.append(Pod.from_dict(m.raw))
            except InputError as exc:
                log.debug("cannot activate sibling %s of %s: %s", m.name, full, exc)
        return out

    def unreserve(self, pod: Pod) -> None:
        full = pod_group_full_name(pod)
        if full:
            self._unassign(full, pod.name)

    def unreserve_raw(self, raw: dict[str, Any]) -> None:
        full = _raw_full_name(raw)
        if full:
            self._unassign(full, (raw.get("metadata") or {}).get("name", ""))

    def _unassign(self, full: str, name: str) -> None:
        with self._lock:
            assigned = self._assigned.get(full)
            if assigned is not None:
                assigned.discard(name)
                if not assigned:
                    del self._assigned[full]


def _raw_full_name(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    name = (meta.get("labels") or {}).get(POD_GROUP_LABEL, "")
    return f"{meta.get('namespace') or 'default'}/{name}" if name else ""

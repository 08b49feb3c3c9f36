"""Coscheduling: all-or-nothing scheduling of a PodGroup ("gang"), as scheduler-plugins does it.

Pods join a group with the label `scheduling.x-k8s.io/pod-group: <PodGroup name>` (same namespace).
The group's pods are sorted together (QueueSort), a group that cannot possibly start is turned away
early (PreFilter), each assumed member waits at Permit until `minMember` members are assumed or bound,
and one failure releases the waiting members (PostFilter / Unreserve). See README.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from scheduler_runtime.api import (
    NOMINATING_NOOP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeList,
    Plugin,
    PluginArgs,
    Pod,
    PostFilterResult,
    QueuedPodInfo,
    Status,
)

from .core import (
    GROUP,
    PODGROUP_EVENT_RESOURCE,
    PermitStatus,
    PodGroupManager,
    pod_group_full_name,
    pod_group_label,
    wait_time_seconds,
)

log = logging.getLogger("ksched.plugins.Coscheduling")


class CoschedulingArgs(PluginArgs):
    """Defaults and bounds as scheduler-plugins' v1 CoschedulingArgs."""

    permit_waiting_time_seconds: int = Field(60, ge=0)
    pod_group_backoff_seconds: int = Field(0, ge=0)
    pod_group_reject_percentage: int = Field(10, ge=0, le=100)


class Coscheduling(Plugin):
    """QueueSort, PreFilter, PostFilter, Reserve/Unreserve and Permit for PodGroups."""

    name = "Coscheduling"
    args_model = CoschedulingArgs
    rbac: ClassVar[list[dict[str, Any]]] = [
        {"apiGroups": [GROUP], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},
    ]

    def __init__(self, args: CoschedulingArgs | None = None, handle: Any = None, *,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__(args if args is not None else CoschedulingArgs(), handle)
        a = self.args
        self.schedule_timeout = float(a.permit_waiting_time_seconds)
        self.pg_backoff: float | None = float(a.pod_group_backoff_seconds) if a.pod_group_backoff_seconds > 0 \
            else None
        self.pg_reject_threshold = a.pod_group_reject_percentage / 100.0
        self.mgr = PodGroupManager(handle, self.schedule_timeout, clock=clock, wall_clock=wall_clock)
        # QueuedPodInfo timestamps come from the queue's monotonic clock; PodGroup creation times are wall
        # clock. This offset turns the former into the latter so QueueSort compares like with like.
        self._mono_to_wall = wall_clock() - time.monotonic()
        if handle is not None and getattr(handle, "cluster", None) is not None:
            self.mgr.start()

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(PODGROUP_EVENT_RESOURCE, ActionType.Add | ActionType.Update)),
        ]

    # ------------------------------------------------------------------ QueueSort
    def _initial_attempt(self, qpi: QueuedPodInfo) -> float:
        ts = qpi.initial_attempt_timestamp if qpi.initial_attempt_timestamp is not None else qpi.timestamp
        return ts + self._mono_to_wall

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Higher priority first; then earlier group (or pod) time; then pod namespace/name."""
        p1, p2 = a.pod, b.pod
        if p1.priority != p2.priority:
            return p1.priority > p2.priority
        t1 = self.mgr.creation_timestamp(p1, self._initial_attempt(a))
        t2 = self.mgr.creation_timestamp(p2, self._initial_attempt(b))
        if t1 == t2:
            return p1.key < p2.key
        return t1 < t2

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snapshot = self.handle.snapshot if self.handle is not None else None
        all_nodes = snapshot.node_infos if snapshot is not None else list(nodes)
        reason = self.mgr.pre_filter(pod, all_nodes)
        if reason is not None:
            # UnschedulableAndUnresolvable: no preemption attempt for a group that cannot start anyway
            log.debug("PreFilter failed for pod %s: %s", pod.key, reason)
            return Status.unresolvable(reason)
        return None

    # ------------------------------------------------------------------ PostFilter
    def _reject_waiting(self, namespace: str, pg_name: str, message: str) -> int:
        n = 0
        if self.handle is None:
            return n
        for wp in self.handle.iterate_waiting_pods():
            p = wp.pod
            if p.namespace == namespace and pod_group_label(p) == pg_name:
                log.debug("%s: rejecting waiting pod %s", message, p.key)
                wp.reject(self.name, message)
                n += 1
        return n

    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult, Status]:
        noop = PostFilterResult("", NOMINATING_NOOP)
        full, pg = self.mgr.get_pod_group(pod)
        if pg is None:
            return noop, Status.unschedulable("can not find pod group")
        assigned = self.mgr.assigned_count(full)
        if assigned >= pg.min_member:
            # enough members are assumed or bound already: do not reject the whole group
            return noop, Status.unschedulable()
        not_assigned = float(pg.min_member - assigned) / float(pg.min_member)
        if not_assigned <= self.pg_reject_threshold:
            # a small gap: later members may still complete the group
            return noop, Status.unschedulable()
        self._reject_waiting(pod.namespace, pg.name, "optimistic rejection in PostFilter")
        if self.pg_backoff is not None and len(self.mgr.members(full)) >= pg.min_member:
            self.mgr.backoff_pod_group(full, self.pg_backoff)
        self.mgr.delete_permitted(full)
        self.mgr.mark_failure(full)
        return noop, Status.unschedulable(
            f"PodGroup {full} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter")

    # ------------------------------------------------------------------ Permit
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        wait = self.schedule_timeout
        s = self.mgr.permit(state, pod)
        if s is PermitStatus.NOT_SPECIFIED:
            return None, 0.0
        if s is PermitStatus.NOT_FOUND:
            return Status.unschedulable("PodGroup not found"), 0.0
        full = pod_group_full_name(pod)
        if s is PermitStatus.WAIT:
            log.info("Pod %s is waiting to be scheduled to node %s", pod.key, node_name)
            _, pg = self.mgr.get_pod_group(pod)
            w = wait_time_seconds(pg, self.schedule_timeout)
            if w != 0:
                wait = w
            siblings = self.mgr.siblings_to_activate(state, pod)
            if siblings and self.handle is not None:
                self.handle.activate(siblings)
            return Status.wait(), wait
        # SUCCESS: the quorum is reached; let every waiting member of the group through
        self.mgr.clear_failure(full)
        for wp in self.handle.iterate_waiting_pods() if self.handle is not None else ():
            if pod_group_full_name(wp.pod) == full:
                log.debug("Permit allows pod %s", wp.pod.key)
                wp.allow(self.name)
        return None, 0.0

    # ------------------------------------------------------------------ Reserve / Unreserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        full, pg = self.mgr.get_pod_group(pod)
        if pg is None:
            return
        self.mgr.unreserve(pod)
        self._reject_waiting(pod.namespace, pg.name, "rejection in Unreserve")
        self.mgr.delete_permitted(full)
        self.mgr.mark_failure(full)

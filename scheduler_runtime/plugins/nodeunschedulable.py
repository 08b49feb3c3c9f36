"""NodeUnschedulable: cordoned nodes (spec.unschedulable) only take pods that tolerate the taint.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.plugin import FilterBatch, Plugin
from ..framework.snapshot import Snapshot
from ..framework.status import Status
from ..framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo, all_ok
from ..objects import Node, Pod, Taint, tolerates_all

REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def _fits(pod: Pod, node: Node) -> bool:
    return not node.unschedulable or tolerates_all(pod.tolerations, UNSCHEDULABLE_TAINT)


class NodeUnschedulable(Plugin):
    name = "NodeUnschedulable"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.TOLERATIONS, signers.tolerations(pod))]

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.node is None or _fits(pod, node_info.node):
            return None
        return Status.unresolvable(REASON)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        group_ok = np.fromiter((_fits(pod, n) for n in snapshot.group_nodes), dtype=bool,
                               count=len(snapshot.group_nodes))
        ok = all_ok(len(snapshot)) if group_ok.all() else group_ok[snapshot.table.groups]
        return FilterBatch(ok, Status.unresolvable(REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeTaint),
                                     _after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodToleration), _after_toleration_change)]


def _after_node_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterNodeChange: a node added schedulable, or uncordoned."""
    if not isinstance(new, Node):
        return QUEUE  # kube: an unexpected object is an error, which requeues
    if (old is None and not new.unschedulable) or (isinstance(old, Node) and old.unschedulable
                                                   and not new.unschedulable):
        return QUEUE
    return QUEUE_SKIP


def _after_toleration_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodTolerationChange: the pod itself now tolerates the unschedulable taint."""
    if not isinstance(new, Pod):
        return QUEUE
    if new.uid == pod.uid and tolerates_all(new.tolerations, UNSCHEDULABLE_TAINT):
        return QUEUE
    return QUEUE_SKIP

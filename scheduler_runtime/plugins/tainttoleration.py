"""TaintToleration: NoSchedule/NoExecute taints filter; untolerated PreferNoSchedule taints lower the score.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin
from ..framework.snapshot import Snapshot
from ..framework.status import MAX_SCORE, Status
from ..framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    NodeInfo,
    NodeScore,
    all_ok,
)
from ..objects import Node, Pod, Toleration, tolerates_all

REASON = "node(s) had untolerated taint(s)"
_PRESCORE = "PreScoreTaintToleration"


def _filter_ok(pod: Pod, node: Node) -> bool:
    for t in node.taints:
        if t.effect in ("NoSchedule", "NoExecute") and not tolerates_all(pod.tolerations, t):
            return False
    return True


def _prefer_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


def _count_intolerable(tols: tuple[Toleration, ...], node: Node) -> int:
    return sum(1 for t in node.taints if t.effect == "PreferNoSchedule" and not tolerates_all(tols, t))


class TaintToleration(Plugin):
    name = "TaintToleration"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.TOLERATIONS, signers.tolerations(pod))]

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.node is None or _filter_ok(pod, node_info.node):
            return None
        return Status.unresolvable(REASON)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        groups = snapshot.group_nodes
        group_ok = np.fromiter((_filter_ok(pod, n) for n in groups), dtype=bool, count=len(groups))
        ok = all_ok(len(snapshot)) if group_ok.all() else group_ok[snapshot.table.groups]
        return FilterBatch(ok, Status.unresolvable(REASON))

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> None:
        state.write(_PRESCORE, _prefer_tolerations(pod))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        tols = state.get(_PRESCORE)
        if tols is None:
            tols = _prefer_tolerations(pod)
        return _count_intolerable(tols, node_info.node) if node_info.node is not None else 0

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        tols = state.get(_PRESCORE)
        if tols is None:
            tols = _prefer_tolerations(pod)
        groups = snapshot.group_nodes
        per_group = np.fromiter((_count_intolerable(tols, n) for n in groups), dtype=np.int64, count=len(groups))
        return per_group[snapshot.table.groups[rows]]

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        arr = np.array([s.score for s in scores], dtype=np.int64)
        for s, v in zip(scores, self.normalize_score_batch(state, pod, np.zeros(0), arr).tolist(), strict=True):
            s.score = v
        return None

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=True)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeTaint),
                                     _after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodToleration), _after_toleration_change)]


def _after_node_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterNodeChange: the node's NoSchedule/NoExecute taints went from untolerated (or the node
    is new) to tolerated."""
    if not isinstance(new, Node):
        return QUEUE  # kube: an unexpected object is an error, which requeues
    was_untolerated = not isinstance(old, Node) or not _filter_ok(pod, old)
    return QUEUE if was_untolerated and _filter_ok(pod, new) else QUEUE_SKIP


def _after_toleration_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodTolerationChange: the pod itself got a toleration."""
    if not isinstance(new, Pod):
        return QUEUE
    return QUEUE if new.uid == pod.uid else QUEUE_SKIP


def default_normalize(scores: np.ndarray, reverse: bool) -> np.ndarray:
    """kube's DefaultNormalizeScore: scale to [0,100] by the max (truncating), optionally reversed."""
    if not len(scores):
        return scores
    m = int(scores.max())
    if m == 0:
        return np.full(len(scores), MAX_SCORE if reverse else 0, dtype=np.int64)
    out = MAX_SCORE * scores // m
    return MAX_SCORE - out if reverse else out

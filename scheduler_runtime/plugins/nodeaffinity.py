"""NodeAffinity: nodeSelector + required node affinity filter; preferred terms score.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import Handle, SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin, PluginArgs
from ..framework.snapshot import HOSTNAME_LABEL, Snapshot
from ..framework.status import Status
from ..framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    NodeInfo,
    NodeScore,
    PreFilterResult,
)
from ..objects import Node, NodeSelector, NodeSelectorTerm, Pod, PreferredSchedulingTerm
from .tainttoleration import default_normalize

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"


class NodeAffinityArgs(PluginArgs):
    added_affinity: dict[str, Any] | None = Field(default=None)


def _has_fields(sel: NodeSelector | None) -> bool:
    return sel is not None and any(t.fields for t in sel.terms)


def _mentions_hostname(pod: Pod, extra: dict[str, Any] | None = None) -> bool:
    """Equivalence groups ignore the hostname label, so selectors on it are evaluated per node."""
    if HOSTNAME_LABEL in pod.node_selector:
        return True
    na = ((pod.raw.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return HOSTNAME_LABEL in repr(na) or (extra is not None and HOSTNAME_LABEL in repr(extra))


class NodeAffinity(Plugin):
    name = "NodeAffinity"
    args_model = NodeAffinityArgs

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.NODE_AFFINITY, signers.node_affinity(pod)),
                SignFragment(signers.NODE_SELECTOR, signers.node_selector(pod))]

    def __init__(self, args: NodeAffinityArgs | None = None, handle: Handle | None = None) -> None:
        super().__init__(args or NodeAffinityArgs(), handle)
        added = self.args.added_affinity or {}
        req = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        path = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        self.added_required = NodeSelector(req, path) if req is not None else None
        self.added_preferred = tuple(
            PreferredSchedulingTerm(int(t.get("weight", 0)), NodeSelectorTerm(
                t.get("preference") or {}, f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"))
            for i, t in enumerate(added.get("preferredDuringSchedulingIgnoredDuringExecution") or []))

    # ---------------------------------------------------------------- filter
    def _pod_ok(self, pod: Pod, node: Node) -> bool:
        for k, v in pod.node_selector.items():
            if node.labels.get(k) != v:
                return False
        return pod.required_node_affinity is None or pod.required_node_affinity.matches(node)

    def _status(self, pod: Pod, node: Node) -> Status | None:
        if self.added_required is not None and not self.added_required.matches(node):
            return Status.unresolvable(REASON_ENFORCED)
        if not self._pod_ok(pod, node):
            return Status.unresolvable(REASON_POD)
        return None

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None,
                                                                               Status | None]:
        if not pod.node_selector and pod.required_node_affinity is None and self.added_required is None:
            return None, self.skipped
        sel = pod.required_node_affinity
        if sel is None or not sel.terms:
            return None, None
        # Terms are ORed, the `metadata.name In` requirements of one term ANDed (intersected).
        names: set[str] = set()
        for term in sel.terms:
            if term.name_values is None:
                return None, None  # a term without a name requirement admits every node
            names |= term.name_values
        if not names:
            return None, Status.unresolvable(REASON_CONFLICT)
        return PreFilterResult(names), None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.node is None:
            return None
        return self._status(pod, node_info.node)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        per_node = (_has_fields(pod.required_node_affinity) or _has_fields(self.added_required)
                    or _mentions_hostname(pod, self.args.added_affinity))
        if per_node:
            statuses = [self._status(pod, ni.node) if ni.node is not None else None for ni in snapshot.node_infos]
            ok = np.fromiter((s is None for s in statuses), dtype=bool, count=len(statuses))
            return FilterBatch(ok, lambda row: statuses[row] or Status.unresolvable(REASON_POD))
        groups = snapshot.group_nodes
        gstat = [self._status(pod, n) for n in groups]
        gok = np.fromiter((s is None for s in gstat), dtype=bool, count=len(gstat))
        table_groups = snapshot.table.groups
        return FilterBatch(gok[table_groups], lambda row: gstat[table_groups[row]] or Status.unresolvable(REASON_POD))

    # ---------------------------------------------------------------- score
    def _terms(self, pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
        return pod.preferred_node_affinity + self.added_preferred

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        err = _preferred_error(pod.preferred_node_affinity)
        if err:
            return Status.as_error(err)
        if not self._terms(pod):
            return self.skipped
        return None

    def _node_score(self, terms: tuple[PreferredSchedulingTerm, ...], node: Node) -> int:
        return sum(t.weight for t in terms if t.weight and t.term.matches(node))

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        return self._node_score(self._terms(pod), node_info.node) if node_info.node is not None else 0

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        terms = self._terms(pod)
        if any(t.term.fields for t in terms) or _mentions_hostname(pod, self.args.added_affinity):
            return np.fromiter((self._node_score(terms, snapshot.node_infos[r].node) for r in rows.tolist()),
                               dtype=np.int64, count=len(rows))
        groups = snapshot.group_nodes
        per_group = np.fromiter((self._node_score(terms, n) for n in groups), dtype=np.int64, count=len(groups))
        return per_group[snapshot.table.groups[rows]]

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        arr = default_normalize(np.array([s.score for s in scores], dtype=np.int64), reverse=False)
        for s, v in zip(scores, arr.tolist(), strict=True):
            s.score = v
        return None

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=False)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel),
                                     self._after_node_change)]

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterNodeChange: a node added matching the pod's required affinity (and the profile's
        addedAffinity), or updated from not matching to matching."""
        if not isinstance(new, Node):
            return QUEUE  # kube: an unexpected object is an error, which requeues
        if self.added_required is not None and not self.added_required.matches(new):
            return QUEUE_SKIP
        if not self._pod_ok(pod, new):
            return QUEUE_SKIP
        if not isinstance(old, Node):
            return QUEUE
        return QUEUE_SKIP if self._pod_ok(pod, old) else QUEUE



def _preferred_error(terms: tuple[PreferredSchedulingTerm, ...]) -> str:
    """NewPreferredSchedulingTerms' error: terms with weight 0 or no requirements are skipped unparsed."""
    errs = [t.term.error for t in terms if t.weight and not t.term.empty and t.term.error]
    return errs[0] if len(errs) == 1 else ("[" + ", ".join(errs) + "]" if errs else "")

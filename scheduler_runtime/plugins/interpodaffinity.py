"""InterPodAffinity: required (anti-)affinity filtering and preferred-term scoring per topology domain.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/interpodaffinity/ (plugin.go, filtering.go,
scoring.go).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from ..config.fielderrors import FieldErrors, invalid
from ..framework.cycle_state import CycleState
from ..framework.nodelist import NodeList
from ..framework.plugin import Plugin, PluginArgs
from ..framework.status import MAX_SCORE, Status
from ..framework.types import ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo, NodeScore
from ..objects import Node, Pod, PodAffinityTerm

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
_PRE_FILTER = "PreFilterInterPodAffinity"
_PRE_SCORE = "PreScoreInterPodAffinity"

Pair = tuple[str, str]


class InterPodAffinityArgs(PluginArgs):
    hard_pod_affinity_weight: int = Field(default=1, json_schema_extra={"minimum": 0, "maximum": 100})

    @model_validator(mode="after")
    def _kube_rules(self) -> InterPodAffinityArgs:
        """kube-scheduler's ValidateInterPodAffinityArgs."""
        w = self.hard_pod_affinity_weight
        if not 0 <= w <= 100:
            raise FieldErrors([(("hardPodAffinityWeight",), invalid(w, "not in valid range [0, 100]"))])
        return self
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass
class _FilterState:
    existing_anti: dict[Pair, int]
    affinity: dict[Pair, int]
    anti: dict[Pair, int]

    def clone(self) -> _FilterState:
        return _FilterState(dict(self.existing_anti), dict(self.affinity), dict(self.anti))


def _inc(d: dict[Pair, int], key: Pair, delta: int) -> None:
    d[key] = d.get(key, 0) + delta


class InterPodAffinity(Plugin):
    name = "InterPodAffinity"
    args_model = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs | None = None, handle: Any = None) -> None:
        super().__init__(args or InterPodAffinityArgs(), handle)

    def _ns_labels(self, ns: str) -> dict[str, str] | None:
        snap = getattr(self.handle, "snapshot", None)
        return snap.namespace_labels.get(ns) if snap is not None else None

    def _term_matches(self, term: PodAffinityTerm, owner_ns: str, other: Pod) -> bool:
        return term.matches(owner_ns, other, self._ns_labels(other.namespace))

    # ---------------------------------------------------------------- filter
    def _account(self, s: _FilterState, pod: Pod, existing: Pod, node: Node, delta: int) -> None:
        for t in existing.anti_affinity_required:
            if t.topology_key in node.labels and self._term_matches(t, existing.namespace, pod):
                _inc(s.existing_anti, (t.topology_key, node.labels[t.topology_key]), delta)
        if pod.affinity_required and all(self._term_matches(t, pod.namespace, existing)
                                         for t in pod.affinity_required):
            for t in pod.affinity_required:
                if t.topology_key in node.labels:
                    _inc(s.affinity, (t.topology_key, node.labels[t.topology_key]), delta)
        for t in pod.anti_affinity_required:
            if t.topology_key in node.labels and self._term_matches(t, pod.namespace, existing):
                _inc(s.anti, (t.topology_key, node.labels[t.topology_key]), delta)

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snap = nodes.snapshot
        if not pod.affinity_required and not pod.anti_affinity_required and not snap.num_required_anti_affinity_pods:
            return Status.skip()
        s = _FilterState({}, {}, {})
        needs_all = bool(pod.affinity_required or pod.anti_affinity_required)
        for ni in snap.node_infos:
            node = ni.node
            if node is None:
                continue
            pods = ni.pods if needs_all else ni.pods_with_required_anti_affinity
            for existing in pods:
                if existing.uid == pod.uid:
                    continue
                self._account(s, pod, existing, node, 1)
        state.write(_PRE_FILTER, s)
        return None

    def add_pod(self, state: CycleState, pod: Pod, to_add: Pod, node_info: NodeInfo) -> None:
        s = state.get(_PRE_FILTER)
        if s is not None and node_info.node is not None:
            self._account(s, pod, to_add, node_info.node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod, node_info: NodeInfo) -> None:
        s = state.get(_PRE_FILTER)
        if s is not None and node_info.node is not None:
            self._account(s, pod, to_remove, node_info.node, -1)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_PRE_FILTER)
        node = node_info.node
        if s is None or node is None:
            return None
        if pod.affinity_required:
            pods_exist = True
            for t in pod.affinity_required:
                val = node.labels.get(t.topology_key)
                if val is None:
                    return Status.unresolvable(REASON_AFFINITY)
                if s.affinity.get((t.topology_key, val), 0) <= 0:
                    pods_exist = False
            if not pods_exist:
                # The first pod of a group that selects itself may go anywhere its terms' keys exist.
                if not (not any(v > 0 for v in s.affinity.values())
                        and all(self._term_matches(t, pod.namespace, pod) for t in pod.affinity_required)):
                    return Status.unresolvable(REASON_AFFINITY)
        for t in pod.anti_affinity_required:
            val = node.labels.get(t.topology_key)
            if val is not None and s.anti.get((t.topology_key, val), 0) > 0:
                return Status.unschedulable(REASON_ANTI)
        if s.existing_anti:
            for k, v in node.labels.items():
                if s.existing_anti.get((k, v), 0) > 0:
                    return Status.unschedulable(REASON_EXISTING_ANTI)
        return None

    # ---------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snap = nodes.snapshot
        has_constraints = bool(pod.affinity_preferred or pod.anti_affinity_preferred)
        ignore_existing = self.args.ignore_preferred_terms_of_existing_pods
        if not has_constraints and (ignore_existing or snap.num_affinity_pods == 0):
            return Status.skip()
        hard = self.args.hard_pod_affinity_weight
        scores: dict[Pair, int] = {}
        for ni in snap.node_infos:
            node = ni.node
            if node is None:
                continue
            pods = ni.pods if has_constraints else ni.pods_with_affinity
            for e in pods:
                if e.uid == pod.uid:
                    continue
                for t in pod.affinity_preferred:
                    if t.topology_key in node.labels and self._term_matches(t, pod.namespace, e):
                        _inc(scores, (t.topology_key, node.labels[t.topology_key]), t.weight)
                for t in pod.anti_affinity_preferred:
                    if t.topology_key in node.labels and self._term_matches(t, pod.namespace, e):
                        _inc(scores, (t.topology_key, node.labels[t.topology_key]), -t.weight)
                if hard > 0:
                    for t in e.affinity_required:
                        if t.topology_key in node.labels and self._term_matches(t, e.namespace, pod):
                            _inc(scores, (t.topology_key, node.labels[t.topology_key]), hard)
                if not ignore_existing:
                    for t in e.affinity_preferred:
                        if t.topology_key in node.labels and self._term_matches(t, e.namespace, pod):
                            _inc(scores, (t.topology_key, node.labels[t.topology_key]), t.weight)
                    for t in e.anti_affinity_preferred:
                        if t.topology_key in node.labels and self._term_matches(t, e.namespace, pod):
                            _inc(scores, (t.topology_key, node.labels[t.topology_key]), -t.weight)
        if not scores:
            return Status.skip()
        state.write(_PRE_SCORE, scores)
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        scores: dict[Pair, int] | None = state.get(_PRE_SCORE)
        node = node_info.node
        if not scores or node is None:
            return 0
        return sum(v for (k, val), v in scores.items() if node.labels.get(k) == val)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        if not scores:
            return None
        lo = min(s.score for s in scores)
        hi = max(s.score for s in scores)
        diff = hi - lo
        for s in scores:
            s.score = int(MAX_SCORE * (s.score - lo) / diff) if diff > 0 else 0
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add | ActionType.UpdatePodLabel
                                                  | ActionType.Delete)),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel))]

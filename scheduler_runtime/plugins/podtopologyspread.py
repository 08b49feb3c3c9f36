"""PodTopologySpread: hard (DoNotSchedule) skew filtering and soft (ScheduleAnyway) scoring.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/podtopologyspread/ (plugin.go, filtering.go,
scoring.go, common.go).

Counting follows kube-scheduler: only nodes that carry every constraint's topology key and pass the
node-inclusion policies count; pods count when they are in the pod's namespace, not terminating, and
match the constraint's selector. Pods without constraints get the system defaults (hostname skew 3,
zone skew 5, ScheduleAnyway) with a selector built from their Services and controllers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator, model_validator

from ..config.fielderrors import (
    FieldErrorList,
    duplicate,
    forbidden,
    invalid,
    label_key_errors,
    not_supported,
    required,
)
from ..framework.cycle_state import CycleState
from ..framework.nodelist import NodeList
from ..framework.plugin import Plugin, PluginArgs
from ..framework.status import MAX_SCORE, Status
from ..framework.types import ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo, NodeScore
from ..objects import LabelSelector, Node, Pod, SpreadConstraint, tolerates_all

REASON = "node(s) didn't match pod topology spread constraints"
REASON_LABEL = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
_PRE_FILTER = "PreFilterPodTopologySpread"
_PRE_SCORE = "PreScorePodTopologySpread"


WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
DEFAULTING_TYPES = ("System", "List")


class DefaultConstraint(PluginArgs):
    """A v1.TopologySpreadConstraint; absent fields hold Go's zero values, which validation then reports."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = Field("", json_schema_extra={"enum": list(WHEN_UNSATISFIABLE)})
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


class PodTopologySpreadArgs(PluginArgs):
    default_constraints: list[DefaultConstraint] = Field(default_factory=list)
    defaulting_type: str = Field("System", json_schema_extra={"enum": list(DEFAULTING_TYPES)})

    @field_validator("defaulting_type")
    @classmethod
    def _default_type(cls, v: str) -> str:
        return v or "System"  # SetDefaults_PodTopologySpreadArgs

    @model_validator(mode="after")
    def _kube_rules(self) -> PodTopologySpreadArgs:
        """kube-scheduler's ValidatePodTopologySpreadArgs, every problem at once."""
        errs = FieldErrorList()
        if self.defaulting_type not in DEFAULTING_TYPES:
            errs.add(("defaultingType",), not_supported(self.defaulting_type, DEFAULTING_TYPES))
        elif self.defaulting_type == "System" and self.default_constraints:
            errs.add(("defaultingType",), invalid(self.defaulting_type, "when .defaultConstraints are not empty"))
        for i, c in enumerate(self.default_constraints):
            p = ("defaultConstraints", i)
            if c.max_skew <= 0:
                errs.add((*p, "maxSkew"), invalid(c.max_skew, "not in valid range (0, inf)"))
            if not c.topology_key:
                errs.add((*p, "topologyKey"), required("can not be empty"))
            else:
                for msg in label_key_errors(c.topology_key):
                    errs.add((*p, "topologyKey"), invalid(c.topology_key, msg))
            if not c.when_unsatisfiable:
                errs.add((*p, "whenUnsatisfiable"), required("can not be empty"))
            elif c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
                errs.add((*p, "whenUnsatisfiable"), not_supported(c.when_unsatisfiable, sorted(WHEN_UNSATISFIABLE)))
            if c.label_selector is not None:
                errs.add((*p, "labelSelector"),
                         forbidden("constraint must not define a selector, as they deduced for each pod"))
            for other in self.default_constraints[:i]:
                if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                    errs.add(p, duplicate(f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
                    break
        errs.raise_if_any()
        return self


SYSTEM_DEFAULTS = (
    (HOSTNAME, 3),
    ("topology.kubernetes.io/zone", 5),
)


def _count_matching(pods: list[Pod], selector: LabelSelector | None, namespace: str) -> int:
    if selector is None:
        return 0
    n = 0
    for p in pods:
        if p.namespace == namespace and p.deletion_timestamp is None and selector.matches(p.labels):
            n += 1
    return n


def _node_matches_pod_affinity(pod: Pod, node: Node) -> bool:
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    return pod.required_node_affinity is None or pod.required_node_affinity.matches(node)


def _included(c: SpreadConstraint, pod: Pod, node: Node) -> bool:
    if c.node_affinity_policy == "Honor" and not _node_matches_pod_affinity(pod, node):
        return False
    if c.node_taints_policy == "Honor":
        for t in node.taints:
            if t.effect in ("NoSchedule", "NoExecute") and not tolerates_all(pod.tolerations, t):
                return False
    return True


def _has_keys(node: Node, constraints: list[SpreadConstraint]) -> bool:
    return all(c.topology_key in node.labels for c in constraints)


@dataclass
class _FilterState:
    constraints: list[SpreadConstraint]
    counts: list[dict[str, int]]  # per constraint: domain value -> matching pods

    def clone(self) -> _FilterState:
        return _FilterState(self.constraints, [dict(c) for c in self.counts])

    def min_match(self, i: int) -> int:
        c = self.constraints[i]
        counts = self.counts[i]
        if not counts:
            return 0
        if c.min_domains is not None and len(counts) < c.min_domains:
            return 0
        return min(counts.values())


@dataclass
class _ScoreState:
    constraints: list[SpreadConstraint]
    ignored: set[str]
    counts: list[dict[str, int]]
    weights: list[float]


class PodTopologySpread(Plugin):
    name = "PodTopologySpread"
    args_model = PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs | None = None, handle: Any = None) -> None:
        super().__init__(args or PodTopologySpreadArgs(), handle)
        a: PodTopologySpreadArgs = self.args
        self.system_defaulted = a.defaulting_type == "System"
        if self.system_defaulted:
            self.defaults = [(k, s, "ScheduleAnyway") for k, s in SYSTEM_DEFAULTS]
        else:
            self.defaults = [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in a.default_constraints]

    # ---------------------------------------------------------------- constraints
    def _default_selector(self, pod: Pod) -> LabelSelector | None:
        cluster = getattr(self.handle, "cluster", None)
        if cluster is None:
            return None
        match: dict[str, str] = {}
        exprs: list[dict[str, Any]] = []
        for svc in cluster.list("services", pod.namespace):
            sel = (svc.get("spec") or {}).get("selector") or {}
            if sel and all(pod.labels.get(k) == v for k, v in sel.items()):
                match.update(sel)
        ref = pod.controller_ref()
        if ref is not None:
            kind_to_res = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
                           "ReplicationController": "replicationcontrollers"}
            res = kind_to_res.get(ref.kind)
            if res is not None:
                for obj in cluster.list(res, pod.namespace):
                    if (obj.get("metadata") or {}).get("name") != ref.name:
                        continue
                    sel = (obj.get("spec") or {}).get("selector") or {}
                    if ref.kind == "ReplicationController":
                        match.update(sel)
                    else:
                        match.update(sel.get("matchLabels") or {})
                        exprs += sel.get("matchExpressions") or []
        if not match and not exprs:
            return None
        return LabelSelector.parse({"matchLabels": match, "matchExpressions": exprs})

    def _constraints(self, pod: Pod, which: str) -> list[SpreadConstraint]:
        if pod.spread_constraints:
            return [c for c in pod.spread_constraints if c.when_unsatisfiable == which]
        defaults = [d for d in self.defaults if d[2] == which]
        if not defaults:
            return []
        sel = self._default_selector(pod)
        if sel is None:
            return []
        return [SpreadConstraint(skew, key, wu, sel, None, "Honor", "Ignore") for key, skew, wu in defaults]

    # ---------------------------------------------------------------- filter
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        constraints = self._constraints(pod, "DoNotSchedule")
        if not constraints:
            return Status.skip()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for ni in nodes.snapshot.node_infos:
            node = ni.node
            if node is None or not _has_keys(node, constraints):
                continue
            for i, c in enumerate(constraints):
                if not _included(c, pod, node):
                    continue
                val = node.labels[c.topology_key]
                counts[i][val] = counts[i].get(val, 0) + _count_matching(ni.pods, c.selector, pod.namespace)
        state.write(_PRE_FILTER, _FilterState(constraints, counts))
        return None

    def _update(self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo, delta: int) -> None:
        s: _FilterState | None = state.get(_PRE_FILTER)
        node = node_info.node
        if s is None or node is None or not _has_keys(node, s.constraints) or other.namespace != pod.namespace:
            return
        for i, c in enumerate(s.constraints):
            if c.selector is None or not c.selector.matches(other.labels) or not _included(c, pod, node):
                continue
            val = node.labels[c.topology_key]
            s.counts[i][val] = s.counts[i].get(val, 0) + delta

    def add_pod(self, state: CycleState, pod: Pod, to_add: Pod, node_info: NodeInfo) -> None:
        self._update(state, pod, to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod, node_info: NodeInfo) -> None:
        self._update(state, pod, to_remove, node_info, -1)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_PRE_FILTER)
        node = node_info.node
        if s is None or node is None:
            return None
        if not _has_keys(node, s.constraints):
            return Status.unresolvable(REASON_LABEL)
        for i, c in enumerate(s.constraints):
            val = node.labels[c.topology_key]
            self_match = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
            skew = s.counts[i].get(val, 0) + self_match - s.min_match(i)
            if skew > c.max_skew:
                return Status.unschedulable(REASON)
        return None

    # ---------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        constraints = self._constraints(pod, "ScheduleAnyway")
        if not constraints:
            return Status.skip()
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        sizes = [0] * len(constraints)
        for ni in nodes:
            node = ni.node
            if node is None:
                continue
            if require_all and not _has_keys(node, constraints):
                ignored.add(ni.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == HOSTNAME or c.topology_key not in node.labels:
                    continue
                val = node.labels[c.topology_key]
                if val not in counts[i]:
                    counts[i][val] = 0
                    sizes[i] += 1
        weights = []
        for i, c in enumerate(constraints):
            size = len(nodes) - len(ignored) if c.topology_key == HOSTNAME else sizes[i]
            weights.append(math.log(size + 2))
        for ni in nodes.snapshot.node_infos:
            node = ni.node
            if node is None or (require_all and not _has_keys(node, constraints)):
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == HOSTNAME or not _included(c, pod, node):
                    continue
                val = node.labels.get(c.topology_key)
                if val is None or val not in counts[i]:
                    continue
                counts[i][val] += _count_matching(ni.pods, c.selector, pod.namespace)
        state.write(_PRE_SCORE, _ScoreState(constraints, ignored, counts, weights))
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        s: _ScoreState | None = state.get(_PRE_SCORE)
        node = node_info.node
        if s is None or node is None or node_info.name in s.ignored:
            return 0
        total = 0.0
        for i, c in enumerate(s.constraints):
            val = node.labels.get(c.topology_key)
            if val is None:
                continue
            if c.topology_key == HOSTNAME:
                cnt = _count_matching(node_info.pods, c.selector, pod.namespace)
            else:
                cnt = s.counts[i].get(val, 0)
            total += cnt * s.weights[i] + (c.max_skew - 1)
        return int(math.copysign(math.floor(abs(total) + 0.5), total))

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        s: _ScoreState | None = state.get(_PRE_SCORE)
        ignored = s.ignored if s is not None else set()
        vals = [x.score for x in scores if x.name not in ignored]
        if not vals:
            for x in scores:
                x.score = 0
            return None
        lo, hi = min(vals), max(vals)
        for x in scores:
            if x.name in ignored:
                x.score = 0
            elif hi == 0:
                x.score = MAX_SCORE
            else:
                x.score = MAX_SCORE * (hi + lo - x.score) // hi
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add | ActionType.UpdatePodLabel
                                                  | ActionType.Delete)),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Delete
                                                  | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint))]


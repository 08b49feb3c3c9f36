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

import numpy as np
from pydantic import Field, field_validator, model_validator

from ..fielderrors import (
    FieldErrorList,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin, PluginArgs
from ..framework.podindex import Topology, selector_key
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
)
from ..labelsel import label_key_errors
from ..objects import LabelSelector, Node, Pod, SpreadConstraint, tolerates_all
from .nodeaffinity import _mentions_hostname

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


def _has_all(tops: list[Topology], n: int) -> np.ndarray:
    """Rows whose node carries every constraint's topology key."""
    out = np.ones(n, dtype=bool)
    for t in tops:
        out &= t.ids >= 0
    return out


@dataclass
class _FilterState:
    """Per constraint: matching pods per topology domain (arrays indexed by the snapshot's domain ids),
    which domains count (`present`), and counts for values outside the index (added by AddPod)."""

    constraints: list[SpreadConstraint]
    topologies: list[Topology]
    counts: list[np.ndarray]
    present: list[np.ndarray]
    extra: list[dict[str, int]]
    _mins: list[int | None]

    def clone(self) -> _FilterState:
        return _FilterState(self.constraints, self.topologies, [c.copy() for c in self.counts],
                            [p.copy() for p in self.present], [dict(e) for e in self.extra], list(self._mins))

    def count(self, i: int, val: str) -> int:
        d = self.topologies[i].index.get(val)
        return int(self.counts[i][d]) if d is not None else self.extra[i].get(val, 0)

    def add(self, i: int, val: str, delta: int) -> None:
        d = self.topologies[i].index.get(val)
        if d is None:
            self.extra[i][val] = self.extra[i].get(val, 0) + delta
        else:
            self.counts[i][d] += delta
            self.present[i][d] = True
        self._mins[i] = None

    def min_match(self, i: int) -> int:
        m = self._mins[i]
        if m is None:
            m = self._mins[i] = self._min_match(i)
        return m

    def _min_match(self, i: int) -> int:
        c = self.constraints[i]
        present = self.present[i]
        n = int(np.count_nonzero(present)) + len(self.extra[i])
        if not n:
            return 0
        if c.min_domains is not None and n < c.min_domains:
            return 0
        vals = [int(self.counts[i][present].min())] if present.any() else []
        return min(vals + list(self.extra[i].values()))


@dataclass
class _ScoreState:
    constraints: list[SpreadConstraint]
    ignored: set[str]
    counts: list[dict[str, int]]
    weights: list[float]


class PodTopologySpread(Plugin):
    name = "PodTopologySpread"
    args_model = PodTopologySpreadArgs

    @property
    def signs_no_pod(self) -> bool:
        """With default constraints (the System defaulting of the default profile) `sign_pod` refuses every
        pod: the batching runtime then knows every signature is None without asking."""
        return bool(self.defaults)

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        if pod.spread_constraints:
            return Status.unschedulable("pods with topology constraints are not signable")
        if self.defaults:
            return Status.unschedulable("pods with default topology constraints are not signable")
        return None

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
    def _matching(self, snap: Snapshot, c: SpreadConstraint, namespace: str) -> np.ndarray:
        """Per row: pods in `namespace`, not terminating, that the constraint's selector matches."""
        sel = c.selector
        if sel is None:
            return np.zeros(len(snap), dtype=np.int64)

        def pred(p: Pod) -> bool:
            return p.namespace == namespace and p.deletion_timestamp is None and sel.matches(p.labels)
        return snap.match_counts(("PodTopologySpread", namespace, selector_key(sel)), pred)

    def _included_rows(self, snap: Snapshot, c: SpreadConstraint, pod: Pod) -> np.ndarray | None:
        """Rows passing the constraint's node-inclusion policies (None: every row)."""
        affinity = c.node_affinity_policy == "Honor" and bool(pod.node_selector or pod.required_node_affinity)
        taints = c.node_taints_policy == "Honor"
        if not affinity and not taints:
            return None
        infos = snap.node_infos
        sel = pod.required_node_affinity
        if affinity and ((sel is not None and any(t.fields for t in sel.terms)) or _mentions_hostname(pod)):
            return np.fromiter((ni.node is not None and _included(c, pod, ni.node) for ni in infos), dtype=bool,
                               count=len(infos))
        per_group = np.fromiter((_included(c, pod, g) for g in snap.group_nodes), dtype=bool,
                                count=len(snap.group_nodes))
        return per_group[snap.table.groups]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        constraints = self._constraints(pod, "DoNotSchedule")
        if not constraints:
            return self.skipped
        snap = nodes.snapshot
        tops = [snap.topology(c.topology_key) for c in constraints]
        has_all = _has_all(tops, len(snap))
        counts, present = [], []
        for c, top in zip(constraints, tops, strict=True):
            inc = self._included_rows(snap, c, pod)
            rows = has_all if inc is None else has_all & inc
            ids = top.ids[rows]
            counts.append(np.bincount(ids, weights=self._matching(snap, c, pod.namespace)[rows],
                                      minlength=len(top.values)).astype(np.int64))
            present.append(np.bincount(ids, minlength=len(top.values)) > 0)
        state.write(_PRE_FILTER, _FilterState(constraints, tops, counts, present, [{} for _ in constraints],
                                              [None] * len(constraints)))
        return None

    def _update(self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo, delta: int) -> None:
        s: _FilterState | None = state.get(_PRE_FILTER)
        node = node_info.node
        if s is None or node is None or not _has_keys(node, s.constraints) or other.namespace != pod.namespace:
            return
        for i, c in enumerate(s.constraints):
            if c.selector is None or not c.selector.matches(other.labels) or not _included(c, pod, node):
                continue
            s.add(i, node.labels[c.topology_key], delta)

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
            skew = s.count(i, val) + self_match - s.min_match(i)
            if skew > c.max_skew:
                return Status.unschedulable(REASON)
        return None

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        """`filter` for every row at once, from the same state."""
        s: _FilterState | None = state.get(_PRE_FILTER)
        n = len(snapshot)
        if s is None:
            return FilterBatch(np.ones(n, dtype=bool), Status.unschedulable(REASON))
        tops = [snapshot.topology(c.topology_key) for c in s.constraints]
        has_all = _has_all(tops, n)
        ok = has_all.copy()
        for i, (c, top) in enumerate(zip(s.constraints, tops, strict=True)):
            self_match = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
            per_row = s.counts[i][np.where(top.ids >= 0, top.ids, 0)] if len(s.counts[i]) else np.zeros(n, np.int64)
            ok &= (per_row + self_match - s.min_match(i)) <= c.max_skew
        if has_all.all():  # one Status for every failing row: no per-node objects on the hot path
            return FilterBatch(ok, Status.unschedulable(REASON))
        return FilterBatch(ok, lambda row: Status.unschedulable(REASON) if has_all[row]
                           else Status.unresolvable(REASON_LABEL))

    # ---------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        constraints = self._constraints(pod, "ScheduleAnyway")
        if not constraints:
            return self.skipped
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        snap = nodes.snapshot
        infos = snap.node_infos
        tops = [snap.topology(c.topology_key) for c in constraints]
        has_all = _has_all(tops, len(snap))
        rows = nodes.rows
        ignored_rows = rows[~has_all[rows]] if require_all else rows[:0]
        ignored = {infos[r].name for r in ignored_rows.tolist()}
        kept = rows[has_all[rows]] if require_all else rows
        counts: list[dict[str, int]] = []
        weights = []
        for c, top in zip(constraints, tops, strict=True):
            if c.topology_key == HOSTNAME:
                counts.append({})
                weights.append(math.log(len(nodes) - len(ignored) + 2))
                continue
            ids = top.ids[kept]
            domains = np.bincount(ids[ids >= 0], minlength=len(top.values)) > 0
            weights.append(math.log(int(np.count_nonzero(domains)) + 2))
            if not len(domains):  # no node carries the key: nothing to count
                counts.append({})
                continue
            # every node of a domain seen among the feasible ones counts, feasible or not
            mask = (top.ids >= 0) & domains[np.where(top.ids >= 0, top.ids, 0)]
            if require_all:
                mask &= has_all
            inc = self._included_rows(snap, c, pod)
            if inc is not None:
                mask &= inc
            per_domain = np.bincount(top.ids[mask], weights=self._matching(snap, c, pod.namespace)[mask],
                                     minlength=len(top.values)).astype(np.int64)
            counts.append({top.values[d]: int(per_domain[d]) for d in np.flatnonzero(domains).tolist()})
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

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        """`score` for the given rows, with the same float arithmetic per node."""
        s: _ScoreState | None = state.get(_PRE_SCORE)
        if s is None:
            return np.zeros(len(rows), dtype=np.int64)
        total = np.zeros(len(rows), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            top = snapshot.topology(c.topology_key)
            ids = top.ids[rows]
            has = ids >= 0
            if c.topology_key == HOSTNAME:
                cnt = self._matching(snapshot, c, pod.namespace)[rows]
            else:
                per_domain = np.zeros(len(top.values) + 1, dtype=np.int64)
                for val, n in s.counts[i].items():
                    per_domain[top.index[val]] = n
                cnt = per_domain[np.where(has, ids, len(top.values))]
            total += np.where(has, cnt * s.weights[i] + (c.max_skew - 1), 0.0)
        out = np.copysign(np.floor(np.abs(total) + 0.5), total).astype(np.int64)
        if s.ignored:
            infos = snapshot.node_infos
            out[np.fromiter((infos[r].name in s.ignored for r in rows.tolist()), dtype=bool, count=len(rows))] = 0
        return out

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        s: _ScoreState | None = state.get(_PRE_SCORE)
        ign = np.zeros(len(rows), dtype=bool)
        if s is not None and s.ignored:
            infos = self.handle.snapshot.node_infos
            ign = np.fromiter((infos[r].name in s.ignored for r in rows.tolist()), dtype=bool, count=len(rows))
        vals = scores[~ign]
        if not len(vals):
            return np.zeros(len(rows), dtype=np.int64)
        lo, hi = int(vals.min()), int(vals.max())
        out = np.full(len(rows), MAX_SCORE, dtype=np.int64) if hi == 0 else MAX_SCORE * (hi + lo - scores) // hi
        out[ign] = 0
        return out

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """kube-scheduler 1.36 with queueing hints: the pod's own new tolerations count too (NodeTaintsPolicy)."""
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add | ActionType.UpdatePodLabel
                                                  | ActionType.UpdatePodToleration | ActionType.Delete),
                                     self._after_pod_change),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Delete
                                                  | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint),
                                     self._after_node_change)]

    # ---------------------------------------------------------------- queueing hints
    def _after_pod_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterPodChange: an assigned (or nominated) pod of the pod's namespace added or deleted
        that a hard constraint selects, or relabelled into or out of one; the pod itself getting tolerations
        when a constraint honours taints."""
        if not isinstance(old, Pod | None) or not isinstance(new, Pod | None) or (old is None and new is None):
            return QUEUE  # kube: unexpected objects are an error, which requeues
        for p in (new, old):
            if p is not None and not _involved(p, pod):
                return QUEUE_SKIP
        constraints = self._constraints(pod, "DoNotSchedule")
        if old is not None and new is not None:
            if (pod.uid == new.uid and _spec_list(old, "tolerations") != _spec_list(new, "tolerations")
                    and any(c.node_taints_policy == "Honor" for c in constraints)):
                return QUEUE
            if old.labels == new.labels:
                return QUEUE_SKIP
            return QUEUE if any(_selects(c, old) != _selects(c, new) for c in constraints) else QUEUE_SKIP
        changed = new if new is not None else old
        assert changed is not None
        return QUEUE if any(_selects(c, changed) for c in constraints) else QUEUE_SKIP

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterNodeChange: a node that has every hard constraint's topology key added or
        deleted, one gaining or losing a key, or (having them all) changing a key's value or its taints."""
        if isinstance(old, dict):  # a deleted node arrives as the object the watch delivered
            old = Node.from_dict(old)
        if not isinstance(old, Node | None) or not isinstance(new, Node | None) or (old is None and new is None):
            return QUEUE
        constraints = self._constraints(pod, "DoNotSchedule")
        was = old is not None and _has_keys(old, constraints)
        now = new is not None and _has_keys(new, constraints)
        if old is not None and new is not None:
            if was != now:
                return QUEUE
            moved = any(old.labels.get(c.topology_key, "") != new.labels.get(c.topology_key, "")
                        for c in constraints)
            return QUEUE if now and (moved or _spec_list(old, "taints") != _spec_list(new, "taints")) \
                else QUEUE_SKIP
        return QUEUE if (now if new is not None else was) else QUEUE_SKIP


def _involved(other: Pod, pod: Pod) -> bool:
    """involvedInTopologySpreading: the pod itself, or an assigned or nominated pod of its namespace."""
    if other.uid == pod.uid:
        return True
    return bool(other.node_name or other.nominated_node_name) and other.namespace == pod.namespace


def _selects(c: SpreadConstraint, p: Pod) -> bool:
    return c.selector is not None and c.selector.matches(p.labels)


def _spec_list(obj: Pod | Node, field: str) -> Any:
    """A spec list as the API holds it, absent and empty alike (apimachinery's semantic equality)."""
    return (obj.raw.get("spec") or {}).get(field) or []


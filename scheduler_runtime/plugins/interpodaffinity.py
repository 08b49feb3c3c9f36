"""InterPodAffinity: required (anti-)affinity filtering and preferred-term scoring per topology domain.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/interpodaffinity/ (plugin.go, filtering.go,
scoring.go).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from ..fielderrors import FieldErrors, invalid
from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin, PluginArgs
from ..framework.podindex import (
    AFFINITY_PREFERRED,
    AFFINITY_REQUIRED,
    ANTI_PREFERRED,
    ANTI_REQUIRED,
    DomainCounts,
    Topology,
    per_domain_sums,
    term_key,
)
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
    """Matching pods per (topology key, domain): existing pods' anti-affinity against this pod, this pod's
    affinity and anti-affinity terms against existing pods. `existing_rows`: the rows `existing_anti` rejects,
    when known (dropped whenever AddPod/RemovePod change the counts). `shared`: `existing_anti` is the
    plugin's cached sums, which AddPod/RemovePod copy before they change them (most cycles never do)."""

    existing_anti: DomainCounts
    affinity: DomainCounts
    anti: DomainCounts
    existing_rows: np.ndarray | None = None
    shared: bool = False

    def own_existing_anti(self) -> None:
        """Copy-on-write: make `existing_anti` this state's own before it changes."""
        if self.shared:
            self.existing_anti = self.existing_anti.copy()
            self.shared = False

    def clone(self) -> _FilterState:
        return _FilterState(self.existing_anti.copy(), self.affinity.copy(), self.anti.copy())


def _inc(d: DomainCounts | dict[Pair, int], key: Pair, delta: int) -> None:
    d[key] = d.get(key, 0) + delta


class _ScoreState:
    """Summed term weights per topology domain, as one array per topology key (indexed by domain id)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.topologies: dict[str, Topology] = {}
        self.by_key: dict[str, np.ndarray] = {}
        self.touched = False  # some term matched some pod (even if the weights cancel out)

    def _arr(self, key: str) -> tuple[Topology, np.ndarray]:
        top = self.topologies.get(key)
        if top is None:
            top = self.topologies[key] = self.snap.topology(key)
            self.by_key[key] = np.zeros(len(top.values), dtype=np.int64)
        return top, self.by_key[key]

    def add(self, key: str, per_row: np.ndarray, weight: int) -> None:
        per_domain = per_domain_sums(self.snap.topology(key), per_row)
        if per_domain is None:
            return
        _, arr = self._arr(key)
        arr += weight * per_domain
        self.touched = True

    @classmethod
    def from_pairs(cls, snap: Snapshot, scores: dict[Pair, int]) -> _ScoreState:
        out = cls(snap)
        for (k, v), w in scores.items():
            top, arr = out._arr(k)
            arr[top.index[v]] += w
            out.touched = True
        return out

    def node_score(self, node: Node) -> int:
        total = 0
        for key, arr in self.by_key.items():
            val = node.labels.get(key)
            if val is not None:
                i = self.topologies[key].index.get(val)
                if i is not None:
                    total += int(arr[i])
        return total


class InterPodAffinity(Plugin):
    name = "InterPodAffinity"
    args_model = InterPodAffinityArgs

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        aff = (pod.raw.get("spec") or {}).get("affinity") or {}
        if aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None:
            return Status.unschedulable("pods with InterPodAffinity are not signable")
        # without existing pods' preferred terms, only pods with affinity terms of their own see each other
        if self.args.ignore_preferred_terms_of_existing_pods:
            return None
        return [SignFragment(signers.LABELS, (pod.raw.get("metadata") or {}).get("labels"))]

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
        if pod.affinity_error:
            return Status.unresolvable(f"parsing pod: {pod.affinity_error}")
        snap = nodes.snapshot
        if not pod.affinity_required and not pod.anti_affinity_required and not snap.num_required_anti_affinity_pods:
            return self.skipped
        needs_all = bool(pod.affinity_required or pod.anti_affinity_required)
        if pod.uid in snap.pod_nodes:
            s = self._pre_filter_scan(pod, snap, needs_all)  # the pod itself is in the cache: leave it out
            positive = s.existing_anti.any_positive()
        else:
            existing, rows, positive, shared = self._existing_anti(pod, snap)
            s = _FilterState(existing, DomainCounts(snap), DomainCounts(snap), rows, shared)
            if pod.affinity_required:
                counts = self._matching_all(snap, pod.affinity_required, pod.namespace)
                for t in pod.affinity_required:
                    s.affinity.add_rows(t.topology_key, counts, 1)
            for t in pod.anti_affinity_required:
                s.anti.add_rows(t.topology_key, self._matching_all(snap, (t,), pod.namespace), 1)
        if not needs_all and not positive:
            return self.skipped  # no required terms and no existing pod's anti-affinity matches this pod
        state.write(_PRE_FILTER, s)
        return None

    def _existing_anti(self, pod: Pod, snap: Snapshot) -> tuple[DomainCounts, np.ndarray | None, bool, bool]:
        """Existing pods' required anti-affinity terms that match `pod`, summed per domain, the rows they
        reject, whether any sum is positive and whether the sums are shared. Pods alike (a ReplicaSet's) match
        the same terms: while the term index has not changed, the last pod's sums (shared, copied only if
        AddPod/RemovePod change them) and verdicts are reused. No term matching (the common case): empty
        counts and no rows, so that Filter spends nothing per node on them."""
        terms = snap.terms
        if not snap.num_required_anti_affinity_pods:
            return DomainCounts(snap), None, False, False
        nsl = self._ns_labels(pod.namespace)
        matching = [e for e in terms.entries(snap.node_infos)
                    if e.kind == ANTI_REQUIRED and e.term.matches(e.owner_ns, pod, nsl)]
        if not matching:
            return DomainCounts(snap), None, False, False
        tops = [snap.topology(e.term.topology_key) for e in matching]
        last = self.__dict__.get("_anti_cache")
        if (last is not None and last[0] is snap and last[1] == terms.version and len(last[2]) == len(matching)
                and all(a is b for a, b in zip(last[2], matching, strict=True))
                and all(a is b for a, b in zip(last[3], tops, strict=True))):
            return last[4], last[5], last[6], True
        out = DomainCounts(snap)
        for e, top in zip(matching, tops, strict=True):
            out.add_domains(e.term.topology_key, top, e.domain_counts(top), 1)
        rows = out.rows_positive(len(snap))
        positive = out.any_positive()
        self.__dict__["_anti_cache"] = (snap, terms.version, matching, tops, out, rows, positive)
        return out, rows, positive, True

    def _matching_all(self, snap: Snapshot, terms: tuple[PodAffinityTerm, ...], owner_ns: str) -> np.ndarray:
        """Per row: existing pods that every one of `terms` (owned by a pod in `owner_ns`) matches."""
        def pred(other: Pod) -> bool:
            nsl = self._ns_labels(other.namespace)
            return all(t.matches(owner_ns, other, nsl) for t in terms)
        key = ("InterPodAffinity", tuple(term_key(t) for t in terms), owner_ns, snap.namespace_version)
        return snap.match_counts(key, pred)

    def _pre_filter_scan(self, pod: Pod, snap: Snapshot, needs_all: bool) -> _FilterState:
        s = _FilterState(DomainCounts(snap), DomainCounts(snap), DomainCounts(snap))
        for ni in snap.node_infos:
            node = ni.node
            if node is None:
                continue
            pods = ni.pods if needs_all else ni.pods_with_required_anti_affinity
            for existing in pods:
                if existing.uid == pod.uid:
                    continue
                self._account(s, pod, existing, node, 1)
        return s

    def add_pod(self, state: CycleState, pod: Pod, to_add: Pod, node_info: NodeInfo) -> None:
        s = state.get(_PRE_FILTER)
        if s is not None and node_info.node is not None:
            s.existing_rows = None
            s.own_existing_anti()
            self._account(s, pod, to_add, node_info.node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod, node_info: NodeInfo) -> None:
        s = state.get(_PRE_FILTER)
        if s is not None and node_info.node is not None:
            s.existing_rows = None
            s.own_existing_anti()
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

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        """`filter` for every row: 1 = affinity, 2 = anti-affinity, 3 = existing pods' anti-affinity."""
        s: _FilterState | None = state.get(_PRE_FILTER)
        n = len(snapshot)
        code = np.zeros(n, dtype=np.int8)
        if s is None:
            return FilterBatch(code == 0, Status.unschedulable(REASON_ANTI))
        rows = s.existing_rows
        if rows is not None and len(rows) == n and not pod.anti_affinity_required and not pod.affinity_required:
            # only existing pods' anti-affinity can reject (a ReplicaSet's pods matched by others' terms)
            return FilterBatch(~rows, Status.unschedulable(REASON_EXISTING_ANTI if rows.any() else REASON_ANTI))
        if s.existing_rows is not None and len(s.existing_rows) == n:
            code[s.existing_rows] = 3
        elif s.existing_anti:
            code[s.existing_anti.rows_positive(n)] = 3
        if pod.anti_affinity_required:
            anti = s.anti.rows_positive(n, {t.topology_key for t in pod.anti_affinity_required})
            code[anti] = 2
        if pod.affinity_required:
            missing = np.zeros(n, dtype=bool)
            pods_exist = np.ones(n, dtype=bool)
            for t in pod.affinity_required:
                top = snapshot.topology(t.topology_key)
                missing |= top.ids < 0
                pods_exist &= s.affinity.rows_positive(n, {t.topology_key})
            first_of_group = (not any(v > 0 for v in s.affinity.values())
                              and all(self._term_matches(t, pod.namespace, pod) for t in pod.affinity_required))
            code[missing | (~pods_exist if not first_of_group else missing)] = 1
        ok = code == 0
        statuses = {1: Status.unresolvable(REASON_AFFINITY), 2: Status.unschedulable(REASON_ANTI),
                    3: Status.unschedulable(REASON_EXISTING_ANTI)}
        used = np.flatnonzero(np.bincount(code, minlength=4)[1:]) + 1  # the failure codes present
        if len(used) <= 1:
            return FilterBatch(ok, statuses[int(used[0])] if len(used) else statuses[2])
        return FilterBatch(ok, lambda row: Status(statuses[int(code[row])].code, *statuses[int(code[row])].reasons))

    # ---------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        snap = nodes.snapshot
        has_constraints = bool(pod.affinity_preferred or pod.anti_affinity_preferred) or (
            bool(pod.affinity_error) and _has_raw_preferred(pod))
        # kube-scheduler's flag only skips PreScore for a pod without preferred terms of its own; when the
        # pod has some, existing pods' preferred terms still count.
        if not has_constraints and (self.args.ignore_preferred_terms_of_existing_pods or snap.num_affinity_pods == 0):
            return self.skipped
        if pod.affinity_error:
            return Status.as_error(f"failed to parse pod: {pod.affinity_error}")
        if pod.uid in snap.pod_nodes:  # the pod itself is in the cache: leave it out
            scores = _ScoreState.from_pairs(snap, self._pre_score_scan(pod, snap, has_constraints))
        else:
            scores = self._pre_score_indexed(pod, snap)
        if not scores.touched:
            return self.skipped
        state.write(_PRE_SCORE, scores)
        return None

    def _pre_score_indexed(self, pod: Pod, snap: Snapshot) -> _ScoreState:
        hard = self.args.hard_pod_affinity_weight
        out = _ScoreState(snap)
        for t in pod.affinity_preferred:
            out.add(t.topology_key, self._matching_all(snap, (t,), pod.namespace), t.weight)
        for t in pod.anti_affinity_preferred:
            out.add(t.topology_key, self._matching_all(snap, (t,), pod.namespace), -t.weight)
        nsl = self._ns_labels(pod.namespace)
        for e in snap.terms.entries(snap.node_infos):
            if e.kind == AFFINITY_REQUIRED:
                if hard <= 0:
                    continue
                w = hard
            elif e.kind == AFFINITY_PREFERRED:
                w = e.term.weight
            elif e.kind == ANTI_PREFERRED:
                w = -e.term.weight
            else:
                continue
            if e.term.matches(e.owner_ns, pod, nsl):
                out.add(e.term.topology_key, e.counts, w)
        return out

    def _pre_score_scan(self, pod: Pod, snap: Snapshot, has_constraints: bool) -> dict[Pair, int]:
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
                for t in e.affinity_preferred:
                    if t.topology_key in node.labels and self._term_matches(t, e.namespace, pod):
                        _inc(scores, (t.topology_key, node.labels[t.topology_key]), t.weight)
                for t in e.anti_affinity_preferred:
                    if t.topology_key in node.labels and self._term_matches(t, e.namespace, pod):
                        _inc(scores, (t.topology_key, node.labels[t.topology_key]), -t.weight)
        return scores

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        s: _ScoreState | None = state.get(_PRE_SCORE)
        node = node_info.node
        if s is None or not s.touched or node is None:
            return 0
        return s.node_score(node)

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s: _ScoreState | None = state.get(_PRE_SCORE)
        out = np.zeros(len(rows), dtype=np.int64)
        if s is None or not s.touched:
            return out
        for key, per_domain in s.by_key.items():
            ids = s.topologies[key].ids[rows]
            out += np.where(ids >= 0, per_domain[np.where(ids >= 0, ids, 0)], 0)
        return out

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if not len(scores):
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        # float64(MaxNodeScore) * (float64(s-min) / float64(diff)), truncated: the division first
        return (MAX_SCORE * ((scores - lo).astype(np.float64) / float(diff))).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        if not scores:
            return None
        lo = min(s.score for s in scores)
        hi = max(s.score for s in scores)
        diff = hi - lo
        for s in scores:
            # float64(MaxNodeScore) * (float64(s-min) / float64(diff)), truncated: the division first
            s.score = int(MAX_SCORE * ((s.score - lo) / diff)) if diff > 0 else 0
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """kube-scheduler with queueing hints (SchedulerQueueingHints is locked on): no UpdateNodeTaint. The pod
        hint is 1.37's (anti-affinity: any term, #139161) unless 1.35 or 1.36 is emulated."""
        from ..featuregates import emulated_minor

        old_rules = emulated_minor(getattr(self.handle, "feature_gates", None)) in ("1.35", "1.36")
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add | ActionType.UpdatePodLabel
                                                  | ActionType.Delete),
                                     _after_pod_change_136 if old_rules else _after_pod_change),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel),
                                     _after_node_change)]


# ------------------------------------------------------------------------------------------ queueing hints
# Terms are matched as kube's hints match them: the term's namespaces, or its namespaceSelector against an
# empty label set (the hints do not look namespaces up), never the snapshot's namespace labels.
_NO_NS_LABELS: dict[str, str] = {}


def _all_match(terms: tuple[PodAffinityTerm, ...], owner_ns: str, other: Pod) -> bool:
    """podMatchesAllAffinityTerms: some terms, and every one selects `other`."""
    return bool(terms) and all(t.matches(owner_ns, other, _NO_NS_LABELS) for t in terms)


def _unparsed(pod: Pod, which: str) -> bool:
    """The pod's required `which` terms ("requiredAffinityTerms", "requiredAntiAffinityTerms") did not parse:
    kube's GetAffinityTerms fails, and a hint that fails requeues."""
    return bool(pod.affinity_error) and f"{which}: " in pod.affinity_error


def _any_match(terms: tuple[PodAffinityTerm, ...], owner_ns: str, other: Pod) -> bool:
    """podMatchesAnyAffinityTerms (kube 1.37): one of the terms selects `other`."""
    return any(t.matches(owner_ns, other, _NO_NS_LABELS) for t in terms)


def _after_pod_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterAssignedPodChange / isSchedulableAfterTargetPodUpdateLabel (kube 1.37): as 1.36's,
    but an existing pod leaves the pod's anti-affinity, or a deleted one was in it (or had the pod in its
    own), when it matches ANY anti-affinity term: a pod is refused by one matching term (#139161)."""
    return _pod_change(pod, old, new, _any_match)


def _after_pod_change_136(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodChange of kube 1.36: the anti-affinity checks need every term to match."""
    return _pod_change(pod, old, new, _all_match)


def _pod_change(pod: Pod, old: Any, new: Any,
                anti_match: Callable[[tuple[PodAffinityTerm, ...], str, Pod], bool]) -> int:
    """An assigned (or nominated) pod added that the pod's affinity selects, one updated into its affinity or
    out of its anti-affinity, one deleted that its anti-affinity selects or whose anti-affinity selected it;
    any label change of the pod itself."""
    if not isinstance(old, Pod | None) or not isinstance(new, Pod | None) or (old is None and new is None):
        return QUEUE  # kube: unexpected objects are an error, which requeues
    if old is not None and new is not None and new.uid == pod.uid:
        return QUEUE
    for p in (new, old):
        if p is not None and not p.node_name and not p.nominated_node_name:
            return QUEUE_SKIP
    if _unparsed(pod, "requiredAffinityTerms") or _unparsed(pod, "requiredAntiAffinityTerms"):
        return QUEUE
    terms, anti, ns = pod.affinity_required, pod.anti_affinity_required, pod.namespace
    if old is not None and new is not None:
        if not _all_match(terms, ns, old) and _all_match(terms, ns, new):
            return QUEUE
        return QUEUE if anti_match(anti, ns, old) and not anti_match(anti, ns, new) else QUEUE_SKIP
    if new is not None:
        return QUEUE if _all_match(terms, ns, new) else QUEUE_SKIP
    assert old is not None
    if anti_match(anti, ns, old):
        return QUEUE
    if _unparsed(old, "requiredAntiAffinityTerms"):
        return QUEUE
    return QUEUE if anti_match(old.anti_affinity_required, old.namespace, pod) else QUEUE_SKIP


def _after_node_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterNodeChange: a node added or relabelled so that it gains (or changes the value of) an
    affinity term's topology key; for anti-affinity any added node, or one losing or changing such a key."""
    if not isinstance(new, Node) or not isinstance(old, Node | None):
        return QUEUE
    if _unparsed(pod, "requiredAffinityTerms"):
        return QUEUE
    for t in pod.affinity_required:
        k = t.topology_key
        if old is None:
            if k in new.labels:
                return QUEUE
            continue
        if k in new.labels and (k not in old.labels or old.labels[k] != new.labels[k]):
            return QUEUE
    if _unparsed(pod, "requiredAntiAffinityTerms"):
        return QUEUE
    for t in pod.anti_affinity_required:
        if old is None:
            return QUEUE
        k = t.topology_key
        if k in old.labels and (k not in new.labels or old.labels[k] != new.labels[k]):
            return QUEUE
    return QUEUE_SKIP


def _has_raw_preferred(pod: Pod) -> bool:
    """Preferred terms in the spec, parsed or not (kube decides PreScore's Skip before parsing them)."""
    aff = (pod.raw.get("spec") or {}).get("affinity") or {}
    return any(((aff.get(k) or {}).get("preferredDuringSchedulingIgnoredDuringExecution"))
               for k in ("podAffinity", "podAntiAffinity"))

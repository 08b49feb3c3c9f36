"""Per-attempt scheduling results: what `describe-pod` and `simulate` show about a decision."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any

from .framework.outcomes import FIRST_NODES_KEPT, StatusTally
from .framework.status import distinct_statuses

#: CycleState keys: annotations the scheduler wants written with the binding (one API write instead of
#: two, the result lands exactly when the bind does), and whether the binder carried them
BIND_ANNOTATIONS = "ksched.io/bind-annotations"
BIND_ANNOTATIONS_CARRIED = "ksched.io/bind-annotations-carried"
MAX_NODES_PER_REASON = FIRST_NODES_KEPT
TOP_NODES = 5


@dataclass
class AttemptResult:
    pod: str
    profile: str
    attempt: int
    outcome: str  # scheduled | unschedulable | error | waiting
    node: str = ""
    message: str = ""
    num_nodes: int = 0
    feasible: int = 0
    #: reason -> {"count": n, "nodes": [first names]}
    filter_reasons: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: top nodes: [{"node", "total", "plugins": {name: {"raw", "normalized", "weight", "weighted"}}}]
    scores: list[dict[str, Any]] = field(default_factory=list)
    prefilter_message: str = ""
    postfilter_message: str = ""
    reserve: str = ""
    permit: str = ""
    bind: str = ""
    nominated_node: str = ""
    plugin: str = ""
    #: extender URL -> what it said: {"filter": {"passed", "failed", "unresolvable"} | {"error"}, "prioritize":
    #: {"weight", "scores"}, "preempt": {"nodes"}, "bind": {"node"}}; empty without extenders
    extenders: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # shallow: the nested values are plain dicts and lists already, and dataclasses.asdict's deep copy
        # cost more than the rest of a binding cycle's Python work (measured with py-spy --gil)
        return {name: getattr(self, name) for name in _RESULT_FIELDS}


_RESULT_FIELDS = tuple(f.name for f in fields(AttemptResult))


class ResultStore:
    """Last attempt per pod (thread-safe: binding workers update outcomes), for the callers that read them
    back (simulate, its report, tests). `retain=False` keeps nothing: a scheduler serving a cluster writes each
    result on its pod (the annotation) and nothing reads this store, which would otherwise hold every pod it
    ever saw, deleted ones included, for the life of the process."""

    def __init__(self, retain: bool = True) -> None:
        self._lock = threading.Lock()
        self._by_pod: dict[str, AttemptResult] = {}
        self.retain = retain

    def put(self, r: AttemptResult) -> None:
        if not self.retain:
            return
        with self._lock:
            self._by_pod[r.pod] = r

    def get(self, pod_key: str) -> AttemptResult | None:
        with self._lock:
            return self._by_pod.get(pod_key)

    def all(self) -> dict[str, AttemptResult]:
        with self._lock:
            return dict(self._by_pod)


def group_filter_reasons(node_statuses: dict[str, Any], absent: Any = None, num_absent: int = 0,
                         tally: list[StatusTally] | None = None) -> dict[str, dict[str, Any]]:
    """reason -> {count, the first nodes (in order) that gave it, the plugin of the first}. Batch filters
    share one Status among many nodes: counts come per distinct Status, from `tally` (`Diagnosis.tally`) when
    the caller has one, else from a walk over the nodes that stops once every reason has its nodes."""
    if tally is not None:
        out = _group_tally(tally)
    else:
        out = _group_walk(node_statuses)
    if absent is not None and num_absent:
        for reason in absent.all_reasons:
            g = out.setdefault(reason, {"count": 0, "nodes": [], "plugin": absent.plugin})
            g["count"] += num_absent
    return out


def _group_tally(tally: list[StatusTally]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    firsts: dict[str, list[tuple[int, str]]] = {}
    for t in tally:  # in the order of each Status's first node, so reasons come in the order a walk finds them
        for reason in t.status.all_reasons:
            g = out.get(reason)
            if g is None:
                g = out[reason] = {"count": 0, "nodes": [], "plugin": t.status.plugin}
                firsts[reason] = []
            g["count"] += t.nodes
            firsts[reason].extend(t.firsts)
    for reason, g in out.items():
        g["nodes"] = [name for _, name in sorted(firsts[reason])[:MAX_NODES_PER_REASON]]
    return out


def _group_walk(node_statuses: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    reasons_of: dict[int, list[str]] = {}
    totals: dict[str, int] = {}
    for st, n in distinct_statuses(node_statuses.values()):  # in the order of each one's first node
        rs = reasons_of[id(st)] = list(st.all_reasons)
        for r in rs:
            totals[r] = totals.get(r, 0) + n
    unfilled = len(totals)
    for node, st in node_statuses.items():
        if not unfilled:
            break
        for reason in reasons_of[id(st)]:
            g = out.get(reason)
            if g is None:
                g = out[reason] = {"count": totals[reason], "nodes": [], "plugin": st.plugin}
            if len(g["nodes"]) < MAX_NODES_PER_REASON:
                g["nodes"].append(node)
                if len(g["nodes"]) == MAX_NODES_PER_REASON or len(g["nodes"]) == g["count"]:
                    unfilled -= 1
    return out

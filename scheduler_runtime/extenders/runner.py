"""The configured extenders at kube-scheduler's positions: after Filter, beside Score, in preemption, at Bind.

What each extender said in an attempt is kept in an `ExtenderRecord` in the CycleState: its `summary`
goes into the pod's result (describe-pod), its `raw` responses into the simulator-format annotations.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..framework.cycle_state import CycleState
from ..framework.runtime import CycleError, Diagnosis, ScoreResult
from ..framework.snapshot import Snapshot
from ..framework.status import MAX_SCORE, Code, Status
from ..framework.types import NodeInfo
from ..objects import Node, Pod
from .client import ExtenderError, HTTPExtender
from .config import MAX_EXTENDER_PRIORITY, ExtenderConfig

log = logging.getLogger("ksched.extenders")

#: framework.ExtenderName: the pseudo-plugin a pod is unschedulable for when an extender dropped nodes, so
#: any cluster event requeues it (the queue knows no events for it)
EXTENDER_NAME = "Extender"
RECORD_KEY = "ksched.io/extender-record"
#: in-tree Score plugins whose kube-scheduler Score reads the NodeInfo's pods or image states (see
#: ExtenderSet._rescore_fresh); the rest read node fields or PreScore state built from the whole snapshot
EMPTY_NODE_SCORED = ("NodeResourcesFit", "NodeResourcesBalancedAllocation", "ImageLocality")
MAX_NODES_LISTED = 20
MAX_RAW_ENTRIES = 200


@dataclass
class ExtenderRecord:
    #: extender URL -> {"filter": ..., "prioritize": ..., "preempt": ..., "bind": ...}, small, for results
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: verb -> extender URL -> response as received (node objects cut to their names), for simulator results
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: node name -> the Node object a non-nodeCacheCapable filter extender returned for it, when the feasible
    #: nodes came back that way: kube-scheduler then scores fresh NodeInfos built from them
    fresh: dict[str, dict[str, Any]] | None = None

    def clone(self) -> ExtenderRecord:
        return self  # one record per attempt, shared by the clones preemption makes of the CycleState

    def put(self, ext: HTTPExtender, verb: str, summary: dict[str, Any], response: Any = None) -> None:
        self.summary.setdefault(ext.name, {})[verb] = summary
        if response is not None or "error" in summary:
            self.raw.setdefault(verb, {})[ext.name] = _trim(response) if response is not None else \
                {"Error": summary["error"]}


def record_of(state: CycleState) -> ExtenderRecord:
    rec = state.get(RECORD_KEY)
    if rec is None:
        rec = ExtenderRecord()
        state.write(RECORD_KEY, rec)
    return rec


def _limited(m: dict[str, str]) -> dict[str, str]:
    return dict(list(m.items())[:MAX_NODES_LISTED])


def _trim(value: Any, depth: int = 0) -> Any:
    """At most MAX_RAW_ENTRIES entries per list or map (two levels deep): a response about thousands of nodes
    must not outgrow the pod's annotation budget."""
    if depth > 2:
        return value
    if isinstance(value, list):
        return [_trim(v, depth + 1) for v in value[:MAX_RAW_ENTRIES]]
    if isinstance(value, dict):
        return {k: _trim(v, depth + 1) for k, v in list(value.items())[:MAX_RAW_ENTRIES]}
    return value


def _names_only(resp: Any) -> Any:
    """A filter response with its Node objects cut to their names (they can be megabytes)."""
    if isinstance(resp, dict):
        nodes = resp.get("Nodes")
        if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
            items = [{"metadata": {"name": ((it or {}).get("metadata") or {}).get("name")}} for it in nodes["items"]]
            return {**resp, "Nodes": {**nodes, "items": items}}
    return resp


class ExtenderSet:
    """kube-scheduler's sched.Extenders: non-ignorable extenders in file order, then the ignorable ones."""

    def __init__(self, configs: list[ExtenderConfig]) -> None:
        exts = [HTTPExtender(c) for c in configs]
        self.extenders = [e for e in exts if not e.ignorable] + [e for e in exts if e.ignorable]
        self.has_filters = any(e.is_filter() for e in self.extenders)
        self.has_prioritizers = any(e.is_prioritizer() for e in self.extenders)
        #: scheduler_goroutines{operation="prioritizing_extender"}
        self.prioritizing = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        for e in self.extenders:
            e.close()

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: Pod, snapshot: Any, rows: np.ndarray,
               diagnosis: Diagnosis) -> np.ndarray:
        """findNodesThatPassExtenders on the feasible rows: sequential, each extender sees what the previous
        one kept; an error fails the attempt unless the extender is ignorable."""
        if not self.has_filters or not len(rows):
            return rows
        current = [int(r) for r in rows.tolist()]
        rec = record_of(state)
        rec.fresh = None
        for ext in self.extenders:
            if not current:
                break
            if not ext.is_filter() or not ext.is_interested(pod):
                continue
            infos = snapshot.node_infos
            try:
                names, failed, unresolvable, resp, objects = ext.filter(pod, [infos[r].node for r in current])
            except ExtenderError as exc:
                rec.put(ext, "filter", {"error": str(exc), "ignorable": ext.ignorable})
                if ext.ignorable:
                    log.info("Skipping extender as it returned error and has ignorable flag set: extender=%s "
                             "err=%s", ext.name, exc)
                    continue
                raise CycleError(Status.as_error(exc)) from exc
            for node, msg in unresolvable.items():
                diagnosis.record(node, Status(Code.UnschedulableAndUnresolvable, msg, plugin=ext.name))
            for node, msg in failed.items():
                if node not in unresolvable:  # failedAndUnresolvable takes precedence
                    diagnosis.record(node, Status(Code.Unschedulable, msg, plugin=ext.name))
            kept = []
            for nm in names or []:
                ni = snapshot.get(nm)
                if ni is None:
                    log.warning("extender %s returned node %r, which is not in the scheduler's cache; ignored",
                                ext.name, nm)
                    continue
                kept.append(ni.row)
            rec.put(ext, "filter", {"passed": len(kept), "failed": _limited(failed),
                                    "unresolvable": _limited(unresolvable)}, _names_only(resp))
            if objects is not None:
                rec.fresh = {str((o.get("metadata") or {}).get("name") or ""): o for o in objects}
            elif rec.fresh is not None:
                rec.fresh = {nm: rec.fresh[nm] for nm in names or [] if nm in rec.fresh}
            current = kept
        if len(current) != len(rows):
            diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
        return np.asarray(current, dtype=np.int64)

    # ------------------------------------------------------------------ Score
    def prioritize(self, state: CycleState, pod: Pod, snapshot: Any, scores: ScoreResult,
                   keep_breakdown: bool, fw: Any = None) -> None:
        """prioritizeNodes' extender part: every interested prioritizer concurrently; each score x weight x
        (MaxNodeScore / MaxExtenderPriority) is added to the node's total. Errors only lose that extender's
        scores, ignorable or not."""
        if fw is not None and record_of(state).fresh is not None:
            self._rescore_fresh(fw, state, pod, snapshot, scores, keep_breakdown)
        exts = [e for e in self.extenders if e.is_prioritizer() and e.is_interested(pod)]
        if not exts or not len(scores.rows):
            return
        infos = snapshot.node_infos
        rows = scores.rows.tolist()
        nodes = [infos[r].node for r in rows]
        out: list[Any] = [None] * len(exts)

        def call(i: int) -> None:
            with self._lock:
                self.prioritizing += 1
            try:
                out[i] = exts[i].prioritize(pod, nodes)
            except ExtenderError as exc:
                out[i] = exc
            finally:
                with self._lock:
                    self.prioritizing -= 1

        if len(exts) == 1:
            call(0)
        else:
            threads = [threading.Thread(target=call, args=(i,), name="prioritizing-extender", daemon=True)
                       for i in range(len(exts))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        index = {infos[r].name: i for i, r in enumerate(rows)}
        rec = record_of(state)
        scale = MAX_SCORE // MAX_EXTENDER_PRIORITY
        for ext, res in zip(exts, out, strict=True):
            if isinstance(res, ExtenderError):
                log.debug("Failed to run extender's priority function. No score given by this extender: "
                          "extender=%s pod=%s err=%s", ext.name, pod.key, res)
                rec.put(ext, "prioritize", {"error": str(res)})
                continue
            host_scores, weight, resp = res
            raw = np.zeros(len(rows), dtype=np.int64)
            for host, score in host_scores:
                i = index.get(host)
                if i is not None:
                    raw[i] += score
            scores.totals += raw * weight * scale
            if keep_breakdown:
                scores.per_plugin[ext.name] = (raw, raw * scale, weight)
            listed = dict(list({h: s for h, s in host_scores}.items())[:MAX_NODES_LISTED])
            rec.put(ext, "prioritize", {"weight": weight, "scores": listed}, resp)

    def _rescore_fresh(self, fw: Any, state: CycleState, pod: Pod, snapshot: Any, scores: ScoreResult,
                       keep_breakdown: bool) -> None:
        """kube-scheduler v1.36.3's HTTPExtender.Filter, without nodeCacheCapable, turns the Node objects the
        extender returns into new NodeInfos (no pods, no image states), and prioritizeNodes scores those: the
        Score plugins that read a node's pods or images then see an empty node. Those plugins' scores are
        recomputed here on such empty nodes; the others read only node fields or cluster-wide state."""
        targets = [cp for cp in fw.score if cp.name in EMPTY_NODE_SCORED and cp.name not in state.skip_score_plugins]
        fresh = record_of(state).fresh or {}
        if not targets or not len(scores.rows):
            return
        infos = snapshot.node_infos
        fsnap = Snapshot()
        try:
            for r in scores.rows.tolist():
                raw = fresh.get(infos[r].name) or infos[r].node.raw
                status = {k: v for k, v in (raw.get("status") or {}).items() if k != "images"}
                fsnap.add_node(NodeInfo(Node.from_dict({**raw, "status": status})))
        except Exception as exc:  # noqa: BLE001 - a malformed node from the extender: score the real nodes
            log.warning("extender returned a node ksched cannot read (%s); scoring the cached nodes", exc)
            return
        frows = np.arange(len(scores.rows), dtype=np.int64)
        st = state.clone()
        for cp in targets:
            real = scores.per_plugin.get(cp.name)
            if real is not None:
                real_norm = real[1]
            else:
                raw_real = fw._score_one(cp, st, pod, snapshot, scores.rows, infos)
                real_norm = fw._normalize(cp, st, pod, scores.rows, raw_real, infos)
            f_raw = fw._score_one(cp, st, pod, fsnap, frows, fsnap.node_infos)
            f_norm = fw._normalize(cp, st, pod, frows, f_raw, fsnap.node_infos)
            scores.totals += (f_norm - real_norm) * cp.weight
            if keep_breakdown:
                scores.per_plugin[cp.name] = (f_raw, f_norm, cp.weight)

    # ------------------------------------------------------------------ Bind
    def bind(self, state: CycleState, pod: Pod, node: str) -> tuple[bool, Status | None]:
        """extendersBinding: the first interested binder binds; an ignorable one's error passes the pod on."""
        for ext in self.extenders:
            if not ext.is_binder() or not ext.is_interested(pod):
                continue
            rec = record_of(state)
            try:
                resp = ext.bind(pod, node)
            except ExtenderError as exc:
                rec.put(ext, "bind", {"node": node, "error": str(exc)})
                if ext.ignorable:
                    log.info("Skipping extender in bind as it returned error and has ignorable flag set: "
                             "extender=%s err=%s", ext.name, exc)
                    continue
                return True, Status.as_error(exc)
            rec.put(ext, "bind", {"node": node}, resp if resp is not None else {})
            return True, None
        return False, None

    # ------------------------------------------------------------------ Preemption
    def process_preemption(self, state: CycleState, pod: Pod, victims: dict[str, tuple[list[Pod], int]],
                           snapshot: Any) -> tuple[dict[str, tuple[list[Pod], int]], Status | None]:
        """callExtenders: each interested extender with a preempt verb narrows node -> victims in turn."""
        if not victims:
            return victims, None
        rec = record_of(state)
        for ext in self.extenders:
            if not ext.supports_preemption() or not ext.is_interested(pod):
                continue
            try:
                new, resp = ext.process_preemption(pod, victims, snapshot)
            except ExtenderError as exc:
                rec.put(ext, "preempt", {"error": str(exc)})
                if ext.ignorable:
                    log.info("Skipped extender as it returned error and has ignorable flag set: extender=%s "
                             "err=%s", ext.name, exc)
                    continue
                return {}, Status.as_error(exc)
            for node, (pods, _) in list(new.items()):
                if not pods:
                    if ext.ignorable:
                        del new[node]
                        log.info("Ignored node for which the extender didn't report victims: node=%s extender=%s",
                                 node, ext.name)
                        continue
                    err = ExtenderError(f'expected at least one victim pod on node "{node}"')
                    rec.put(ext, "preempt", {"error": str(err)}, resp)
                    return {}, Status.as_error(err)
            rec.put(ext, "preempt", {"nodes": {n: [p.key for p in pods] for n, (pods, _) in
                                               list(new.items())[:MAX_NODES_LISTED]}}, resp)
            victims = new
            if not victims:
                break
        return victims, None


def build_extender_set(configs: list[ExtenderConfig] | None) -> ExtenderSet | None:
    return ExtenderSet(configs) if configs else None

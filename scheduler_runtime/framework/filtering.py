"""Filter: finding the feasible nodes of a pod, with the per-node and the batch (FilterBatch) plugin paths.

Follows kube-scheduler v1.36.3 pkg/scheduler/schedule_one.go (findNodesThatPassFilters: numFeasibleNodesToFind,
the rotating start index, nodes outside a PreFilterResult) and framework/runtime/framework.go (RunFilterPlugins,
RunFilterPluginsWithNominatedPods: the two passes with and without higher-priority nominated pods, AddPod /
RemovePod of the PreFilter extensions). A batch plugin answers for the whole node table at once (`FilterBatch`);
the verdicts, the first rejecting plugin per node and the evaluation counts are those of kube's per-node walk.
`FilterRunner` is the base of `runtime.Framework`; the attributes it declares are set there.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from ..objects import Pod
from . import filter_readers
from .cycle_state import CycleState
from .handle import Handle
from .interface import FilterBatchPlugin, FilterPlugin
from .invoke import WHAT, ConfiguredPlugin, CycleError, PluginCaller, failure, filter_batch_return, verdict
from .outcomes import Diagnosis, num_feasible_nodes_to_find
from .plugin import FilterBatch
from .snapshot import Snapshot
from .status import Code, Status
from .types import NodeInfo, PreFilterResult

_NO_CODES: frozenset[Code] = frozenset()
#: up to this many rows failing one batch plugin get their Statuses row by row rather than through its keys
_FEW_FAILED_ROWS = 16
_FILTER = WHAT["Filter"]
_ROW_RANGES: dict[int, np.ndarray] = {}


def _row_range(n: int) -> np.ndarray:
    """0..n-1, read-only and kept: the rotated search order of a cycle is two slices of it."""
    got = _ROW_RANGES.get(n)
    if got is None:
        if len(_ROW_RANGES) > 64:
            _ROW_RANGES.clear()
        got = _ROW_RANGES[n] = np.arange(n, dtype=np.int64)
        got.flags.writeable = False
    return got


class FilterRunner(PluginCaller):
    """Filter and the PreFilter extensions of one profile."""

    handle: Handle
    pre_filter: list[ConfiguredPlugin]
    filter: list[ConfiguredPlugin]
    score: list[ConfiguredPlugin]
    extenders: Any
    percentage_of_nodes_to_score: int | None
    next_start_node_index: int
    _filter_all_batch: bool

    def _extensions(self, method: str) -> list[tuple[str, Any]]:
        """(name, bound method) of the PreFilter plugins that have `method` (add_pod / remove_pod), in order:
        looked up once, since the preemption dry run calls these per victim per node."""
        cache: dict[str, list[tuple[str, Any]]] = self.__dict__.setdefault("_extension_cache", {})
        got = cache.get(method)
        if got is None:
            got = cache[method] = [(cp.name, fn) for cp in self.pre_filter
                                   if (fn := getattr(cp.plugin, method, None)) is not None]
        return got

    def run_pre_filter_add_pod(self, state: CycleState, pod: Pod, to_add: Pod, node_info: NodeInfo) -> Status | None:
        skip = state.skip_filter_plugins
        for name, fn in self._extensions("add_pod"):
            if name in skip:
                continue
            _, st = self._invoke("AddPod", name, fn, state, pod, to_add, node_info, passes=_NO_CODES)
            if st is not None:
                return st
        return None

    def run_pre_filter_remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod,
                                  node_info: NodeInfo) -> Status | None:
        skip = state.skip_filter_plugins
        for name, fn in self._extensions("remove_pod"):
            if name in skip:
                continue
            _, st = self._invoke("RemovePod", name, fn, state, pod, to_remove, node_info, passes=_NO_CODES)
            if st is not None:
                return st
        return None

    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        """All Filter plugins on one node, per-node methods; first non-success stops (Error aborts).

        A per-node method is called as `_invoke("Filter", ..., evaluations=1)` would, written out: the
        preemption dry run runs this several times per node it examines."""
        skip = state.skip_filter_plugins
        metrics = self.metrics
        st: Status | None
        for cp in self.filter:
            name = cp.name
            if name in skip:
                continue
            fn = getattr(cp.plugin, "filter", None)
            if fn is not None:
                if metrics is not None:
                    self._evaluated("Filter", name, 1)
                try:
                    ret = fn(state, pod, node_info)
                except CycleError:
                    raise
                except Exception as exc:
                    return failure(_FILTER, name, exc)
                if ret is None:
                    continue
                st = verdict(_FILTER, name, ret)
            else:  # batch-only plugin: evaluate on the node's table row
                fb, st = self._invoke("Filter", cp.name, cast(FilterBatchPlugin, cp.plugin).filter_batch, state, pod,
                                      self.handle.snapshot, evaluations=1, unpack=filter_batch_return)
                if st is None and node_info.row >= 0 and not fb.ok[node_info.row]:
                    _, st = self._invoke("Filter", cp.name, fb.status_at, node_info.row)
            if st is not None:
                return st
        return None

    def run_filter_calls(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                         calls: list[tuple[str, Any]]) -> Status | None:
        """`run_filter` over prepared (name, per-node filter) pairs of the plugins `state` does not skip, in
        order; a pair without a method is a plugin known to pass this node: counted as evaluated, not called."""
        metrics = self.metrics
        for name, fn in calls:
            if metrics is not None:
                self._evaluated("Filter", name, 1)
            if fn is None:
                continue
            try:
                ret = fn(state, pod, node_info)
            except CycleError:
                raise
            except Exception as exc:
                return failure(_FILTER, name, exc)
            if ret is not None and (st := verdict(_FILTER, name, ret)) is not None:
                return st
        return None

    def nominated_pods_to_add(self, pod: Pod, node_name: str) -> list[Pod]:
        """The pods nominated to `node_name` that the two-pass filter adds for `pod`: priority >= pod's."""
        return self.nominated_to_add(pod, self.handle.nominated_pods_for_node(node_name))

    @staticmethod
    def nominated_to_add(pod: Pod, nominated: list[Pod]) -> list[Pod]:
        """Of a node's nominated pods, those the two-pass filter adds for `pod`."""
        priority, uid = pod.priority, pod.uid
        return [p for p in nominated if p.priority >= priority and p.uid != uid]

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                                       nominated: list[Pod] | None = None) -> Status | None:
        """Filter with higher-or-equal priority nominated pods added (pass 1) and without (pass 2).
        `nominated`: `nominated_pods_to_add` for this node when the caller already has it."""
        if nominated is None:
            nominated = self.nominated_pods_to_add(pod, node_info.name)
        if not nominated:
            return self.run_filter(state, pod, node_info)
        cloned_state = state.clone()
        cloned = node_info.clone()
        for p in nominated:
            cloned.add_pod(p)
            st = self.run_pre_filter_add_pod(cloned_state, pod, p, cloned)
            if st is not None:
                return st
        st = self.run_filter(cloned_state, pod, cloned)
        if st is not None:
            return st
        return self.run_filter(state, pod, node_info)

    def find_nodes_that_pass_filters(self, state: CycleState, pod: Pod, snapshot: Snapshot,
                                     pre_result: PreFilterResult | None, diagnosis: Diagnosis) -> np.ndarray:
        """Rows of feasible nodes, at most numFeasibleNodesToFind, searched from the rotating start index."""
        with self.evaluations_summed():
            return self._find_nodes_that_pass_filters(state, pod, snapshot, pre_result, diagnosis)

    def _find_nodes_that_pass_filters(self, state: CycleState, pod: Pod, snapshot: Snapshot,
                                      pre_result: PreFilterResult | None, diagnosis: Diagnosis) -> np.ndarray:
        n = len(snapshot)
        if pre_result is not None and pre_result.node_names is not None:
            rows = np.fromiter((ni.row for nm in pre_result.node_names
                                if (ni := snapshot.by_name.get(nm)) is not None), dtype=np.int64)
            rows.sort()
            diagnosis.num_absent = n - len(rows)
            if diagnosis.num_absent:
                narrowing = state.get("__prefilter_narrowing__") or []
                diagnosis.absent_status = Status(
                    Code.UnschedulableAndUnresolvable,
                    f"node(s) didn't satisfy plugin(s) [{' '.join(narrowing)}]")
        else:
            rows = None
        m = n if rows is None else len(rows)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        num_to_find = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, n)
        ext = self.extenders
        if not self.score and (ext is None or not (ext.has_filters or ext.has_prioritizers)):
            num_to_find = 1
        start = self.next_start_node_index % m
        # the rows from the start index on, then those before it (no modulo over every row)
        searched = _row_range(m) if rows is None else rows
        order = np.concatenate((searched[start:], searched[:start]))
        active = [cp for cp in self.filter if cp.name not in state.skip_filter_plugins]
        nominated_nodes = self._nominated_pods()

        if not active:
            feasible = order[:num_to_find]
            processed = len(feasible)
        elif rows is not None and len(rows) * 8 < n:
            # a PreFilterResult named a few nodes (a DaemonSet pod's metadata.name pin): evaluate just those,
            # per node, rather than every plugin's batch over the whole table
            feasible, processed = self._filter_per_node(state, pod, snapshot, active, order, num_to_find, diagnosis,
                                                        nominated_nodes, few_rows=True)
        elif self._filter_all_batch or all(cp.batch for cp in active):
            feasible, processed = self._filter_batch(state, pod, snapshot, active, order, num_to_find, diagnosis,
                                                     nominated_nodes, start if m == n else -1)
        else:
            feasible, processed = self._filter_per_node(state, pod, snapshot, active, order, num_to_find, diagnosis,
                                                        nominated_nodes)
        self.next_start_node_index = (self.next_start_node_index + processed) % n
        return feasible

    def _nominated_reuse(self, state: CycleState, pod: Pod, replays: filter_readers.Replays) -> Any:
        """None, or a function giving `run_filter_with_nominated_pods` on a node that reuses the outcome of an
        earlier node alike (see filter_readers) in this cycle: a preemption wave leaves many nodes holding the
        same pods and the same kind of nominated preemptor, each checked per node in every cycle. A reuse's
        evaluation counts go to `replays`, which the caller flushes."""
        skip = state.skip_filter_plugins
        active = [cp for cp in self.filter if cp.name not in skip]
        if not all(cp.name in filter_readers.READ_ONLY and filter_readers.in_tree(cp.name, cp.plugin)
                   for cp in active) or any(name not in skip for name, _ in self._extensions("add_pod")):
            return None
        node_only = [cast(FilterPlugin, cp.plugin).filter for cp in active if cp.name in filter_readers.NODE_ONLY]
        memo: dict[Any, tuple[Status | None, list[tuple[str, str, int]]]] = {}

        def check(ni: NodeInfo, node_only_passed: bool, pods: list[Pod]) -> Status | None:
            """`node_only_passed`: this cycle's batch Filter already passed the node on every Node-only plugin
            (whose verdicts read the pod and the Node alone), so they are not asked again. `pods`: the pods
            nominated to the node."""
            if ni.node is None or (not node_only_passed and any(fn(state, pod, ni) is not None for fn in node_only)):
                return self.run_filter_with_nominated_pods(state, pod, ni, self.nominated_to_add(pod, pods))
            nominated, key = filter_readers.nominated_resource_key(ni, pods, pod)
            got = memo.get(key)
            if got is not None:
                replays.add(got[1])
                return got[0]
            st, counted = filter_readers.recording_evaluations(
                self, lambda: self.run_filter_with_nominated_pods(state, pod, ni, nominated))
            if st is None or st.code != Code.Error:
                memo[key] = (st, counted)
            return st  # type: ignore[no-any-return]
        return check

    def _nominated_pods(self) -> Mapping[str, list[Pod]]:
        """Every nominated node's pods, read once for a cycle (read only)."""
        fn = getattr(self.handle, "nominated_pods_by_node", None)
        return fn() if callable(fn) else {}

    def _filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[ConfiguredPlugin],
                      order: np.ndarray, num_to_find: int, diagnosis: Diagnosis,
                      nominated_nodes: Mapping[str, list[Pod]], rotation: int = -1) -> tuple[np.ndarray, int]:
        """`rotation` >= 0: `order` is every row, rotated to begin at that one."""
        batches: list[tuple[ConfiguredPlugin, FilterBatch]] = []
        ok = None
        for cp in active:
            start = time.perf_counter()
            fb, err = self._invoke("Filter", cp.name, cast(FilterBatchPlugin, cp.plugin).filter_batch, state, pod,
                                   snapshot, state=state, timed=True,  # one observation for the whole batch
                                   unpack=filter_batch_return)
            if err is not None:
                raise CycleError(err) from err.error
            self._observe("Filter", start, None)
            batches.append((cp, fb))
            if fb.all_pass:  # passes every node: nothing to combine
                continue
            if ok is None:
                ok = fb.ok.copy()
            else:
                ok &= fb.ok
        if any(fb.pending is not None for _, fb in batches):  # some rows need a plugin's per-node verdict
            return self._walk_batches(state, pod, snapshot, active, {cp.name: fb for cp, fb in batches}, order,
                                      num_to_find, diagnosis, nominated_nodes)
        if ok is None:
            ok = np.ones(len(snapshot), dtype=bool)
        nominated_statuses: dict[int, Status] = {}
        if nominated_nodes:
            replays = filter_readers.Replays(self)
            reuse = self._nominated_reuse(state, pod, replays)
            node_ok = None  # rows every in-tree Node-only plugin passed in this batch
            for cp, fb in batches:
                if cp.name in filter_readers.NODE_ONLY and filter_readers.in_tree(cp.name, cp.plugin):
                    node_ok = fb.ok if node_ok is None else (node_ok & fb.ok)
            rows: list[int] = []
            passed: list[bool] = []
            for nm, pods in nominated_nodes.items():  # nodes with nominated pods: the exact two-pass check
                ni = snapshot.by_name.get(nm)
                if ni is not None:
                    found = (self.run_filter_with_nominated_pods(state, pod, ni, self.nominated_to_add(pod, pods))
                             if reuse is None else reuse(ni, node_ok is not None and bool(node_ok[ni.row]), pods))
                    rows.append(ni.row)
                    passed.append(found is None)
                    if found is not None:
                        nominated_statuses[ni.row] = found
            replays.flush()
            ok[rows] = passed  # at once: a preemption wave leaves hundreds of nominated nodes
        ok_in_order = ok[order] if rotation < 0 else np.concatenate((ok[rotation:], ok[:rotation]))
        feasible_pos = np.flatnonzero(ok_in_order)
        if len(feasible_pos) > num_to_find:
            feasible_pos = feasible_pos[:num_to_find]
            processed = int(feasible_pos[-1]) + 1
        else:
            processed = len(order)
        if self.metrics is not None:
            walked = order[:processed]
            if nominated_nodes:  # those rows were walked (and counted) by run_filter_with_nominated_pods
                skip = {ni.row for nm in nominated_nodes if (ni := snapshot.by_name.get(nm)) is not None}
                walked = walked[~np.isin(walked, list(skip))]
            alive = np.ones(len(walked), dtype=bool)
            for cp, fb in batches:  # a node reaches a plugin only when every earlier one passed it
                self._evaluated("Filter", cp.name, int(alive.sum()))
                alive &= fb.ok[walked]
        failed_rows = order[:processed][~ok_in_order[:processed]]
        if len(failed_rows):
            self._record_batch_failures(state, pod, snapshot, batches, failed_rows, diagnosis, nominated_nodes,
                                        nominated_statuses)
        return order[feasible_pos], processed

    def _record_batch_failures(self, state: CycleState, pod: Pod, snapshot: Snapshot,
                               batches: list[tuple[ConfiguredPlugin, FilterBatch]], failed_rows: np.ndarray,
                               diagnosis: Diagnosis, nominated_nodes: Mapping[str, list[Pod]],
                               nominated_statuses: dict[int, Status] | None = None) -> None:
        """Each failed row's Status. `nominated_statuses`: the verdicts the nominated-pods check already gave
        (rows that fail only through nominated pods take theirs instead of being filtered again)."""
        remaining = failed_rows
        infos = snapshot.node_infos
        for cp, fb in batches:
            if not len(remaining):
                break
            if fb.all_pass:
                continue
            fails = ~fb.ok[remaining]
            here = remaining[fails]
            remaining = remaining[~fails]
            if not len(here):
                continue
            diagnosis.unschedulable_plugins.add(cp.name)
            uniform = fb.status if isinstance(fb.status, Status) else None
            if uniform is not None:
                uniform.plugin = cp.name
                diagnosis.record_many(snapshot.row_names()[here].tolist(), uniform)
                continue
            # rows with equal keys share one Status: one call per distinct key; a few failed rows are asked
            # one by one, cheaper than the keys, which cover every row of the table
            keys = fb.row_keys() if len(here) > _FEW_FAILED_ROWS else None
            if keys is not None:
                _, first, inverse, counts = np.unique(keys[here], return_index=True, return_inverse=True,
                                                      return_counts=True)
                shared = [fb.status_at(int(here[i])) for i in first.tolist()]
                for st in shared:
                    st.plugin = cp.name
                row_names = snapshot.row_names()[here].tolist()
                if len(shared) == 1:
                    diagnosis.record_many(row_names, shared[0])
                else:
                    by_first = np.argsort(first, kind="stable").tolist()  # the order of each one's first node
                    diagnosis.record_each(row_names, [shared[j] for j in inverse.tolist()],
                                          [(shared[j], int(counts[j])) for j in by_first])
                continue
            for r in here.tolist():
                st = fb.status_at(r)
                st.plugin = cp.name
                diagnosis.record(infos[r].name, st)
        known = nominated_statuses or {}
        for r in remaining.tolist():  # failed only through nominated pods
            ni = infos[r]
            found = known.get(r)
            if found is None:
                found = self.run_filter_with_nominated_pods(state, pod, ni)
            if found is not None:
                diagnosis.record(ni.name, found)
                if found.plugin:
                    diagnosis.unschedulable_plugins.add(found.plugin)

    def _filter_per_node(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[ConfiguredPlugin],
                         order: np.ndarray, num_to_find: int, diagnosis: Diagnosis,
                         nominated_nodes: Mapping[str, list[Pod]], few_rows: bool = False
                         ) -> tuple[np.ndarray, int]:
        batch_results: dict[str, FilterBatch] = {}
        for cp in active:
            if few_rows and callable(getattr(cp.plugin, "filter", None)):
                continue  # a handful of nodes: the per-node method is cheaper than a verdict for every row
            if cp.batch:  # batch verdicts equal per-node ones: compute them once for all nodes
                fb, err = self._invoke("Filter", cp.name, cast(FilterBatchPlugin, cp.plugin).filter_batch, state,
                                       pod, snapshot, unpack=filter_batch_return)
                if err is not None:
                    raise CycleError(err) from err.error
                batch_results[cp.name] = fb
        return self._walk_batches(state, pod, snapshot, active, batch_results, order, num_to_find, diagnosis,
                                  nominated_nodes)

    def _walk_batches(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[ConfiguredPlugin],
                      batch_results: dict[str, FilterBatch], order: np.ndarray, num_to_find: int,
                      diagnosis: Diagnosis, nominated_nodes: Mapping[str, list[Pod]]) -> tuple[np.ndarray, int]:
        """The per-node walk over `active`, the plugins in `batch_results` answering from their verdicts."""
        batch_ok: np.ndarray | None = None
        for fb in batch_results.values():
            batch_ok = fb.ok.copy() if batch_ok is None else (batch_ok & fb.ok)
        per_node = [cp for cp in active if cp.name not in batch_results]
        feasible: list[int] = []
        infos = snapshot.node_infos
        evals: Counter[str] = Counter()
        try:
            processed = self._walk_nodes(state, pod, active, per_node, batch_results, batch_ok, order, num_to_find,
                                         diagnosis, nominated_nodes, infos, feasible, evals)
        finally:
            for name, n in evals.items():
                self._evaluated("Filter", name, n)
        return np.asarray(feasible, dtype=np.int64), processed

    def _walk_nodes(self, state: CycleState, pod: Pod, active: list[ConfiguredPlugin],
                    per_node: list[ConfiguredPlugin], batch_results: dict[str, FilterBatch],
                    batch_ok: np.ndarray | None, order: np.ndarray, num_to_find: int, diagnosis: Diagnosis,
                    nominated_nodes: Mapping[str, list[Pod]], infos: list[NodeInfo], feasible: list[int],
                    evals: Counter[str]) -> int:
        """The per-node walk in `order` until `num_to_find` nodes pass; returns how many were processed."""
        processed = 0
        what = "running {} filter plugin"
        batch_names = tuple(batch_results)  # counted by hand below: Counter.update's Mapping check costs per node
        for row in order.tolist():
            processed += 1
            ni = infos[row]
            pods = nominated_nodes.get(ni.name)
            if pods is not None:
                st = self.run_filter_with_nominated_pods(state, pod, ni, self.nominated_to_add(pod, pods))
            else:
                st = None
                # every batch plugin passed the node: only the per-node plugins can still reject it; otherwise
                # walk all plugins in order so the first rejecting one is the one reported, as kube-scheduler
                walk = per_node if batch_ok is None or batch_ok[row] else active
                if walk is per_node:
                    for name in batch_names:  # every batch plugin passed this node: each was evaluated
                        evals[name] += 1
                cp = active[0]
                try:  # _invoke's conversion, around the loop: this runs once per node and plugin
                    for cp in walk:
                        fb = batch_results.get(cp.name)
                        evals[cp.name] += 1
                        ret: Status | None
                        if fb is not None:
                            if fb.ok[row]:
                                continue
                            pending = fb.pending
                            if pending is not None and pending[row]:  # undecided by the batch: ask the node
                                ret = cast(FilterPlugin, cp.plugin).filter(state, pod, ni)
                            else:
                                ret = fb.status_at(row)
                        else:
                            ret = cast(FilterPlugin, cp.plugin).filter(state, pod, ni)
                        if ret is None:
                            continue
                        st = verdict(what, cp.name, ret)
                        if st is not None:
                            break
                except Exception as exc:
                    raise CycleError(failure(what, cp.name, exc)) from exc
            if st is None:
                feasible.append(row)
                if len(feasible) >= num_to_find:
                    break
            else:
                if st.code == Code.Error:
                    raise CycleError(st)
                diagnosis.record(ni.name, st)
                if st.plugin:
                    diagnosis.unschedulable_plugins.add(st.plugin)
        return processed

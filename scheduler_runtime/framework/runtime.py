"""Framework: runs one profile's plugins at each extension point with kube-scheduler's status rules."""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..config.fielderrors import go_value
from ..objects import Pod
from .cycle_state import CycleState
from .handle import Handle
from .interface import (
    BindPlugin,
    FilterBatchPlugin,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreBatchPlugin,
    ScorePlugin,
)
from .nodelist import NodeList
from .plugin import FilterBatch, Plugin
from .snapshot import Snapshot
from .status import MAX_SCORE, MIN_SCORE, Code, Status
from .types import NodeInfo, NodeScore, PostFilterResult, PreFilterResult, QueuedPodInfo
from .waiting import WaitingPod, WaitingPods

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive percentageOfNodesToScore (int32 truncating arithmetic)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)



_q = go_value  # Go's %q, for the names kube-scheduler quotes in its messages


class PluginError(Exception):
    """A plugin raised or returned something invalid; carries the plugin's name."""


def _plugin_error(message: str, exc: BaseException) -> PluginError:
    """The one-line error for the pod, keeping the plugin's own exception (and its traceback) as the cause
    so the scheduler can log where in the plugin it was raised."""
    err = PluginError(message)
    err.__cause__ = exc
    return err


@dataclass(slots=True)
class ConfiguredPlugin:
    plugin: Plugin
    name: str
    weight: int = 0
    batch: bool = False


@dataclass
class Diagnosis:
    """Why a pod did not fit: per-node statuses, the plugins that rejected, PreFilter/PostFilter messages."""

    node_statuses: dict[str, Status] = field(default_factory=dict)
    absent_status: Status | None = None  # nodes outside a PreFilterResult
    num_absent: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""


class FitError(Exception):
    """No node fits; `message` is kube-scheduler's FailedScheduling text."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__(self.message)

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for st in self.diagnosis.node_statuses.values():
            for r in st.all_reasons:
                counts[r] = counts.get(r, 0) + 1
        if self.diagnosis.absent_status is not None and self.diagnosis.num_absent:
            for r in self.diagnosis.absent_status.all_reasons:
                counts[r] = counts.get(r, 0) + self.diagnosis.num_absent
        return counts

    @property
    def message(self) -> str:
        d = self.diagnosis
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            parts = sorted(f"{c} {r}" for r, c in self.reason_counts().items())
            msg += " " + ", ".join(parts) + "."
        if d.post_filter_msg:
            msg += " " + d.post_filter_msg
        return msg


@dataclass
class ScoreResult:
    """Scores of the feasible nodes: per plugin (raw, normalised) and weighted totals."""

    rows: np.ndarray
    names: list[str]
    totals: np.ndarray
    per_plugin: dict[str, tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict)


#: the codes most extension points pass on as they are; any other non-success code is turned into an Error
_REJECTED = frozenset({Code.Unschedulable, Code.UnschedulableAndUnresolvable, Code.Pending})


def _invoke(what: str, name: str, call: Callable[..., Any], *args: Any, passes: frozenset[Code] = _REJECTED,
            unpack: Callable[[Any], tuple[Any, Any]] | None = None) -> tuple[Any, Status | None]:
    """Call one plugin method and turn whatever it did into (value, Status | None): every extension point
    calls its plugins through here (the per-node Filter and Score loops apply the same `_failure` and
    `_verdict` around a whole loop, so that a node costs no extra call).

    `what` names the call as kube-scheduler's messages do, `{}` standing for the quoted plugin name
    (`running Reserve plugin {}`; formatted only on failure). `unpack` splits a composite return into
    (value, status). A _CycleError raised inside (a nested framework call) goes through unchanged."""
    try:
        ret = call(*args)
        value, st = (None, ret) if unpack is None else unpack(ret)
    except _CycleError:
        raise
    except Exception as exc:
        return None, _failure(what, name, exc)
    return value, _verdict(what, name, st, passes)


def _failure(what: str, name: str, exc: BaseException) -> Status:
    """A plugin raised: an Error status `<what>: <exception>` naming the plugin; the exception stays the
    cause, for the traceback in the log."""
    return Status.as_error(_plugin_error(f"{what.format(_q(name))}: {exc}", exc)).with_plugin(name)


def _verdict(what: str, name: str, st: Any, passes: frozenset[Code] = _REJECTED) -> Status | None:
    """A plugin's returned status as the framework takes it: None for Success; a code this point passes on
    (`passes`) as it is, with the plugin's name; any other code, or something not a Status, an Error."""
    if st is None:
        return None
    if not isinstance(st, Status):
        return Status.as_error(PluginError(f"{what.format(_q(name))}: returned {type(st).__name__}, expected "
                                           "Status or None")).with_plugin(name)
    if st.code == Code.Success:
        return None
    st.plugin = name
    if st.code in passes:
        return st
    return Status.as_error(PluginError(f"{what.format(_q(name))}: {st.message}")).with_plugin(name)


def _pre_filter_return(ret: Any) -> tuple[PreFilterResult | None, Any]:
    if isinstance(ret, tuple):
        r, st = ret
    elif isinstance(ret, PreFilterResult):
        r, st = ret, None
    else:
        r, st = None, ret
    if r is not None and not isinstance(r, PreFilterResult):
        raise PluginError(f"returned {type(r).__name__}, expected PreFilterResult")
    return r, st


def _post_filter_return(ret: Any) -> tuple[PostFilterResult | None, Any]:
    return ret if isinstance(ret, tuple) else (None, ret)


def _permit_return(ret: Any) -> tuple[float, Any]:
    st, timeout = ret if isinstance(ret, tuple) else (ret, 0.0)
    return float(timeout or 0), st


def _score_return(ret: Any) -> tuple[int, Any]:
    val, st = ret if isinstance(ret, tuple) else (ret, None)
    if isinstance(val, bool) or not isinstance(val, int | np.integer):
        raise PluginError(f"score returned {type(val).__name__}, expected int")
    return int(val), st


def _filter_batch_return(ret: Any) -> tuple[FilterBatch, None]:
    if not isinstance(ret, FilterBatch):
        raise PluginError(f"filter_batch returned {type(ret).__name__}, expected FilterBatch")
    return ret, None


def _value(ret: Any) -> tuple[Any, None]:
    """For a framework helper around plugin calls: the return is a value, never a status."""
    return ret, None


def _ignored(ret: Any) -> tuple[None, None]:
    """Unreserve and PostBind return nothing the framework uses."""
    return None, None


_ALL_CODES = frozenset(Code)
_NO_CODES: frozenset[Code] = frozenset()


def _extension_point(point: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """scheduler_framework_extension_point_duration_seconds for a whole extension point, labelled with the
    status it ends with (Success when it returns None), as kube's Run*Plugins record it."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(self: Framework, *args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            out = fn(self, *args, **kw)
            self._observe(point, start, out if isinstance(out, Status) else None)
            return out
        return run
    return deco


class Framework:
    """One profile: its plugins per extension point, in run order, with score weights."""

    def __init__(self, profile_name: str, handle: Handle, plan: dict[str, list[tuple[Plugin, int]]],
                 percentage_of_nodes_to_score: int | None = None, rng: random.Random | None = None,
                 metrics: Any = None) -> None:
        self.profile_name = profile_name
        self.handle = handle
        handle.framework = self
        self.rng = rng or random.Random()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.waiting_pods = WaitingPods()
        self.metrics = metrics
        self.next_start_node_index = 0
        #: scheduler_runtime.extenders.ExtenderSet shared by all profiles, or None
        self.extenders: Any = None

        def conf(point: str, batch_attr: str | None = None) -> list[ConfiguredPlugin]:
            out = []
            for plugin, weight in plan.get(point, []):
                batch = batch_attr is not None and callable(getattr(plugin, batch_attr, None))
                out.append(ConfiguredPlugin(plugin, plugin.name, weight or (1 if point == "score" else 0), batch))
            return out

        self.pre_enqueue = conf("preEnqueue")
        self.queue_sort = conf("queueSort")
        self.pre_filter = conf("preFilter")
        self.filter = conf("filter", "filter_batch")
        self.post_filter = conf("postFilter")
        self.pre_score = conf("preScore")
        self.score = conf("score", "score_batch")
        self.reserve = conf("reserve")
        self.permit = conf("permit")
        self.pre_bind = conf("preBind")
        self.bind = conf("bind")
        self.post_bind = conf("postBind")
        self.plugins: dict[str, Plugin] = {}
        for lst in plan.values():
            for plugin, _ in lst:
                self.plugins[plugin.name] = plugin
        self._filter_all_batch = all(p.batch for p in self.filter)
        if metrics is not None and hasattr(metrics, "init_plugin_evaluations"):
            metrics.init_plugin_evaluations(profile_name, {
                "PreFilter": [cp.name for cp in self.pre_filter], "Filter": [cp.name for cp in self.filter],
                "PreScore": [cp.name for cp in self.pre_score], "Score": [cp.name for cp in self.score]})
        #: a plugin outside the runtime's own in-tree set runs in the binding cycle (it might hang there);
        #: Permit runs in the scheduling cycle, and a Permit Wait has its own thread already
        self.has_foreign_binding_plugins = any(
            not type(cp.plugin).__module__.startswith("scheduler_runtime.")
            for cp in (*self.pre_bind, *self.bind, *self.post_bind))

    # ------------------------------------------------------------------ helpers
    def _observe(self, point: str, start: float, status: Status | None) -> None:
        if self.metrics is not None:
            self.metrics.extension_point(self.profile_name, point, status, time.perf_counter() - start)

    def _evaluated(self, point: str, name: str, n: int = 1) -> None:
        """scheduler_plugin_evaluation_total: kube counts a PreFilter/PreScore run unless it returned Skip,
        and a Filter/Score run per node it evaluated."""
        if self.metrics is not None and n:
            self.metrics.plugin_evaluated(self.profile_name, point, name, n)

    def _timed(self, state: CycleState, point: str, name: str, start: float, status: Any) -> None:
        """scheduler_plugin_execution_duration_seconds, in the cycles kube samples (record_plugin_metrics)."""
        if self.metrics is not None and state.record_plugin_metrics:
            code = status.code.name if isinstance(status, Status) else "Success"
            self.metrics.plugin_duration.labels(name, point, code).observe(time.perf_counter() - start)

    def has_post_filter(self) -> bool:
        return bool(self.post_filter)

    def has_score_plugins(self) -> bool:
        return bool(self.score)

    def less(self) -> Callable[[QueuedPodInfo, QueuedPodInfo], bool] | None:
        return cast(QueueSortPlugin, self.queue_sort[0].plugin).less if self.queue_sort else None

    def events_to_register(self) -> dict[str, list[Any] | None]:
        """plugin name -> its ClusterEventWithHint list (None = all events), for the queue's requeueing."""
        out: dict[str, list[Any] | None] = {}
        for cp in (*self.pre_enqueue, *self.pre_filter, *self.filter, *self.reserve, *self.permit):
            fn = getattr(cp.plugin, "events_to_register", None)
            out[cp.name] = list(fn()) if callable(fn) else None
        return out

    # ------------------------------------------------------------------ PreEnqueue
    @_extension_point("PreEnqueue")
    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        for cp in self.pre_enqueue:
            _, st = _invoke("running PreEnqueue plugin {}", cp.name,
                            cast(PreEnqueuePlugin, cp.plugin).pre_enqueue, pod)
            if st is not None:
                return st
        return None

    # ------------------------------------------------------------------ PreFilter
    def run_pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None,
                                                                                    Status | None, set[str]]:
        """Returns (merged result, status, plugins that rejected)."""
        start = time.perf_counter()
        result: PreFilterResult | None = None
        rejected: Status | None = None
        rejectors: set[str] = set()
        narrowing: list[str] = []
        for cp in self.pre_filter:
            t0 = time.perf_counter()
            r, st = _invoke("running PreFilter plugin {}", cp.name,
                            cast(PreFilterPlugin, cp.plugin).pre_filter, state, pod, nodes,
                            passes=_REJECTED | {Code.Skip}, unpack=_pre_filter_return)
            self._timed(state, "PreFilter", cp.name, t0, st)
            if st is not None and st.code == Code.Skip:
                state.skip_filter_plugins.add(cp.name)
                continue
            self._evaluated("PreFilter", cp.name)
            if st is not None:
                if st.code in (Code.UnschedulableAndUnresolvable, Code.Error):
                    if st.code != Code.Error:
                        rejectors.add(cp.name)
                    self._observe("PreFilter", start, st)
                    return None, st, rejectors
                rejectors.add(cp.name)  # Unschedulable or Pending: the other PreFilter plugins still run
                rejected = rejected or st
                continue
            if r is not None and not r.all_nodes():
                narrowing.append(cp.name)
                result = r if result is None else result.merge(r)
                if not result.node_names:
                    msg = (f"node(s) didn't satisfy plugin {narrowing[0]}" if len(narrowing) == 1 else
                           f"node(s) didn't satisfy plugin(s) [{' '.join(narrowing)}] simultaneously")
                    st = Status(Code.UnschedulableAndUnresolvable, msg)
                    rejectors.update(narrowing)
                    self._observe("PreFilter", start, st)
                    return None, st, rejectors
        if result is not None:
            result = PreFilterResult(result.node_names)
            state.write("__prefilter_narrowing__", list(narrowing))
        self._observe("PreFilter", start, rejected)
        return result, rejected, rejectors

    def _extensions(self, method: str) -> list[tuple[str, Callable[..., Any]]]:
        """(name, bound method) of the PreFilter plugins that have `method` (add_pod / remove_pod), in order:
        looked up once, since the preemption dry run calls these per victim per node."""
        cache = self.__dict__.setdefault("_extension_cache", {})
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
            _, st = _invoke("running AddPod on PreFilter plugin {}", name, fn,
                            state, pod, to_add, node_info, passes=_NO_CODES)
            if st is not None:
                return st
        return None

    def run_pre_filter_remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod,
                                  node_info: NodeInfo) -> Status | None:
        skip = state.skip_filter_plugins
        for name, fn in self._extensions("remove_pod"):
            if name in skip:
                continue
            _, st = _invoke("running RemovePod on PreFilter plugin {}", name, fn,
                            state, pod, to_remove, node_info, passes=_NO_CODES)
            if st is not None:
                return st
        return None

    # ------------------------------------------------------------------ Filter
    def run_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        """All Filter plugins on one node, per-node methods; first non-success stops (Error aborts)."""
        skip = state.skip_filter_plugins
        what = "running {} filter plugin"
        for cp in self.filter:
            if cp.name in skip:
                continue
            fn = getattr(cp.plugin, "filter", None)
            self._evaluated("Filter", cp.name)
            if fn is not None:
                _, st = _invoke(what, cp.name, fn, state, pod, node_info)
            else:  # batch-only plugin: evaluate on the node's table row
                fb, st = _invoke(what, cp.name, cast(FilterBatchPlugin, cp.plugin).filter_batch, state, pod,
                                 self.handle.snapshot, unpack=_filter_batch_return)
                if st is None and node_info.row >= 0 and not fb.ok[node_info.row]:
                    _, st = _invoke(what, cp.name, fb.status_at, node_info.row)
            if st is not None:
                return st
        return None

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        """Filter with higher-or-equal priority nominated pods added (pass 1) and without (pass 2)."""
        nominated = [p for p in self.handle.nominated_pods_for_node(node_info.name)
                     if p.priority >= pod.priority and p.uid != pod.uid]
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
        order = (np.arange(m, dtype=np.int64) + start) % m
        if rows is not None:
            order = rows[order]
        active = [cp for cp in self.filter if cp.name not in state.skip_filter_plugins]
        nominated_nodes = self._nominated_node_names()

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
                                                     nominated_nodes)
        else:
            feasible, processed = self._filter_per_node(state, pod, snapshot, active, order, num_to_find, diagnosis,
                                                        nominated_nodes)
        self.next_start_node_index = (self.next_start_node_index + processed) % n
        return feasible

    def _nominated_node_names(self) -> set[str]:
        fn = getattr(self.handle, "nominated_node_names", None)
        return fn() if callable(fn) else set()

    def _filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[ConfiguredPlugin],
                      order: np.ndarray, num_to_find: int, diagnosis: Diagnosis,
                      nominated_nodes: set[str]) -> tuple[np.ndarray, int]:
        batches: list[tuple[ConfiguredPlugin, FilterBatch]] = []
        ok = None
        for cp in active:
            start = time.perf_counter()
            fb, err = _invoke("running {} filter plugin", cp.name,
                              cast(FilterBatchPlugin, cp.plugin).filter_batch, state, pod, snapshot,
                              unpack=_filter_batch_return)
            if err is not None:
                raise _CycleError(err) from err.error
            self._timed(state, "Filter", cp.name, start, None)  # one observation for the whole batch
            self._observe("Filter", start, None)
            batches.append((cp, fb))
            ok = fb.ok.copy() if ok is None else (ok & fb.ok)
        assert ok is not None
        nominated_statuses: dict[int, Status] = {}
        if nominated_nodes:
            for nm in nominated_nodes:  # nodes with nominated pods get the exact per-node two-pass check
                ni = snapshot.by_name.get(nm)
                if ni is not None:
                    found = self.run_filter_with_nominated_pods(state, pod, ni)
                    ok[ni.row] = found is None
                    if found is not None:
                        nominated_statuses[ni.row] = found
        ok_in_order = ok[order]
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
                               diagnosis: Diagnosis, nominated_nodes: set[str],
                               nominated_statuses: dict[int, Status] | None = None) -> None:
        """Each failed row's Status. `nominated_statuses`: the verdicts the nominated-pods check already gave
        (rows that fail only through nominated pods take theirs instead of being filtered again)."""
        remaining = failed_rows
        infos = snapshot.node_infos
        statuses = diagnosis.node_statuses
        for cp, fb in batches:
            if not len(remaining):
                break
            fails = ~fb.ok[remaining]
            here = remaining[fails]
            remaining = remaining[~fails]
            if not len(here):
                continue
            diagnosis.unschedulable_plugins.add(cp.name)
            uniform = fb.status if isinstance(fb.status, Status) else None
            if uniform is not None:
                uniform.plugin = cp.name
                statuses.update(dict.fromkeys(snapshot.row_names()[here].tolist(), uniform))
                continue
            keys = fb.row_keys()
            if keys is not None:  # rows with equal keys share one Status: one call per distinct key
                _, first, inverse = np.unique(keys[here], return_index=True, return_inverse=True)
                shared = [fb.status_at(int(here[i])) for i in first.tolist()]
                for st in shared:
                    st.plugin = cp.name
                row_names = snapshot.row_names()[here].tolist()
                if len(shared) == 1:
                    statuses.update(dict.fromkeys(row_names, shared[0]))
                else:
                    statuses.update(zip(row_names, [shared[j] for j in inverse.tolist()], strict=True))
                continue
            for r in here.tolist():
                st = fb.status_at(r)
                st.plugin = cp.name
                statuses[infos[r].name] = st
        for r in remaining.tolist():  # failed only through nominated pods
            ni = infos[r]
            found = (nominated_statuses or {}).get(r)
            if found is None:
                found = self.run_filter_with_nominated_pods(state, pod, ni)
            if found is not None:
                statuses[ni.name] = found
                if found.plugin:
                    diagnosis.unschedulable_plugins.add(found.plugin)

    def _filter_per_node(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[ConfiguredPlugin],
                         order: np.ndarray, num_to_find: int, diagnosis: Diagnosis,
                         nominated_nodes: set[str], few_rows: bool = False) -> tuple[np.ndarray, int]:
        batch_results: dict[str, FilterBatch] = {}
        for cp in active:
            if few_rows and callable(getattr(cp.plugin, "filter", None)):
                continue  # a handful of nodes: the per-node method is cheaper than a verdict for every row
            if cp.batch:  # batch verdicts equal per-node ones: compute them once for all nodes
                fb, err = _invoke("running {} filter plugin", cp.name,
                                  cast(FilterBatchPlugin, cp.plugin).filter_batch, state, pod, snapshot,
                                  unpack=_filter_batch_return)
                if err is not None:
                    raise _CycleError(err) from err.error
                batch_results[cp.name] = fb
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
                    nominated_nodes: set[str], infos: list[NodeInfo], feasible: list[int],
                    evals: Counter[str]) -> int:
        """The per-node walk in `order` until `num_to_find` nodes pass; returns how many were processed."""
        processed = 0
        what = "running {} filter plugin"
        for row in order.tolist():
            processed += 1
            ni = infos[row]
            if ni.name in nominated_nodes:
                st = self.run_filter_with_nominated_pods(state, pod, ni)
            else:
                st = None
                # every batch plugin passed the node: only the per-node plugins can still reject it; otherwise
                # walk all plugins in order so the first rejecting one is the one reported, as kube-scheduler
                walk = per_node if batch_ok is None or batch_ok[row] else active
                if walk is per_node:
                    evals.update(batch_results.keys())  # every batch plugin passed this node: each was evaluated
                cp = active[0]
                try:  # _invoke's conversion, around the loop: this runs once per node and plugin
                    for cp in walk:
                        fb = batch_results.get(cp.name)
                        evals[cp.name] += 1
                        ret: Status | None
                        if fb is not None:
                            if fb.ok[row]:
                                continue
                            ret = fb.status_at(row)
                        else:
                            ret = cast(FilterPlugin, cp.plugin).filter(state, pod, ni)
                        if ret is None:
                            continue
                        st = _verdict(what, cp.name, ret)
                        if st is not None:
                            break
                except Exception as exc:
                    raise _CycleError(_failure(what, cp.name, exc)) from exc
            if st is None:
                feasible.append(row)
                if len(feasible) >= num_to_find:
                    break
            else:
                if st.code == Code.Error:
                    raise _CycleError(st)
                diagnosis.node_statuses[ni.name] = st
                if st.plugin:
                    diagnosis.unschedulable_plugins.add(st.plugin)
        return processed

    # ------------------------------------------------------------------ PostFilter
    def run_post_filter(self, state: CycleState, pod: Pod,
                        statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        start = time.perf_counter()
        reasons: list[str] = []
        rejector = ""
        result: PostFilterResult | None = None
        for cp in self.post_filter:
            r, st = _invoke("running PostFilter plugin {}", cp.name, cast(PostFilterPlugin, cp.plugin).post_filter,
                            state, pod, statuses, passes=_ALL_CODES, unpack=_post_filter_return)
            if st is None:
                self._observe("PostFilter", start, st)
                return r, Status(Code.Success)
            if st.code == Code.UnschedulableAndUnresolvable:
                self._observe("PostFilter", start, st)
                return r, st
            if not st.is_rejected():  # kube's AsStatus(s.AsError()): the plugin's own error, not wrapped
                err = Status.as_error(st.error if st.error is not None else PluginError(st.message))
                self._observe("PostFilter", start, err)
                return None, err.with_plugin(cp.name)
            reasons.extend(st.all_reasons)
            rejector = rejector or cp.name
            if r is not None and r.mode != 0:
                result = r
        final = Status(Code.Unschedulable, *reasons, plugin=rejector)
        self._observe("PostFilter", start, final)
        return result, final

    # ------------------------------------------------------------------ PreScore / Score
    def run_pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        start = time.perf_counter()
        for cp in self.pre_score:
            t0 = time.perf_counter()
            _, st = _invoke("running PreScore plugin {}", cp.name, cast(PreScorePlugin, cp.plugin).pre_score,
                            state, pod, nodes, passes=frozenset({Code.Skip}))
            self._timed(state, "PreScore", cp.name, t0, st)
            if st is None or st.code != Code.Skip:
                self._evaluated("PreScore", cp.name)
            if st is None:
                continue
            if st.code == Code.Skip:
                state.skip_score_plugins.add(cp.name)
                continue
            return st
        self._observe("PreScore", start, None)
        return None

    def run_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray,
                  keep_breakdown: bool = False) -> ScoreResult:
        start = time.perf_counter()
        totals = np.zeros(len(rows), dtype=np.int64)
        result = ScoreResult(rows, [], totals)
        infos = snapshot.node_infos
        for cp in self.score:
            if cp.name in state.skip_score_plugins:
                continue
            self._evaluated("Score", cp.name, len(rows))
            t0 = time.perf_counter()
            raw, err = _invoke("running Score plugin {}", cp.name, self._score_one, cp, state, pod, snapshot, rows,
                               infos, unpack=_value)
            if err is None:
                self._timed(state, "Score", cp.name, t0, None)  # per node in kube; here one per plugin run
                norm, err = _invoke("running Score plugin {}", cp.name, self._normalize, cp, state, pod, rows, raw,
                                    infos, unpack=_value)
            if err is not None:
                raise _CycleError(err) from err.error
            if len(norm) and (int(norm.max()) > MAX_SCORE or int(norm.min()) < MIN_SCORE):
                bad = int(norm.max()) if int(norm.max()) > MAX_SCORE else int(norm.min())
                raise _CycleError(Status.as_error(PluginError(
                    f"plugin {_q(cp.name)} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_SCORE}, {MAX_SCORE}] after normalizing")).with_plugin(cp.name))
            totals += norm * cp.weight
            if keep_breakdown:
                result.per_plugin[cp.name] = (raw, norm, cp.weight)
        self._observe("Score", start, None)
        return result

    def _score_one(self, cp: ConfiguredPlugin, state: CycleState, pod: Pod, snapshot: Snapshot,
                   rows: np.ndarray, infos: list[NodeInfo]) -> np.ndarray:
        if cp.batch:
            raw = cast(ScoreBatchPlugin, cp.plugin).score_batch(state, pod, snapshot, rows)
            if not isinstance(raw, np.ndarray) or raw.shape != rows.shape:
                raise PluginError(f"score_batch returned {type(raw).__name__}, expected an array of {len(rows)}")
            return raw.astype(np.int64, copy=False)
        out = np.empty(len(rows), dtype=np.int64)
        fn = cast(ScorePlugin, cp.plugin).score
        for i, r in enumerate(rows.tolist()):
            ret = fn(state, pod, infos[r])
            if ret.__class__ is not int:  # (score, status), a numpy integer, or a wrong return
                ret, st = _score_return(ret)
                err = _verdict("running Score plugin {}", cp.name, st, passes=frozenset())
                if err is not None:
                    raise _CycleError(err)
            out[i] = ret
        return out

    def _normalize(self, cp: ConfiguredPlugin, state: CycleState, pod: Pod, rows: np.ndarray,
                   raw: np.ndarray, infos: list[NodeInfo]) -> np.ndarray:
        batch = getattr(cp.plugin, "normalize_score_batch", None)
        if callable(batch):
            return np.asarray(batch(state, pod, rows, raw.copy()), dtype=np.int64)
        fn = getattr(cp.plugin, "normalize_score", None)
        if not callable(fn):
            return raw
        scores = [NodeScore(infos[r].name, int(s)) for r, s in zip(rows.tolist(), raw.tolist(), strict=True)]
        _, st = _invoke("running Normalize on Score plugin {}", cp.name, fn, state, pod, scores, passes=frozenset())
        if st is not None:
            raise _CycleError(st) from st.error
        return np.fromiter((s.score for s in scores), dtype=np.int64, count=len(scores))

    def select_host(self, totals: np.ndarray) -> int:
        """Index of a max-score node, ties broken uniformly at random."""
        best = totals.max()
        idx = np.flatnonzero(totals == best)
        if len(idx) == 1:
            return int(idx[0])
        return int(idx[self.rng.randrange(len(idx))])

    # ------------------------------------------------------------------ Reserve / Permit
    @_extension_point("Reserve")
    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for cp in self.reserve:
            t0 = time.perf_counter()
            _, st = _invoke("running Reserve plugin {}", cp.name, cast(ReservePlugin, cp.plugin).reserve,
                            state, pod, node_name)
            self._timed(state, "Reserve", cp.name, t0, st)
            if st is not None:
                return st
        return None

    @_extension_point("Unreserve")
    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for cp in reversed(self.reserve):
            fn = getattr(cp.plugin, "unreserve", None)
            if fn is None:
                continue
            _, st = _invoke("running Unreserve plugin {}", cp.name, fn, state, pod, node_name, unpack=_ignored)
            if st is not None:  # Unreserve cannot fail; log and go on
                self.handle.logger.error("Unreserve plugin %s failed for pod %s: %s", cp.name, pod.key,
                                         st.error.__cause__ if st.error is not None else st.message)

    @_extension_point("Permit")
    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        timeouts: dict[str, float] = {}
        for cp in self.permit:
            timeout, st = _invoke("running Permit plugin {}", cp.name, cast(PermitPlugin, cp.plugin).permit,
                                  state, pod, node_name, passes=_REJECTED | {Code.Wait}, unpack=_permit_return)
            if st is None:
                continue
            if st.code == Code.Wait:
                timeouts[cp.name] = timeout
                continue
            return st
        if timeouts:
            self.waiting_pods.add(WaitingPod(pod, timeouts, node_name=node_name))
            return Status(Code.Wait, f"one or more plugins asked to wait and no plugin rejected pod {_q(pod.name)}")
        return None

    def wait_on_permit(self, pod: Pod) -> Status | None:
        wp = self.waiting_pods.get(pod.uid)
        if wp is None:
            return None
        try:
            st = wp.wait()
        finally:
            self.waiting_pods.remove(pod.uid)
        if st.code == Code.Success:
            return None
        return st

    # ------------------------------------------------------------------ binding cycle
    @_extension_point("PreBind")
    def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for cp in self.pre_bind:
            t0 = time.perf_counter()
            _, st = _invoke("running PreBind plugin {}", cp.name, cast(PreBindPlugin, cp.plugin).pre_bind,
                            state, pod, node_name, passes=_REJECTED | {Code.Skip})
            self._timed(state, "PreBind", cp.name, t0, st)
            if st is not None and st.code != Code.Skip:
                return st
        return None

    @_extension_point("Bind")
    def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if self.extenders is not None:  # kube-scheduler's bind(): extenders first, then the Bind plugins
            bound, ext_st = self.extenders.bind(state, pod, node_name)
            if bound:
                return cast("Status | None", ext_st)
        if not self.bind:
            return Status(Code.Skip)
        for cp in self.bind:
            t0 = time.perf_counter()
            _, st = _invoke("running Bind plugin {}", cp.name, cast(BindPlugin, cp.plugin).bind, state, pod, node_name,
                            passes=_REJECTED | {Code.Skip})
            self._timed(state, "Bind", cp.name, t0, st)
            if st is not None and st.code == Code.Skip:
                continue
            return st
        return Status(Code.Skip, "all bind plugins skipped")

    @_extension_point("PostBind")
    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for cp in self.post_bind:
            _, st = _invoke("running PostBind plugin {}", cp.name, cast(PostBindPlugin, cp.plugin).post_bind,
                            state, pod, node_name, unpack=_ignored)
            if st is not None:  # PostBind is informational; log and go on
                self.handle.logger.error("PostBind plugin %s failed for pod %s: %s", cp.name, pod.key,
                                         st.error.__cause__ if st.error is not None else st.message)

    def plugin_names(self) -> Iterable[str]:
        return self.plugins.keys()


class _CycleError(Exception):
    """Aborts the scheduling cycle with an Error status (a plugin failed, not a rejection)."""

    def __init__(self, status: Status) -> None:
        self.status = status
        super().__init__(status.message)


CycleError = _CycleError

"""Framework: runs one profile's plugins at each extension point with kube-scheduler's status rules.

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/runtime/framework.go (Run*Plugins: the order, which
codes stop a point, Skip, Wait, the extension-point metrics). Each plugin call goes through
`invoke.PluginCaller._invoke` once; Filter and the feasible-node search are in `filtering.py`, the cycle's
outcome types in `outcomes.py`.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np

from ..fielderrors import go_value
from ..objects import Pod
from .cycle_state import CycleState
from .filtering import FilterRunner
from .handle import Handle
from .interface import (
    BindPlugin,
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
from .invoke import (
    ALL_CODES,
    REJECTED,
    ConfiguredPlugin,
    CycleError,
    PluginError,
    ignored_return,
    permit_return,
    post_filter_return,
    pre_filter_return,
    score_return,
    value_return,
    verdict,
)
from .nodelist import NodeList
from .outcomes import Diagnosis, FitError, ScoreResult, num_feasible_nodes_to_find
from .plugin import Plugin
from .snapshot import Snapshot
from .status import MAX_SCORE, MIN_SCORE, Code, Status
from .types import NodeInfo, NodeScore, PostFilterResult, PreFilterResult, QueuedPodInfo
from .waiting import WaitingPod, WaitingPods

#: names importers of this module use (the framework's outcomes and errors live in outcomes.py and invoke.py)
__all__ = ["ConfiguredPlugin", "CycleError", "Diagnosis", "FitError", "Framework", "PluginError", "ScoreResult",
           "num_feasible_nodes_to_find"]


#: how kube-scheduler's messages name a failed call at each extension point (`{}`: the quoted plugin name)


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


class Framework(FilterRunner):
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
        #: opportunistic batching (scheduler_runtime.batching): the profile's PodSigner and OpportunisticBatch,
        #: both None while the OpportunisticBatching gate is off
        self.signer: Any = None
        self.batch: Any = None

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
            _, st = self._invoke("PreEnqueue", cp.name, cast(PreEnqueuePlugin, cp.plugin).pre_enqueue, pod)
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
            r, st = self._invoke("PreFilter", cp.name, cast(PreFilterPlugin, cp.plugin).pre_filter, state, pod, nodes,
                                 state=state, timed=True, evaluations=1, passes=REJECTED | {Code.Skip},
                                 unpack=pre_filter_return)
            if st is not None and st.code == Code.Skip:
                state.skip_filter_plugins.add(cp.name)
                continue
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


    # ------------------------------------------------------------------ Filter


    # ------------------------------------------------------------------ PostFilter
    def run_post_filter(self, state: CycleState, pod: Pod,
                        statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        start = time.perf_counter()
        reasons: list[str] = []
        rejector = ""
        result: PostFilterResult | None = None
        for cp in self.post_filter:
            success: list[str] = []  # a Success status's message (kube 1.37 preemption says where it preempts)

            def unpack(ret: Any, success: list[str] = success) -> tuple[PostFilterResult | None, Any]:
                r, st = post_filter_return(ret)
                if isinstance(st, Status) and st.code == Code.Success:
                    success.extend(st.all_reasons)
                return r, st

            r, st = self._invoke("PostFilter", cp.name, cast(PostFilterPlugin, cp.plugin).post_filter,
                                 state, pod, statuses, passes=ALL_CODES, unpack=unpack)
            if st is None:
                self._observe("PostFilter", start, st)
                return r, Status(Code.Success, *success)
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
            _, st = self._invoke("PreScore", cp.name, cast(PreScorePlugin, cp.plugin).pre_score, state, pod, nodes,
                                 state=state, timed=True, evaluations=1, passes=frozenset({Code.Skip}))
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
            # timed per node in kube; here once per plugin run
            raw, err = self._invoke("Score", cp.name, self._score_one, cp, state, pod, snapshot, rows, infos,
                                    state=state, timed=True, evaluations=len(rows), unpack=value_return)
            if err is None:
                if self._normalizers(cp) == (None, None):  # nothing to call: the raw scores stand
                    norm = raw
                else:
                    norm, err = self._invoke("Score", cp.name, self._normalize, cp, state, pod, rows, raw, infos,
                                             unpack=value_return)
            if err is not None:
                raise CycleError(err) from err.error
            if len(norm):  # each bound read once
                hi = int(norm.max())
                lo = int(norm.min()) if hi <= MAX_SCORE else MIN_SCORE
                if hi > MAX_SCORE or lo < MIN_SCORE:
                    bad = hi if hi > MAX_SCORE else lo
                    raise CycleError(Status.as_error(PluginError(
                        f"plugin {go_value(cp.name)} returns an invalid score {bad}, it should in the range of "
                        f"[{MIN_SCORE}, {MAX_SCORE}] after normalizing")).with_plugin(cp.name))
                if hi or lo:  # an all-zero column (a plugin with nothing to say for this pod) adds nothing
                    totals += norm if cp.weight == 1 else norm * cp.weight
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
                ret, st = score_return(ret)
                err = verdict("running Score plugin {}", cp.name, st, passes=frozenset())
                if err is not None:
                    raise CycleError(err)
            out[i] = ret
        return out

    def _normalizers(self, cp: ConfiguredPlugin) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
        """A Score plugin's (normalize_score_batch, normalize_score), None where it has no such method: looked
        up once per plugin object rather than per cycle (a missing attribute is a slow lookup)."""
        cache: dict[str, tuple[Plugin, Any, Any]] = self.__dict__.setdefault("_normalizer_cache", {})
        got = cache.get(cp.name)
        if got is None or got[0] is not cp.plugin:
            batch = getattr(cp.plugin, "normalize_score_batch", None)
            fn = getattr(cp.plugin, "normalize_score", None)
            got = cache[cp.name] = (cp.plugin, batch if callable(batch) else None, fn if callable(fn) else None)
        return got[1], got[2]

    def _normalize(self, cp: ConfiguredPlugin, state: CycleState, pod: Pod, rows: np.ndarray,
                   raw: np.ndarray, infos: list[NodeInfo]) -> np.ndarray:
        batch, fn = self._normalizers(cp)
        if batch is not None:
            return np.asarray(batch(state, pod, rows, raw.copy()), dtype=np.int64)
        if fn is None:
            return raw
        scores = [NodeScore(infos[r].name, int(s)) for r, s in zip(rows.tolist(), raw.tolist(), strict=True)]
        _, st = self._invoke("NormalizeScore", cp.name, fn, state, pod, scores, passes=frozenset())
        if st is not None:
            raise CycleError(st) from st.error
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
            _, st = self._invoke("Reserve", cp.name, cast(ReservePlugin, cp.plugin).reserve, state, pod, node_name,
                                 state=state, timed=True)
            if st is not None:
                return st
        return None

    @_extension_point("Unreserve")
    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for cp in reversed(self.reserve):
            fn = getattr(cp.plugin, "unreserve", None)
            if fn is None:
                continue
            _, st = self._invoke("Unreserve", cp.name, fn, state, pod, node_name, unpack=ignored_return)
            if st is not None:  # Unreserve cannot fail; log and go on
                self.handle.logger.error("Unreserve plugin %s failed for pod %s: %s", cp.name, pod.key,
                                         st.error.__cause__ if st.error is not None else st.message)

    @_extension_point("Permit")
    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        timeouts: dict[str, float] = {}
        for cp in self.permit:
            timeout, st = self._invoke("Permit", cp.name, cast(PermitPlugin, cp.plugin).permit, state, pod, node_name,
                                       passes=REJECTED | {Code.Wait}, unpack=permit_return)
            if st is None:
                continue
            if st.code == Code.Wait:
                timeouts[cp.name] = timeout
                continue
            return st
        if timeouts:
            self.waiting_pods.add(WaitingPod(pod, timeouts, node_name=node_name))
            return Status(Code.Wait,
                          f"one or more plugins asked to wait and no plugin rejected pod {go_value(pod.name)}")
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
    def will_wait_on_permit(self, pod: Pod) -> bool:
        return self.waiting_pods.get(pod.uid) is not None

    @_extension_point("PreBindPreFlight")
    def run_pre_bind_pre_flights(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """kube's RunPreBindPreFlights: None when some PreBind plugin will work for the pod on `node_name`,
        Skip when none will, an Error when one failed or answered other than Success, Skip or Error. The
        plugins that said Skip are not run at PreBind (`run_pre_bind`)."""
        out: Status | None = Status(Code.Skip)
        skipped = set()
        parallel = set()
        for cp in self.pre_bind:
            fn = getattr(cp.plugin, "pre_bind_pre_flight", None)
            if fn is None:  # a plugin that cannot tell is taken to work
                out = None
                continue
            if getattr(cp.plugin, "allow_parallel_pre_bind", False) is True:
                parallel.add(cp.name)
            _, st = self._invoke("PreBindPreFlight", cp.name, fn, state, pod, node_name, state=state, timed=True,
                                 passes=REJECTED | {Code.Skip})
            if st is None:
                out = None
            elif st.code == Code.Skip:
                skipped.add(cp.name)
            elif st.code == Code.Error:
                return st
            else:
                return Status.as_error(PluginError(
                    f"PreBindPreFlight {cp.name} returned {go_value(st.code.name)}, which is unsupported. It is "
                    "supposed to return Success, Skip, or Error status")).with_plugin(cp.name)
        state.skip_pre_bind_plugins = frozenset(skipped)
        state.parallel_pre_bind_plugins = frozenset(parallel)
        return out

    def _pre_bind_groups(self, state: CycleState) -> list[list[Any]]:
        """kube 1.37's PreBind plugin groups: consecutive plugins that allowed parallel running form one group,
        every other plugin is a group of its own; skipped plugins are left out (after grouping, so a skipped
        plugin that allowed parallel running does not split its neighbours)."""
        skipped, parallel = state.skip_pre_bind_plugins, state.parallel_pre_bind_plugins
        groups: list[list[Any]] = []
        run: list[Any] = []
        for cp in self.pre_bind:
            if cp.name in parallel:
                if cp.name not in skipped:
                    run.append(cp)
                continue
            if run:
                groups.append(run)
                run = []
            if cp.name not in skipped:
                groups.append([cp])
        if run:
            groups.append(run)
        return groups

    def _pre_bind_one(self, state: CycleState, cp: Any, pod: Pod, node_name: str) -> Status | None:
        _, st = self._invoke("PreBind", cp.name, cast(PreBindPlugin, cp.plugin).pre_bind, state, pod, node_name,
                             state=state, timed=True, passes=REJECTED | {Code.Skip})
        return st if st is not None and st.code != Code.Skip else None

    def _pre_bind_side_by_side(self, state: CycleState, group: list[Any], pod: Pod, node_name: str) -> Status | None:
        """One group of parallel PreBind plugins, each on its own thread; the first failure wins and tells the
        others to stop (`state.pre_bind_cancelled`), whose own failures are then not reported, as in kube."""
        cancelled = threading.Event()
        first: list[Status] = []
        lock = threading.Lock()

        def run(cp: Any) -> None:
            st = self._pre_bind_one(state, cp, pod, node_name)
            if st is not None:
                with lock:
                    if not first:
                        first.append(st)
                        cancelled.set()

        state.pre_bind_cancelled = cancelled
        try:
            threads = [threading.Thread(target=run, args=(cp,), name=f"prebind-{cp.name}", daemon=True)
                       for cp in group[1:]]
            for t in threads:
                t.start()
            run(group[0])  # the binding cycle's own thread takes the first, so the watchdog still sees a plugin
            for t in threads:
                t.join()
        finally:
            state.pre_bind_cancelled = None
        return first[0] if first else None

    @_extension_point("PreBind")
    def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for group in self._pre_bind_groups(state):
            st = (self._pre_bind_one(state, group[0], pod, node_name) if len(group) == 1
                  else self._pre_bind_side_by_side(state, group, pod, node_name))
            if st is not None:
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
            _, st = self._invoke("Bind", cp.name, cast(BindPlugin, cp.plugin).bind, state, pod, node_name,
                                 state=state, timed=True, passes=REJECTED | {Code.Skip})
            if st is not None and st.code == Code.Skip:
                continue
            return st
        return Status(Code.Skip, "all bind plugins skipped")

    @_extension_point("PostBind")
    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for cp in self.post_bind:
            _, st = self._invoke("PostBind", cp.name, cast(PostBindPlugin, cp.plugin).post_bind, state, pod, node_name,
                                 unpack=ignored_return)
            if st is not None:  # PostBind is informational; log and go on
                self.handle.logger.error("PostBind plugin %s failed for pod %s: %s", cp.name, pod.key,
                                         st.error.__cause__ if st.error is not None else st.message)

    def plugin_names(self) -> Iterable[str]:
        return self.plugins.keys()



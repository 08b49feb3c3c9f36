"""DefaultPreemption: when no node fits, find a node where evicting lower-priority pods makes room.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go and
pkg/scheduler/framework/preemption/preemption.go.

Follows kube-scheduler's evaluator: candidates among nodes rejected as Unschedulable (never
UnschedulableAndUnresolvable), a dry run per node that removes every lower-priority pod and then
reprieves as many as possible (PDB-protected ones first), candidate sampling from a random offset,
and the same ordering when picking the node.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from ..featuregates import default_gates, emulated_minor
from ..fielderrors import FieldErrorList, invalid
from ..framework import filter_readers
from ..framework.cycle_state import CycleState
from ..framework.plugin import Plugin, PluginArgs
from ..framework.status import Code, Status
from ..framework.types import NodeInfo, PostFilterResult
from ..objects import Pod, PodDisruptionBudget

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
MAX_INT32 = 2**31 - 1
ASYNC_GATE = "SchedulerAsyncPreemption"
WAITING = "waiting for the preemption for this pod to be finished"



@functools.cache
def _async_by_default(minor: str) -> bool:
    """The gate's default at `minor`: every gate's default is built once, not at each pod's PreEnqueue."""
    return bool(default_gates(minor).get(ASYNC_GATE, False))

class DefaultPreemptionArgs(PluginArgs):
    min_candidate_nodes_percentage: int = Field(default=10, json_schema_extra={"minimum": 0, "maximum": 100})
    min_candidate_nodes_absolute: int = Field(default=100, json_schema_extra={"minimum": 0})

    @model_validator(mode="after")
    def _kube_rules(self) -> DefaultPreemptionArgs:
        """kube-scheduler's ValidateDefaultPreemptionArgs, every problem at once."""
        errs = FieldErrorList()
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            errs.add(("minCandidateNodesPercentage",), invalid(pct, "not in valid range [0, 100]"))
        if absolute < 0:
            errs.add(("minCandidateNodesAbsolute",), invalid(absolute, "not in valid range [0, inf)"))
        if pct == 0 and absolute == 0:
            errs.add(("minCandidateNodesPercentage",),
                     invalid(pct, "cannot be zero at the same time as minCandidateNodesAbsolute"))
            errs.add(("minCandidateNodesAbsolute",),
                     invalid(absolute, "cannot be zero at the same time as minCandidateNodesPercentage"))
        errs.raise_if_any()
        return self


@dataclass
class Candidate:
    node: str
    victims: list[Pod]
    pdb_violations: int


#: kube-scheduler's GetPodStartTime reads a pod without status.startTime (bound, not started) as starting now:
#: later than every pod that has one
_NOT_STARTED = "\uffff"


def _start_time(p: Pod) -> str:
    """kube's GetPodStartTime, comparable as a string (RFC 3339 in UTC), `_NOT_STARTED` when unset."""
    return (p.raw.get("status") or {}).get("startTime") or _NOT_STARTED


def _more_important_key(p: Pod) -> tuple[int, str]:
    """(-priority, start time): more important first. A node's order is worked out once per generation of
    it and preemptor priority (`_DryRun.select_remembered`), so the start-time helper's call is affordable."""
    return (-p.priority, _start_time(p))


def _fit_message(counts: dict[str, int], total: int) -> str:
    parts = sorted(f"{c} {r}" for r, c in counts.items())
    return f"0/{total} nodes are available: " + ", ".join(parts) + "."


class DefaultPreemption(Plugin):
    name = "DefaultPreemption"
    args_model = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None = None, handle: Any = None) -> None:
        super().__init__(args or DefaultPreemptionArgs(), handle)
        # async preemption (kube's Executor): preemptors whose API calls are in flight, and the last victim
        # each one waits for once the others are deleted
        self._lock = threading.Lock()
        self._preempting: set[str] = set()
        self._last_victim: dict[str, tuple[str, str]] = {}
        #: kube's Parallelizer for victim deletions (parallelism workers), made on the first preemption with
        #: more than one victim
        self._deleters: ThreadPoolExecutor | None = None

    # ---------------------------------------------------------------- entry
    def post_filter(self, state: CycleState, pod: Pod, statuses: dict[str, Status]
                    ) -> tuple[PostFilterResult | None, Status]:
        fw = self.handle.framework
        summed = getattr(fw, "evaluations_summed", None)
        if summed is None:
            return self._post_filter(state, pod, statuses)
        with summed():  # the dry run re-runs Filter plugins per node: their evaluations counted once at the end
            return self._post_filter(state, pod, statuses)

    def _post_filter(self, state: CycleState, pod: Pod, statuses: dict[str, Status]
                     ) -> tuple[PostFilterResult | None, Status]:
        fw = self.handle.framework
        snap = self.handle.snapshot
        if pod.preemption_policy == "Never":
            return None, Status(Code.Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.")
        if pod.nominated_node_name:
            ni = snap.get(pod.nominated_node_name)
            nst = statuses.get(pod.nominated_node_name)
            if (ni is not None and (nst is None or nst.code != Code.UnschedulableAndUnresolvable)
                    and any(p.priority < pod.priority and _terminating_by_preemption(p) for p in ni.pods)):
                return None, Status(Code.Unschedulable, "preemption: not eligible due to a terminating pod on the "
                                                         "nominated node.")
        total = len(snap)
        unschedulable = Code.Unschedulable
        potential = [ni for ni, st in zip(snap.node_infos, map(statuses.get, snap.row_names().tolist()), strict=True)
                     if st is not None and st.code == unschedulable]
        if not potential:  # kube's Preempt: no candidates, a FitError and an empty nomination (clears the pod's)
            return PostFilterResult(""), Status(Code.Unschedulable,
                                                "preemption: " + _fit_message({NOT_HELPFUL: total}, total))
        pdbs = self._pdbs()
        n = len(potential)
        want = n * self.args.min_candidate_nodes_percentage // 100
        want = min(max(want, self.args.min_candidate_nodes_absolute), n)
        offset = fw.rng.randrange(n)
        dry = _DryRun(fw, state, pod, statuses)
        candidates: list[Candidate] = []
        clean = False  # some candidate violates no PDB
        # the dry run's verdict per node that gave no candidate: kube-scheduler's nested FitError counts each
        # reason of each node's status (the Filter status when evicting every lower-priority pod is not enough)
        failed: dict[str, Status] = {}
        errors: list[str] = []
        try:
            for i in range(n):
                ni = potential[(offset + i) % n]
                victims, violations, st = self._select_victims(state, pod, ni, pdbs, dry)
                if st is None and victims:
                    candidates.append(Candidate(ni.name, victims, violations))
                    clean = clean or not violations
                    if clean and len(candidates) >= want:
                        break
                    continue
                if st is None:
                    st = Status.as_error(f"expected at least one victim pod on node {_q(ni.name)}")
                if st.code == Code.Error:
                    errors.append(st.message)
                failed[ni.name] = st
        finally:
            dry.replays.flush()
        if not candidates:
            if errors:
                agg = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
                return None, Status(Code.Error, "preemption: " + agg)
            counts: dict[str, int] = {}
            for st in failed.values():
                for reason in st.all_reasons:
                    counts[reason] = counts.get(reason, 0) + 1
            not_helpful = total - len(failed)
            if not_helpful:
                counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + not_helpful
            return PostFilterResult(""), Status(Code.Unschedulable, "preemption: " + _fit_message(counts, total))
        ext = getattr(self.handle, "extenders", None)
        ordered = ext is None  # the dry run lists each node's victims most important first
        if ext is not None:  # callExtenders: extenders with a preempt verb may drop nodes and change victims
            kept, st = ext.process_preemption(state, pod, {c.node: (c.victims, c.pdb_violations) for c in candidates},
                                              snap)
            if st is not None:  # PostFilter prefixes every message of the evaluator with "preemption: "
                return None, Status(st.code, "preemption: " + st.message)
            candidates = [Candidate(n, pods, v) for n, (pods, v) in kept.items()]
            if not candidates:
                return None, Status(Code.Unschedulable, "preemption: no candidate node for preemption")
        best = self._pick(candidates, ordered)
        self.handle.observe_victims(len(best.victims))
        if self._async_enabled():
            self._prepare_candidate_async(best, pod)
        else:
            err = self._prepare_candidate(best, pod)
            if err is not None:
                return None, Status(Code.Error, "preemption: " + err)
        if emulated_minor(getattr(self.handle, "feature_gates", None)) in ("1.35", "1.36"):
            return PostFilterResult(best.node), Status(Code.Success)
        # kube 1.37: the FailedScheduling message of a pod that preempts ends with where it preempts
        return PostFilterResult(best.node), Status(Code.Success, f"preemption: found a potential placement for pod "
                                                                 f"on node {best.node}, preempting "
                                                                 f"{len(best.victims)} victims")

    # ---------------------------------------------------------------- executing the preemption
    def _async_enabled(self) -> bool:
        gates = getattr(self.handle, "feature_gates", None)
        if gates is None:
            return _async_by_default(emulated_minor(None))
        return bool(gates.get(ASYNC_GATE, False))

    def pre_enqueue(self, pod: Pod) -> Status | None:
        """Holds a preemptor back while the API calls of its asynchronous preemption are in flight."""
        if not self._async_enabled() or not self._running_preemption(pod.uid):
            return None
        return Status(Code.UnschedulableAndUnresolvable, WAITING)

    def _running_preemption(self, uid: str) -> bool:
        """kube's IsPodRunningPreemption: in flight until the last victim is gone or terminating."""
        with self._lock:
            if uid not in self._preempting:
                return False
            last = self._last_victim.get(uid)
        if last is None:
            return True
        return not self.handle.pod_gone_or_deleting(*last)

    def _preempt_victim(self, node: str, pod: Pod, victim: Pod) -> None:
        """Deletes one victim (the kube backend marks it DisruptionTarget first); raises when that fails."""
        self.handle.delete_pod(victim)
        self.handle.record_event(victim, "Normal", "Preempted", "Preempting",
                                 f"Preempted by pod {pod.uid} on node {node}")

    def _clear_lower_nominations(self, node: str, pod: Pod) -> bool:
        """Lower-priority pods nominated to `node` may no longer fit there: their nominations are cleared."""
        cluster = getattr(self.handle, "cluster", None)
        ok = True
        for p in self.handle.nominated_pods_for_node(node):
            if p.priority >= pod.priority or cluster is None:
                continue
            try:
                cluster.patch_pod_status(p, None, nominated_node_name="")
            except Exception as exc:  # noqa: BLE001 - not critical, as in kube-scheduler
                self.handle.logger.warning("cannot clear the nominatedNodeName of %s: %s", p.key, exc)
                ok = False
        return ok

    def _preempt_victims(self, node: str, pod: Pod, victims: Sequence[Pod]) -> None:
        """Delete the victims concurrently on a backend that gains from it, as kube's Parallelizer().Until
        does (at most `parallelism` at a time); the first failure is raised once all have ended, and victims
        not yet started are then skipped (kube cancels the context)."""
        if len(victims) <= 1 or not getattr(getattr(self.handle, "cluster", None), "concurrent_deletes", False):
            for v in victims:
                self._preempt_victim(node, pod, v)
            return
        with self._lock:
            if self._deleters is None:
                workers = max(1, int(getattr(self.handle, "parallelism", 16) or 16))
                self._deleters = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preempt")
            pool = self._deleters
        failed: list[BaseException] = []

        def one(v: Pod) -> None:
            if failed:
                return
            try:
                self._preempt_victim(node, pod, v)
            except Exception as exc:  # noqa: BLE001 - handed to the caller below
                failed.append(exc)

        for f in [pool.submit(one, v) for v in victims]:
            f.result()
        if failed:
            raise failed[0]

    def _prepare_candidate(self, c: Candidate, pod: Pod) -> str | None:
        """SchedulerAsyncPreemption off: the victims are deleted inside PostFilter, concurrently; a failed
        deletion fails PostFilter (its message returned)."""
        try:
            self._preempt_victims(c.node, pod, [v for v in c.victims if not v.deletion_timestamp])
        except Exception as exc:  # noqa: BLE001 - kube's AsStatus(err)
            return str(exc)
        self._clear_lower_nominations(c.node, pod)
        return None

    def _prepare_candidate_async(self, c: Candidate, pod: Pod) -> None:
        """kube's prepareCandidateAsync: the nomination is returned at once; clearing lower-priority
        nominations and deleting the victims (all but the last, then the last one, which PreEnqueue watches)
        run on the scheduler's background workers, all but the last concurrently. On a failure the preemptor
        is activated."""
        victims = [v for v in c.victims if not v.deletion_timestamp]
        if not victims:
            return
        with self._lock:
            self._preempting.add(pod.uid)

        def run() -> None:
            start = time.monotonic()
            ok = self._clear_lower_nominations(c.node, pod)
            try:
                self._preempt_victims(c.node, pod, victims[:-1])
            except Exception as exc:  # noqa: BLE001 - reported, the preemptor is retried
                self.handle.logger.error("async preemption for %s failed: %s", pod.key, exc)
                ok = False
            else:
                last = victims[-1]
                with self._lock:
                    self._last_victim[pod.uid] = (last.namespace, last.name)
                try:
                    self._preempt_victim(c.node, pod, last)
                except Exception as exc:  # noqa: BLE001
                    self.handle.logger.error("async preemption of the last victim for %s failed: %s",
                                             pod.key, exc)
                    ok = False
            with self._lock:
                self._preempting.discard(pod.uid)
                self._last_victim.pop(pod.uid, None)
            result = "success" if ok else "error"
            metrics = getattr(getattr(self.handle, "framework", None), "metrics", None)
            if metrics is not None and hasattr(metrics, "preemption_goroutine"):
                metrics.preemption_goroutine(result, time.monotonic() - start)
            # no deletion event may come: without this the preemptor could stay unschedulable. kube activates it
            # on an error only; its deletions also end without an event when the victims' deletion events were
            # handled earlier, while PreEnqueue held the preemptor (victims deleted by someone else, or a second
            # preemption of victims the first one deleted: kubernetes#141694), and it then waits for the
            # five-minute flush. The last victim gone from the cache says so; while the cache holds it, its
            # deletion event is still to come and moves the preemptor as usual (after the victims are gone).
            if not ok or not self.handle.pod_cached(victims[-1].uid):
                self.handle.activate([pod])

        try:
            self.handle.run_in_background(run)
        except Exception:  # the workers are shut down: nothing will release the preemptor
            with self._lock:
                self._preempting.discard(pod.uid)
            raise

    # ---------------------------------------------------------------- dry run
    def _pdbs(self) -> list[PodDisruptionBudget]:
        cluster = getattr(self.handle, "cluster", None)
        if cluster is None:
            return []
        out = []
        for raw in cluster.list("poddisruptionbudgets"):
            try:
                out.append(PodDisruptionBudget.from_dict(raw))
            except Exception:  # a malformed PDB must not break preemption
                continue
        return out

    @staticmethod
    def _split_by_pdb(pods: list[Pod], pdbs: list[PodDisruptionBudget]) -> tuple[list[Pod], list[Pod]]:
        allowed = [p.disruptions_allowed for p in pdbs]
        violating, fine = [], []
        for pod in pods:
            violated = False
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod.namespace or pdb.selector is None or pdb.selector.empty:
                    continue
                if not pdb.selector.matches(pod.labels) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
            (violating if violated else fine).append(pod)
        return violating, fine

    def _select_victims(self, state: CycleState, pod: Pod, ni: NodeInfo, pdbs: list[PodDisruptionBudget],
                        dry: _DryRun | None = None) -> tuple[list[Pod], int, Status | None]:
        """SelectVictimsOnNode: (victims, PDB violations, None) or the status saying why the node cannot help."""
        fw = self.handle.framework
        if dry is None:
            dry = _DryRun(fw, state, pod)
        node_order = _lower_priority(ni, pod.priority)[0]
        if not node_order:
            return [], 0, dry.no_victims
        lower = list(node_order)  # the dry run sorts its own copy
        if dry.memo is not None and not pdbs:
            nominated = dry.nominated_to_add(ni.name)
            return dry.select_remembered(ni, lower, nominated,
                                         lambda: self._select_victims_on(state, pod, ni, pdbs, dry, lower))
        return self._select_victims_on(state, pod, ni, pdbs, dry, lower)

    def _select_victims_on(self, state: CycleState, pod: Pod, ni: NodeInfo, pdbs: list[PodDisruptionBudget],
                           dry: _DryRun, lower: list[Pod]) -> tuple[list[Pod], int, Status | None]:
        fw = self.handle.framework
        st = state.clone() if dry.extensions or not dry.read_only else state
        clone = ni.clone()
        remove_ext = fw.run_pre_filter_remove_pod
        for v in lower:
            clone.remove_pod(v)
            if dry.extensions:
                err = remove_ext(st, pod, v, clone)
                if err is not None:
                    return [], 0, Status(Code.Error, err.message)
        # the nominated pods the two-pass filter adds do not change during the dry run: looked up once
        nominated = dry.nominated_to_add(ni.name)
        fst = fw.run_filter_with_nominated_pods(st, pod, clone, nominated)
        if fst is not None and fst.code != Code.Success:
            return [], 0, fst
        lower.sort(key=_more_important_key)
        violating, fine = self._split_by_pdb(lower, pdbs) if pdbs else ((), lower)
        victims: list[Pod] = []
        violations = 0

        def reprieve(p: Pod) -> bool:
            clone.add_pod(p)
            if dry.extensions:
                fw.run_pre_filter_add_pod(st, pod, p, clone)
            if (dry.refilter(st, clone) if not nominated
                    else fw.run_filter_with_nominated_pods(st, pod, clone, nominated)) is None:
                return True
            clone.remove_pod(p)
            if dry.extensions:
                remove_ext(st, pod, p, clone)
            victims.append(p)
            return False

        for p in violating:
            if not reprieve(p):
                violations += 1
        for p in fine:
            reprieve(p)
        victims.sort(key=_more_important_key)
        return victims, violations, None

    @staticmethod
    def _pick(cands: list[Candidate], ordered: bool = False) -> Candidate:
        """pickOneNodeForPreemption: fewest PDB violations, then the lowest highest-priority victim, the lowest
        priority sum, the fewest victims, the latest start among the highest-priority victims; the first
        candidate of a tie. The start times (the dearest criterion) are read only for the candidates still
        tied on the others, as kube-scheduler narrows its list criterion by criterion. `ordered`: each
        candidate's victims are sorted most important first (higher priority, then earlier start), so the
        first one holds the earliest start among the highest-priority victims."""
        def key(c: Candidate) -> tuple[int, int, int, int]:
            vs = c.victims
            return (c.pdb_violations, vs[0].priority, sum([v.priority for v in vs]) + (MAX_INT32 + 1) * len(vs),
                    len(vs))

        keys = [key(c) for c in cands]
        best = min(keys)
        tied = [c for c, k in zip(cands, keys, strict=True) if k == best]
        if len(tied) == 1:
            return tied[0]

        def earliest(c: Candidate) -> str:
            if ordered:
                return _start_time(c.victims[0])
            highest = c.victims[0].priority
            return min([_start_time(v) for v in c.victims if v.priority == highest])

        # the latest of those start times wins; max() keeps the first of equals, as min() does
        return max(tied, key=earliest)


_Outcome = tuple[list[Pod], int, "Status | None"]
_Selection = Callable[[], _Outcome]

class _DryRun:
    """What one pod's dry run does per node, worked out once per preemption attempt.

    `extensions`: some PreFilter plugin not skipped has AddPod/RemovePod (otherwise those calls do nothing
    and are left out). `read_only`: every Filter plugin that runs is an in-tree one that only reads the
    CycleState, so without extensions the dry run needs no copy of it. `refilter` re-runs Filter on a node
    whose every plugin has passed once in this dry run, after a pod was added back: the plugins that look at
    the Node only cannot change their verdict, so they are counted as evaluated (as kube-scheduler counts
    them) without being called again; the others run as `run_filter` runs them.
    """

    __slots__ = ("fw", "state", "pod", "extensions", "read_only", "calls", "node_only", "memo", "statuses",
                 "after_node_only", "nominated", "no_victims", "replays")

    def __init__(self, fw: Any, state: CycleState, pod: Pod, statuses: dict[str, Status] | None = None) -> None:
        self.fw = fw
        self.state = state
        self.pod = pod
        #: this cycle's Filter statuses: a node rejected by a plugin that runs after every Node-only one has
        #: passed those (their verdicts read the pod and the Node alone), so the dry run need not ask them again
        self.statuses = statuses or {}
        #: the pods nominated to each node, asked once: the dry run looks at hundreds of nodes
        self.nominated: Mapping[str, list[Pod]] = fw._nominated_pods()
        #: the verdict of every node without lower-priority pods (only counted): one Status for them all
        self.no_victims = Status(Code.UnschedulableAndUnresolvable, NO_VICTIMS)
        skip = state.skip_filter_plugins
        self.extensions = any(name not in skip for m in ("add_pod", "remove_pod") for name, _ in fw._extensions(m))
        active = [cp for cp in fw.filter if cp.name not in skip]
        known = [filter_readers.in_tree(cp.name, cp.plugin) for cp in active]
        self.read_only = all(k and cp.name in filter_readers.READ_ONLY for k, cp in zip(known, active, strict=True))
        # (name, bound filter or None when the Node-only verdict is already known to pass)
        self.calls: list[tuple[str, Any]] | None = None
        if callable(getattr(fw, "run_filter_calls", None)) and all(callable(getattr(cp.plugin, "filter", None))
                                                                   for cp in active):
            self.calls = [(cp.name, None if k and cp.name in filter_readers.NODE_ONLY else cp.plugin.filter)
                          for k, cp in zip(known, active, strict=True)]
        self.node_only = [cp.plugin.filter for cp in active if cp.name in filter_readers.NODE_ONLY]
        last = max((i for i, cp in enumerate(active) if cp.name in filter_readers.NODE_ONLY), default=-1)
        self.after_node_only = frozenset(cp.name for cp in active[last + 1:])
        #: outcomes by what decides them (see `select_remembered`); None: this pod's dry run cannot use them
        self.memo: dict[Any, tuple[list[int], Status | None, list[tuple[str, str, int]]]] | None = (
            {} if self.read_only and not self.extensions and self.calls is not None else None)
        #: the evaluation counts of the reused outcomes, counted once the candidates are found (`_post_filter`)
        self.replays = filter_readers.Replays(fw)

    def select_remembered(self, ni: NodeInfo, lower: list[Pod], nominated: list[Pod], compute: _Selection
                          ) -> _Outcome:
        """SelectVictimsOnNode with no PDBs and only the in-tree readers of `filter_readers.READ_ONLY` running: on
        a node every Node-only filter passes, their verdicts (with pods removed or added back, and with the
        node's nominated pods added in the first pass) depend on the allocatable, the number of pods and the
        summed requests; so the outcome, as positions in the victims' priority order, is the same on every
        node where those, the requests of the lower-priority pods in that order and those of the nominated
        pods are. Computed on the first such node, reused on the others with the same Filter evaluation
        counts."""
        pod, state = self.pod, self.state
        if ni.node is None:
            return compute()
        _, ordered, requests = _lower_priority(ni, pod.priority)
        seen = self.statuses.get(ni.name)
        if ((seen is None or seen.plugin not in self.after_node_only)
                and any(fn(state, pod, ni) is not None for fn in self.node_only)):
            return compute()  # (rare on a node preemption might help) its statuses may name the node's own data
        key = (filter_readers.resource_key(ni, nominated), requests)
        fw = self.fw
        got = self.memo.get(key) if self.memo is not None else None
        if got is not None:
            positions, st, counted = got
            self.replays.add(counted)
            return ([ordered[i] for i in positions], 0, None) if st is None else ([], 0, st)
        (victims, violations, st), evaluations = filter_readers.recording_evaluations(fw, compute)
        if st is None or st.code != Code.Error:
            where = {id(p): i for i, p in enumerate(ordered)}
            assert self.memo is not None
            self.memo[key] = ([where[id(v)] for v in victims], st, evaluations)
        return victims, violations, st

    def nominated_to_add(self, node: str) -> list[Pod]:
        """The pods nominated to `node` that the dry run's two-pass Filter adds."""
        pods = self.nominated.get(node)
        return self.fw.nominated_to_add(self.pod, pods) if pods else []  # type: ignore[no-any-return]

    def refilter(self, state: CycleState, node_info: NodeInfo) -> Status | None:
        calls = self.calls
        if calls is None:
            return self.fw.run_filter(state, self.pod, node_info)  # type: ignore[no-any-return]
        return self.fw.run_filter_calls(state, self.pod, node_info, calls)  # type: ignore[no-any-return]


def _lower_priority(ni: NodeInfo, priority: int) -> tuple[list[Pod], list[Pod], tuple[Any, ...]]:
    """The node's pods below `priority`: in the node's order, most important first, and the latter's
    requests. A function of the node's pods, so kept with them: a preemption wave asks the same unchanged
    nodes again in every cycle, most of them holding nothing a preemptor could evict. Callers must not
    change the lists."""
    memo = filter_readers.node_memo(ni)
    got = memo.get(("victim order", priority))
    if got is None:
        lower = [p for p in ni.pods if p.priority < priority]
        ordered = sorted(lower, key=_more_important_key)
        got = memo[("victim order", priority)] = (lower, ordered, tuple([tuple(p.requests.items()) for p in ordered]))
    return got  # type: ignore[no-any-return]


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _terminating_by_preemption(p: Pod) -> bool:
    """podTerminatingByPreemption: deleting, with DisruptionTarget=True for reason PreemptionByScheduler."""
    if not p.deletion_timestamp:
        return False
    for c in (p.raw.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget":
            return c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
    return False

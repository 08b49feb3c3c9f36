"""One scheduling attempt of one pod: the scheduling cycle, then the binding cycle, and what a failure does.

Follows kube-scheduler v1.36.3 pkg/scheduler/schedule_one.go: ScheduleOne (pop, schedulingCycle: PreFilter,
the nominated node fast path, Filter, extenders, PreScore, Score, selectHost; assume, Reserve, Permit), then
bindingCycle (WaitOnPermit, PreBind, Bind, PostBind) inline or on a binding worker, and handleSchedulingFailure
(PostFilter/preemption, the FailedScheduling event, the PodScheduled condition, back to the queue).

`SchedulingCycle` is the base of `scheduler.Scheduler`, which wires the cache, the queue, the frameworks and
the cluster backend and applies cluster events between attempts; the attributes it declares are what the cycle
reads. Whatever differs between results modes (`--results=ksched|simulator|off`) sits behind
`self.recorder` (`recording.AttemptRecorder`), chosen at wiring time; whatever differs between a real cluster
and an in-memory one sits behind the `ClusterBackend` (binding, events, status, deletes).
"""

from __future__ import annotations

import dataclasses
import logging
import queue as _stdqueue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .batching import Ranking
from .bindpool import BindingPool
from .cache import Cache
from .cluster.base import BindError, ClusterBackend, LeadershipLost
from .extenders.runner import record_of
from .framework.cycle_state import CycleState
from .framework.nodelist import NodeList
from .framework.runtime import CycleError, Diagnosis, FitError, Framework, ScoreResult
from .framework.status import Code, Status
from .framework.types import NOMINATING_OVERRIDE, QueuedPodInfo
from .objects import Pod
from .podrequests import counting_claim_statuses
from .queue import SchedulingQueue
from .recording import AttemptRecorder
from .results import BIND_ANNOTATIONS_CARRIED, TOP_NODES, AttemptResult, ResultStore, group_filter_reasons
from .verbosity import V1, V2, V3
from .watchdog import CycleWatchdog, plugin_frame

log = logging.getLogger("ksched.scheduler")

#: CycleState key: kube's EvaluatedNodes for the chosen node (the -v=2 "Successfully bound" line reports it)
EVALUATED_NODES = "ksched.io/evaluated-nodes"

NOTE_LENGTH_LIMIT = 1024

#: kube's ErrNoNodesAvailable: the cluster has no node at all (not a fit error on some nodes)
NO_NODES_MSG = "no nodes available to schedule pods"


def truncate_message(msg: str) -> str:
    if len(msg) <= NOTE_LENGTH_LIMIT:
        return msg
    return msg[: NOTE_LENGTH_LIMIT - 4] + " ..."


@dataclass
class Decision:
    """What the observer (CLI live view, simulate) is told after each attempt."""

    pod: Pod
    result: AttemptResult


class SchedulingCycle:
    """The per-pod cycle; `scheduler.Scheduler` sets every attribute declared here."""

    cluster: ClusterBackend
    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    extenders: Any
    recorder: AttemptRecorder
    results: ResultStore
    observer: Callable[[Decision], None] | None
    metrics: Any
    watchdog: CycleWatchdog | None
    record_breakdown: bool
    bind_deadline: float
    detached_bindings: dict[str, str]
    _binders: BindingPool | None
    _bounded_binder: BindingPool | None
    _inflight_bindings: int
    _inflight_lock: threading.Lock
    _victims_deleted: int
    #: NominatedNodeNameForExpectation (beta, on since 1.35): PreBindPreFlight, and status.nominatedNodeName
    #: written before PreBind when some PreBind plugin will work or the pod waits on Permit
    nominate_for_expectation: bool
    #: SchedulerAsyncAPICalls off (kube's default): a failed attempt's status write is sent before the loop
    #: goes on, as kube's handleSchedulingFailure patches it in the scheduling goroutine
    failure_writes_wait: bool
    scheduled: int
    attempts: int
    scheduling_cycle: int
    binds_abandoned: int
    cycle_seconds: list[float]
    keep_cycle_times: bool

    #: what the scheduling loop applies between attempts (cluster events, and undos from binding workers)
    _inbox: _stdqueue.SimpleQueue[tuple[Any, ...]]

    def _call_on_loop(self, fn: Callable[[], None]) -> None:
        self._inbox.put(("__call__", fn))
        self.queue.wake()

    def schedule_one(self, qpi: QueuedPodInfo) -> None:
        wd = self.watchdog
        if wd is None:
            self._schedule_one(qpi)
            return
        wd.begin(qpi.pod.key, "scheduling")
        try:
            self._schedule_one(qpi)
        finally:
            wd.end()

    def _schedule_one(self, qpi: QueuedPodInfo) -> None:
        pod = qpi.pod
        self.scheduling_cycle += 1
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None or self.cache.pod_node(pod.uid) is not None:
            self.queue.done(pod.uid)
            return
        if log.isEnabledFor(V3):
            log.log(V3, "Attempting to schedule pod: pod=%s", pod.key)
        if fw.signer is not None and qpi.signed is not pod:  # kube signs a pod when it is queued or updated
            qpi.signature, qpi.signed = fw.signer.sign(pod), pod
        start = time.perf_counter()
        self.attempts += 1
        state = CycleState()
        if self.metrics is not None:
            state.record_plugin_metrics = self.metrics.sample_plugins()
        result = AttemptResult(pod.key, fw.profile_name, qpi.attempts, "unschedulable",
                               num_nodes=len(self.cache.snapshot))
        rec = self.recorder
        rec.begin(pod)
        try:
            node_name, scores, feasible, evaluated = self._schedule_pod(fw, state, pod, result, qpi.signature)
        except FitError as fe:
            self._handle_fit_error(fw, state, qpi, fe, result, start)
            return
        except CycleError as ce:
            self._fail(fw, qpi, ce.status, result, start)
            return
        result.node = node_name
        result.feasible = feasible
        state.write(EVALUATED_NODES, evaluated)
        rec.selected(pod, node_name)
        if scores is not None and self.record_breakdown:
            result.scores = _top_scores(scores, TOP_NODES, self.cache.snapshot)
        # assume, reserve, permit
        self.cache.assume_pod(_assumed(state, pod, node_name), node_name)
        st = fw.run_reserve(state, pod, node_name)
        rec.reserved(fw, pod, st)
        if st is not None:
            result.reserve = st.message
            self._undo_assume(fw, state, qpi, node_name, st, result, start)
            return
        st = fw.run_permit(state, pod, node_name)
        rec.permitted(fw, pod, st)
        if st is not None and st.code != Code.Wait:
            result.permit = st.message
            self._undo_assume(fw, state, qpi, node_name, st, result, start)
            return
        waiting = st is not None and st.code == Code.Wait
        if waiting:
            result.permit = "Wait"
        if self.keep_cycle_times:
            self.cycle_seconds.append(time.perf_counter() - start)
        if self._binders is not None or waiting:
            with self._inflight_lock:
                self._inflight_bindings += 1
            if self._binders is not None:
                self._binders.submit(self._binding_cycle_guarded, fw, state, qpi, node_name, result, start)
            else:
                threading.Thread(target=self._binding_cycle_guarded, name=f"permit-{pod.name}", daemon=True,
                                 args=(fw, state, qpi, node_name, result, start)).start()
        elif fw.has_foreign_binding_plugins and self.bind_deadline > 0:
            self._binding_cycle_bounded(fw, state, qpi, node_name, result, start)
        else:
            self._binding_cycle(fw, state, qpi, node_name, result, start, on_loop=True)

    def _binding_cycle_bounded(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str,
                               result: AttemptResult, start: float) -> None:
        """Synchronous binding, but a user's PreBind/Bind that hangs must not stop every other pod: the cycle
        runs on a binding pool's worker (replaced when stuck) and the loop waits for it up to
        `bind_deadline`, which keeps runs deterministic (failures are undone through the inbox before the
        next pop) unless a plugin hangs."""
        done = threading.Event()
        key = qpi.pod.key
        worker: list[int] = []

        def work() -> None:
            worker.append(threading.get_ident())
            try:
                self._binding_cycle(fw, state, qpi, node_name, result, start, on_loop=False)
            except Exception:  # noqa: BLE001 - the framework turns plugin errors into statuses already
                log.exception("binding cycle of pod %s failed", key)
            finally:
                with self._inflight_lock:
                    done.set()
                    late = self.detached_bindings.pop(key, None) is not None
                if late:
                    log.warning("binding cycle of pod %s finished after the loop stopped waiting for it", key)

        if self.watchdog is not None:
            self.watchdog.end()  # the loop only waits from here on; the binding thread registers itself
        if self._bounded_binder is None:
            self._bounded_binder = BindingPool(1, self.bind_deadline, name="bind-bounded")
        self._bounded_binder.submit(work)
        if done.wait(self.bind_deadline):
            return
        plugin, method = plugin_frame(sys._current_frames().get(worker[0]) if worker else None)
        where = f"plugin {plugin} ({method})" if plugin else "the framework"
        with self._inflight_lock:
            if done.is_set():
                return
            self.detached_bindings[key] = where
        self._bounded_binder.give_up(worker[0])
        stuck = dataclasses.replace(result, outcome="error", message=(
            f"binding cycle on node {node_name} has been in {where} for {self.bind_deadline:.0f}s "
            f"(deadline exceeded); the pod stays reserved there until it returns"))
        self.results.put(stuck)
        if self.observer is not None:
            self.observer(Decision(qpi.pod, stuck))
        log.warning("stopped waiting for the binding cycle of pod %s after %.0fs (it is in %s); scheduling "
                    "other pods meanwhile", key, self.bind_deadline, where)

    def _binding_cycle_guarded(self, *args: Any) -> None:
        try:
            self._binding_cycle(*args, on_loop=False)
        finally:
            with self._inflight_lock:
                self._inflight_bindings -= 1

    def _schedule_pod(self, fw: Framework, state: CycleState, pod: Pod, result: AttemptResult,
                      signature: str | None = None) -> tuple[str, ScoreResult | None, int, int]:
        """The node, the scores (None: not scored), and kube's FeasibleNodes and EvaluatedNodes."""
        snap = self.cache.snapshot
        n = len(snap)
        diagnosis = Diagnosis()
        if n == 0:
            diagnosis.pre_filter_msg = NO_NODES_MSG
            raise FitError(pod, 0, diagnosis)
        all_nodes = NodeList(snap)
        pre_result, st, rejectors = fw.run_pre_filter(state, pod, all_nodes)
        rec = self.recorder
        rec.prefilter(fw, pod, set(rejectors or ()), st.message if st is not None else "",
                      pre_result.node_names if pre_result is not None else None)
        if st is not None and st.code != Code.Success:
            if not st.is_rejected():
                raise CycleError(st)
            diagnosis.unschedulable_plugins |= rejectors
            if st.code == Code.Pending:
                diagnosis.pending_plugins |= rejectors
            diagnosis.pre_filter_msg = st.message
            diagnosis.absent_status = st
            diagnosis.num_absent = n
            raise FitError(pod, n, diagnosis)
        ext = self.extenders
        if ext is not None:
            ext_record = record_of(state)
            result.extenders = ext_record.summary
            rec.extenders(pod, ext_record.raw)
        batch = fw.batch
        cycle = self.scheduling_cycle
        hint = batch.node_hint(state, pod, signature, cycle) if batch is not None else ""
        # nominated node fast path; opportunistic batching's hint takes it too (a nomination comes first)
        nnn = pod.nominated_node_name or self.queue.nominator.node_of(pod.uid) or hint
        if nnn:
            ni = snap.get(nnn)
            if ni is not None and (pre_result is None or pre_result.node_names is None
                                   or nnn in pre_result.node_names):
                if fw.run_filter_with_nominated_pods(state, pod, ni) is None and (
                        ext is None or _passes_extenders(ext, state, pod, snap, ni.row)):
                    if batch is not None:
                        batch.store(signature, hint, nnn, 0, None, cycle)
                    return nnn, None, 1, 1
        feasible = fw.find_nodes_that_pass_filters(state, pod, snap, pre_result, diagnosis)
        rec.filters(fw, pod, snap, feasible, diagnosis.node_statuses)
        if ext is not None:  # findNodesThatPassExtenders
            feasible = ext.filter(state, pod, snap, feasible, diagnosis)
        if len(feasible) == 0:
            raise FitError(pod, n, diagnosis)
        result.filter_reasons = group_filter_reasons(diagnosis.node_statuses, diagnosis.absent_status,
                                                     diagnosis.num_absent, diagnosis.tally()
                                                     ) if diagnosis.node_statuses else {}
        if len(feasible) == 1:
            name = snap.node_infos[int(feasible[0])].name
            if batch is not None:
                batch.store(signature, hint, name, 0, None, cycle)
            return name, None, 1, 1 + len(diagnosis.node_statuses)
        nodes = NodeList(snap, feasible)
        st = fw.run_pre_score(state, pod, nodes)
        rec.prescore(fw, pod, st)
        if st is not None:
            raise CycleError(st)
        # 1.37's rescore normalises the cached nodes' raw scores again: keep them for a batchable pod
        scores = fw.run_score(state, pod, snap, feasible, keep_breakdown=self.record_breakdown or (
            batch is not None and batch.rescore and signature is not None))
        rec.scores(pod, scores, snap)  # plugins only: the simulator keeps extenders' answers apart
        if ext is not None:
            ext.prioritize(state, pod, snap, scores, self.record_breakdown, fw)
        idx = fw.select_host(scores.totals) if len(scores.totals) else 0
        name = snap.node_infos[int(feasible[idx])].name
        if batch is not None:
            batch.store(signature, hint, name, len(feasible) - 1,
                        lambda: _ranking(fw, scores, feasible, idx, snap), cycle)
        return name, scores, len(feasible), len(feasible) + len(diagnosis.node_statuses)

    def _binding_cycle(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str,
                       result: AttemptResult, start: float, on_loop: bool) -> None:
        pod = qpi.pod
        nominated = False  # this attempt wrote the interim status.nominatedNodeName
        if self.nominate_for_expectation:
            st = fw.run_pre_bind_pre_flights(state, pod, node_name)
            if st is not None and st.code != Code.Skip:
                self._binding_failed(fw, state, qpi, node_name, st, result, start, on_loop)
                return
            if st is None or fw.will_wait_on_permit(pod):
                nominated = self._nominate_for_binding(pod, node_name)
        st = fw.wait_on_permit(pod)
        if st is not None:
            result.permit = st.message
            self._binding_failed(fw, state, qpi, node_name, st, result, start, on_loop, nominated)
            return
        if not self._may_write():  # queued (or waiting on Permit) when the lease was lost
            self._abandon(fw, state, qpi, node_name, on_loop)
            return
        self.recorder.stage_binding(state, pod, node_name, result)
        wd = self.watchdog if not on_loop else None  # on the loop thread the scheduling entry covers it
        if wd is not None:
            wd.begin(pod.key, "binding")
        try:
            st = fw.run_pre_bind(state, pod, node_name)
            if st is None:
                st = fw.run_bind(state, pod, node_name)
                if st is not None:
                    log.log(V1, "Failed to bind pod: pod=%s", pod.key)
                    if st.code == Code.Error and isinstance(st.error, Exception):
                        result.bind = st.message
        finally:
            if wd is not None:
                wd.end()
        self.recorder.bound(fw, pod, st)
        if st is not None:
            self._binding_failed(fw, state, qpi, node_name, st, result, start, on_loop, nominated)
            return
        self.queue.done(pod.uid)
        fw.run_post_bind(state, pod, node_name)
        result.outcome = "scheduled"
        result.message = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        self.scheduled += 1
        if log.isEnabledFor(V2):
            log.log(V2, "Successfully bound pod to node: pod=%s node=%s evaluatedNodes=%d feasibleNodes=%d",
                    pod.key, node_name, state.get(EVALUATED_NODES, 1), result.feasible)
        self._record_event(pod, "Normal", "Scheduled", "Binding", result.message)
        if self.metrics is not None:
            self.metrics.attempt(fw.profile_name, "scheduled", time.perf_counter() - start, qpi)
        self._finish(pod, result, carried=bool(state.get(BIND_ANNOTATIONS_CARRIED)))

    def _nominate_for_binding(self, pod: Pod, node_name: str) -> bool:
        """Tell other components (the cluster autoscaler) where the pod is going while PreBind or Permit takes
        time; kube logs a failed write and binds anyway. True when the write was sent."""
        if not self._may_write():
            return False
        try:
            self.cluster.nominate_for_binding(pod, node_name)
        except Exception as exc:  # noqa: BLE001 - kube: "Failed to update the nominated node name in the binding cycle"
            log.error("failed to update the nominated node name of %s to %s in the binding cycle: %s",
                      pod.key, node_name, exc)
            return False
        return True

    def _binding_failed(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str, st: Status,
                        result: AttemptResult, start: float, on_loop: bool, nominated: bool = False) -> None:
        """`nominated`: the attempt wrote the interim nomination, which the failure must clear (below)."""
        pod = qpi.pod
        if _not_leader(st) or not self._may_write():
            self._abandon(fw, state, qpi, node_name, on_loop)
            return

        def undo() -> None:
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            if nominated:
                # kube's failure handler writes the status from its informer's copy of the pod, which carries the
                # interim nomination, so its clearNominatedNode removes it; the pod this attempt holds predates
                # that write, and a status patch diffed against it would leave the stale nomination in place
                qpi.pod = _with_nomination(pod, node_name)
            gone = isinstance(st.error, BindError) and st.error.gone
            if gone:
                self.queue.done(pod.uid)
                result.outcome = "error"
                result.message = st.message
                self._finish(pod, result)
                return
            if st.is_rejected():
                plugins = {st.plugin} if st.plugin else set()
                diag = Diagnosis(node_statuses={node_name: st}, unschedulable_plugins=plugins)
                self._handle_fit_error(fw, state, qpi, FitError(pod, 1, diag), result, start, post_filter=False)
            else:
                self._fail(fw, qpi, st, result, start)

        if on_loop:
            undo()
        else:
            self._call_on_loop(undo)

    def _may_write(self) -> bool:
        gate = getattr(self.cluster, "may_write", None)
        return gate() if gate is not None else True

    def _abandon(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str,
                 on_loop: bool) -> None:
        """The lease was lost before the binding was sent: undo the assumption and write nothing (no event,
        status, result or metric); the pod is the new leader's. It waits in the queue, which a replica that
        does not lead never pops, so leading again would retry it."""
        pod = qpi.pod
        with self._inflight_lock:
            self.binds_abandoned += 1
        log.info("not binding pod %s to node %s: this replica lost the leader lease; leaving it to the new "
                 "leader", pod.key, node_name)

        def undo() -> None:
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self.queue.done(pod.uid)
            # informer updates were not applied while the pod was assumed: queue the version the cluster has
            getter = getattr(self.cluster, "get_pod", None)
            raw = getter(pod.namespace, pod.name) if getter is not None else pod.raw
            if raw and (raw.get("metadata") or {}).get("uid") == pod.uid and \
                    not (raw.get("spec") or {}).get("nodeName"):
                self.queue.add(Pod.from_dict(raw), event="LeaderElectionLost")

        if on_loop:
            undo()
        else:
            self._call_on_loop(undo)

    # ------------------------------------------------------------------ failures
    def _handle_fit_error(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, fe: FitError,
                          result: AttemptResult, start: float, post_filter: bool = True) -> None:
        pod = qpi.pod
        d = fe.diagnosis
        # kube's NominatingInfo: "" clears the pod's nomination (no nodes at all, Reserve/Permit refusals),
        # None leaves it as it is (no PostFilter plugins, or PostFilter gave no result), a name sets it
        no_nodes = d.pre_filter_msg.startswith(NO_NODES_MSG)
        nominated: str | None = "" if no_nodes or not post_filter else None
        if post_filter and fw.has_post_filter() and not no_nodes:
            statuses = dict(d.node_statuses)
            if d.absent_status is not None and d.num_absent:
                for ni in self.cache.snapshot.node_infos:
                    statuses.setdefault(ni.name, d.absent_status)
            victims = self._victims_deleted
            r, st = fw.run_post_filter(state, pod, statuses)
            if self.metrics is not None:
                self.metrics.preemption([cp.name for cp in fw.post_filter], self._victims_deleted - victims)
            if st.message:  # kube's PostFilterMsg: a Success can carry one too (1.37's preemption)
                d.post_filter_msg = st.message
            if r is not None and r.mode == NOMINATING_OVERRIDE:
                nominated = r.nominated_node_name
                if nominated:
                    self.recorder.nominated(fw, pod, nominated)
        result.filter_reasons = group_filter_reasons(d.node_statuses, d.absent_status, d.num_absent, d.tally())
        result.prefilter_message = d.pre_filter_msg
        result.postfilter_message = d.post_filter_msg
        status = Status(Code.Unschedulable, fe.message)
        self._fail(fw, qpi, status, result, start, rejectors=d.unschedulable_plugins, pending=d.pending_plugins,
                   nominated=nominated)

    def _undo_assume(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str, st: Status,
                     result: AttemptResult, start: float) -> None:
        """Reserve or Permit said no after the pod was assumed: unreserve, forget, then fail the attempt
        (a rejection is a fit error on that one node, so PostFilter is not run, as in kube)."""
        pod = qpi.pod
        fw.run_unreserve(state, pod, node_name)
        self.cache.forget_pod(pod)
        if st.is_rejected():
            diag = Diagnosis(node_statuses={node_name: st}, unschedulable_plugins={st.plugin})
            self._handle_fit_error(fw, state, qpi, FitError(pod, 1, diag), result, start, post_filter=False)
        else:
            self._fail(fw, qpi, st, result, start)

    def _fail(self, fw: Framework, qpi: QueuedPodInfo, st: Status, result: AttemptResult, start: float,
              rejectors: set[str] | None = None, pending: set[str] | None = None,
              nominated: str | None = "") -> None:
        """`nominated`: a node sets the pod's nomination, "" clears it (kube's clearNominatedNode, the
        default for errors), None leaves it unchanged."""
        pod = qpi.pod
        rejected = st.is_rejected()
        msg = st.message
        result.outcome = "unschedulable" if rejected else "error"
        result.message = msg
        if rejected:
            if log.isEnabledFor(V2):
                if result.prefilter_message.startswith(NO_NODES_MSG):
                    log.log(V2, "Unable to schedule pod; no nodes are registered to the cluster; waiting: pod=%s",
                            pod.key)
                else:
                    log.log(V2, "Unable to schedule pod; no fit; waiting: pod=%s err=%s", pod.key, msg)
        else:
            cause = getattr(st.error, "__cause__", None)
            log.error("Error scheduling pod; retrying: pod=%s err=%s", pod.key, msg,
                      exc_info=(type(cause), cause, cause.__traceback__) if cause is not None else None)
        result.plugin = st.plugin
        if nominated:
            result.nominated_node = nominated
            self.queue.nominator.add(pod, nominated)
        elif nominated == "":
            self.queue.nominator.delete(pod)
        if self.cache.pod_node(pod.uid) is None and self.cluster_has_pod(pod):
            self.queue.add_unschedulable_if_not_present(qpi, set(rejectors or ()) if rejected else set(),
                                                        set(pending or ()) if rejected else set())
        else:
            self.queue.done(pod.uid)
        self._record_event(pod, "Warning", "FailedScheduling", "Scheduling", truncate_message(msg))
        try:
            self.cluster.patch_pod_status(pod, {
                "type": "PodScheduled", "status": "False",
                "reason": "Unschedulable" if rejected else "SchedulerError", "message": msg,
            }, nominated)
        except Exception as exc:
            log.warning("could not update status of pod %s: %s", pod.key, exc)
        if self.metrics is not None:
            self.metrics.attempt(fw.profile_name, "unschedulable" if rejected else "error",
                                 time.perf_counter() - start, qpi)
        self._finish(pod, result)
        if not self.failure_writes_wait:
            return
        try:  # kube's updatePod: the loop waits for the failure's status (and here its result annotation)
            self.cluster.send_pod_writes(pod)
        except Exception as exc:  # noqa: BLE001 - as the status write above: logged, not fatal
            log.warning("could not update status of pod %s: %s", pod.key, exc)

    def cluster_has_pod(self, pod: Pod) -> bool:
        getter = getattr(self.cluster, "get_pod", None)
        if getter is None:
            return True
        raw = getter(pod.namespace, pod.name)
        return raw is not None and (raw.get("metadata") or {}).get("uid") == pod.uid

    def _finish(self, pod: Pod, result: AttemptResult, carried: bool = False) -> None:
        self.results.put(result)
        self.recorder.finish(pod, result, carried)
        if self.observer is not None:
            self.observer(Decision(pod, result))

    def _record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str) -> None:
        try:
            self.cluster.record_event(pod, type_, reason, action, note, reporting_controller=pod.scheduler_name)
        except Exception as exc:
            log.warning("could not record event for pod %s: %s", pod.key, exc)

    def _pod_cached(self, uid: str) -> bool:
        return self.cache.pod_node(uid) is not None

    def _delete_victim(self, pod: Pod, by: str = "") -> None:
        self.cluster.delete_pod(pod, reason="preempted", by=by)

    def _observe_victims(self, n: int) -> None:
        self._victims_deleted += n

    def _run_in_background(self, fn: Callable[[], None]) -> None:
        """Async preemption's API calls: on the binding workers when binding is asynchronous, else now."""
        if self._binders is not None:
            self._binders.submit(fn)
        else:
            fn()

    def _stored_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        get = getattr(self.cluster, "get_pod", None)
        raw: dict[str, Any] | None = get(namespace, name) if get is not None else None
        return raw

    def _get_pod(self, namespace: str, name: str) -> Pod | None:
        raw = self._stored_pod(namespace, name)
        return Pod.from_dict(raw) if raw is not None else None

    def _pod_gone_or_deleting(self, namespace: str, name: str) -> bool:
        """`_get_pod`'s verdict on deletion, from the stored object itself (no parse)."""
        raw = self._stored_pod(namespace, name)
        return raw is None or bool((raw.get("metadata") or {}).get("deletionTimestamp"))


def _with_nomination(pod: Pod, node_name: str) -> Pod:
    """`pod` as the cluster holds it once the binding cycle's nomination of `node_name` is written: only the
    status changes, so `Pod.rebound` carries the parsed fields over (a parse when it cannot)."""
    raw = dict(pod.raw or {})
    raw["status"] = {**(raw.get("status") or {}), "nominatedNodeName": node_name}
    return pod.rebound(raw) or Pod.from_dict(raw)


def _not_leader(st: Status) -> bool:
    """Did a Bind or PreBind fail because the backend refused to send without the lease?"""
    exc: BaseException | None = st.error if isinstance(st.error, BaseException) else None
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, LeadershipLost):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _ranking(fw: Framework, scores: ScoreResult, feasible: np.ndarray, chosen: int, snap: Any) -> Ranking:
    """The feasible nodes but the chosen one, best total first, ties in random order (kube keeps them in a
    heap ordered by score, then by a random number drawn per node), with their raw scores."""
    tie = np.random.default_rng(fw.rng.getrandbits(64)).random(len(scores.totals))
    order = np.lexsort((-tie, -scores.totals))
    order = order[order != chosen]
    infos = snap.node_infos
    return Ranking([infos[int(feasible[i])].name for i in order.tolist()],
                   {name: raw[order] for name, (raw, _norm, _w) in scores.per_plugin.items()}, tie[order])


def _passes_extenders(ext: Any, state: CycleState, pod: Pod, snap: Any, row: int) -> bool:
    """The nominated node through the filter extenders; an extender error there only means the full search
    runs (evaluateNominatedNode's error is logged), its verdicts stay in the record."""
    try:
        return len(ext.filter(state, pod, snap, np.asarray([row], dtype=np.int64), Diagnosis())) == 1
    except CycleError as exc:
        log.error("Evaluation failed on nominated node: pod=%s err=%s", pod.key, exc.status.message)
        return False


def _top_scores(scores: ScoreResult, k: int, snapshot: Any) -> list[dict[str, Any]]:
    if not len(scores.totals):
        return []
    order = np.argsort(-scores.totals, kind="stable")[:k]
    # each plugin's column read once for the k nodes, not one numpy scalar at a time
    infos = snapshot.node_infos
    names = [infos[r].name for r in scores.rows[order].tolist()]
    totals = scores.totals[order].tolist()
    columns = [(name, np.asarray(raw)[order].tolist(), np.asarray(norm)[order].tolist(), weight)
               for name, (raw, norm, weight) in scores.per_plugin.items()]
    out = []
    for j, node in enumerate(names):
        plugins = {name: {"raw": int(raw[j]), "normalized": int(norm[j]), "weight": weight,
                          "weighted": int(norm[j]) * weight} for name, raw, norm, weight in columns}
        out.append({"node": node, "total": int(totals[j]), "plugins": plugins})
    return out


def _assumed(state: CycleState, pod: Pod, node_name: str) -> Pod:
    """The pod as the cache assumes it on `node_name`: with DRANodeAllocatableResources, carrying what its claims
    take of that node (DynamicResources' Filter worked it out), so the next cycles count it (kube's assume)."""
    if not counting_claim_statuses():
        return pod
    from .plugins.dynamicresources.plugin import node_allocatable_statuses

    statuses = node_allocatable_statuses(state, node_name)
    return pod.with_claim_statuses(statuses) if statuses else pod

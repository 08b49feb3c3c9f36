"""The scheduling loop: a serial scheduling cycle per pod, then the binding cycle (inline or on workers)."""

from __future__ import annotations

import dataclasses
import logging
import queue as _stdqueue
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bindpool import BindingPool
from .cache import Cache
from .cluster.base import BindError, ClusterBackend, LeadershipLost
from .describe import RESULT_ANNOTATION, encode_result
from .extenders import build_extender_set
from .extenders.runner import record_of
from .framework.cycle_state import CycleState
from .framework.handle import Handle
from .framework.nodelist import NodeList
from .framework.plugin import Plugin
from .framework.registry import Registry
from .framework.runtime import CycleError, Diagnosis, FitError, Framework, ScoreResult
from .framework.status import Code, Status
from .framework.types import ActionType, ClusterEvent, QueuedPodInfo
from .objects import Node, Pod
from .queue import SchedulingQueue
from .results import (
    BIND_ANNOTATIONS,
    BIND_ANNOTATIONS_CARRIED,
    TOP_NODES,
    AttemptResult,
    ResultStore,
    group_filter_reasons,
)
from .simresults import PREFIX, SUCCESS, VICTIM, WAIT, SimRecord
from .watchdog import CycleWatchdog, plugin_frame

log = logging.getLogger("ksched.scheduler")

NOTE_LENGTH_LIMIT = 1024


def truncate_message(msg: str) -> str:
    if len(msg) <= NOTE_LENGTH_LIMIT:
        return msg
    return msg[: NOTE_LENGTH_LIMIT - 4] + " ..."


@dataclass
class Decision:
    """What the observer (CLI live view, simulate) is told after each attempt."""

    pod: Pod
    result: AttemptResult


def build_frameworks(config: Any, registry: Registry, snapshot: Any, cluster: ClusterBackend | None,
                     rng: random.Random, metrics: Any = None) -> dict[str, Framework]:
    """One Framework per profile, plugin instances shared across extension points within a profile; the
    configured extenders are shared by all of them (kube-scheduler's sched.Extenders)."""
    out: dict[str, Framework] = {}
    extenders = build_extender_set(getattr(config, "extenders", None))
    for prof in config.profiles:
        handle = Handle(snapshot, profile=prof.scheduler_name, cluster=cluster, parallelism=config.parallelism)
        instances: dict[str, Plugin] = {}
        plan: dict[str, list[tuple[Plugin, int]]] = {}
        for point, entries in prof.plan.items():
            lst = []
            for name, weight in entries:
                inst = instances.get(name)
                if inst is None:
                    spec = registry.get(name)
                    if spec is None:
                        raise ValueError(f"plugin {name!r} does not exist")
                    inst = spec.instantiate(prof.args.get(name), handle)
                    instances[name] = inst
                lst.append((inst, weight))
            plan[point] = lst
        pct = prof.percentage_of_nodes_to_score
        if pct is None:
            pct = config.percentage_of_nodes_to_score
        fw = out[prof.scheduler_name] = Framework(prof.scheduler_name, handle, plan, pct, rng=rng, metrics=metrics)
        fw.extenders = handle.extenders = extenders
    return out


def _node_update_action(old: Node, new: Node) -> ActionType:
    a = ActionType(0)
    if old.allocatable != new.allocatable:
        a |= ActionType.UpdateNodeAllocatable
    if old.labels != new.labels:
        a |= ActionType.UpdateNodeLabel
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        a |= ActionType.UpdateNodeTaint
    if old.ready != new.ready:
        a |= ActionType.UpdateNodeCondition
    if old.annotations != new.annotations:
        a |= ActionType.UpdateNodeAnnotation
    if old.declared_features != new.declared_features:
        a |= ActionType.UpdateNodeDeclaredFeature
    return a


def _event_resource(raw: dict[str, Any]) -> str:
    kind = raw.get("kind") or ""
    api = raw.get("apiVersion") or ""
    group = api.split("/")[0] if "/" in api else ""
    if group in ("", "apps", "policy", "v1") or kind in ("Pod", "Node"):
        return kind
    return f"{group}/{kind}"


class Scheduler:
    """Owns the cache, the queue and one Framework per profile; driven by a cluster backend."""

    def __init__(self, cluster: ClusterBackend, config: Any, registry: Registry, *, seed: int | None = None,
                 clock: Callable[[], float] = time.monotonic, bind_async: bool = False, bind_workers: int = 16,
                 results: ResultStore | None = None, observer: Callable[[Decision], None] | None = None,
                 metrics: Any = None, record_breakdown: bool = True, results_mode: str = "ksched",
                 watchdog: CycleWatchdog | None = None, bind_deadline: float = 30.0) -> None:
        self.cluster = cluster
        #: how long a binding cycle may take before it stops holding anything up: synchronous binding waits
        #: no longer for one with a plugin from outside the runtime; async binding replaces its worker
        self.bind_deadline = bind_deadline
        #: pod key -> "plugin (method)" of binding cycles the loop stopped waiting for; cleared when they end
        self.detached_bindings: dict[str, str] = {}
        #: pod uid -> the result annotation last written for it (attempt number zeroed), while it is pending
        self._written_results: dict[str, str] = {}
        self.watchdog = watchdog
        self.config = config
        self.cache = Cache()
        self.rng = random.Random(seed)
        self.clock = clock
        self.metrics = metrics
        self.results = results if results is not None else ResultStore()
        self.observer = observer
        self.record_breakdown = record_breakdown and results_mode != "off"
        self.results_mode = results_mode
        #: pod uid -> what the current attempt recorded, only with results_mode "simulator"
        self._sim: dict[str, SimRecord] = {}
        self.frameworks = build_frameworks(config, registry, self.cache.snapshot, cluster, self.rng, metrics)
        first = next(iter(self.frameworks.values()))
        self.extenders = first.extenders
        less = first.less()
        self._events = {name: fw.events_to_register() for name, fw in self.frameworks.items()}
        self.queue = SchedulingQueue(
            less=less, pre_enqueue=self._pre_enqueue, events_for=self._events_for,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds), clock=clock)
        for fw in self.frameworks.values():
            fw.handle.activate = self.queue.activate
            fw.handle.nominated_pods_for_node = self.queue.nominator.pods_for_node
            fw.handle.nominated_node_names = self.queue.nominator.node_names
            fw.handle.delete_pod = self._delete_victim
            fw.handle.record_event = self._record_event
        if metrics is not None:
            self.queue.on_incoming = metrics.incoming
            self.queue.on_hint = getattr(metrics, "queueing_hint", None)
            bind = getattr(metrics, "bind", None)
            if bind is not None:
                bind(self)
        self._victims_deleted = 0  # preemption victims deleted so far (scheduler_preemption_victims)
        self._inbox: _stdqueue.SimpleQueue[tuple[Any, ...]] = _stdqueue.SimpleQueue()
        self._binders = BindingPool(bind_workers, bind_deadline) if bind_async else None
        self._bounded_binder: BindingPool | None = None  # synchronous binding of foreign plugins, lazily
        self._inflight_bindings = 0
        self._inflight_lock = threading.Lock()
        self._stop = threading.Event()
        self.scheduled = 0
        self.attempts = 0
        #: binding cycles dropped because the leader gate closed before the binding was sent
        self.binds_abandoned = 0
        self.cycle_seconds: list[float] = []
        self.keep_cycle_times = False

    # ------------------------------------------------------------------ wiring
    def _pre_enqueue(self, pod: Pod) -> Status | None:
        fw = self.frameworks.get(pod.scheduler_name)
        return fw.run_pre_enqueue(pod) if fw is not None else None

    def _events_for(self, profile: str, plugin: str) -> Any:
        return self._events.get(profile, {}).get(plugin)

    def start(self, **kwargs: Any) -> None:
        """Subscribe to the backend; initial objects arrive as ADDED events into the inbox."""
        self.cluster.start(self.on_cluster_event, **kwargs)
        self.drain_inbox()

    def on_cluster_event(self, resource: str, action: str, old: dict | None, new: dict | None) -> None:
        """Backend callback (any thread): applied by the scheduling thread between cycles."""
        self._inbox.put((resource, action, old, new))

    def _call_on_loop(self, fn: Callable[[], None]) -> None:
        self._inbox.put(("__call__", fn))

    def drain_inbox(self) -> int:
        n = 0
        while True:
            try:
                item = self._inbox.get_nowait()
            except _stdqueue.Empty:
                return n
            n += 1
            if item[0] == "__call__":
                item[1]()
                continue
            try:
                if self.metrics is None:
                    self._apply(*item)
                else:
                    t0 = time.perf_counter()
                    self._apply(*item)
                    self.metrics.event_handled(*item, time.perf_counter() - t0, self.frameworks)
            except Exception as exc:  # one bad object must not stop the scheduler
                log.error("ignoring %s %s event: %s", item[0], item[1], exc)

    def _apply(self, resource: str, action: str, old_raw: dict | None, new_raw: dict | None) -> None:
        if resource == "pods":
            self._apply_pod(action, old_raw, new_raw)
        elif resource == "nodes":
            self._apply_node(action, old_raw, new_raw)
        elif resource == "namespaces":
            raw = new_raw or old_raw or {}
            meta = raw.get("metadata") or {}
            if action == "DELETED":
                self.cache.snapshot.namespace_labels.pop(meta.get("name", ""), None)
            else:
                self.cache.set_namespace(meta.get("name", ""), dict(meta.get("labels") or {}))
        else:
            raw = new_raw or old_raw or {}
            act = {"ADDED": ActionType.Add, "DELETED": ActionType.Delete}.get(action, ActionType.Update)
            self.queue.move_on_event(ClusterEvent(_event_resource(raw), act), old_raw, new_raw)

    def _apply_node(self, action: str, old_raw: dict | None, new_raw: dict | None) -> None:
        if action == "DELETED":
            name = (old_raw or {}).get("metadata", {}).get("name", "")
            self.cache.remove_node(name)
            self.queue.move_on_event(ClusterEvent("Node", ActionType.Delete), old_raw, None)
            return
        assert new_raw is not None
        node = Node.from_dict(new_raw)
        existing = self.cache.snapshot.get(node.name)
        old = existing.node if existing is not None else None
        self.cache.add_node(node)
        if old is None:
            self.queue.move_on_event(ClusterEvent("Node", ActionType.Add), None, node)
        else:
            act = _node_update_action(old, node)
            if act:
                self.queue.move_on_event(ClusterEvent("Node", act), old, node)

    def _apply_pod(self, action: str, old_raw: dict | None, new_raw: dict | None) -> None:
        if action == "DELETED":
            pod = Pod.from_dict(old_raw or {})
            self._written_results.pop(pod.uid, None)
            if self.cache.pod_node(pod.uid) is not None:
                self.cache.remove_pod(pod)
                self.queue.move_on_event(ClusterEvent("Pod", ActionType.Delete), pod, None)
            self.queue.delete(pod)
            for fw in self.frameworks.values():
                wp = fw.waiting_pods.get(pod.uid)
                if wp is not None:
                    wp.reject("", "removed")
            return
        assert new_raw is not None
        pod = Pod.from_dict(new_raw)
        if pod.node_name:
            self._written_results.pop(pod.uid, None)
            known = self.cache.pod_node(pod.uid) is not None
            if pod.terminated:
                if known:
                    self.cache.remove_pod(pod)
                    self.queue.move_on_event(ClusterEvent("Pod", ActionType.Delete), pod, None)
                return
            self.cache.add_pod(pod)
            self.queue.delete(pod)
            self.queue.nominator.delete(pod)
            if not known:
                self.queue.move_on_event(ClusterEvent("Pod", ActionType.Add), None, pod)
            elif old_raw is not None and ((old_raw.get("metadata") or {}).get("labels")
                                          != (new_raw.get("metadata") or {}).get("labels")):
                self.queue.move_on_event(ClusterEvent("Pod", ActionType.UpdatePodLabel), None, pod)
            return
        if pod.scheduler_name not in self.frameworks or pod.terminated or pod.deletion_timestamp:
            return
        if self.cache.is_assumed(pod.uid):
            return
        if action == "ADDED":
            self.queue.add(pod)
            if pod.nominated_node_name:
                self.queue.nominator.add(pod, pod.nominated_node_name)
        else:
            self.queue.update(Pod.from_dict(old_raw) if old_raw else None, pod)

    # ------------------------------------------------------------------ the loop
    def run(self, until_idle: bool = True, stop: threading.Event | None = None,
            idle_grace: float = 0.0, active: threading.Event | None = None) -> None:
        """Schedule until stopped, or (until_idle) until nothing is left that could be attempted. While
        `active` is given and not set (a standby replica) cluster events still update the cache and the
        queue, as kube-scheduler's informers do before it leads, but no pod is attempted."""
        stop = stop or self._stop
        last_flush = self.clock()
        idle_since: float | None = None
        while not stop.is_set():
            self.drain_inbox()
            if active is not None and not active.is_set():
                active.wait(0.1)
                continue
            if not self._may_write():  # the leader gate closed (lease lost): attempt nothing that cannot bind
                stop.wait(0.1)
                continue
            now = self.clock()
            if now - last_flush >= 30.0:
                self.queue.flush_unschedulable_leftover()
                last_flush = now
            qpi = self.queue.pop(timeout=0 if until_idle else 0.2)
            if qpi is None:
                if until_idle and self._idle():
                    if idle_since is None:
                        idle_since = time.monotonic()
                    if time.monotonic() - idle_since >= idle_grace:
                        return
                    time.sleep(0.01)
                elif until_idle:
                    time.sleep(0.002)
                continue
            idle_since = None
            self.schedule_one(qpi)
        if self._bounded_binder is not None:
            self._bounded_binder.shutdown(wait=True)
            self._bounded_binder = None
        if self._binders is not None:
            self._binders.shutdown(wait=True)
            self.drain_inbox()

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()

    def _idle(self) -> bool:
        with self._inflight_lock:
            if self._inflight_bindings:
                return False
        if not self._inbox.empty():
            return False
        counts = self.queue.pending_counts()
        if counts["active"]:
            return False
        # pods that failed with an error are not retried early: an idle run leaves them in backoff
        return not (counts["backoff"] - counts.get("backoffError", 0) and self.queue.pop_from_backoff)

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
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None or self.cache.pod_node(pod.uid) is not None:
            self.queue.done(pod.uid)
            return
        start = time.perf_counter()
        self.attempts += 1
        state = CycleState()
        if self.metrics is not None:
            state.record_plugin_metrics = self.metrics.sample_plugins()
        result = AttemptResult(pod.key, fw.profile_name, qpi.attempts, "unschedulable",
                               num_nodes=len(self.cache.snapshot))
        sim = None
        if self.results_mode == "simulator":
            sim = self._sim[pod.uid] = SimRecord()
        try:
            node_name, scores, feasible = self._schedule_pod(fw, state, pod, result)
        except FitError as fe:
            self._handle_fit_error(fw, state, qpi, fe, result, start)
            return
        except CycleError as ce:
            self._fail(fw, qpi, ce.status, result, start)
            return
        result.node = node_name
        result.feasible = feasible
        if sim is not None:
            sim.selected_node = node_name
        if scores is not None and self.record_breakdown:
            result.scores = _top_scores(scores, TOP_NODES, self.cache.snapshot)
        # assume, reserve, permit
        self.cache.assume_pod(pod, node_name)
        st = fw.run_reserve(state, pod, node_name)
        if sim is not None:
            sim.outcome(fw, "reserve", st.message if st is not None else "")
        if st is not None:
            result.reserve = st.message
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            if st.is_rejected():
                diag = Diagnosis(node_statuses={node_name: st}, unschedulable_plugins={st.plugin})
                self._handle_fit_error(fw, state, qpi, FitError(pod, 1, diag), result, start, post_filter=False)
            else:
                self._fail(fw, qpi, st, result, start)
            return
        st = fw.run_permit(state, pod, node_name)
        if sim is not None:
            sim.outcome(fw, "permit", WAIT if st is not None and st.code == Code.Wait else
                        (st.message if st is not None else ""))
        if st is not None and st.code != Code.Wait:
            result.permit = st.message
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            if st.is_rejected():
                diag = Diagnosis(node_statuses={node_name: st}, unschedulable_plugins={st.plugin})
                self._handle_fit_error(fw, state, qpi, FitError(pod, 1, diag), result, start, post_filter=False)
            else:
                self._fail(fw, qpi, st, result, start)
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

    def _schedule_pod(self, fw: Framework, state: CycleState, pod: Pod,
                      result: AttemptResult) -> tuple[str, ScoreResult | None, int]:
        snap = self.cache.snapshot
        n = len(snap)
        diagnosis = Diagnosis()
        if n == 0:
            diagnosis.pre_filter_msg = "no nodes available to schedule pods"
            raise FitError(pod, 0, diagnosis)
        all_nodes = NodeList(snap)
        pre_result, st, rejectors = fw.run_pre_filter(state, pod, all_nodes)
        sim = self._sim.get(pod.uid) if self._sim else None
        if sim is not None:
            sim.prefilter(fw, set(rejectors or ()), st.message if st is not None else "",
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
            result.extenders = record_of(state).summary
            if sim is not None:
                sim.extenders = record_of(state).raw
        # nominated node fast path
        nnn = pod.nominated_node_name or self.queue.nominator.node_of(pod.uid)
        if nnn:
            ni = snap.get(nnn)
            if ni is not None and (pre_result is None or pre_result.node_names is None
                                   or nnn in pre_result.node_names):
                if fw.run_filter_with_nominated_pods(state, pod, ni) is None and (
                        ext is None or _passes_extenders(ext, state, pod, snap, ni.row)):
                    return nnn, None, 1
        feasible = fw.find_nodes_that_pass_filters(state, pod, snap, pre_result, diagnosis)
        if sim is not None:
            sim.filters(fw, snap, feasible, diagnosis.node_statuses)
        if ext is not None:  # findNodesThatPassExtenders
            feasible = ext.filter(state, pod, snap, feasible, diagnosis)
        if len(feasible) == 0:
            raise FitError(pod, n, diagnosis)
        result.filter_reasons = group_filter_reasons(diagnosis.node_statuses, diagnosis.absent_status,
                                                     diagnosis.num_absent) if diagnosis.node_statuses else {}
        if len(feasible) == 1:
            return snap.node_infos[int(feasible[0])].name, None, 1
        nodes = NodeList(snap, feasible)
        st = fw.run_pre_score(state, pod, nodes)
        if sim is not None:
            sim.prescore = {cp.name: st.message if st is not None and st.plugin == cp.name else SUCCESS
                            for cp in fw.pre_score}
        if st is not None:
            raise CycleError(st)
        scores = fw.run_score(state, pod, snap, feasible, keep_breakdown=self.record_breakdown)
        if sim is not None:  # plugins only: the simulator keeps extenders' answers apart
            sim.scores(scores, snap)
        if ext is not None:
            ext.prioritize(state, pod, snap, scores, self.record_breakdown, fw)
        idx = fw.select_host(scores.totals) if len(scores.totals) else 0
        return snap.node_infos[int(feasible[idx])].name, scores, len(feasible)

    def _binding_cycle(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str,
                       result: AttemptResult, start: float, on_loop: bool) -> None:
        pod = qpi.pod
        st = fw.wait_on_permit(pod)
        if st is not None:
            result.permit = st.message
            self._binding_failed(fw, state, qpi, node_name, st, result, start, on_loop)
            return
        if not self._may_write():  # queued (or waiting on Permit) when the lease was lost
            self._abandon(fw, state, qpi, node_name, on_loop)
            return
        if self.results_mode == "ksched":
            staged = dataclasses.replace(result, outcome="scheduled",
                                         message=f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}")
            state.write(BIND_ANNOTATIONS, {RESULT_ANNOTATION: encode_result(staged.to_dict())})
        wd = self.watchdog if not on_loop else None  # on the loop thread the scheduling entry covers it
        if wd is not None:
            wd.begin(pod.key, "binding")
        try:
            st = fw.run_pre_bind(state, pod, node_name)
            if st is None:
                st = fw.run_bind(state, pod, node_name)
                if st is not None and st.code == Code.Error and isinstance(st.error, Exception):
                    result.bind = st.message
        finally:
            if wd is not None:
                wd.end()
        sim = self._sim.get(pod.uid) if self._sim else None
        if sim is not None:
            sim.outcome(fw, "prebind", st.message if st is not None and st.plugin in
                        {cp.name for cp in fw.pre_bind} else "")
            if st is None or st.plugin not in {cp.name for cp in fw.pre_bind}:
                sim.outcome(fw, "bind", st.message if st is not None else "")
        if st is not None:
            self._binding_failed(fw, state, qpi, node_name, st, result, start, on_loop)
            return
        self.queue.done(pod.uid)
        fw.run_post_bind(state, pod, node_name)
        result.outcome = "scheduled"
        result.message = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        self.scheduled += 1
        self._record_event(pod, "Normal", "Scheduled", "Binding", result.message)
        if self.metrics is not None:
            self.metrics.attempt(fw.profile_name, "scheduled", time.perf_counter() - start, qpi)
        self._finish(pod, result, carried=bool(state.get(BIND_ANNOTATIONS_CARRIED)))

    def _binding_failed(self, fw: Framework, state: CycleState, qpi: QueuedPodInfo, node_name: str, st: Status,
                        result: AttemptResult, start: float, on_loop: bool) -> None:
        pod = qpi.pod
        if _not_leader(st) or not self._may_write():
            self._abandon(fw, state, qpi, node_name, on_loop)
            return

        def undo() -> None:
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
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
        nominated = None
        if post_filter and fw.has_post_filter() and not d.pre_filter_msg.startswith("no nodes available"):
            statuses = dict(d.node_statuses)
            if d.absent_status is not None and d.num_absent:
                for ni in self.cache.snapshot.node_infos:
                    statuses.setdefault(ni.name, d.absent_status)
            victims = self._victims_deleted
            r, st = fw.run_post_filter(state, pod, statuses)
            if self.metrics is not None:
                self.metrics.preemption([cp.name for cp in fw.post_filter], self._victims_deleted - victims)
            if st.code != Code.Success and st.message:
                d.post_filter_msg = st.message
            if r is not None and r.nominated_node_name:
                nominated = r.nominated_node_name
                sim = self._sim.get(pod.uid) if self._sim else None
                if sim is not None:
                    sim.postfilter[nominated] = {cp.name: VICTIM for cp in fw.post_filter}
        result.filter_reasons = group_filter_reasons(d.node_statuses, d.absent_status, d.num_absent)
        result.prefilter_message = d.pre_filter_msg
        result.postfilter_message = d.post_filter_msg
        status = Status(Code.Unschedulable, fe.message)
        self._fail(fw, qpi, status, result, start, rejectors=d.unschedulable_plugins, pending=d.pending_plugins,
                   nominated=nominated)

    def _fail(self, fw: Framework, qpi: QueuedPodInfo, st: Status, result: AttemptResult, start: float,
              rejectors: set[str] | None = None, pending: set[str] | None = None,
              nominated: str | None = None) -> None:
        pod = qpi.pod
        rejected = st.is_rejected()
        msg = st.message
        result.outcome = "unschedulable" if rejected else "error"
        result.message = msg
        if not rejected:
            cause = getattr(st.error, "__cause__", None)
            log.error("Error scheduling pod; retrying: pod=%s err=%s", pod.key, msg,
                      exc_info=(type(cause), cause, cause.__traceback__) if cause is not None else None)
        result.plugin = st.plugin
        if nominated:
            result.nominated_node = nominated
            self.queue.nominator.add(pod, nominated)
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
            }, nominated or "")
        except Exception as exc:
            log.warning("could not update status of pod %s: %s", pod.key, exc)
        if self.metrics is not None:
            self.metrics.attempt(fw.profile_name, "unschedulable" if rejected else "error",
                                 time.perf_counter() - start, qpi)
        self._finish(pod, result)

    def cluster_has_pod(self, pod: Pod) -> bool:
        getter = getattr(self.cluster, "get_pod", None)
        if getter is None:
            return True
        raw = getter(pod.namespace, pod.name)
        return raw is not None and (raw.get("metadata") or {}).get("uid") == pod.uid

    def _finish(self, pod: Pod, result: AttemptResult, carried: bool = False) -> None:
        self.results.put(result)
        sim = self._sim.pop(pod.uid, None) if self._sim else None
        if sim is not None:
            prev = ((pod.raw or {}).get("metadata") or {}).get("annotations") or {}
            try:
                self.cluster.annotate_pod(pod, sim.annotations(prev.get(PREFIX + "result-history")))
            except Exception as exc:
                log.warning("could not record scheduling result on pod %s: %s", pod.key, exc)
        if self.results_mode == "ksched" and not carried:
            # a retry with the same result (but for its attempt number) leaves the pod alone: it keeps its
            # resourceVersion, so its FailedScheduling events aggregate into one EventSeries as
            # kube-scheduler's do, and a pod pending for hours costs no write per retry
            d = result.to_dict()
            sig = encode_result({**d, "attempt": 0})
            if result.outcome == "scheduled":
                self._written_results.pop(pod.uid, None)
            elif self._written_results.get(pod.uid) == sig:
                sig = ""
            else:
                self._written_results[pod.uid] = sig
            if sig:
                try:
                    self.cluster.annotate_pod(pod, {RESULT_ANNOTATION: encode_result(d)})
                except Exception as exc:
                    log.warning("could not record scheduling result on pod %s: %s", pod.key, exc)
        if self.observer is not None:
            self.observer(Decision(pod, result))

    def _record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str) -> None:
        try:
            self.cluster.record_event(pod, type_, reason, action, note, reporting_controller=pod.scheduler_name)
        except Exception as exc:
            log.warning("could not record event for pod %s: %s", pod.key, exc)

    def _delete_victim(self, pod: Pod) -> None:
        self._victims_deleted += 1
        self.cluster.delete_pod(pod, reason="preempted")


def _not_leader(st: Status) -> bool:
    """Did a Bind or PreBind fail because the backend refused to send without the lease?"""
    exc: BaseException | None = st.error if isinstance(st.error, BaseException) else None
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, LeadershipLost):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


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
    out = []
    for i in order.tolist():
        name = snapshot.node_infos[int(scores.rows[i])].name
        entry: dict[str, Any] = {"node": name, "total": int(scores.totals[i]), "plugins": {}}
        for name, (raw, norm, weight) in scores.per_plugin.items():
            entry["plugins"][name] = {"raw": int(raw[i]), "normalized": int(norm[i]), "weight": weight,
                                      "weighted": int(norm[i]) * weight}
        out.append(entry)
    return out

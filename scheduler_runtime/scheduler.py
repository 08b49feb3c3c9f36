"""Wiring and the loop: the `Scheduler` owns the cache, the queue and one Framework per profile, applies
cluster events between attempts and pops pods; each attempt is `schedule_one.SchedulingCycle`'s.

Follows kube-scheduler v1.36.3 pkg/scheduler/scheduler.go (New: profiles to frameworks, the queue's
PreEnqueue/QueueingHints wiring) and eventhandlers.go (assigned pods into the cache, unassigned ones into the
queue, other objects as queueing events). Cluster events arrive on any thread into an inbox the loop drains.
"""

from __future__ import annotations

import functools
import logging
import queue as _stdqueue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from .batching import OpportunisticBatch, PodSigner
from .bindpool import BindingPool
from .cache import Cache
from .cluster.base import ClusterBackend
from .extenders import build_extender_set
from .framework.handle import Handle
from .framework.plugin import Plugin
from .framework.registry import Registry
from .framework.runtime import Framework
from .framework.status import Status
from .framework.types import ActionType, ClusterEvent
from .objects import Node, Pod
from .podevents import pod_update_actions
from .podrequests import count_claim_statuses
from .queue import SchedulingQueue
from .recording import recorder_for
from .results import ResultStore
from .schedule_one import Decision, SchedulingCycle
from .watchdog import CycleWatchdog

log = logging.getLogger("ksched.scheduler")

#: names importers of this module use
__all__ = ["Decision", "Scheduler", "build_frameworks"]


def build_frameworks(config: Any, registry: Registry, snapshot: Any, cluster: ClusterBackend | None,
                     rng: random.Random, metrics: Any = None, opportunistic_batching: bool = True,
                     clock: Callable[[], float] = time.monotonic, batch_rescore: bool = False
                     ) -> dict[str, Framework]:
    """One Framework per profile, plugin instances shared across extension points within a profile; the
    configured extenders are shared by all of them (kube-scheduler's sched.Extenders). With the
    OpportunisticBatching gate on, each profile signs pods and keeps its own batch cache (`batch_rescore`:
    kube-scheduler 1.37's, which rescores the node just chosen)."""
    out: dict[str, Framework] = {}
    extenders = build_extender_set(getattr(config, "extenders", None))
    for prof in config.profiles:
        handle = Handle(snapshot, profile=prof.scheduler_name, cluster=cluster, parallelism=config.parallelism)
        handle.feature_gates = getattr(config, "feature_gates", None)
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
        if opportunistic_batching:
            fw.signer = PodSigner(fw, has_extenders=extenders is not None)
            fw.batch = OpportunisticBatch(fw, clock, rescore=batch_rescore)
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


#: the inbox's resource for a claim a plugin wrote (Handle.claim_assumed)
_CLAIM_EVENT = "resourceclaims.resource.k8s.io"


def _resource_version(raw: dict[str, Any] | None) -> int | None:
    rv = str(((raw or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else None


def _event_resource(raw: dict[str, Any]) -> str:
    kind = raw.get("kind") or ""
    api = raw.get("apiVersion") or ""
    group = api.split("/")[0] if "/" in api else ""
    if group in ("", "apps", "policy", "v1") or kind in ("Pod", "Node"):
        return kind
    return f"{group}/{kind}"


class Scheduler(SchedulingCycle):
    """Owns the cache, the queue and one Framework per profile; driven by a cluster backend."""

    def __init__(self, cluster: ClusterBackend, config: Any, registry: Registry, *, seed: int | None = None,
                 clock: Callable[[], float] = time.monotonic, bind_async: bool = False, bind_workers: int = 16,
                 results: ResultStore | None = None, observer: Callable[[Decision], None] | None = None,
                 metrics: Any = None, record_breakdown: bool = True, results_mode: str = "ksched",
                 watchdog: CycleWatchdog | None = None, bind_deadline: float = 30.0,
                 feature_gates: dict[str, bool] | None = None, kube_minor: int | None = None) -> None:
        """`feature_gates`: the effective gates (featuregates.parse_feature_gates); only the ones the cycle
        reads matter here (OpportunisticBatching, on unless turned off). `kube_minor`: the kube-scheduler
        minor whose behaviour the cycle follows where minors differ (opportunistic batching rescores from 37);
        by default the one the gates emulate, else the pinned one."""
        # DRANodeAllocatableResources (alpha): assigned pods count what their claims take of the node, as kube's
        # process-wide gate makes PodInfo.CalculateResource do; set before any pod of this scheduler is parsed
        count_claim_statuses(bool((feature_gates or {}).get("DRANodeAllocatableResources", False)))
        if kube_minor is None:
            from .featuregates import emulated_minor

            kube_minor = int(emulated_minor(feature_gates).split(".")[1])
        self.cluster = cluster
        #: how long a binding cycle may take before it stops holding anything up: synchronous binding waits
        #: no longer for one with a plugin from outside the runtime; async binding replaces its worker
        self.bind_deadline = bind_deadline
        #: pod key -> "plugin (method)" of binding cycles the loop stopped waiting for; cleared when they end
        self.detached_bindings: dict[str, str] = {}
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
        self.recorder = recorder_for(results_mode, cluster)
        batching = (feature_gates or {}).get("OpportunisticBatching", True)  # beta, on by default since 1.36
        # beta, on by default since 1.35 (the earliest minor ksched emulates)
        self.nominate_for_expectation = (feature_gates or {}).get("NominatedNodeNameForExpectation", True)
        # beta, off by default: without its API dispatcher kube's loop waits for a failure's status write
        self.failure_writes_wait = not (feature_gates or {}).get("SchedulerAsyncAPICalls", False)
        self.frameworks = build_frameworks(config, registry, self.cache.snapshot, cluster, self.rng, metrics,
                                           opportunistic_batching=batching, clock=clock,
                                           batch_rescore=kube_minor >= 37)
        first = next(iter(self.frameworks.values()))
        self.extenders = first.extenders
        less = first.less()
        self._events = {name: fw.events_to_register() for name, fw in self.frameworks.items()}
        self._interest: dict[tuple[str, int], frozenset[str]] = {}
        self.queue = SchedulingQueue(
            less=less, pre_enqueue=self._pre_enqueue, events_for=self._events_for,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds), clock=clock, interested=self._interested,
            plugin_index=(self._plugins_for, frozenset(n for plugins in self._events.values()
                                                       for n, regs in plugins.items() if regs is not None)))
        for profile, fw in self.frameworks.items():
            fw.handle.activate = self.queue.activate
            fw.handle.nominated_pods_for_node = self.queue.nominator.pods_for_node
            fw.handle.nominated_node_names = self.queue.nominator.node_names
            fw.handle.nominated_pods_by_node = self.queue.nominator.pods_by_node
            fw.handle.delete_pod = functools.partial(self._delete_victim, by=profile)
            fw.handle.record_event = self._record_event
            fw.handle.observe_victims = self._observe_victims
            fw.handle.run_in_background = self._run_in_background
            fw.handle.get_pod = self._get_pod
            fw.handle.pod_gone_or_deleting = self._pod_gone_or_deleting
            fw.handle.pod_cached = self._pod_cached
            fw.handle.claim_assumed = self._claim_assumed
        if metrics is not None:
            self.queue.on_incoming = metrics.incoming
            self.queue.on_hint = getattr(metrics, "queueing_hint", None)
            bind = getattr(metrics, "bind", None)
            if bind is not None:
                bind(self)
        self._victims_deleted = 0  # preemption victims deleted so far (scheduler_preemption_victims)
        #: claim key -> the claim as the queue last saw it (kube's claim assume cache: `_claim_event`)
        self._claims_seen: dict[str, dict[str, Any]] = {}
        self._inbox: _stdqueue.SimpleQueue[tuple[Any, ...]] = _stdqueue.SimpleQueue()
        self.queue.interrupt = lambda: not self._inbox.empty()
        self._binders = BindingPool(bind_workers, bind_deadline) if bind_async else None
        self._bounded_binder: BindingPool | None = None  # synchronous binding of foreign plugins, lazily
        self._inflight_bindings = 0
        self._inflight_lock = threading.Lock()
        self._stop = threading.Event()
        self.scheduled = 0
        self.attempts = 0
        #: kube's SchedulingCycle(): one per pod popped (opportunistic batching reuses only the last cycle's)
        self.scheduling_cycle = 0
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

    def _plugins_for(self, ev: ClusterEvent) -> frozenset[str]:
        """The plugins (of any profile) that register `ev`, or register nothing and so take every event.
        Kept per (resource, action): the queue asks this for every event."""
        key = (ev.resource, int(ev.action))
        got = self._interest.get(key)
        if got is None:
            got = frozenset(name for plugins in self._events.values() for name, regs in plugins.items()
                            if regs is None or any(r.event.matches(ev) for r in regs))
            self._interest[key] = got
        return got

    def _interested(self, ev: ClusterEvent) -> bool:
        """kube's isEventOfInterest: an event no plugin registers moves no pod and is not even logged."""
        return bool(self._plugins_for(ev))

    def start(self, **kwargs: Any) -> None:
        """Subscribe to the backend; initial objects arrive as ADDED events into the inbox."""
        self.cluster.start(self.on_cluster_event, **kwargs)
        self.drain_inbox()

    def on_cluster_event(self, resource: str, action: str, old: dict | None, new: dict | None) -> None:
        """Backend callback (any thread): applied by the scheduling thread between cycles, or at once when it
        waits for a pod."""
        self._inbox.put((resource, action, old, new))
        self.queue.wake()

    def _claim_assumed(self, claim: dict[str, Any]) -> None:
        """A claim a plugin wrote (any thread): its update event, through the inbox so that it lands among
        the informer's events in the order they happened."""
        self._inbox.put((_CLAIM_EVENT, "ASSUMED", None, claim))
        self.queue.wake()

    def _claim_event(self, action: str, old_raw: dict | None, new_raw: dict | None) -> None:
        """ResourceClaim events as kube's queue gets them, from its claim assume cache: a claim that PreBind
        wrote counts as updated when the write returns (`ASSUMED`), not when the informer brings that version
        back; an informer version no newer than the last one the queue saw is dropped (the echo of the write,
        or an older update delivered after it), and the next newer one is an update from the written claim.
        Versions are compared as numbers, as the assume cache does; a claim the queue never saw cannot be
        assumed (kube: not found)."""
        latest = self._claims_seen
        raw = new_raw or old_raw or {}
        m = raw.get("metadata") or {}
        key = f"{m.get('namespace') or ''}/{m.get('name') or ''}"
        seen = latest.get(key)
        if action == "DELETED":
            latest.pop(key, None)
            self.queue.move_on_event(ClusterEvent(_event_resource(raw), ActionType.Delete),
                                     seen if seen is not None else old_raw, None)
            return
        version = _resource_version(new_raw)
        if seen is not None:
            have = _resource_version(seen)
            if version is not None and have is not None and (version < have or (
                    version == have and action != "ASSUMED")):
                return  # kube: an assumed version out of sync is refused; an informer one not newer, skipped
        elif action == "ASSUMED":
            return
        latest[key] = new_raw  # type: ignore[assignment]
        act = ActionType.Add if seen is None else ActionType.Update
        self.queue.move_on_event(ClusterEvent(_event_resource(raw), act), seen, new_raw)

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
            if resource == _CLAIM_EVENT or raw.get("kind") == "ResourceClaim":
                self._claim_event(action, old_raw, new_raw)
                return
            act = {"ADDED": ActionType.Add, "DELETED": ActionType.Delete}.get(action, ActionType.Update)
            self.queue.move_on_event(ClusterEvent(_event_resource(raw), act), old_raw, new_raw)

    def _apply_node(self, action: str, old_raw: dict | None, new_raw: dict | None) -> None:
        if action == "DELETED":
            name = (old_raw or {}).get("metadata", {}).get("name", "")
            gone = self.cache.snapshot.get(name)
            self.cache.remove_node(name)
            # hints get the Node, as kube's get the *v1.Node the informer last held
            self.queue.move_on_event(ClusterEvent("Node", ActionType.Delete),
                                     gone.node if gone is not None and gone.node is not None else old_raw, None)
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
            self.recorder.forget(pod)
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
        pod = self._rebound(old_raw, new_raw) if action == "MODIFIED" else None
        if pod is None:
            pod = Pod.from_dict(new_raw)
        if pod.node_name:
            self.recorder.forget(pod)
            known = self.cache.pod_node(pod.uid) is not None
            if pod.terminated:
                if known:
                    self.cache.remove_pod(pod)
                    self.queue.move_on_event(ClusterEvent("Pod", ActionType.Delete), pod, None)
                return
            self.cache.add_pod(pod)
            self.queue.delete(pod)
            self.queue.nominator.delete(pod)
            if not known or (old_raw is not None and not (old_raw.get("spec") or {}).get("nodeName")):
                # kube's assigned-pod informer sees a pod it (or this scheduler) just bound as added
                self.queue.move_on_event(ClusterEvent("Pod", ActionType.Add), None, pod)
            elif old_raw is not None:
                # kube's AssignedPodUpdate events, one per kind of change, each with the old and new pod
                old_pod = Pod.from_dict(old_raw)
                for act in pod_update_actions(old_pod, pod):
                    self.queue.move_on_event(ClusterEvent("Pod", act), old_pod, pod)
            return
        if pod.scheduler_name not in self.frameworks or pod.terminated or pod.deletion_timestamp:
            return
        if self.cache.is_assumed(pod.uid):
            return
        if action == "ADDED":
            self.queue.add(pod)
            if pod.nominated_node_name:  # gated or not (kube 1.37, #139057)
                self.queue.nominator.add(pod, pod.nominated_node_name)
        else:
            old = Pod.from_dict(old_raw) if old_raw else None
            self.queue.update(old, pod)
            if self.queue.where(pod.uid) not in (None, "in-flight"):  # kube leaves in-flight pods' nominations
                self._update_nomination(old, pod)

    def _rebound(self, old_raw: dict | None, new_raw: dict) -> Pod | None:
        """The bind of a pod this scheduler assumed, seen back: its assumed Pod (parsed from `old_raw`, the
        very object) carried over by Pod.rebound instead of parsing `new_raw` again. None: parse."""
        if old_raw is None:
            return None
        uid = (old_raw.get("metadata") or {}).get("uid")
        held = self.cache.assumed_pod(uid) if uid else None
        if held is None or held.raw is not old_raw:
            return None
        return held.rebound(new_raw)

    def _update_nomination(self, old: Pod | None, new: Pod) -> None:
        """kube's UpdateNominatedPod for a queued pod (gated ones included): the nomination follows the pod's
        status.nominatedNodeName, except that one made in memory is kept while neither version carries one."""
        nominator = self.queue.nominator
        if not new.nominated_node_name and (old is None or not old.nominated_node_name):
            kept = nominator.node_of(new.uid)
            if kept:
                nominator.add(new, kept)
            return
        nominator.add(new, new.nominated_node_name)

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
        self.finish_bindings()

    def finish_bindings(self) -> None:
        """Wait for the binding pools' cycles in flight and stop their workers, then apply what they handed
        back to the loop (a failed binding's requeue): the end of a run, or of a test's single attempt."""
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

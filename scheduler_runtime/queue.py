"""Scheduling queue: activeQ, backoffQ and the unschedulable pool, with kube-scheduler's requeueing rules."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .backoff import BackoffPolicy
from .framework.status import Status
from .framework.types import QUEUE, ClusterEvent, ClusterEventWithHint, QueuedPodInfo
from .objects import Pod
from .podevents import pod_update_actions

ACTIVE, BACKOFF, UNSCHEDULABLE, GATED = "active", "backoff", "unschedulable", "gated"

LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
PreEnqueueFn = Callable[[Pod], Status | None]
#: (profile, plugin) -> registrations, or None when the plugin registered no events (= every event)
EventsFn = Callable[[str, str], list[ClusterEventWithHint] | None]


class _Entry:
    """Heap entry ordered by the profile's QueueSort `less`."""

    __slots__ = ("qpi", "less", "removed")

    def __init__(self, qpi: QueuedPodInfo, less: LessFn) -> None:
        self.qpi = qpi
        self.less = less
        self.removed = False

    def __lt__(self, other: _Entry) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.qpi.seq < other.qpi.seq


class SchedulingQueue:
    """Thread-safe; the clock is injectable so tests can move time."""

    def __init__(self, less: LessFn | None = None, pre_enqueue: PreEnqueueFn | None = None,
                 events_for: EventsFn | None = None, initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 pop_from_backoff: bool = True, interested: Callable[[ClusterEvent], bool] | None = None,
                 plugin_index: tuple[Callable[[ClusterEvent], frozenset[str]], frozenset[str]] | None = None
                 ) -> None:
        self._less = less or (lambda a, b: a.pod.priority > b.pod.priority or (
            a.pod.priority == b.pod.priority and a.timestamp < b.timestamp))
        self._pre_enqueue = pre_enqueue or (lambda pod: None)
        self._events_for = events_for or (lambda profile, plugin: None)
        #: does some plugin of some profile register this event (kube's isEventOfInterest)? Others are dropped
        #: before any pod is looked at
        self._interested = interested or (lambda ev: True)
        #: (plugins that may requeue a pod on an event, every plugin that registered events): an event then
        #: looks only at the pods some of whose rejecting plugins are among the first (or unknown, or none)
        self._plugin_index = plugin_index
        self._by_rejector: dict[str, set[str]] = {}  # rejecting plugin ("" for none) -> uids, not gated
        #: gated pods by the PreEnqueue plugin holding them: an event looks only at those whose plugin
        #: registered it (SchedulingGates registers only the pod's own update, so no cluster event looks at
        #: pods waiting on scheduling gates, however many there are)
        self._gated: dict[str, set[str]] = {}
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._backoff_policy = BackoffPolicy(initial_backoff, cap=max_backoff)
        self.max_in_unschedulable = max_in_unschedulable
        self.clock = clock
        self.pop_from_backoff = pop_from_backoff
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._active: list[_Entry] = []
        self._backoff: list[tuple[float, int, _Entry]] = []
        self._unschedulable: dict[str, QueuedPodInfo] = {}  # unschedulable and gated pods, kept by _park
        self._where: dict[str, tuple[str, Any]] = {}  # uid -> (queue, entry/qpi)
        self._in_flight: dict[str, int] = {}  # uid -> event-log position at pop
        #: in-flight pods activated meanwhile (kube's ForceActivate in-flight event): back to activeQ when done
        self._force_activated: set[str] = set()
        self._event_log: deque[tuple[int, ClusterEvent, Any, Any]] = deque()
        self._event_seq = 0
        self._closed = False
        self.nominator = Nominator()
        self.on_incoming: Callable[[str, str], None] = lambda queue, event: None
        #: (plugin, event label, "Queue"|"QueueSkip"|"Error", seconds) for each queueing hint function run
        self.on_hint: Callable[[str, str, str, float], None] | None = None
        #: pop's reason to return None early while it would block: the popping thread has other work (the
        #: scheduler's inbox of cluster events), which otherwise waits out pop's timeout
        self.interrupt: Callable[[], bool] | None = None
        #: pop is blocked right now (read without the lock): only then does wake() need to take it
        self.waiting = False

    # ------------------------------------------------------------------ adding
    def add(self, pod: Pod, event: str = "PodAdd") -> None:
        with self._cond:
            if pod.uid in self._where or pod.uid in self._in_flight:
                return
            qpi = QueuedPodInfo(pod, timestamp=self.clock(), seq=next(self._seq))
            self._enqueue_gated_or_active(qpi, event)
            self._cond.notify()

    def _enqueue_gated_or_active(self, qpi: QueuedPodInfo, event: str) -> None:
        st = self._pre_enqueue(qpi.pod)
        if st is not None and not st.is_success():
            qpi.gated = True
            qpi.gating_plugin = st.plugin
            self._park(qpi)
            self._where[qpi.pod.uid] = (GATED, qpi)
            self.on_incoming(GATED, event)
            return
        qpi.gated = False
        self._push_active(qpi, event)

    def _pre_enqueue_passes(self, qpi: QueuedPodInfo) -> bool:
        """kube's moveToActiveQ runs PreEnqueue on an unschedulable pod an event moves: a pod it rejects (a
        preemptor whose asynchronous preemption is in flight) stays in the unschedulable pool."""
        st = self._pre_enqueue(qpi.pod)
        return st is None or st.is_success()

    def _push_active(self, qpi: QueuedPodInfo, event: str) -> None:
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self.clock()
        e = _Entry(qpi, self._less)
        heapq.heappush(self._active, e)
        self._where[qpi.pod.uid] = (ACTIVE, e)
        self.on_incoming(ACTIVE, event)

    def _push_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        e = _Entry(qpi, self._less)
        heapq.heappush(self._backoff, (self.backoff_expiry(qpi), qpi.seq, e))
        self._where[qpi.pod.uid] = (BACKOFF, e)
        self.on_incoming(BACKOFF, event)

    def _remove(self, uid: str) -> QueuedPodInfo | None:
        where = self._where.pop(uid, None)
        if where is None:
            return None
        kind, obj = where
        if kind in (ACTIVE, BACKOFF):
            obj.removed = True
            return obj.qpi
        self._unpark(uid)
        return obj

    @staticmethod
    def _rejector_keys(qpi: QueuedPodInfo) -> set[str]:
        return (qpi.unschedulable_plugins | qpi.pending_plugins) or {""}

    def _park(self, qpi: QueuedPodInfo) -> None:
        """Into the unschedulable pool (gated or not), indexed by the plugins that rejected it."""
        uid = qpi.pod.uid
        self._unschedulable[uid] = qpi
        if qpi.gated:
            self._gated.setdefault(qpi.gating_plugin, set()).add(uid)
            return
        for k in self._rejector_keys(qpi):
            self._by_rejector.setdefault(k, set()).add(uid)

    def _unpark(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._unschedulable.pop(uid, None)
        if qpi is None:
            return None
        if qpi.gated:
            self._ungate(uid, qpi.gating_plugin)
            return qpi
        for k in self._rejector_keys(qpi):
            bucket = self._by_rejector.get(k)
            if bucket is not None:
                bucket.discard(uid)
                if not bucket:
                    del self._by_rejector[k]
        return qpi

    def _ungate(self, uid: str, plugin: str) -> None:
        bucket = self._gated.get(plugin)
        if bucket is not None:
            bucket.discard(uid)
            if not bucket:
                del self._gated[plugin]

    def _candidates(self, ev: ClusterEvent) -> list[QueuedPodInfo]:
        """The pooled pods an event may move: gated ones, and those a plugin that may requeue on it rejected."""
        if not self._unschedulable:  # the usual case under load: every bound pod's event finds nothing to move
            return []
        if self._plugin_index is None or ev.resource == "*":
            return list(self._unschedulable.values())
        may_requeue, known = self._plugin_index
        plugins = may_requeue(ev)
        uids: set[str] = set()
        for plugin, bucket in self._gated.items():
            if plugin in plugins:  # a plugin that registers nothing matching cannot lift its gate on it
                uids |= bucket
        for k, bucket in self._by_rejector.items():
            if k in plugins or k not in known:  # "" (no rejector) and unknown names take every event
                uids |= bucket
        out = [self._unschedulable[u] for u in uids if u in self._unschedulable]
        out.sort(key=lambda q: q.seq)
        return out

    # ------------------------------------------------------------------ backoff
    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        count = qpi.consecutive_errors_count or qpi.unschedulable_count
        if count == 0 or self.max_backoff == 0:
            return 0.0
        policy = self._backoff_policy
        if policy.initial != self.initial_backoff or policy.cap != self.max_backoff:  # the fields were set
            policy = self._backoff_policy = BackoffPolicy(self.initial_backoff, cap=self.max_backoff)
        return policy.duration(count)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_expiry(qpi) > self.clock()

    def _queue_after_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        if self.is_backing_off(qpi):
            self._push_backoff(qpi, event)
        else:
            self._push_active(qpi, event)

    def flush_backoff_completed(self) -> int:
        with self._cond:
            return self._flush_backoff_locked()

    def _flush_backoff_locked(self) -> int:
        now = self.clock()
        moved = 0
        while self._backoff and (self._backoff[0][2].removed or self._backoff[0][0] <= now):
            _, _, e = heapq.heappop(self._backoff)
            if e.removed:
                continue
            self._push_active(e.qpi, "BackoffComplete")
            moved += 1
        if moved:
            self._cond.notify_all()
        return moved

    def flush_unschedulable_leftover(self) -> int:
        with self._cond:
            now = self.clock()
            stale = [q for q in self._unschedulable.values()
                     if not q.gated and now - q.timestamp > self.max_in_unschedulable]
            for q in stale:
                q.flushed_from_unschedulable = True  # scheduler_pod_scheduled_after_flush_total
                self._unpark(q.pod.uid)
                self._queue_after_backoff(q, "UnschedulableTimeout")
            if stale:
                self._cond.notify_all()
            return len(stale)

    # ------------------------------------------------------------------ popping
    def pop(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """Next pod by QueueSort order; blocks up to `timeout` (None = forever) while empty."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._flush_backoff_locked()
                while self._active and self._active[0].removed:
                    heapq.heappop(self._active)
                if self._active:
                    e = heapq.heappop(self._active)
                    return self._start(e.qpi)
                if self.pop_from_backoff:
                    while self._backoff and self._backoff[0][2].removed:
                        heapq.heappop(self._backoff)
                    # early pops serve pods that were unschedulable; pods that failed with an error wait out
                    # their backoff (kube-scheduler keeps them in a separate error backoff queue)
                    i = next((i for i, (_, _, e) in enumerate(self._backoff)
                              if not e.removed and not e.qpi.consecutive_errors_count), None)
                    if i is not None:
                        e = self._backoff[i][2]
                        self._backoff[i] = self._backoff[-1]
                        self._backoff.pop()
                        heapq.heapify(self._backoff)
                        return self._start(e.qpi)
                if self._closed:
                    return None
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                if self._backoff:
                    nxt = max(0.0, self._backoff[0][0] - self.clock())
                    wait = nxt if wait is None else min(wait, nxt)
                self.waiting = True  # before the check: a wake() after it then finds pop blocked
                if self.interrupt is not None and self.interrupt():
                    self.waiting = False
                    return None
                self._cond.wait(wait if wait is None else max(wait, 0.001))
                self.waiting = False

    def _start(self, qpi: QueuedPodInfo) -> QueuedPodInfo:
        self._where.pop(qpi.pod.uid, None)
        qpi.attempts += 1
        self._in_flight[qpi.pod.uid] = self._event_seq
        return qpi

    def done(self, uid: str) -> None:
        with self._cond:
            self._in_flight.pop(uid, None)
            self._force_activated.discard(uid)
            self._prune_event_log()

    def _prune_event_log(self) -> None:
        if not self._in_flight:
            self._event_log.clear()
            return
        oldest = min(self._in_flight.values())
        while self._event_log and self._event_log[0][0] <= oldest:
            self._event_log.popleft()

    # ------------------------------------------------------------------ failures
    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, rejectors: set[str],
                                         pending: set[str] | None = None) -> None:
        """Requeue after a failed attempt: errors go to backoff, rejections wait for a useful event."""
        with self._cond:
            uid = qpi.pod.uid
            popped_at = self._in_flight.pop(uid, self._event_seq)
            forced = uid in self._force_activated
            self._force_activated.discard(uid)
            if uid in self._where:
                self._prune_event_log()
                return
            qpi.timestamp = self.clock()
            qpi.flushed_from_unschedulable = False  # back after an attempt: the flush is behind it
            qpi.unschedulable_plugins = set(rejectors)
            qpi.pending_plugins = set(pending or ())
            if not rejectors and not pending:
                qpi.consecutive_errors_count += 1
                self._push_backoff(qpi, "ScheduleAttemptFailure")
            else:
                qpi.unschedulable_count += 1
                qpi.consecutive_errors_count = 0
                decision = "immediate" if forced else None
                for seq, ev, old, new in self._event_log:
                    if seq > popped_at:
                        d = self._hint(qpi, ev, old, new)
                        if d is not None:
                            decision = d if decision != "immediate" else decision
                if decision is not None and not self._pre_enqueue_passes(qpi):
                    decision = None
                if decision == "immediate":
                    self._push_active(qpi, "ScheduleAttemptFailure")
                elif decision == "backoff":
                    self._queue_after_backoff(qpi, "ScheduleAttemptFailure")
                else:
                    self._park(qpi)
                    self._where[uid] = (UNSCHEDULABLE, qpi)
                    self.on_incoming(UNSCHEDULABLE, "ScheduleAttemptFailure")
            self._prune_event_log()
            self._cond.notify_all()

    def requeue_after_error(self, qpi: QueuedPodInfo) -> None:
        self.add_unschedulable_if_not_present(qpi, set())

    def _gate_lifted(self, qpi: QueuedPodInfo, ev: ClusterEvent, old: Any, new: Any) -> bool:
        """A pod held back by a PreEnqueue plugin that registered this event (DynamicResources waiting for a
        claim to be created): run PreEnqueue again when the plugin's hint says so, as kube's queue does."""
        plugin = getattr(qpi, "gating_plugin", "")
        regs = self._events_for(qpi.pod.scheduler_name, plugin) if plugin else None
        if not regs:
            return False
        for reg in regs:
            if not reg.event.matches(ev):
                continue
            try:
                queue = reg.hint is None or reg.hint(qpi.pod, old, new) == QUEUE
            except Exception:
                queue = True
            if queue:
                st = self._pre_enqueue(qpi.pod)
                if st is None or st.is_success():
                    return True
                if st.plugin != plugin:
                    self._ungate(qpi.pod.uid, plugin)
                    self._gated.setdefault(st.plugin, set()).add(qpi.pod.uid)
                    qpi.gating_plugin = st.plugin
                return False
        return False

    def _hint(self, qpi: QueuedPodInfo, ev: ClusterEvent, old: Any, new: Any) -> str | None:
        """'immediate', 'backoff' or None (stay), per kube's QueueingHint evaluation."""
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors or ev.resource == "*":
            return "backoff"
        result = None
        profile = qpi.pod.scheduler_name
        for plugin in rejectors:
            regs = self._events_for(profile, plugin)
            if regs is None:
                hits = [QUEUE]
            else:
                hits = []
                for reg in regs:
                    if not reg.event.matches(ev):
                        continue
                    if reg.hint is None:
                        hits.append(QUEUE)
                        continue
                    start = time.perf_counter()
                    label = ""
                    try:
                        hit = reg.hint(qpi.pod, old, new)
                    except Exception:
                        hit, label = QUEUE, "Error"
                    hits.append(hit)
                    if self.on_hint is not None:  # scheduler_queueing_hint_execution_duration_seconds
                        label = label or ("Queue" if hit == QUEUE else "QueueSkip")
                        self.on_hint(plugin, _event_metric_label(ev), label, time.perf_counter() - start)
            if QUEUE in hits:
                if plugin in qpi.pending_plugins:
                    return "immediate"
                result = "backoff"
        return result

    # ------------------------------------------------------------------ events
    def move_on_event(self, ev: ClusterEvent, old: Any = None, new: Any = None,
                      precheck: Callable[[Pod], bool] | None = None) -> int:
        """A cluster event: move unschedulable pods whose rejecting plugins care about it."""
        if ev.resource != "*" and not self._interested(ev):
            return 0
        with self._cond:
            if self._in_flight:
                self._event_seq += 1
                self._event_log.append((self._event_seq, ev, old, new))
            moved = 0
            for qpi in self._candidates(ev):
                uid = qpi.pod.uid
                if qpi.gated:
                    if self._gate_lifted(qpi, ev, old, new):
                        self._unpark(uid)
                        qpi.gated = False
                        self._push_active(qpi, str(ev))
                        moved += 1
                    continue
                if precheck is not None and not precheck(qpi.pod):
                    continue
                d = self._hint(qpi, ev, old, new)
                if d is None or not self._pre_enqueue_passes(qpi):
                    continue
                self._unpark(uid)
                if d == "immediate":
                    self._push_active(qpi, str(ev))
                else:
                    self._queue_after_backoff(qpi, str(ev))
                moved += 1
            if moved:
                self._cond.notify_all()
            return moved

    def update(self, old: Pod | None, new: Pod) -> None:
        """An unscheduled pod changed. A pod being scheduled keeps the change's events for when its attempt
        ends; an unschedulable one moves when a rejecting plugin's hint says the change may help, as kube's
        queue does with queueing hints on (a change of no particular kind is a generic Pod Update)."""
        events = [ClusterEvent("Pod", a) for a in pod_update_actions(old, new)] if old is not None else []
        with self._cond:
            uid = new.uid
            where = self._where.get(uid)
            if where is None:
                if uid in self._in_flight:
                    for ev in events:
                        if self._interested(ev):
                            self._event_seq += 1
                            self._event_log.append((self._event_seq, ev, old, new))
                    return
                qpi = QueuedPodInfo(new, timestamp=self.clock(), seq=next(self._seq))
                self._enqueue_gated_or_active(qpi, "PodUpdate")
                self._cond.notify()
                return
            kind, obj = where
            if kind in (ACTIVE, BACKOFF):
                obj.qpi.pod = new
                return
            qpi: QueuedPodInfo = obj
            qpi.pod = new
            if kind == GATED:
                st = self._pre_enqueue(new)
                if st is None or st.is_success():
                    self._unpark(uid)
                    del self._where[uid]
                    qpi.gated = False
                    self._push_active(qpi, "PodUpdate")
                    self._cond.notify()
                return
            decision: str | None = "backoff" if old is None else None
            label = "UnscheduledPodUpdate"
            for ev in events:
                decision = self._hint(qpi, ev, old, new) if self._interested(ev) else None
                if decision is not None:
                    label = f"UnschedulablePod{ev.action.name}"  # kube's event label
                    break
            if decision is not None:
                self._unpark(uid)
                del self._where[uid]
                if decision == "immediate":
                    self._push_active(qpi, label)
                else:
                    self._queue_after_backoff(qpi, label)
                self._cond.notify()

    def delete(self, pod: Pod) -> None:
        with self._cond:
            self._remove(pod.uid)
            self.nominator.delete(pod)

    def activate(self, pods: Iterable[Pod]) -> None:
        with self._cond:
            for pod in pods:
                where = self._where.get(pod.uid)
                if where is None and pod.uid in self._in_flight:
                    self._force_activated.add(pod.uid)
                    continue
                if where is None or where[0] == ACTIVE:
                    continue
                kind, obj = where
                if kind == GATED:
                    continue
                qpi = self._remove(pod.uid)
                if qpi is not None:
                    self._push_active(qpi, "ForceActivate")
            self._cond.notify_all()

    def wake(self) -> None:
        """Rouse a blocked pop so it asks `interrupt` again (kube's informers add pods to the queue
        themselves and Pop wakes at once; here events reach the queue through the popping thread)."""
        if self.waiting:
            with self._cond:
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ------------------------------------------------------------------ introspection
    def pending_counts(self) -> dict[str, int]:
        """Pods per queue; `backoffError` counts the backoff pods whose last attempt ended in an error."""
        with self._cond:
            counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, "backoffError": 0}
            for kind, obj in self._where.values():
                counts[kind] += 1
                if kind == BACKOFF and getattr(getattr(obj, "qpi", obj), "consecutive_errors_count", 0):
                    counts["backoffError"] += 1
            return counts

    def has_work(self) -> bool:
        """Pods that could be attempted now or after backoff (not unschedulable, not gated)."""
        with self._cond:
            return any(k in (ACTIVE, BACKOFF) for k, _ in self._where.values()) or bool(self._in_flight)

    def pods(self, kinds: tuple[str, ...] = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED)) -> list[QueuedPodInfo]:
        with self._cond:
            out = []
            for kind, obj in self._where.values():
                if kind in kinds:
                    out.append(obj.qpi if kind in (ACTIVE, BACKOFF) else obj)
            return out

    def where(self, uid: str) -> str | None:
        with self._cond:
            w = self._where.get(uid)
            return w[0] if w else ("in-flight" if uid in self._in_flight else None)

    def __len__(self) -> int:
        with self._cond:
            return len(self._where)


class Nominator:
    """Pods nominated to nodes by preemption, so other pods do not take the freed room."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}
        #: each node's pods as a list, a new one whenever they change (so one that is unchanged stays the same
        #: object from cycle to cycle), and `pods_by_node`'s answer, kept until a nomination changes
        self._lists: dict[str, list[Pod]] = {}
        self._view: dict[str, list[Pod]] | None = None

    def add(self, pod: Pod, node: str) -> None:
        with self._lock:
            self._delete_locked(pod.uid)
            if not node:
                return
            self._by_node.setdefault(node, {})[pod.uid] = pod
            self._node_of[pod.uid] = node
            self._changed_locked(node)

    def delete(self, pod: Pod) -> None:
        with self._lock:
            self._delete_locked(pod.uid)

    def _delete_locked(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(uid, None)
                if not pods:
                    del self._by_node[node]
            self._changed_locked(node)

    def _changed_locked(self, node: str) -> None:
        pods = self._by_node.get(node)
        if pods:
            self._lists[node] = list(pods.values())
        else:
            self._lists.pop(node, None)
        self._view = None

    def pods_for_node(self, node: str) -> list[Pod]:
        with self._lock:
            return list(self._by_node.get(node, {}).values())

    def node_names(self) -> set[str]:
        with self._lock:
            return set(self._by_node)

    def pods_by_node(self) -> dict[str, list[Pod]]:
        """Every node's nominated pods under one lock: a scheduling cycle asks about each nominated node, and
        a preemption wave leaves hundreds of them. Shared until a nomination changes, and a node's list until
        its nominations do (`filter_readers.nominated_resource_key` keeps what it derives with the list):
        callers only read them."""
        with self._lock:
            view = self._view
            if view is None:
                view = self._view = dict(self._lists)
            return view

    def node_of(self, uid: str) -> str:
        with self._lock:
            return self._node_of.get(uid, "")


def _event_metric_label(ev: ClusterEvent) -> str:
    """kube's event label in metrics: Pod events in the queue are about assigned pods (AssignedPodDelete)."""
    label = str(ev)
    return "Assigned" + label if label.startswith("Pod") else label

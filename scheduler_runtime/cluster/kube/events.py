"""Event recording: events.k8s.io/v1 Events for pods, aggregated into EventSeries, written in the background.

Follows client-go v0.36.3 tools/events (event_broadcaster.go: isomorphic events keyed by eventKey become a
series on the second sighting, series refreshed every 30 minutes and finished after 6 minutes unseen, a write
retried 12 times 10 s apart; event_recorder.go: the event body, a note cut at 1024 bytes). Writes go through
the recorder's own client (kube-scheduler's recorder has its own clientset, so its own rate limit); `put`
never blocks the scheduling loop.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...backoff import BackoffPolicy
from ...objects import Pod
from .resources import micro_time, path_escape
from .rest import ApiError, KubeClient, Response
from .workers import ShardedWorkers

log = logging.getLogger("ksched.kube")

#: events/v1 validation's limit on `note` (a longer one is cut, ending " ...", as the recorder does)
NOTE_LENGTH_LIMIT = 1024

# client-go tools/events (the events.k8s.io/v1 broadcaster kube-scheduler uses): an isomorphic event
# seen again within EVENT_SERIES_FINISH_TIME of its last sighting becomes an EventSeries; every
# EVENT_SERIES_REFRESH_TIME open series are re-patched, every EVENT_SERIES_FINISH_TIME ended ones are
# written with their final count and forgotten; a write the API server did not answer is tried
# EVENT_MAX_TRIES times, EVENT_RETRY_SLEEP apart (jittered by a quarter).
EVENT_SERIES_FINISH_TIME = 6 * 60.0
EVENT_SERIES_REFRESH_TIME = 30 * 60.0
EVENT_MAX_TRIES = 12
EVENT_RETRY_SLEEP = 10.0
#: ksched's bound on remembered isomorphic events (client-go's map is unbounded); the least recently
#: seen one is forgotten first, its series written with the count reached
EVENT_CACHE_SIZE = 20000


def _event_key(body: dict[str, Any]) -> tuple[Any, ...]:
    """client-go's eventKey: type, action, reason, reporting controller and instance, and the full
    regarding/related references (resourceVersion included). The note is not part of it."""
    return (body.get("type"), body.get("action"), body.get("reason"), body.get("reportingController"),
            body.get("reportingInstance"), tuple(sorted((body.get("regarding") or {}).items())),
            tuple(sorted((body.get("related") or {}).items())))


class _Isomorphic:
    """One remembered event: the body as first created and its series, counted in memory."""

    __slots__ = ("body", "first", "count", "last", "gen")

    def __init__(self, body: dict[str, Any], now: float) -> None:
        self.body = body
        self.first = now  # eventTime: when a singleton is forgotten
        self.count = 1  # 1: no series yet
        self.last = now  # series.lastObservedTime
        self.gen = 0  # bumped on every sighting: a write in flight never forgets a newer count

    def series(self) -> dict[str, Any]:
        return {"count": self.count, "lastObservedTime": micro_time(self.last)}


#: a queued write: namespace, the event body, the series to write (None: create the singleton)
_Write = tuple[str, dict[str, Any], dict[str, Any] | None]


class EventWriter(ShardedWorkers[_Write]):
    """Events aggregated into EventSeries as client-go's events/v1 broadcaster does: the first of
    isomorphic events is created, the second PATCHes the stored one with series {count: 2}, later ones
    only count in memory until the periodic refresh or the end of the series writes the count.

    `put` never waits on the API: it updates the in-memory cache and queues a write. Writes go through
    bounded FIFOs (when full the oldest write is dropped) served by worker threads; the writes of one
    isomorphic event go to the same worker, so a series patch never overtakes its create. A
    housekeeping thread refreshes and finishes series. `clock` (wall seconds) is injectable."""

    def __init__(self, client: KubeClient, maxlen: int = 2000, workers: int = 2, *,
                 clock: Callable[[], float] = time.time, cache_size: int = EVENT_CACHE_SIZE,
                 retry_sleep: float = EVENT_RETRY_SLEEP, housekeeping: bool = True) -> None:
        super().__init__()
        self.client = client
        self.maxlen = maxlen
        self.clock = clock
        self.cache_size = cache_size
        self.retry_sleep = retry_sleep
        self._retry = BackoffPolicy(retry_sleep, factor=1.0, jitter=(1.0, 1.25))
        self._cache: collections.OrderedDict[tuple[Any, ...], _Isomorphic] = collections.OrderedDict()
        self._shards: list[collections.deque[_Write]] = [collections.deque() for _ in range(max(1, workers))]
        self._queued = 0
        self._stop_evt = threading.Event()
        self.sent = self.dropped = self.failed = self.aggregated = 0
        self._start_workers(len(self._shards), "events")
        if housekeeping:
            self._threads.append(threading.Thread(target=self._housekeeping, name="events-series", daemon=True))
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------- recording (any thread, never blocks)
    def put(self, namespace: str, body: dict[str, Any]) -> None:
        key = _event_key(body)
        with self._cv:
            if self._stopping:
                return
            now = self.clock()
            ent = self._cache.get(key)
            if ent is None:
                self._cache[key] = _Isomorphic(body, now)
                while len(self._cache) > self.cache_size:
                    okey, old = self._cache.popitem(last=False)
                    if old.count > 1:  # write the count reached before forgetting the series
                        self._enqueue(okey, old.body["metadata"]["namespace"], old.body, old.series())
                self._enqueue(key, namespace, body, None)
                return
            self._cache.move_to_end(key)
            ent.gen += 1
            ent.count += 1
            ent.last = now
            if ent.count == 2:
                self._enqueue(key, namespace, ent.body, ent.series())
            else:
                self.aggregated += 1

    def _enqueue(self, key: tuple[Any, ...], namespace: str, body: dict[str, Any],
                 series: dict[str, Any] | None) -> None:
        idx = hash(key) % len(self._shards)
        shard = self._shards[idx]
        if self._queued >= self.maxlen:
            victim = shard if shard else max(self._shards, key=len)
            victim.popleft()
            self._queued -= 1
            self.dropped += 1
        shard.append((namespace, body, series))
        self._queued += 1
        self._wake(idx)

    def series_count(self, body: dict[str, Any]) -> int:
        """How many times an event isomorphic to `body` was seen (0: not remembered)."""
        with self._cv:
            ent = self._cache.get(_event_key(body))
            return ent.count if ent is not None else 0

    def __len__(self) -> int:
        with self._cv:
            return len(self._cache)

    # ------------------------------------------------------------- writing
    def _write(self, namespace: str, body: dict[str, Any], series: dict[str, Any] | None) -> bool:
        """One attempt, as client-go's recordEvent: a series is PATCHed onto the stored event (created
        with the series if it is gone). Returns True if it should be tried again later."""
        base = f"/apis/events.k8s.io/v1/namespaces/{path_escape(namespace)}/events"
        name = body["metadata"]["name"]
        try:
            if series is not None:
                path = f"{base}/{path_escape(name)}"
                resp = self.client.request("PATCH", path, body={"series": series}, timeout=15,
                                           content_type="application/strategic-merge-patch+json")
                if resp.ok:
                    self.sent += 1
                    return False
                if resp.status != 404:
                    return self._failed(resp, "PATCH", path, name)
            path = base
            resp = self.client.request("POST", path, body=body if series is None else {**body, "series": series},
                                       timeout=15)
            if resp.ok:
                self.sent += 1
                return False
            if resp.status == 409:
                if series is not None:  # created meanwhile by the isomorphic event's own create: patch it
                    return True
                self.sent += 1  # already written (a retried create)
                return False
            return self._failed(resp, "POST", path, name)
        except ApiError as exc:
            log.warning("could not write event %s (may retry): %s", name, exc)
            return True

    def _failed(self, resp: Response, method: str, path: str, name: str) -> bool:
        if resp.status == 429 or resp.status >= 500:
            log.warning("could not write event %s (may retry): %s", name, self.client.error(resp, method, path))
            return True
        self.failed += 1
        if resp.status != 404:  # 404: namespace being deleted
            log.warning("could not write event %s: %s", name, self.client.error(resp, method, path))
        return False

    def _record(self, namespace: str, body: dict[str, Any], series: dict[str, Any] | None,
                tries: int = EVENT_MAX_TRIES) -> bool:
        """Write with retries; False if given up."""
        for attempt in range(tries):
            if not self._write(namespace, body, series):
                return True
            if attempt + 1 < tries and self._stop_evt.wait(self._retry.delay(attempt + 1)):
                break
        self.failed += 1
        if not self._stop_evt.is_set():
            log.error("could not write event %s: retry limit exceeded", body["metadata"]["name"])
        return False

    # the worker loop (ShardedWorkers): one shard per worker
    def _has_work(self, shard: int) -> bool:
        return bool(self._shards[shard])

    def _take(self, shard: int) -> _Write:
        self._queued -= 1
        return self._shards[shard].popleft()

    def _backlog(self) -> int:
        return self._queued

    def _handle(self, item: _Write) -> None:
        self._record(*item)

    # ------------------------------------------------------------- series upkeep (housekeeping thread)
    def refresh_series(self) -> int:
        """Re-patch every open series with its current count (client-go: every 30 minutes)."""
        with self._cv:
            snaps = [(e.body, e.series()) for e in self._cache.values() if e.count > 1]
        for body, series in snaps:
            if self._stop_evt.is_set():
                break
            try:
                self._write(body["metadata"]["namespace"], body, series)
            except Exception as exc:  # noqa: BLE001
                log.error("event series refresh: %s", exc)
        return len(snaps)

    def finish_series(self) -> int:
        """Write the final count of series not seen for EVENT_SERIES_FINISH_TIME and forget them, and
        singletons older than that (client-go: every 6 minutes). Returns how many were forgotten."""
        with self._cv:
            cutoff = self.clock() - EVENT_SERIES_FINISH_TIME
            snaps = [(k, e, e.gen, e.series() if e.count > 1 else None) for k, e in self._cache.items()
                     if (e.last if e.count > 1 else e.first) < cutoff]
        done = 0
        for key, ent, gen, series in snaps:
            if series is not None:
                try:
                    if self._write(ent.body["metadata"]["namespace"], ent.body, series):
                        continue  # not written: kept for the next round
                except Exception as exc:  # noqa: BLE001
                    log.error("event series finish: %s", exc)
                    continue
            with self._cv:
                if self._cache.get(key) is ent and ent.gen == gen:  # not seen again meanwhile
                    del self._cache[key]
                    done += 1
        return done

    def _housekeeping(self) -> None:
        now = time.monotonic()
        due_refresh, due_finish = now + EVENT_SERIES_REFRESH_TIME, now + EVENT_SERIES_FINISH_TIME
        while not self._stop_evt.wait(max(0.0, min(due_refresh, due_finish) - time.monotonic())):
            try:
                if time.monotonic() >= due_finish:
                    self.finish_series()
                    due_finish = time.monotonic() + EVENT_SERIES_FINISH_TIME
                if time.monotonic() >= due_refresh:
                    self.refresh_series()
                    due_refresh = time.monotonic() + EVENT_SERIES_REFRESH_TIME
            except Exception as exc:  # noqa: BLE001 - keep the thread alive
                log.error("event series upkeep: %s", exc)

    # ------------------------------------------------------------- lifecycle
    def stop(self, timeout: float = 2.0) -> None:
        self.flush(timeout)
        with self._cv:
            self._stopping = True
            self._stop_evt.set()
            for s in self._shards:
                s.clear()
            self._queued = 0
            self._wake_all()


def pod_event(pod: Pod, type_: str, reason: str, action: str, note: str, *, controller: str, hostname: str,
              now_ns: int) -> dict[str, Any]:
    """The events.k8s.io/v1 Event about `pod`, named `<pod>.<now_ns hex>` as the recorder names it."""
    if len(note) > NOTE_LENGTH_LIMIT:
        note = note[: NOTE_LENGTH_LIMIT - 4] + " ..."
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{pod.name}.{now_ns:x}", "namespace": pod.namespace},
        "eventTime": micro_time(ns=now_ns),
        "reportingController": controller,
        "reportingInstance": f"{controller}-{hostname}"[:128],
        "action": action[:128], "reason": reason[:128], "note": note, "type": type_,
        "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace, "name": pod.name,
                      "uid": pod.uid, "resourceVersion": pod.resource_version},
    }

"""Sharded background writers: one worker thread per shard, all under one condition variable.

The event recorder and the pod status writer both queue writes that the scheduling loop must never wait on,
and both keep the writes of one key (an isomorphic event, a pod) in order by sending that key to the same
shard. This base holds the loop they share: wait for work in the shard, take one item, handle it outside the
lock, count it busy meanwhile (so `flush` waits for writes in flight), keep the worker alive on any error.

Every worker waits on a condition of its own (all share one lock), so a queued write wakes the one worker
whose shard it is, and a finished write wakes only those waiting in `flush`: with one condition for all, each
event woke every worker, and each write done woke them again, for nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Generic, TypeVar

log = logging.getLogger("ksched.kube")

Item = TypeVar("Item")


class ShardedWorkers(Generic[Item]):
    """Subclasses say how a shard is read (`_has_work`, `_take`, `_backlog`, called with `_cv` held) and
    how an item is written (`_handle`, called without it), then call `_start_workers`."""

    failed: int

    def __init__(self) -> None:
        self._shared_lock = threading.RLock()
        #: guards the subclass's queues (with `_shared_lock`); `flush` waits on it for the writes to end
        self._cv = threading.Condition(self._shared_lock)
        self._wakeups: list[threading.Condition] = []
        self._busy = 0
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def _start_workers(self, count: int, name: str) -> None:
        self._worker_name = name
        self._wakeups = [threading.Condition(self._shared_lock) for _ in range(count)]
        self._threads.extend(threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}", daemon=True)
                             for i in range(count))

    def _wake(self, shard: int) -> None:
        """Work was queued in `shard` (called with `_cv` held)."""
        self._wakeups[shard].notify()

    def _wake_all(self) -> None:
        """Stopping (called with `_cv` held): every worker and every flush looks again."""
        for w in self._wakeups:
            w.notify_all()
        self._cv.notify_all()

    def _has_work(self, shard: int) -> bool:
        raise NotImplementedError

    def _take(self, shard: int) -> Item:
        raise NotImplementedError

    def _backlog(self) -> int:
        """Items queued in all shards (not counting those being written)."""
        raise NotImplementedError

    def _handle(self, item: Item) -> None:
        raise NotImplementedError

    def _run(self, shard: int) -> None:
        while True:
            with self._cv:
                while not self._has_work(shard) and not self._stopping:
                    self._wakeups[shard].wait()
                if not self._has_work(shard):
                    return
                item = self._take(shard)
                self._busy += 1
            try:
                self._handle(item)
            except Exception as exc:  # noqa: BLE001 - keep the worker alive
                self.failed += 1
                log.error("%s worker: %s", self._worker_name, exc)
            finally:
                with self._cv:
                    self._busy -= 1
                    self._cv.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued write is done; False if `timeout` ran out first."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._backlog() or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

"""Worker threads for binding cycles that never run out because some of them hang.

kube-scheduler starts a goroutine per binding cycle, so a PreBind that waits forever costs one goroutine.
A fixed thread pool would instead stop binding altogether once every worker sits in such a call. This
pool keeps `workers` threads free of stuck work: a worker busy for longer than `deadline` no longer
counts, and a replacement starts; when the stuck call returns, the surplus worker exits.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("ksched.bindpool")

_STOP = object()


class BindingPool:
    def __init__(self, workers: int, deadline: float = 30.0, name: str = "bind",
                 clock: Callable[[], float] = time.monotonic, check_interval: float = 1.0) -> None:
        self.workers = workers
        self.deadline = deadline
        self.name = name
        self.clock = clock
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy_since: dict[int, float] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._serial = 0
        self._pending = 0  # submitted, not yet taken by a worker
        self._closed = threading.Event()
        self._done = threading.Event()
        for _ in range(workers):
            self._spawn()
        self._monitor: threading.Thread | None = None
        if deadline > 0:
            self._monitor = threading.Thread(target=self._watch, args=(check_interval,), name=f"{name}-monitor",
                                             daemon=True)
            self._monitor.start()

    # ------------------------------------------------------------------ public
    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._closed.is_set():
            raise RuntimeError("binding pool is shut down")
        with self._lock:
            self._pending += 1
        self._tasks.put((fn, args))

    def stuck(self) -> int:
        """Workers busy for longer than the deadline right now."""
        if self.deadline <= 0:
            return 0
        now = self.clock()
        with self._lock:
            return sum(1 for t in self._busy_since.values() if now - t >= self.deadline)

    def give_up(self, worker: int) -> None:
        """The caller stopped waiting for `worker`'s task: count that worker as stuck now (not at the next
        check) and start its replacement, so work queued behind it goes on at once."""
        with self._lock:
            since = self._busy_since.get(worker)
            if since is None:
                return  # it finished meanwhile
            self._busy_since[worker] = min(since, self.clock() - self.deadline)
        self._grow()

    def size(self) -> int:
        with self._lock:
            return len(self._threads)

    def shutdown(self, wait: bool = True) -> None:
        """Lets queued work finish (replacing stuck workers as needed); with `wait`, returns once every
        worker has ended except those stuck past the deadline, which are daemon threads."""
        with self._lock:
            self._closed.set()
            for _ in self._threads:
                self._tasks.put(_STOP)
        if wait:
            while True:
                self._grow()
                with self._lock:
                    now = self.clock()
                    live = [t for ident, t in self._threads.items() if t.is_alive() and not (
                        self.deadline > 0 and now - self._busy_since.get(ident, now) >= self.deadline)]
                if not live:
                    break
                live[0].join(0.1)
        self._done.set()

    # ------------------------------------------------------------------ workers
    def _spawn(self) -> None:
        if self._closed.is_set():
            self._tasks.put(_STOP)  # shutdown queued one stop per worker it knew of; this one needs its own
        self._serial += 1
        t = threading.Thread(target=self._work, name=f"{self.name}-{self._serial}", daemon=True)
        t.start()
        self._threads[t.ident or -1] = t

    def _work(self) -> None:
        me = threading.get_ident()
        while True:
            item = self._tasks.get()
            if item is _STOP:
                break
            fn, args = item
            with self._lock:
                self._pending -= 1
                self._busy_since[me] = self.clock()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a worker must survive anything a binding cycle raises
                log.exception("binding cycle failed")
            with self._lock:
                started = self._busy_since.pop(me)
                surplus = (len(self._threads) > self.workers and not self._closed.is_set()
                           and len(self._threads) - self._stuck_locked() > self.workers)
                if surplus:
                    self._threads.pop(me, None)
            if self.deadline > 0 and self.clock() - started >= self.deadline:
                log.info("a binding cycle returned after %.0fs", self.clock() - started)
            if surplus:
                return
        with self._lock:
            self._threads.pop(me, None)

    def _stuck_locked(self) -> int:
        now = self.clock()
        return sum(1 for t in self._busy_since.values() if now - t >= self.deadline) if self.deadline > 0 else 0

    def _grow(self) -> int:
        """Starts a worker for each one stuck past the deadline; returns how many it started. After
        shutdown only queued work counts: one worker is started when every live one is stuck."""
        started = 0
        with self._lock:
            stuck = self._stuck_locked()
            if self._closed.is_set():
                if self._pending and len(self._threads) - stuck <= 0:
                    self._spawn()
                    started = 1
            else:
                while len(self._threads) - stuck < self.workers:
                    self._spawn()
                    started += 1
        if started:
            log.warning("%d binding worker(s) busy for more than %.0fs; started %d more so binding goes on "
                        "(%d workers)", stuck, self.deadline, started, self.size())
        return started

    def _watch(self, interval: float) -> None:
        while not self._done.wait(interval):
            try:
                self._grow()
            except Exception:  # noqa: BLE001 - the monitor must never take the scheduler down
                log.exception("binding pool monitor failed")

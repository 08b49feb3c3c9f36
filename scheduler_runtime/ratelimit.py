"""A client-side token bucket like client-go's (clientConnection.qps / burst).

Each request takes one token; tokens refill at `qps` per second up to `burst`. A caller that finds the
bucket empty reserves the next token and sleeps until it is due, outside the lock, so concurrent
callers are served in arrival order and never spin. `qps <= 0` disables limiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, qps: float = 50.0, burst: int = 100, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()
        #: total seconds callers spent waiting for a token (for metrics and tests)
        self.waited = 0.0
        self.taken = 0

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _reserve(self) -> float:
        """Take a token now (possibly going into debt); return how long the caller must wait for it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            self.taken += 1
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.qps

    def acquire(self, timeout: float | None = None) -> bool:
        """Block until a token is available. With a timeout, give up (and take nothing) if the wait
        would be longer; returns whether a token was taken."""
        if self.unlimited:
            return True
        if timeout is not None:
            with self._lock:
                now = self._clock()
                tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
                if tokens < 1.0 and (1.0 - tokens) / self.qps > timeout:
                    return False
        wait = self._reserve()
        if wait > 0:
            self.waited += wait
            self._sleep(wait)
        return True

    def try_acquire(self) -> bool:
        """Take a token only if one is available right now."""
        if self.unlimited:
            return True
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            self.taken += 1
            return True

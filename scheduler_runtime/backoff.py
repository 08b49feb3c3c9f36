"""One backoff policy for every retry in the runtime, shaped like apimachinery's wait.Backoff.

A delay is `initial * factor**(retry-1)`, capped, then multiplied by a jitter drawn uniformly from
`jitter` (a (low, high) range; (1, 1) means none). Each user keeps the numbers kube uses there:

- scheduling queue (pod backoff): podInitialBackoffSeconds doubling to podMaxBackoffSeconds, no jitter
- reflector re-list/re-watch: 0.8 s doubling to 30 s, jitter 0.9-1.1 (client-go's reflector backoff)
- event writes: a constant 10 s, jitter 1.0-1.25 (client-go tools/events)
- leader election retries: retryPeriod, jitter 1.0-2.2 (wait.JitterUntil with JitterFactor 1.2)
- webhook token/access reviews: 0.5 s x1.5 per try, jitter 1.0-1.2, 5 tries (kube's webhook backoff)
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

#: exponent bound: retry counts grow without limit, a float power must not overflow
_MAX_EXPONENT = 62


@dataclass(frozen=True)
class BackoffPolicy:
    initial: float
    factor: float = 2.0
    cap: float = math.inf
    #: each delay is multiplied by a number drawn uniformly from this range
    jitter: tuple[float, float] = (1.0, 1.0)
    #: how many tries in all (None: no limit); the caller stops after this many
    steps: int | None = None

    def duration(self, retry: int) -> float:
        """The delay before retry number `retry` (1 for the first), without jitter."""
        if retry <= 0:
            return 0.0
        return min(self.initial * self.factor ** min(retry - 1, _MAX_EXPONENT), self.cap)

    def delay(self, retry: int) -> float:
        """duration(retry) with jitter applied."""
        d = self.duration(retry)
        lo, hi = self.jitter
        return d if lo == hi == 1.0 else d * random.uniform(lo, hi)  # noqa: S311 - jitter, not crypto


@dataclass
class Backoff:
    """A running backoff: `next()` gives the following (jittered) delay, `reset()` starts over after a
    success."""

    policy: BackoffPolicy
    retries: int = field(default=0)

    def next(self) -> float:
        self.retries += 1
        return self.policy.delay(self.retries)

    def reset(self) -> None:
        self.retries = 0

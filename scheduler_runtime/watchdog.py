"""Names the plugin a scheduling or binding cycle is stuck in, at no cost to the hot path.

Timing every plugin call would cost a clock read per node per plugin. Instead each cycle registers its
thread and start time once; a background thread looks at cycles older than the deadline and walks the
stuck thread's Python stack (`sys._current_frames`) for the innermost frame whose `self` is a plugin.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from .framework.plugin import Plugin

log = logging.getLogger("ksched.watchdog")


@dataclass
class _Cycle:
    pod: str
    phase: str  # "scheduling" | "binding"
    started: float
    reported: bool = False


@dataclass(frozen=True)
class Stuck:
    pod: str
    phase: str
    plugin: str
    method: str
    seconds: float

    def message(self) -> str:
        where = f"plugin {self.plugin} ({self.method})" if self.plugin else "the framework"
        return (f"{self.phase} cycle of pod {self.pod} has been in {where} for {self.seconds:.0f}s "
                f"(deadline exceeded)")


def plugin_frame(frame: Any) -> tuple[str, str]:
    """The innermost frame on the stack that runs a method of a Plugin: (plugin name, method name)."""
    while frame is not None:
        obj = frame.f_locals.get("self")
        if isinstance(obj, Plugin):
            return obj.name or type(obj).__name__, frame.f_code.co_name
        frame = frame.f_back
    return "", ""


class CycleWatchdog:
    def __init__(self, deadline: float = 30.0, interval: float = 1.0, clock: Any = time.monotonic) -> None:
        self.deadline = deadline
        self.interval = interval
        self.clock = clock
        self._cycles: dict[int, _Cycle] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stuck: list[Stuck] = []

    def begin(self, pod: str, phase: str) -> None:
        self._cycles[threading.get_ident()] = _Cycle(pod, phase, self.clock())

    def end(self) -> None:
        self._cycles.pop(threading.get_ident(), None)

    def check(self) -> list[Stuck]:
        """Cycles past the deadline, each named by the plugin its thread is in now; logs each one once."""
        now = self.clock()
        frames = None
        out: list[Stuck] = []
        for ident, cyc in list(self._cycles.items()):
            age = now - cyc.started
            if age < self.deadline:
                continue
            if frames is None:
                frames = sys._current_frames()
            plugin, method = plugin_frame(frames.get(ident))
            if self._cycles.get(ident) is not cyc:  # finished meanwhile
                continue
            s = Stuck(cyc.pod, cyc.phase, plugin, method, age)
            out.append(s)
            if not cyc.reported:
                cyc.reported = True
                log.error("%s", s.message())
        with self._lock:
            self.stuck = out
        return out

    def readyz(self) -> str | None:
        """Only a stuck scheduling cycle makes the scheduler unready: it holds up every pod. A stuck binding
        cycle holds up its own pod only (the binding pool replaces its worker), so it is logged, not
        reported here, where it would keep the replica NotReady for as long as the plugin hangs."""
        with self._lock:
            stuck = [s for s in self.stuck if s.phase == "scheduling"]
        return "; ".join(s.message() for s in stuck) or None

    def start(self) -> None:
        if self._thread is None and self.deadline > 0:
            self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the watchdog must never take the scheduler down
                log.exception("watchdog check failed")

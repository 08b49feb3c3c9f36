"""Waiting pods: pods parked at Permit until every waiting plugin allows them, or one rejects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..objects import Pod
from .status import Code, Status

MAX_PERMIT_TIMEOUT = 15 * 60.0


class WaitingPod:
    """A pod parked at Permit. `allow`/`reject` may be called from any thread (plugins, timers)."""

    def __init__(self, pod: Pod, timeouts: dict[str, float], clock: Callable[[], float] = time.monotonic,
                 node_name: str = "") -> None:
        self.pod = pod
        self.node_name = node_name
        self._clock = clock
        now = clock()
        self._deadlines = {p: now + min(t, MAX_PERMIT_TIMEOUT) for p, t in timeouts.items()}
        self._timeouts = {p: min(t, MAX_PERMIT_TIMEOUT) for p, t in timeouts.items()}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: Status | None = None

    def get_pending_plugins(self) -> list[str]:
        with self._lock:
            return sorted(self._deadlines)

    def allow(self, plugin: str) -> None:
        with self._lock:
            self._deadlines.pop(plugin, None)
            if self._deadlines or self._done.is_set():
                return
            self._result = Status(Code.Success)
            self._done.set()

    def reject(self, plugin: str, msg: str) -> bool:
        with self._lock:
            if self._done.is_set():
                return False
            self._result = Status(Code.Unschedulable, msg, plugin=plugin)
            self._done.set()
            return True

    def wait(self) -> Status:
        """Block until allowed, rejected, or a plugin's timeout passes (then rejected as kube does)."""
        while True:
            with self._lock:
                if self._done.is_set():
                    assert self._result is not None
                    return self._result
                plugin, deadline = min(self._deadlines.items(), key=lambda kv: kv[1])
            remaining = deadline - self._clock()
            if remaining <= 0 or not self._done.wait(remaining):
                if self._clock() >= deadline:
                    self.reject(plugin, f"rejected due to timeout after waiting {_go_duration(self._timeouts[plugin])}"
                                        f" at plugin {plugin}")


def _go_duration(seconds: float) -> str:
    if seconds == int(seconds):
        s = int(seconds)
        m, s = divmod(s, 60)
        return f"{m}m{s}s" if m else f"{s}s"
    return f"{seconds}s"


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}
        self._lock = threading.Lock()

    def add(self, wp: WaitingPod) -> None:
        with self._lock:
            self._pods[wp.pod.uid] = wp

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def all(self) -> list[WaitingPod]:
        with self._lock:
            return list(self._pods.values())

    def __len__(self) -> int:
        return len(self._pods)

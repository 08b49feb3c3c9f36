"""`deploy --static-pod --wait`: follow the kubelet replacing the scheduler's static pod, through its mirror pod.

The kubelet notices the changed manifest within seconds, stops the old container, waits 10-15 s (a static
pod of the same name must finish terminating first) and starts the new one; kubeadm's startup probe adds
10 s more. The mirror pod `<name>-<node>` in the API shows each step: its spec takes the new image, then its
container status turns ready, or shows the container exiting and being restarted (a crash loop: a config the
image cannot run, a kubeconfig it cannot read, a plugin missing from the image). A crash loop is reported as
soon as it is certain, with the container's last exit, instead of after the whole timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler_runtime.errors import KschedError

#: restarts after which a container that keeps exiting is a crash loop (the first restart can be bad luck)
CRASH_RESTARTS = 2
#: waiting reasons that will not go away by themselves
STUCK_REASONS = ("ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError")


class StaticPodFailed(KschedError):
    """The kubelet runs the new manifest but the scheduler does not become ready (crash loop, image, timeout)."""

    usage = False


@dataclass
class Status:
    phase: str  # "absent", "old", "starting", "ready", "crashloop", "stuck"
    detail: str = ""
    restarts: int = 0


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for st in pod.get("status", {}).get("containerStatuses") or []:
        if st.get("name") == container:
            return dict(st)
    return {}


def _last_exit(st: dict[str, Any]) -> str:
    term = (st.get("lastState") or {}).get("terminated") or (st.get("state") or {}).get("terminated") or {}
    if not term:
        return ""
    out = f"last exit code {term.get('exitCode')}"
    if term.get("reason"):
        out += f" ({term['reason']})"
    msg = str(term.get("message") or "").strip().splitlines()
    return out + (f": {msg[-1][:300]}" if msg else "")


def classify(pod: dict[str, Any] | None, container: str, image: str) -> Status:
    """Where the replacement stands, from the mirror pod (None: the API has none)."""
    if pod is None:
        return Status("absent", "no mirror pod yet (the kubelet has not started the new pod)")
    spec = next((c for c in pod.get("spec", {}).get("containers") or [] if c.get("name") == container), {})
    if spec.get("image") != image:
        return Status("old", f"the mirror pod still runs {spec.get('image')} (the kubelet has not replaced it yet)")
    st = _container_status(pod, container)
    restarts = int(st.get("restartCount") or 0)
    waiting = (st.get("state") or {}).get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    if st.get("ready"):
        return Status("ready", f"ready, {restarts} restarts", restarts)
    if reason in STUCK_REASONS:
        return Status("stuck", f"{reason}: {str(waiting.get('message') or '').strip()[:300]}", restarts)
    last = _last_exit(st)
    term = (st.get("lastState") or {}).get("terminated") or {}
    # restarts after clean exits (code 0) are the kubelet replacing the container while the static pod
    # changes, not a crash; a container that keeps exiting still reaches CrashLoopBackOff
    failed = term.get("exitCode") != 0  # unknown counts as failed
    if reason == "CrashLoopBackOff" or (restarts >= CRASH_RESTARTS and failed):
        return Status("crashloop", f"{reason or 'restarting'}, {restarts} restarts" + (f", {last}" if last else ""),
                      restarts)
    state = next(iter(st.get("state") or {}), "pending")
    return Status("starting", f"container {state}, {restarts} restarts" + (f", {last}" if last else ""), restarts)


def wait(get_pod: Callable[[], dict[str, Any] | None], container: str, image: str, timeout: float,
         progress: Callable[[Status], None] | None = None, interval: float = 1.0,
         logs: Callable[[], str] | None = None) -> Status:
    """Poll until the new container is ready; StaticPodFailed (its message ends without punctuation, for the
    caller to append how to roll back) on a crash loop, a stuck container or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Status | None = None
    while True:
        st = classify(get_pod(), container, image)
        if progress is not None and (last is None or st.detail != last.detail):
            progress(st)
        last = st
        if st.phase == "ready":
            return st
        if st.phase in ("crashloop", "stuck"):
            tail = logs() if logs is not None else ""
            what = "is crash-looping" if st.phase == "crashloop" else "cannot start"
            raise StaticPodFailed(f"the new scheduler container {what} ({st.detail})"
                                  + (f"; its log ends: {tail}" if tail else ""))
        if time.monotonic() >= deadline:
            raise StaticPodFailed(f"the new scheduler container is not ready after {timeout:.0f} s ({st.detail})")
        time.sleep(interval)


__all__ = ["CRASH_RESTARTS", "STUCK_REASONS", "Status", "StaticPodFailed", "classify", "wait"]

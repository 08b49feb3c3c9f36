"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

* A candidate reads the Lease; it may take it when it does not exist, when its holder is empty (released),
  or when the record has not changed for `leaseDurationSeconds` as measured on the candidate's own
  monotonic clock from the moment it first saw that record (no trust in other machines' clocks).
* Writes are optimistic: create (409 ⇒ someone else won) or replace with the resourceVersion read
  (409 ⇒ someone else wrote first); `leaseTransitions` grows by one whenever the holder changes.
* The leader renews every `retry_period`. Each request has a timeout that never reaches past the renew
  deadline; when no renewal has succeeded for `renew_deadline` seconds (counted from the *start* of the
  last successful request) it stops leading, which is before any other candidate can consider the lease
  expired (`lease_duration` > `renew_deadline`). `is_leader` is computed from the same clock, so it turns
  False on time even if the loop thread is stuck.
* `stop(release=True)` (client-go's ReleaseOnCancel) calls on_stopped_leading first, then writes an empty
  holder with leaseDurationSeconds 1, so a successor takes over at its next retry.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from . import goduration
from .backoff import BackoffPolicy
from .cluster.kube import ApiError, KubeClient, micro_time

log = logging.getLogger("ksched.leaderelection")


def seconds(value: Any) -> float:
    """A duration in seconds: a number (or timedelta) is seconds, as the Python API takes them; a string is
    a Go duration ("15s", "1m30s", "500ms") with Go's rules, so "15" without a unit is refused."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    return goduration.parse_seconds(str(value).strip())


class LeaderElector:
    def __init__(self, client: Any, name: str = "kube-scheduler", namespace: str = "kube-system", *,
                 identity: str | None = None, lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None, release_on_cancel: bool = True,
                 rejoin: bool = False, request_timeout: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        lease_duration, renew_deadline, retry_period = (seconds(lease_duration), seconds(renew_deadline),
                                                        seconds(retry_period))
        if lease_duration <= renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if renew_deadline <= 1.2 * retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        if retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        base: KubeClient = client.client if hasattr(client, "client") and not isinstance(client, KubeClient) \
            else client
        # its own pool and no shared token bucket: a busy scheduler must never starve the renewals
        self.client = base.clone(qps=0, pool_size=2, timeout=renew_deadline)
        self.name = name
        self.namespace = namespace
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self.request_timeout = float(request_timeout) if request_timeout else max(1.0, self.renew_deadline / 2)
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.rejoin = rejoin
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leading = False
        self._last_renew = -1e18
        self._lease: dict[str, Any] | None = None   # the last Lease object we read or wrote
        self._observed: tuple[Any, ...] | None = None
        self._observed_time = -1e18
        self._observed_holder = ""
        self._lock = threading.Lock()
        self._release = True
        self.transitions_seen = 0
        self.last_error = ""

    # ------------------------------------------------------------------ public
    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    @property
    def is_leader(self) -> bool:
        return self._leading and self.clock() - self._last_renew < self.renew_deadline

    @property
    def leader(self) -> str:
        """The holder this elector last observed ('' if none)."""
        return self._observed_holder

    def start(self) -> LeaderElector:
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name=f"leader-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, release: bool = True, timeout: float | None = None) -> None:
        """Stop campaigning; a leader stops leading (callback) and, with release, frees the lease."""
        self._release = release and self.release_on_cancel
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout if timeout is not None else self.request_timeout * 2 + 1)

    release = stop

    def health(self) -> tuple[bool, str]:
        """Leader-election watchdog for /healthz: a leader that has not renewed past its deadline is sick."""
        if self._leading and not self.is_leader:
            return False, f"lease {self.namespace}/{self.name} not renewed for {self.renew_deadline:g}s"
        return True, "ok"

    def run(self) -> None:
        """Campaign until stopped (blocking): acquire, lead while renewals succeed, then stop leading."""
        try:
            while not self._stop.is_set():
                if not self._acquire():
                    break
                self._become_leader()
                self._renew_loop()
                self._lose()
                if not self.rejoin:
                    break
        finally:
            if self._leading:
                self._lose()
            if self._release and self._lease is not None and \
                    (self._lease.get("spec") or {}).get("holderIdentity") == self.identity:
                self._do_release()

    # ------------------------------------------------------------------ phases
    def _acquire(self) -> bool:
        log.info("%s attempting to acquire leader lease %s/%s...", self.identity, self.namespace, self.name)
        while not self._stop.is_set():
            if self._try_acquire_or_renew(self.request_timeout):
                return True
            self._stop.wait(BackoffPolicy(self.retry_period, factor=1.0, jitter=(1.0, 2.2)).delay(1))
        return False

    def _become_leader(self) -> None:
        self._leading = True
        log.info("%s became leader of lease %s/%s", self.identity, self.namespace, self.name)
        if self.on_started_leading is not None:
            threading.Thread(target=self._safe, args=(self.on_started_leading,), name="leading",
                             daemon=True).start()

    def _renew_loop(self) -> None:
        while not self._stop.is_set():
            next_at = self._last_renew + self.retry_period
            self._stop.wait(max(0.0, next_at - self.clock()))
            if self._stop.is_set():
                return
            while True:
                left = self._last_renew + self.renew_deadline - self.clock()
                if left <= 0.05:
                    log.warning("%s failed to renew lease %s/%s within %gs: %s", self.identity, self.namespace,
                                self.name, self.renew_deadline, self.last_error or "timed out")
                    return
                if self._try_acquire_or_renew(min(self.request_timeout, left)):
                    break
                if not self._leading_by_record():
                    log.warning("%s lost lease %s/%s to %s", self.identity, self.namespace, self.name,
                                self._observed_holder)
                    return
                self._stop.wait(min(self.retry_period, max(0.0, left - 0.05)))
                if self._stop.is_set():
                    return

    def _lose(self) -> None:
        was = self._leading
        self._leading = False
        if was and self.on_stopped_leading is not None:
            self._safe(self.on_stopped_leading)

    @staticmethod
    def _safe(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # a callback must not kill the elector
            log.exception("leader election callback failed")

    def _leading_by_record(self) -> bool:
        return self._observed_holder in ("", self.identity)

    # ------------------------------------------------------------------ one attempt
    def _observe(self, lease: dict[str, Any], at: float) -> None:
        spec = lease.get("spec") or {}
        rec = (spec.get("holderIdentity"), spec.get("leaseDurationSeconds"), spec.get("acquireTime"),
               spec.get("renewTime"), spec.get("leaseTransitions"))
        if rec != self._observed:
            self._observed = rec
            self._observed_time = at
            holder = spec.get("holderIdentity") or ""
            if holder != self._observed_holder:
                self._observed_holder = holder
                if holder and holder != self.identity:
                    log.info("lease %s/%s is held by %s", self.namespace, self.name, holder)
                if holder and self.on_new_leader is not None:
                    self._safe(lambda: self.on_new_leader(holder))  # type: ignore[misc]
        self._lease = lease

    def _spec(self, old: dict[str, Any] | None) -> dict[str, Any]:
        now = micro_time()
        spec = dict((old or {}).get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        if old is None:
            spec["leaseTransitions"] = 0
            spec["acquireTime"] = now
        elif holder != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = now
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(1, int(round(self.lease_duration)))
        spec["renewTime"] = now
        return spec

    def _try_acquire_or_renew(self, timeout: float) -> bool:
        t0 = self.clock()
        deadline = t0 + timeout
        try:
            # fast path: we hold it and know its resourceVersion -> one PUT
            lease = self._lease if (self._leading and self._lease is not None and
                                    (self._lease.get("spec") or {}).get("holderIdentity") == self.identity) else None
            if lease is None:
                r = self.client.request("GET", self.path, timeout=timeout, limit=False)
                if r.status == 404:
                    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(None)}
                    c = self.client.request("POST", self.path.rsplit("/", 1)[0], body=body, limit=False,
                                            timeout=max(0.1, deadline - self.clock()), conn_retries=0)
                    if c.status == 201 or c.ok:
                        self._observe(c.json(), t0)
                        self._last_renew = t0
                        self.last_error = ""
                        return True
                    self.last_error = str(self.client.error(c, "POST", self.path.rsplit("/", 1)[0]))
                    return False
                if not r.ok:
                    self.last_error = str(self.client.error(r, "GET", self.path))
                    return False
                lease = r.json()
                self._observe(lease, t0)
                spec = lease.get("spec") or {}
                holder = spec.get("holderIdentity") or ""
                duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
                if holder and holder != self.identity and self._observed_time + duration > t0:
                    self.last_error = f"lease held by {holder}"
                    return False
            new = dict(lease)
            new["spec"] = self._spec(lease)
            u = self.client.request("PUT", self.path, body=new, limit=False, conn_retries=0,
                                    timeout=max(0.1, deadline - self.clock()))
            if u.ok:
                self._observe(u.json(), t0)
                self._last_renew = t0
                self.last_error = ""
                return True
            if u.status == 409:
                self._lease = None  # someone else wrote: read again next time
                self.last_error = "conflict writing the lease (another candidate wrote first)"
            else:
                self.last_error = str(self.client.error(u, "PUT", self.path))
            return False
        except ApiError as exc:
            self.last_error = str(exc)
            return False

    def _do_release(self) -> None:
        lease = self._lease
        if lease is None:
            return
        now = micro_time()
        new = dict(lease)
        spec = dict(lease.get("spec") or {})
        spec.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now})
        new["spec"] = spec
        try:
            r = self.client.request("PUT", self.path, body=new, limit=False, timeout=self.request_timeout)
            if r.ok:
                self._lease = r.json()
                log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
            else:
                log.warning("could not release lease %s/%s: %s", self.namespace, self.name,
                            self.client.error(r, "PUT", self.path))
        except ApiError as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)

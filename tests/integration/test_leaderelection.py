"""LeaderElector on a real coordination.k8s.io/v1 Lease (the session `control_plane` fixture)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import Connection, KubeClient, load_connection
from scheduler_runtime.leaderelection import LeaderElector

pytestmark = pytest.mark.integration

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
LEASE, RENEW, RETRY = 4.0, 3.0, 0.5


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> Iterator[KubeClient]:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)), qps=0)
    yield c
    c.close()


class Tracker:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.leaders: list[str] = []

    def on_start(self) -> None:
        self.started_at = time.monotonic()
        self.started.set()

    def on_stop(self) -> None:
        self.stopped_at = time.monotonic()
        self.stopped.set()


def elector(admin: KubeClient, name: str, ident: str, t: Tracker, **kw: Any) -> LeaderElector:
    return LeaderElector(admin, name=name, namespace="default", identity=ident, lease_duration=LEASE,
                         renew_deadline=RENEW, retry_period=RETRY, on_started_leading=t.on_start,
                         on_stopped_leading=t.on_stop, on_new_leader=t.leaders.append, **kw)


def lease(admin: KubeClient, name: str) -> dict[str, Any]:
    return admin.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")


def wait_one_leader(a: LeaderElector, b: LeaderElector, timeout: float = 10.0) -> tuple[LeaderElector, LeaderElector]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if a.is_leader or b.is_leader:
            return (a, b) if a.is_leader else (b, a)
        time.sleep(0.02)
    raise AssertionError("nobody became leader")


def test_two_electors_exactly_one_leader_and_takeover_after_crash(admin: KubeClient) -> None:
    name = f"le-{uuid.uuid4().hex[:8]}"
    ta, tb = Tracker(), Tracker()
    a = elector(admin, name, "cand-a", ta).start()
    b = elector(admin, name, "cand-b", tb).start()
    try:
        leader, other = wait_one_leader(a, b)
        t_other = tb if other is b else ta
        t_leader = ta if leader is a else tb
        # never two leaders at once, over several renew periods
        end = time.monotonic() + 3 * RETRY + 1
        while time.monotonic() < end:
            assert not (a.is_leader and b.is_leader)
            time.sleep(0.01)
        assert leader.is_leader and not other.is_leader
        assert t_leader.started.wait(2)
        spec = lease(admin, name)["spec"]
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == int(LEASE)
        assert spec.get("leaseTransitions", 0) == 0
        assert MICRO.match(spec["acquireTime"]) and MICRO.match(spec["renewTime"])
        assert other.leader == leader.identity
        # the leader dies without releasing: the other takes over within leaseDuration + retry (+ slack)
        t_crash = time.monotonic()
        leader.stop(release=False)
        assert t_leader.stopped.is_set() and not leader.is_leader
        assert t_other.started.wait(LEASE + 2 * RETRY * 2.2 + 2), "no takeover"
        took = t_other.started_at - t_crash
        assert took <= LEASE + RETRY * 2.2 + 1.5, took
        assert other.is_leader
        spec = lease(admin, name)["spec"]
        assert spec["holderIdentity"] == other.identity and spec["leaseTransitions"] == 1
    finally:
        a.stop()
        b.stop()


def test_release_on_shutdown_hands_over_quickly(admin: KubeClient) -> None:
    name = f"le-{uuid.uuid4().hex[:8]}"
    ta, tb = Tracker(), Tracker()
    a = elector(admin, name, "rel-a", ta).start()
    try:
        assert ta.started.wait(5)
        b = elector(admin, name, "rel-b", tb).start()
        time.sleep(2 * RETRY)
        assert a.is_leader and not b.is_leader
        t0 = time.monotonic()
        a.stop(release=True)
        assert ta.stopped.is_set()
        spec = lease(admin, name)["spec"]
        assert spec.get("holderIdentity") in (None, "", "rel-b")
        assert tb.started.wait(RETRY * 2.2 + 2), "released lease not picked up"
        assert tb.started_at - t0 < RETRY * 2.2 + 1.5
        spec = lease(admin, name)["spec"]
        assert spec["holderIdentity"] == "rel-b" and spec["leaseTransitions"] == 1
        b.stop(release=True)
        spec = lease(admin, name)["spec"]
        assert not spec.get("holderIdentity") and spec["leaseDurationSeconds"] == 1
        assert spec["leaseTransitions"] == 1
    finally:
        a.stop()


def test_leader_that_cannot_renew_stops_before_the_lease_expires(admin: KubeClient) -> None:
    name = f"le-{uuid.uuid4().hex[:8]}"
    t = Tracker()
    a = elector(admin, name, "cut-off", t).start()
    try:
        assert t.started.wait(5)
        time.sleep(RETRY * 2)
        # the API server becomes unreachable for this elector
        a.client = KubeClient(Connection(host="https://127.0.0.1:1"), qps=0)
        assert t.stopped.wait(RENEW + 2 * RETRY + 1), "still leading without renewals"
        assert not a.is_leader
        last_renew = a._last_renew  # start of the last successful renewal
        # stopped leading before anyone else could consider the lease expired
        assert t.stopped_at - last_renew < LEASE, t.stopped_at - last_renew
        assert t.stopped_at - last_renew >= RENEW - 0.1
    finally:
        a.stop(release=False)


def test_conflicting_writes_are_retried(admin: KubeClient) -> None:
    """Five candidates start together: optimistic concurrency leaves exactly one leader."""
    name = f"le-{uuid.uuid4().hex[:8]}"
    trackers = [Tracker() for _ in range(5)]
    es = [elector(admin, name, f"c{i}", trackers[i]).start() for i in range(5)]
    try:
        end = time.monotonic() + 5
        while time.monotonic() < end and not any(e.is_leader for e in es):
            time.sleep(0.02)
        time.sleep(2 * RETRY)
        assert sum(e.is_leader for e in es) == 1
        assert sum(t.started.is_set() for t in trackers) == 1
        holder = lease(admin, name)["spec"]["holderIdentity"]
        assert [e.identity for e in es if e.is_leader] == [holder]
    finally:
        for e in es:
            e.stop()


def test_invalid_timings_are_rejected(admin: KubeClient) -> None:
    with pytest.raises(ValueError):
        LeaderElector(admin, lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError):
        LeaderElector(admin, lease_duration=15, renew_deadline=2, retry_period=2)
    e = LeaderElector(admin, lease_duration="15s", renew_deadline="10s", retry_period="2s")
    assert (e.lease_duration, e.renew_deadline, e.retry_period) == (15.0, 10.0, 2.0)
    assert re.match(r"^.+_[0-9a-f-]{36}$", e.identity)

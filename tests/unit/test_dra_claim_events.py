"""ResourceClaim events as kube-scheduler's queue gets them: through its claim assume cache, which hands the queue
the claim PreBind wrote as soon as the write returns and drops the informer's copies that are not newer."""

from __future__ import annotations

import copy
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.queue import BACKOFF, UNSCHEDULABLE
from scheduler_runtime.scheduler import Scheduler

from .test_dra_plugin import DRIVER, NS, claim, device_class, node, pod, rslice

DRA = "DynamicResources"


def _waiting_scheduler() -> tuple[MemoryCluster, Scheduler, Pod, dict[str, Any]]:
    """A scheduler whose pod `p` (claim `c`) waits in the unschedulable pool, rejected by DynamicResources as
    when another pod's allocation of `c` was in flight; and that allocation, as PreBind's write returned it."""
    m = MemoryCluster()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c"), pod("p", claim_name="c")):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    qpi = s.queue.pop(timeout=0)
    assert qpi is not None and qpi.pod.name == "p"
    s.queue.add_unschedulable_if_not_present(qpi, {DRA})
    assert s.queue.where(qpi.pod.uid) == UNSCHEDULABLE
    stored = m.informer("resourceclaims").get("c", NS)
    written = copy.deepcopy(stored)
    written["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
    written["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "other-uid"}]}
    return m, s, qpi.pod, written


def _requeue_after_another_attempt(s: Scheduler, p: Pod) -> None:
    qpi = s.queue.pop(timeout=0)  # from the backoffQ: nothing else is queued
    assert qpi is not None and qpi.pod.uid == p.uid
    s.queue.add_unschedulable_if_not_present(qpi, {DRA})
    assert s.queue.where(p.uid) == UNSCHEDULABLE


def test_a_claim_prebind_wrote_requeues_its_waiting_pods_before_the_informer_brings_it():
    """kube's PreBind assumes the claim it wrote, and the assume cache hands the queue that update at once."""
    _m, s, p, written = _waiting_scheduler()
    s.frameworks["default-scheduler"].handle.claim_assumed(written)
    s.drain_inbox()
    assert s.queue.where(p.uid) == BACKOFF


def test_the_informers_echo_of_an_assumed_claim_moves_no_pod():
    """The informer's copy of the version PreBind wrote is not newer than the assumed one: kube's assume cache
    drops it, so a pod rejected again meanwhile stays where it is (an older version arriving late, too)."""
    _m, s, p, written = _waiting_scheduler()
    before = s._claims_seen[f"{NS}/c"]
    s.frameworks["default-scheduler"].handle.claim_assumed(written)
    s.drain_inbox()
    _requeue_after_another_attempt(s, p)
    s.on_cluster_event("resourceclaims", "MODIFIED", before, copy.deepcopy(written))
    s.drain_inbox()
    assert s.queue.where(p.uid) == UNSCHEDULABLE
    # a newer version is an update from the assumed claim: deallocation moves the pod again
    newer = copy.deepcopy(before)
    newer["metadata"]["resourceVersion"] = str(int(written["metadata"]["resourceVersion"]) + 1)
    s.on_cluster_event("resourceclaims", "MODIFIED", written, newer)
    s.drain_inbox()
    assert s.queue.where(p.uid) == BACKOFF


def test_an_assumed_version_older_than_the_one_seen_is_refused():
    """kube's Assume refuses a version older than the cache's (out of sync): no event."""
    _m, s, p, written = _waiting_scheduler()
    newer = copy.deepcopy(written)
    newer["metadata"]["resourceVersion"] = str(int(written["metadata"]["resourceVersion"]) + 5)
    newer["status"] = {}
    s.on_cluster_event("resourceclaims", "MODIFIED", s._claims_seen[f"{NS}/c"], newer)
    s.drain_inbox()
    assert s.queue.where(p.uid) == UNSCHEDULABLE  # nothing the pod waits for changed
    s.frameworks["default-scheduler"].handle.claim_assumed(written)
    s.drain_inbox()
    assert s.queue.where(p.uid) == UNSCHEDULABLE


def test_prebind_hands_the_written_claim_to_the_scheduler():
    """End to end on the embedded cluster: every claim PreBind writes reaches `claim_assumed` (the pod's own and
    a shared one's second reservation), the extended-resource claim aside."""
    m = MemoryCluster()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c")):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    seen: list[dict[str, Any]] = []
    handle = s.frameworks["default-scheduler"].handle
    forward = handle.claim_assumed
    handle.claim_assumed = lambda c: (seen.append(c), forward(c))  # type: ignore[func-returns-value]
    s.start()
    m.create(pod("a", claim_name="c"))
    m.create(pod("b", claim_name="c"))
    s.run(until_idle=True)
    assert [len(c["status"]["reservedFor"]) for c in seen] == [1, 2]
    assert all(c["status"].get("allocation") for c in seen)

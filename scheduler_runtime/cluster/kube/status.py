"""Pod status writes of a scheduling cycle: the PodScheduled condition, nominatedNodeName, result annotations.

Follows kube-scheduler v1.36.3 pkg/scheduler/util/utils.go (PatchPodStatus: a strategic-merge patch of
`pods/status` carrying only what changed, lastTransitionTime kept while the status stays) and
pkg/scheduler/schedule_one.go (updatePod: condition and nominatedNodeName in one write). Annotations ride on
`pods/status` as well, which system:kube-scheduler may patch (a patch of `pods` could change the image).
Writes are coalesced per pod (the latest wins) and sent by a few background workers; a failed attempt's writes
are sent by the scheduling loop itself (`send_now`) when it must wait for them as kube's does. Every write passes
the backend's leader gate (`GatedWriter`).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Protocol

from ...objects import Pod
from .resources import path_escape, rfc3339
from .rest import ApiError, GatedWriter
from .workers import ShardedWorkers

log = logging.getLogger("ksched.kube")
_STRATEGIC, _MERGE = "application/strategic-merge-patch+json", "application/merge-patch+json"


class StatusHost(GatedWriter, Protocol):
    """The backend as the status writer sees it: gated writes and its pod cache (to tell a replaced pod)."""

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def write_status(host: StatusHost, pod: Pod, condition: dict[str, Any] | None, nnn: str | None) -> bool:
    """Patch the condition and nominatedNodeName; False if nothing changed, the pod is gone or not leader."""
    patch_status = status_patch(pod, condition, nnn)
    if not patch_status:
        return False
    body = {"metadata": {"uid": pod.uid}, "status": patch_status}
    return _patch_status(host, pod, body, _STRATEGIC)


def status_patch(pod: Pod, condition: dict[str, Any] | None, nnn: str | None) -> dict[str, Any]:
    """The `status` of write_status's patch: what changed of the condition and nominatedNodeName ({}: nothing)."""
    status = (pod.raw.get("status") or {}) if pod.raw else {}
    patch_status: dict[str, Any] = {}
    if condition is not None:
        ctype = condition.get("type", "PodScheduled")
        old = next((c for c in status.get("conditions") or () if c.get("type") == ctype), None)
        cond = {"type": ctype, "status": condition.get("status", "False"),
                "reason": condition.get("reason", ""), "message": condition.get("message", ""),
                "lastProbeTime": None}
        gen = (pod.raw.get("metadata") or {}).get("generation") if pod.raw else None
        if gen is not None:
            cond["observedGeneration"] = gen
        unchanged = old is not None and all(old.get(k) == cond[k] for k in ("status", "reason", "message"))
        if not unchanged:
            same_status = old is not None and old.get("status") == cond["status"]
            kept = old.get("lastTransitionTime") if old is not None and same_status else None
            cond["lastTransitionTime"] = kept or rfc3339()
            patch_status["conditions"] = [cond]
    if nnn is not None:
        cur = status.get("nominatedNodeName") or ""
        if nnn != cur:
            patch_status["nominatedNodeName"] = nnn or None
    return patch_status


def _patch_status(host: StatusHost, pod: Pod, body: dict[str, Any], content_type: str) -> bool:
    """PATCH pods/status; False if not leader or the pod is gone (or was replaced by one with the same name)."""
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}/status"
    resp = host.gated_write("PATCH", path, body=body, content_type=content_type)
    if resp is None:
        return False
    if resp.ok:
        return True
    if resp.status == 404 or (resp.status in (409, 422) and not same_pod(host, pod)):
        return False
    raise host.client.error(resp, "PATCH", path)


def same_pod(host: StatusHost, pod: Pod) -> bool:
    raw = host.get_pod(pod.namespace, pod.name)
    return raw is not None and (raw.get("metadata") or {}).get("uid") == pod.uid


def annotation_changes(pod: Pod, annotations: dict[str, str | None]) -> dict[str, str | None]:
    have = pod.annotations or {}
    return {k: v for k, v in annotations.items() if have.get(k) != v}


def write_annotations(host: StatusHost, pod: Pod, annotations: dict[str, str | None]) -> bool:
    changes = annotation_changes(pod, annotations)
    if not changes:
        return False
    # through pods/status, which system:kube-scheduler may patch (a patch of `pods` could change the image);
    # the API server keeps the spec on a status write and takes the metadata
    body = {"metadata": {"uid": pod.uid, "annotations": changes}}
    return _patch_status(host, pod, body, _MERGE)


def write_status_and_annotations(host: StatusHost, pod: Pod, condition: dict[str, Any] | None, nnn: str | None,
                                 annotated: Pod, annotations: dict[str, str | None]) -> tuple[bool, bool]:
    """A failed attempt's status and its result annotation (`annotated`: the pod as the annotation write saw
    it) in one PATCH of pods/status when both changed (a strategic merge patch merges metadata.annotations as a
    JSON merge patch does: null removes a key); (status written, annotations written)."""
    patch_status = status_patch(pod, condition, nnn)
    changes = annotation_changes(annotated, annotations)
    if patch_status and changes:
        body = {"metadata": {"uid": pod.uid, "annotations": changes}, "status": patch_status}
        done = _patch_status(host, pod, body, _STRATEGIC)
        return done, done
    status_done = bool(patch_status) and _patch_status(
        host, pod, {"metadata": {"uid": pod.uid}, "status": patch_status}, _STRATEGIC)
    annotations_done = bool(changes) and _patch_status(
        host, annotated, {"metadata": {"uid": annotated.uid, "annotations": changes}}, _MERGE)
    return status_done, annotations_done


#: a queued write: the kind ("status" or "annotations"), the pod, and (condition, nnn) or the annotations
_Write = tuple[str, Pod, Any]


class PodWriter(ShardedWorkers[_Write]):
    """Status patches and annotation patches, coalesced per pod (the latest wins), written by a few
    workers; a pod always goes to the same worker, so writes to one pod stay in order."""

    def __init__(self, host: StatusHost, shards: int = 4, max_per_shard: int = 20000) -> None:
        super().__init__()
        self.host = host
        self.max_per_shard = max_per_shard
        self._shards: list[collections.OrderedDict[tuple[str, str], list[Any]]] = [
            collections.OrderedDict() for _ in range(shards)]
        self.written = self.dropped = self.failed = self.skipped = self.superseded = 0
        #: (op, pod key) of the writes being sent, for `settle`
        self._in_flight: set[tuple[str, str]] = set()
        self._start_workers(shards, "podwriter")
        for t in self._threads:
            t.start()

    def put(self, op: str, pod: Pod, payload: Any) -> None:
        idx = hash(pod.key) % len(self._shards)
        shard = self._shards[idx]
        k = (op, pod.key)
        with self._cv:
            if self._stopping:
                return
            cur = shard.get(k)
            if cur is not None and cur[0].uid == pod.uid:
                cur[0] = pod
                if op == "status":
                    cond, nnn = payload
                    cur[1] = (cond if cond is not None else cur[1][0], nnn if nnn is not None else cur[1][1])
                else:
                    cur[1].update(payload)
                return
            if len(shard) >= self.max_per_shard:
                shard.popitem(last=False)
                self.dropped += 1
            shard[k] = [pod, payload if op == "status" else dict(payload)]
            self._wake(idx)

    # the worker loop (ShardedWorkers): one shard per worker
    def _has_work(self, shard: int) -> bool:
        return bool(self._shards[shard])

    def _take(self, shard: int) -> _Write:
        """The shard's oldest write; a status write and an annotation write of the same pod, both queued (a
        failed attempt makes both), are taken together and sent as one patch (`both`)."""
        queued = self._shards[shard]
        op, key = next(iter(queued))
        return self._pop(queued, op, key)

    def _pop(self, queued: collections.OrderedDict[tuple[str, str], list[Any]], op: str, key: str) -> _Write:
        """Take the pod's `op` write off `queued`, with its other kind of write when that is queued too."""
        pod, payload = queued.pop((op, key))
        self._in_flight.add((op, key))
        other = "annotate" if op == "status" else "status" if op == "annotate" else ""
        mate = queued.get((other, key)) if other else None
        if mate is None or mate[0].uid != pod.uid:
            return op, pod, payload
        del queued[(other, key)]
        self._in_flight.add((other, key))
        if op == "status":
            return "both", pod, (payload, mate[0], mate[1])
        return "both", mate[0], (mate[1], pod, payload)

    def settle(self, pod: Pod, timeout: float = 30.0) -> None:
        """Before the pod's binding: its status write still queued is dropped, and one being sent is waited
        for. kube writes a failure's status before the pod's next attempt (and its async API dispatcher lets a
        binding overwrite a pending status patch); here the writes are queued, and a stale PodScheduled=False
        sent after the binding would mark a bound pod unschedulable."""
        k = ("status", pod.key)
        shard = self._shards[hash(pod.key) % len(self._shards)]
        end = None
        with self._cv:
            cur = shard.get(k)
            if cur is not None and cur[0].uid == pod.uid:
                del shard[k]
                self.superseded += 1
            while k in self._in_flight and not self._stopping:
                now = time.monotonic()
                end = end if end is not None else now + timeout
                if now >= end:
                    return
                self._cv.wait(end - now)

    def send_now(self, pod: Pod, timeout: float = 30.0) -> None:
        """Send the pod's queued status and annotation writes on the calling thread (one patch when both are
        queued), after any of its writes already being sent. kube-scheduler (SchedulerAsyncAPICalls off, its
        default) patches a failed attempt's status in its scheduling loop, so the loop keeps the API server's
        pace and its binding cycles finish before it tries the pods waiting on them (pods sharing a claim
        whose allocation is still being written)."""
        key = pod.key
        shard = self._shards[hash(key) % len(self._shards)]
        end = time.monotonic() + timeout
        with self._cv:
            while ((("status", key) in self._in_flight or ("annotate", key) in self._in_flight)
                   and not self._stopping):
                left = end - time.monotonic()
                if left <= 0:
                    return  # the worker sends them
                self._cv.wait(left)
            if self._stopping:
                return
            op = next((o for o in ("status", "annotate")
                       if (w := shard.get((o, key))) is not None and w[0].uid == pod.uid), None)
            if op is None:
                return
            item = self._pop(shard, op, key)
            self._busy += 1
        try:
            self._handle(item)
        finally:
            with self._cv:
                self._busy -= 1
                self._cv.notify_all()

    def _backlog(self) -> int:
        return sum(len(s) for s in self._shards)

    def _handle(self, item: _Write) -> None:
        op, pod, payload = item
        try:
            self._send(op, pod, payload)
        finally:
            with self._cv:  # the base notifies `_cv` once the item is done
                if op == "both":
                    self._in_flight.discard(("status", pod.key))
                    self._in_flight.discard(("annotate", pod.key))
                else:
                    self._in_flight.discard((op, pod.key))

    def _send(self, op: str, pod: Pod, payload: Any) -> None:
        outcomes: tuple[bool, ...]
        try:
            if op == "both":
                (cond, nnn), annotated, annotations = payload
                outcomes = write_status_and_annotations(self.host, pod, cond, nnn, annotated, annotations)
            elif op == "status":
                outcomes = (write_status(self.host, pod, *payload),)
            else:
                outcomes = (write_annotations(self.host, pod, payload),)
        except ApiError as exc:
            self.failed += 1
            log.warning("could not update pod %s: %s", pod.key, exc)
            return
        for done in outcomes:
            if done:
                self.written += 1
            else:
                self.skipped += 1

    def pending(self) -> int:
        with self._cv:
            return self._backlog() + self._busy

    def stop(self, timeout: float = 2.0) -> None:
        self.flush(timeout)
        with self._cv:
            self._stopping = True
            for s in self._shards:
                s.clear()
            self._wake_all()



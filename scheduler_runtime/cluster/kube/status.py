"""Pod status writes of a scheduling cycle: the PodScheduled condition, nominatedNodeName, result annotations.

Follows kube-scheduler v1.36.3 pkg/scheduler/util/utils.go (PatchPodStatus: a strategic-merge patch of
`pods/status` carrying only what changed, lastTransitionTime kept while the status stays) and
pkg/scheduler/schedule_one.go (updatePod: condition and nominatedNodeName in one write). Annotations ride on
`pods/status` as well, which system:kube-scheduler may patch (a patch of `pods` could change the image).
Writes are coalesced per pod (the latest wins) and sent by a few background workers, so the scheduling loop
never waits on them; every write passes the backend's leader gate (`GatedWriter`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Protocol

from ...objects import Pod
from .resources import path_escape, rfc3339
from .rest import ApiError, GatedWriter

log = logging.getLogger("ksched.kube")


class StatusHost(GatedWriter, Protocol):
    """The backend as the status writer sees it: gated writes and its pod cache (to tell a replaced pod)."""

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def write_status(host: StatusHost, pod: Pod, condition: dict[str, Any] | None, nnn: str | None) -> bool:
    """Patch the condition and nominatedNodeName; False if nothing changed, the pod is gone or not leader."""
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
            cond["lastTransitionTime"] = (old.get("lastTransitionTime") if same_status and
                                          old.get("lastTransitionTime") else rfc3339())
            patch_status["conditions"] = [cond]
    if nnn is not None:
        cur = status.get("nominatedNodeName") or ""
        if nnn != cur:
            patch_status["nominatedNodeName"] = nnn or None
    if not patch_status:
        return False
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}/status"
    body = {"metadata": {"uid": pod.uid}, "status": patch_status}
    resp = host.gated_write("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")
    if resp is None:
        return False
    if resp.ok:
        return True
    if resp.status == 404 or (resp.status in (409, 422) and not same_pod(host, pod)):
        return False  # the pod is gone (or was replaced by one with the same name)
    raise host.client.error(resp, "PATCH", path)


def same_pod(host: StatusHost, pod: Pod) -> bool:
    raw = host.get_pod(pod.namespace, pod.name)
    return raw is not None and (raw.get("metadata") or {}).get("uid") == pod.uid


def write_annotations(host: StatusHost, pod: Pod, annotations: dict[str, str | None]) -> bool:
    have = pod.annotations or {}
    changes = {k: v for k, v in annotations.items() if have.get(k) != v}
    if not changes:
        return False
    # through pods/status, which system:kube-scheduler may patch (a patch of `pods` could change the image);
    # the API server keeps the spec on a status write and takes the metadata
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}/status"
    body = {"metadata": {"uid": pod.uid, "annotations": changes}}
    resp = host.gated_write("PATCH", path, body=body, content_type="application/merge-patch+json")
    if resp is None:
        return False
    if resp.ok:
        return True
    if resp.status == 404 or (resp.status in (409, 422) and not same_pod(host, pod)):
        return False
    raise host.client.error(resp, "PATCH", path)


class PodWriter:
    """Status patches and annotation patches, coalesced per pod (the latest wins), written by a few
    workers; a pod always goes to the same worker, so writes to one pod stay in order."""

    def __init__(self, host: StatusHost, shards: int = 4, max_per_shard: int = 20000) -> None:
        self.host = host
        self.max_per_shard = max_per_shard
        self._shards: list[collections.OrderedDict[tuple[str, str], list[Any]]] = [
            collections.OrderedDict() for _ in range(shards)]
        self._cv = threading.Condition()
        self._busy = 0
        self._stopping = False
        self.written = self.dropped = self.failed = self.skipped = 0
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"podwriter-{i}", daemon=True)
                         for i in range(shards)]
        for t in self._threads:
            t.start()

    def put(self, op: str, pod: Pod, payload: Any) -> None:
        shard = self._shards[hash(pod.key) % len(self._shards)]
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
            self._cv.notify_all()

    def _run(self, i: int) -> None:
        shard = self._shards[i]
        while True:
            with self._cv:
                while not shard and not self._stopping:
                    self._cv.wait()
                if not shard:
                    return
                (op, _), (pod, payload) = shard.popitem(last=False)
                self._busy += 1
            try:
                if op == "status":
                    done = write_status(self.host, pod, *payload)
                else:
                    done = write_annotations(self.host, pod, payload)
                if done:
                    self.written += 1
                else:
                    self.skipped += 1
            except ApiError as exc:
                self.failed += 1
                log.warning("could not update pod %s: %s", pod.key, exc)
            except Exception as exc:  # noqa: BLE001 - keep the worker alive
                self.failed += 1
                log.error("pod writer: %s", exc)
            finally:
                with self._cv:
                    self._busy -= 1
                    self._cv.notify_all()

    def pending(self) -> int:
        with self._cv:
            return sum(len(s) for s in self._shards) + self._busy

    def flush(self, timeout: float = 5.0) -> bool:
        end = time.monotonic() + timeout
        with self._cv:
            while any(self._shards) or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self, timeout: float = 2.0) -> None:
        self.flush(timeout)
        with self._cv:
            self._stopping = True
            for s in self._shards:
                s.clear()
            self._cv.notify_all()



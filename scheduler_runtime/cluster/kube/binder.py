"""Synchronous pod writes: the binding (with its result annotations) and the deletion of a preemption victim.

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/plugins/defaultbinder/default_binder.go (POST
`pods/{name}/binding` with the pod UID as precondition; the API server copies a Binding's annotations onto
the pod) and pkg/scheduler/util/utils.go with framework/preemption (DeletePod after a DisruptionTarget
condition, grace period and UID precondition). A 409 on a binding counts as success only when a read of the
pod shows this pod (UID) on the chosen node. The caller is already a bind worker, so these block; every
request passes the backend's leader gate (`GatedWriter`).

Binding retries follow kube-scheduler v1.37.2 pkg/scheduler/util/utils.go BindPod (#138855, ungated): client-go's
retry.DefaultBackoff (4 tries, 10 ms x 5^n apart, 10% jitter) on InternalError (500) and ServiceUnavailable (503),
and, as client-go's transport does, on 429/5xx answers that carry Retry-After (waited as asked). A request that
got no answer (refused or cut connection) is retried too: if it did bind, the retry's 409 finds the pod there.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Protocol

import orjson

from ...objects import Pod
from ..base import NOT_LEADER, BindError, LeadershipLost
from .resources import path_escape, rfc3339
from .rest import ApiError, ApiUnreachableError, GatedWriter

log = logging.getLogger("ksched.kube")


class BindHost(GatedWriter, Protocol):
    """The backend as the binder sees it."""

    bind_retries: int
    scheduler_name: str


#: kube's Retriable(): apierrors.IsInternalError / IsServiceUnavailable
RETRIABLE_STATUS = (500, 503)


def bind_backoff(attempt: int) -> float:
    """Seconds before retry `attempt` (1-based): retry.DefaultBackoff's 10 ms x 5^(n-1) with 10% jitter."""
    d = 0.01 * 5.0 ** (attempt - 1)
    return d + random.random() * 0.1 * d


def bind(host: BindHost, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
    """POST the Binding; retries (`host.bind_retries` times) as the module doc says."""
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}/binding"
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
    if annotations:
        meta["annotations"] = annotations  # the API server copies a Binding's annotations onto the pod
    body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}})
    attempt = 0
    while True:
        try:
            resp = host.gated_write("POST", path, body=body, conn_retries=0)  # checked again before a retry
            if resp is None:
                host.stats["binds_dropped_not_leader"] += 1
                raise LeadershipLost(f"not binding {pod.key} to {node_name}: {NOT_LEADER}")
        except ApiUnreachableError as exc:
            # the bind may have happened; a retry then answers 409 "already assigned" to our node
            if attempt >= host.bind_retries:
                host.stats["bind_errors"] += 1
                raise BindError(f"binding {pod.key} to {node_name}: {exc}") from None
            attempt += 1
            time.sleep(bind_backoff(attempt))
            continue
        if resp.status in (200, 201):
            host.stats["binds"] += 1
            return
        msg = resp.message()
        if resp.status == 409 and bound_to(host, pod, node_name):
            # an earlier try whose answer was lost (connection cut, 5xx while the server went down)
            # did bind it, or someone bound it where we would: either way it sits on our node
            host.stats["binds"] += 1
            return
        if resp.status in (404, 409):
            host.stats["bind_gone"] += 1
            raise BindError(msg, gone=True)
        ra = resp.retry_after() if resp.status == 429 or resp.status >= 500 else None
        if (resp.status in RETRIABLE_STATUS or ra is not None) and attempt < host.bind_retries:
            attempt += 1
            time.sleep(min(ra, 10.0) if ra is not None else bind_backoff(attempt))
            continue
        host.stats["bind_errors"] += 1
        raise BindError(str(host.client.error(resp, "POST", path)))


def bound_to(host: BindHost, pod: Pod, node_name: str) -> bool:
    """After a 409 on a binding: does the API server hold this very pod (same UID) on `node_name`? Read
    from the server, not the cache, and from structured fields (the 409's details name no node)."""
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}"
    try:
        resp = host.client.request("GET", path, conn_retries=1)
    except ApiError:
        return False
    if not resp.ok:
        return False
    raw = resp.json()
    return ((raw.get("metadata") or {}).get("uid") == pod.uid
            and (raw.get("spec") or {}).get("nodeName") == node_name)


def delete_pod(host: BindHost, pod: Pod, reason: str = "", by: str = "") -> None:
    """Delete a pod (a preemption victim) as kube-scheduler's preemption executor does: the DisruptionTarget
    condition first (a status patch; a victim already gone ends it, another failure is the victim's error and
    it is not deleted), then DELETE with empty options (the pod's own grace period, no UID precondition)."""
    path = f"/api/v1/namespaces/{path_escape(pod.namespace)}/pods/{path_escape(pod.name)}"
    if reason == "preempted":
        body = {"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": f"{by or host.scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": rfc3339()}]}}
        r = host.gated_write("PATCH", path + "/status", body=body,
                             content_type="application/strategic-merge-patch+json")
        if r is None:
            log.info("not deleting pod %s: %s", pod.key, NOT_LEADER)
            return
        if r.status == 404:
            return
        if not r.ok:
            raise host.client.error(r, "PATCH", path + "/status")
    resp = host.gated_write("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions"})
    if resp is None:
        log.info("not deleting pod %s: %s", pod.key, NOT_LEADER)
        return
    if resp.ok or resp.status == 404:
        host.stats["deletes"] += 1
        return
    raise host.client.error(resp, "DELETE", path)

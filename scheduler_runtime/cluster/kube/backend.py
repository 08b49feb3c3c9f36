"""`KubeCluster`: the ClusterBackend on a real API server, assembled from the kube package's pieces.

Follows kube-scheduler v1.36.3 cmd/kube-scheduler/app/server.go (RBAC-checked start, informers started and
synced before scheduling, a separate clientset for events) and pkg/scheduler/eventhandlers.go (the resources
watched; pods with the field selector of `resources.POD_FIELD_SELECTOR`). It owns discovery, the reflectors,
the preflight (SelfSubjectAccessReviews of `REQUIRED_PERMISSIONS`), the leader-gated write
(`gated_write`, checked after the rate limiter's wait) and the background writers; binding lives in
`binder`, status writes in `status`, event series in `events`. `start(handler)` waits for the initial lists,
delivers namespaces and nodes, then the other resources, then pods as ADDED, then live changes in order.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from ...objects import Pod
from ...ratelimit import TokenBucket
from ..base import NOT_LEADER, ClusterBackend, EventHandler, PatchError
from . import binder
from .events import EventWriter, pod_event
from .kubeconfig import Connection, load_connection
from .reflector import Reflector, strip_managed_fields, stripper
from .resources import BUILTIN, CORE_RESOURCES, POD_FIELD_SELECTOR, ResourceNotServed, ResourceRef, parse_resource
from .rest import USER_AGENT, ApiError, ApiForbiddenError, KubeClient, Response
from .status import PodWriter, write_status

log = logging.getLogger("ksched.kube")

#: start() delivery order: these first, pods last, everything else in between
_FIRST = ("namespaces", "nodes")


def initial_pod_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order start() hands the listed pods over in: bound ones as listed, then the unbound ones by uid.

    kube-scheduler's informers (client-go's WatchListClient, on by default since 1.35) collect the initial
    objects in a map and hand them to the handlers in that map's order, so the pods pending at startup enter
    the activeQ, and get their queue timestamps, in no particular order. A LIST returns them by name; queued
    in that order, pods named in sequence follow one another, e.g. the pods sharing a ResourceClaim, each of
    which then finds the claim's allocation still in flight (kube: "resource claim ... is in the process of
    being allocated") and waits for a requeue where kube's mostly would not. The uid order stands in for the
    map's: unrelated to names or creation order, and the same for the same objects."""
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if len(bound) == len(pods):
        return pods
    pending = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
    pending.sort(key=lambda p: str((p.get("metadata") or {}).get("uid") or ""))
    return bound + pending


def _cc_get(cc: Any, names: Iterable[str], default: Any) -> Any:
    if cc is None:
        return default
    for n in names:
        v = cc.get(n) if isinstance(cc, dict) else getattr(cc, n, None)
        if v is not None and v != "":
            return v
    return default


#: what the runtime needs; the system:kube-scheduler ClusterRole grants all but the last four, which
#: system:volume-scheduler grants. Results annotations need nothing more: they ride on the binding or on
#: the `pods/status` patch checked here, never on a `patch` of `pods`.
REQUIRED_PERMISSIONS: tuple[tuple[str, str, str, str], ...] = (
    ("list", "", "pods", ""), ("watch", "", "pods", ""), ("list", "", "nodes", ""), ("watch", "", "nodes", ""),
    ("list", "", "namespaces", ""), ("watch", "", "namespaces", ""), ("list", "", "services", ""),
    ("watch", "", "services", ""), ("list", "apps", "replicasets", ""), ("watch", "apps", "replicasets", ""),
    ("list", "apps", "statefulsets", ""), ("watch", "apps", "statefulsets", ""),
    ("list", "policy", "poddisruptionbudgets", ""), ("watch", "policy", "poddisruptionbudgets", ""),
    ("create", "", "pods", "binding"), ("patch", "", "pods", "status"), ("delete", "", "pods", ""),
    ("create", "events.k8s.io", "events", ""),
    # the volume plugins of the default profile (system:kube-scheduler reads, system:volume-scheduler writes)
    ("list", "", "persistentvolumeclaims", ""), ("watch", "", "persistentvolumeclaims", ""),
    ("list", "", "persistentvolumes", ""), ("watch", "", "persistentvolumes", ""),
    ("list", "storage.k8s.io", "storageclasses", ""), ("watch", "storage.k8s.io", "storageclasses", ""),
    ("list", "storage.k8s.io", "csinodes", ""), ("watch", "storage.k8s.io", "csinodes", ""),
    ("list", "storage.k8s.io", "volumeattachments", ""), ("watch", "storage.k8s.io", "volumeattachments", ""),
    ("patch", "", "persistentvolumes", ""), ("patch", "", "persistentvolumeclaims", ""),
)
#: what the DynamicResources plugin needs (system:kube-scheduler grants these); checked only when it runs
DRA_PERMISSIONS: tuple[tuple[str, str, str, str], ...] = (
    ("list", "resource.k8s.io", "resourceclaims", ""), ("watch", "resource.k8s.io", "resourceclaims", ""),
    ("list", "resource.k8s.io", "deviceclasses", ""), ("watch", "resource.k8s.io", "deviceclasses", ""),
    ("list", "resource.k8s.io", "resourceslices", ""), ("watch", "resource.k8s.io", "resourceslices", ""),
    ("patch", "resource.k8s.io", "resourceclaims", ""), ("patch", "resource.k8s.io", "resourceclaims", "status"),
)


class KubeCluster(ClusterBackend):
    """ClusterBackend on a real API server."""

    def __init__(self, kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None,
                 connection: Connection | None = None, qps: float = 50.0, burst: int = 100,
                 bind_workers: int = 16, scheduler_name: str = "default-scheduler",
                 page_size: int = 500, resources: Iterable[str] = CORE_RESOURCES,
                 pod_field_selector: str | None = POD_FIELD_SELECTOR, min_watch_timeout: float = 300.0,
                 watch_read_timeout: float = 150.0, request_timeout: float = 30.0, list_timeout: float = 60.0,
                 backoff_initial: float = 0.8, backoff_cap: float = 30.0, bind_retries: int = 3,
                 check_permissions: bool = True, event_queue: int = 2000,
                 hostname: str | None = None, headers: dict[str, str] | None = None,
                 user_agent: str = USER_AGENT) -> None:
        self.connection = connection or load_connection(kubeconfig, context)
        resources = tuple(resources)
        pool = bind_workers + len(resources) + 16
        self.client = KubeClient(self.connection, qps=qps, burst=burst, pool_size=pool, timeout=request_timeout,
                                 user_agent=user_agent)
        if headers:  # e.g. Impersonate-User
            self.client._extra_headers.update(headers)
        # kube-scheduler's event recorder has its own clientset, so its own rate limiter
        self.event_client = self.client.clone(pool_size=8)
        self.scheduler_name = scheduler_name
        self.hostname = hostname or socket.gethostname()
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.watch_read_timeout = watch_read_timeout
        self.list_timeout = list_timeout
        self.backoff_initial = backoff_initial
        self.backoff_cap = backoff_cap
        self.bind_retries = bind_retries
        self.check_permissions = check_permissions
        self.unhealthy_after = 5.0
        self._pod_field_selector = pod_field_selector
        self._handler: EventHandler | None = None
        self._started = False
        self._lock = threading.RLock()
        self._reflectors: dict[tuple[str, str], Reflector] = {}
        self._uncached_pod_annotations: frozenset[str] = frozenset()
        self._discovery: dict[tuple[str, str, str | None], ResourceRef] = {}
        self._event_writer: EventWriter | None = None
        self._event_queue = event_queue
        self._pod_writer: PodWriter | None = None
        self._last_event_ns = 0
        self.stats: collections.Counter[str] = collections.Counter()
        for r in resources:
            self.informer(r)

    @classmethod
    def from_client_connection(cls, client_connection: Any = None, **kw: Any) -> KubeCluster:
        """Build from a KubeSchedulerConfiguration clientConnection (object or dict)."""
        cc = client_connection
        kw.setdefault("qps", float(_cc_get(cc, ("qps",), 50.0)))
        kw.setdefault("burst", int(_cc_get(cc, ("burst",), 100)))
        kubeconfig = kw.pop("kubeconfig", None) or _cc_get(cc, ("kubeconfig",), None)
        return cls(kubeconfig, **kw)

    @property
    def limiter(self) -> TokenBucket:
        return self.client.limiter

    @property
    def live_handler(self) -> EventHandler | None:
        """The handler reflectors deliver live changes to (set by start(), after the initial objects)."""
        return self._handler

    # ----------------------------------------------------------------- discovery / informers
    def discover(self, group: str, plural: str, version: str | None = None) -> ResourceRef:
        key = (group, plural, version)
        hit = self._discovery.get(key)
        if hit is not None:
            return hit
        b = BUILTIN.get(plural)
        if b is not None and b.group == group and version in (None, b.version):
            return b
        label = f"{plural}.{group}" if group else plural
        versions: list[str]
        if version:
            versions = [version]
        elif not group:
            versions = ["v1"]
        else:
            resp = self.client.request("GET", f"/apis/{group}")
            if resp.status == 404:
                raise ResourceNotServed(f"resource {label} is not served by the API server (is its CRD installed?)")
            if not resp.ok:
                raise self.client.error(resp, "GET", f"/apis/{group}")
            body = resp.json()
            pref = (body.get("preferredVersion") or {}).get("version")
            versions = ([pref] if pref else []) + [v.get("version") for v in body.get("versions") or ()
                                                    if v.get("version") != pref]
        for v in versions:
            path = "/api/v1" if not group else f"/apis/{group}/{v}"
            resp = self.client.request("GET", path)
            if resp.status == 404:
                continue
            if not resp.ok:
                raise self.client.error(resp, "GET", path)
            for r in resp.json().get("resources") or ():
                if r.get("name") == plural:
                    ref = ResourceRef(group, v, plural, bool(r.get("namespaced")), str(r.get("kind") or ""))
                    self._discovery[key] = ref
                    return ref
        raise ResourceNotServed(f"resource {label} is not served by the API server (is its CRD installed?)")

    def informer(self, resource: str) -> Reflector:
        """The store of any resource: 'pods', 'podgroups.scheduling.x-k8s.io', 'group/version/plural'.
        Started at once if the cluster is running, else with start()."""
        group, plural, version = parse_resource(resource)
        with self._lock:
            r = self._reflectors.get((group, plural))
            if r is None:
                fs = self._pod_field_selector if (group, plural) == ("", "pods") else None
                r = Reflector(self, plural, group, plural, version, field_selector=fs, page_size=self.page_size)
                if (group, plural) == ("", "pods"):
                    r.transform = stripper(self._uncached_pod_annotations)
                self._reflectors[(group, plural)] = r
                if self._started:
                    r.snapshot_for_start()
                    if self._handler is not None:
                        r.go_live(self._handler)
                    r.start()
            return r

    def uncache_pod_annotations(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._uncached_pod_annotations |= frozenset(keys)
            r = self._reflectors.get(("", "pods"))
            if r is not None:  # objects stored before this keep theirs
                r.transform = stripper(self._uncached_pod_annotations)

    def reflectors(self) -> list[Reflector]:
        with self._lock:
            return list(self._reflectors.values())

    # ----------------------------------------------------------------- start / health
    def preflight(self) -> None:
        """Fail fast with one line: unreachable server, bad credentials, or missing RBAC permissions."""
        resp = self.client.request("GET", "/version", limit=False, conn_retries=2)
        if resp.status in (401,):
            raise self.client.error(resp, "GET", "/version")
        if not self.check_permissions:
            return
        missing = []
        with self._lock:
            dra = any(g == "resource.k8s.io" for g, _plural in self._reflectors)
        for verb, group, resource, sub in REQUIRED_PERMISSIONS + (DRA_PERMISSIONS if dra else ()):
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                                    "subresource": sub}}}
            r = self.client.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body,
                                    limit=False)
            if not r.ok:
                if r.status in (401,):
                    raise self.client.error(r, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
                log.debug("cannot check permissions (%s); skipping the RBAC preflight", r.status)
                return
            if not (r.json().get("status") or {}).get("allowed"):
                missing.append(f"{verb} {resource}{'/' + sub if sub else ''}"
                               f"{' (' + group + ')' if group else ''}")
        if missing:
            user = self.whoami()
            raise ApiForbiddenError(
                f"RBAC denies {user or 'this identity'}: {', '.join(missing)} "
                f"(bind the system:kube-scheduler ClusterRole or grant these verbs)", status=403,
                verb=missing[0].split()[0], resource=missing[0].split()[1])

    def whoami(self) -> str:
        try:
            r = self.client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", limit=False,
                                    body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            if r.ok:
                name = ((r.json().get("status") or {}).get("userInfo") or {}).get("username")
                return f'user "{name}"' if name else ""
        except ApiError:
            pass
        return ""

    def start(self, handler: EventHandler, timeout: float | None = 120.0) -> None:
        """Start the reflectors, wait for their lists, deliver everything as ADDED (namespaces and nodes
        first, pods last), then deliver changes as they happen."""
        self.preflight()
        with self._lock:
            refl = list(self._reflectors.values())
        for r in refl:
            r.start()
        core = [r for r in refl if r.ref is not None and r.plural in BUILTIN]
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in core:
            while not r.wait_for_sync(1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))):
                if r._stop.is_set():
                    raise ApiError(f"stopped before {r.name} synced")
                if deadline is not None and time.monotonic() >= deadline:
                    raise ApiError(f"caches did not sync within {timeout:g}s: {r.name}: "
                                   f"{r.last_error or 'waiting for the initial list'}",
                                   status=getattr(r.last_exception, "status", 0))
        for r in refl:
            if r not in core:
                left = None if deadline is None else max(0.0, min(10.0, deadline - time.monotonic()))
                if not r.wait_for_sync(left):
                    log.warning("%s not synced yet (%s); its objects arrive when it syncs", r.name,
                                r.last_error or "listing")
        with self._lock:
            self._handler = handler
            self._started = True
            refl = list(self._reflectors.values())
        order = sorted(refl, key=lambda r: (0 if r.name in _FIRST else 2 if r.name == "pods" else 1,
                                            _FIRST.index(r.name) if r.name in _FIRST else 0))
        # nodes before namespaces would also do; memory.py delivers namespaces first, so we do too
        snaps = [(r, r.snapshot_for_start()) for r in order]
        for r, objs in snaps:
            if r.name == "pods":
                objs = initial_pod_order(objs)
            for raw in objs:
                handler(r.name, "ADDED", None, raw)
        for r, _ in snaps:
            r.go_live(handler)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in self.reflectors():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not r.wait_for_sync(left):
                return False
        return True

    def health(self) -> tuple[bool, str]:
        """(ok, reason) for /readyz: every reflector synced and not failing for more than a few seconds."""
        with self._lock:
            refl = list(self._reflectors.values())
        for r in refl:
            ok, why = r.health()
            if not ok:
                return False, f"{r.name}: {why}"
        return True, "ok"

    def readyz_check(self) -> str | None:
        ok, why = self.health()
        return None if ok else why

    def stop(self) -> None:
        for r in self.reflectors():
            r._stop.set()
            r._abort_stream()
        for r in self.reflectors():
            r.stop()
        if self._event_writer is not None:
            self._event_writer.stop()
        if self._pod_writer is not None:
            self._pod_writer.stop()
        self.client.close()
        self.event_client.close()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until queued events, status patches and annotations are written."""
        end = time.monotonic() + timeout
        ok = True
        if self._event_writer is not None:
            ok = self._event_writer.flush(timeout) and ok
        if self._pod_writer is not None:
            ok = self._pod_writer.flush(max(0.0, end - time.monotonic())) and ok
        return ok

    # ----------------------------------------------------------------- reads
    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        group, plural, _ = parse_resource(resource)
        with self._lock:
            r = self._reflectors.get((group, plural))
        if r is None:
            r = self.informer(resource)
            if self._started:
                r.wait_for_sync(10.0)
        return r.list(namespace)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        r = self._reflectors.get(("", "pods"))
        return r.get(name, namespace) if r is not None else None

    # ----------------------------------------------------------------- bind
    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        w = self._pod_writer
        if w is not None:  # no earlier failure status of the pod may land after its binding
            w.settle(pod)
        binder.bind(self, pod, node_name, annotations)

    def gated_write(self, method: str, path: str, **kw: Any) -> Response | None:
        """A write of a scheduling cycle. The leader gate is checked after the rate limiter's wait, right
        before the request goes out, so a replica that lost its lease meanwhile sends nothing (None)."""
        self.client.limiter.acquire()
        if not self.may_write():
            self.stats["writes_dropped_not_leader"] += 1
            return None
        return self.client.request(method, path, limit=False, **kw)

    def get_object(self, resource: str, name: str, namespace: str | None) -> dict[str, Any]:
        """GET from the API server (rate-limited like the writes, never behind the leader gate: a read)."""
        group, plural, version = parse_resource(resource)
        try:
            ref = self.discover(group, plural, version)
        except ResourceNotServed as exc:
            raise PatchError(str(exc), status=404) from None
        resp = self.client.request("GET", ref.path(namespace if ref.namespaced else None, name))
        if resp.ok:
            return strip_managed_fields(resp.json())
        raise PatchError(resp.message(), status=resp.status)

    # ----------------------------------------------------------------- generic writes
    def patch_object(self, resource: str, name: str, namespace: str | None,
                     patch: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        """PATCH (application/merge-patch+json) any object or its `subresource` (status); resourceVersion in the
        patch is a precondition."""
        group, plural, version = parse_resource(resource)
        try:
            ref = self.discover(group, plural, version)
        except ResourceNotServed as exc:
            raise PatchError(str(exc), status=404) from None
        path = ref.path(namespace if ref.namespaced else None, name, subresource)
        resp = self.gated_write("PATCH", path, body=patch, content_type="application/merge-patch+json")
        if resp is None:
            raise PatchError(f"not patching {resource} {name}: {NOT_LEADER}", status=0)
        if resp.ok:
            return strip_managed_fields(resp.json())
        raise PatchError(str(self.client.error(resp, "PATCH", path)), status=resp.status)

    def create_object(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """POST an object; the error is the API server's message, as client-go's StatusError prints it."""
        group, plural, version = parse_resource(resource)
        try:
            ref = self.discover(group, plural, version)
        except ResourceNotServed as exc:
            raise PatchError(str(exc), status=404) from None
        path = ref.path(namespace if ref.namespaced else None)
        resp = self.gated_write("POST", path, body=obj)
        if resp is None:
            raise PatchError(f"not creating {resource}: {NOT_LEADER}", status=0)
        if resp.ok:
            return strip_managed_fields(resp.json())
        raise PatchError(resp.message(), status=resp.status)

    def delete_object(self, resource: str, name: str, namespace: str | None) -> None:
        group, plural, version = parse_resource(resource)
        try:
            ref = self.discover(group, plural, version)
        except ResourceNotServed as exc:
            raise PatchError(str(exc), status=404) from None
        path = ref.path(namespace if ref.namespaced else None, name)
        resp = self.gated_write("DELETE", path)
        if resp is None:
            raise PatchError(f"not deleting {resource} {name}: {NOT_LEADER}", status=0)
        if not resp.ok:
            raise PatchError(resp.message(), status=resp.status)

    # ----------------------------------------------------------------- events
    def _events(self) -> EventWriter:
        w = self._event_writer
        if w is None:
            with self._lock:
                if self._event_writer is None:
                    self._event_writer = EventWriter(self.event_client, maxlen=self._event_queue)
                w = self._event_writer
        return w

    def record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                     reporting_controller: str = "default-scheduler") -> None:
        with self._lock:
            now_ns = time.time_ns()
            if now_ns <= self._last_event_ns:
                now_ns = self._last_event_ns + 1
            self._last_event_ns = now_ns
        body = pod_event(pod, type_, reason, action, note, controller=reporting_controller or self.scheduler_name,
                         hostname=self.hostname, now_ns=now_ns)
        self._events().put(pod.namespace, body)

    @property
    def events_dropped(self) -> int:
        return self._event_writer.dropped if self._event_writer is not None else 0

    # ----------------------------------------------------------------- pod writes (async)
    def _writer(self) -> PodWriter:
        w = self._pod_writer
        if w is None:
            with self._lock:
                if self._pod_writer is None:
                    self._pod_writer = PodWriter(self)
                w = self._pod_writer
        return w

    def patch_pod_status(self, pod: Pod, condition: dict[str, Any] | None,
                         nominated_node_name: str | None = None) -> None:
        if condition is None and nominated_node_name is None:
            return
        self._writer().put("status", pod, (condition, nominated_node_name))

    def send_pod_writes(self, pod: Pod) -> None:
        w = self._pod_writer
        if w is not None:
            w.send_now(pod)

    def nominate_for_binding(self, pod: Pod, node_name: str) -> None:
        """Synchronous, unlike the coalesced status writes: it must reach the API server before the binding."""
        w = self._pod_writer
        if w is not None:  # an earlier failure's queued nominatedNodeName "" must not undo this one
            w.settle(pod)
        write_status(self, pod, None, node_name)

    def annotate_pod(self, pod: Pod, annotations: dict[str, str | None]) -> None:
        if annotations:
            self._writer().put("annotate", pod, annotations)

    # ----------------------------------------------------------------- delete
    concurrent_deletes = True

    def delete_pod(self, pod: Pod, reason: str = "", by: str = "") -> None:
        binder.delete_pod(self, pod, reason, by)

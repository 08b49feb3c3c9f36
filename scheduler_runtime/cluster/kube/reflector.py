"""Reflectors: list + watch of one resource into a store of raw dicts, also the `informer(resource)` handle.

Follows client-go v0.36.3 tools/cache/reflector.go: a paginated list (one unpaginated list after the continue
token expires twice), then a watch with bookmarks from the list's resourceVersion and a random timeout in
[min, 2*min); on 410 Gone / "Expired" / ResourceVersionTooLarge it lists again and emits the difference
against its store as ADDED / MODIFIED / DELETED, so no change is lost and none is delivered twice; connection
errors are retried with exponential backoff from the last resourceVersion seen. `metadata.managedFields` is
stripped from every stored object, as kube-scheduler's informers do (pkg/scheduler/scheduler.go v1.36.3).
The backend a reflector serves is seen only through `ReflectorHost`.
"""

from __future__ import annotations

import builtins
import collections
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from ...backoff import Backoff, BackoffPolicy
from ...errors import KschedError
from ..base import EventHandler
from .resources import BUILTIN, ResourceNotServed, ResourceRef
from .rest import ApiError, KubeClient, Response, too_large_resource_version

log = logging.getLogger("ksched.kube")

#: one store change as handlers get it: (action, old object, new object)
Change = tuple[str, dict[str, Any] | None, dict[str, Any] | None]


class ReflectorHost(Protocol):
    """What a reflector reads from its backend (read at use, so a changed setting applies at once)."""

    client: KubeClient
    min_watch_timeout: float
    watch_read_timeout: float
    list_timeout: float
    backoff_initial: float
    backoff_cap: float
    unhealthy_after: float

    @property
    def live_handler(self) -> EventHandler | None:
        """The scheduler's handler once start() delivered the initial objects, else None."""
        ...

    def discover(self, group: str, plural: str, version: str | None = None) -> ResourceRef: ...


class _Relist(Exception):
    """The watch's resourceVersion is gone (410) or unusable: list again and diff."""


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


def stripper(annotations: frozenset[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """strip_managed_fields that also drops these annotations (a pod's empty annotations go with them): what
    the scheduler writes on pods and never reads back from its cache is not worth holding for every pod."""
    if not annotations:
        return strip_managed_fields

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = strip_managed_fields(obj).get("metadata")
        if meta is not None:
            ann = meta.get("annotations")
            if ann:
                for key in annotations:
                    ann.pop(key, None)
                if not ann:
                    del meta["annotations"]
        return obj
    return strip


class Reflector:
    """List + watch of one resource into a store of raw dicts; also the `informer(resource)` handle:
    `list(namespace)`, `get(name, namespace)`, `add_handler(fn(action, old, new))`, `synced`,
    `wait_for_sync(timeout)`."""

    def __init__(self, cluster: ReflectorHost, name: str, group: str, plural: str, version: str | None = None,
                 *, field_selector: str | None = None, label_selector: str | None = None,
                 page_size: int = 500) -> None:
        self.cluster = cluster
        self.name = name
        self.group, self.plural, self.version = group, plural, version
        b = BUILTIN.get(plural)
        self.ref: ResourceRef | None = b if (b is not None and b.group == group and version in (None, b.version)) \
            else None
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self._lock = threading.RLock()
        self._deliver_lock = threading.Lock()
        self._store: dict[str, dict[str, Any]] = {}
        self._rv = ""
        self._synced = threading.Event()
        self._handlers: list[Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]] = []
        self._mode = "quiet"  # quiet (before start) -> buffer (start is replaying) -> live
        self._pending: list[Change] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None
        self._aborting = False
        self._force_rv: str | None = None
        self.last_error: str = ""
        self.last_exception: BaseException | None = None
        self.failing_since: float | None = None
        #: counters: lists (incl. relists), relists (after 410), watches (opened), events, errors
        self.stats: collections.Counter[str] = collections.Counter()
        self.min_watch_timeout = cluster.min_watch_timeout
        self.watch_read_timeout = cluster.watch_read_timeout
        #: applied to every object listed or watched before it is stored (client-go's informer transform)
        self.transform: Callable[[dict[str, Any]], dict[str, Any]] = strip_managed_fields

    # ----------------------------------------------------------- the informer handle
    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def resource_version(self) -> str:
        return self._rv

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            objs = list(self._store.values())
        if namespace is not None and (self.ref is None or self.ref.namespaced):
            objs = [o for o in objs if (o.get("metadata") or {}).get("namespace") == namespace]
        return objs

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        key = f"{namespace}/{name}" if namespace and (self.ref is None or self.ref.namespaced) else name
        with self._lock:
            return self._store.get(key)

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def add_handler(self, fn: Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]) -> None:
        """fn(action, old, new) on the reflector thread for every change from now on."""
        self._handlers.append(fn)

    def health(self) -> tuple[bool, str]:
        if not self.synced:
            return False, self.last_error or "waiting for the initial list"
        fs = self.failing_since
        if fs is not None and time.monotonic() - fs > self.cluster.unhealthy_after:
            return False, self.last_error
        return True, "ok"

    # ----------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"reflector-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._paused.clear()
        self._abort_stream()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)

    def pause(self) -> None:
        """Close the watch and hold before the next one (tests; also for controlled maintenance)."""
        self._paused.set()
        self._abort_stream()

    def resume(self, resource_version: str | None = None) -> None:
        """Continue watching, from `resource_version` if given (e.g. "1" forces a 410 and a re-list)."""
        if resource_version is not None:
            self._force_rv = resource_version
        self._paused.clear()

    def _abort_stream(self) -> None:
        r = self._resp
        if r is not None:
            self._aborting = True
            try:
                if hasattr(r, "shutdown"):
                    r.shutdown()
                else:
                    r.release_conn()
            except Exception:  # noqa: BLE001 - best effort from another thread
                pass

    # ----------------------------------------------------------- start() support
    def snapshot_for_start(self) -> builtins.list[dict[str, Any]]:
        with self._lock:
            self._mode = "buffer"
            self._pending = []
            return list(self._store.values())

    def go_live(self, handler: EventHandler) -> None:
        with self._deliver_lock:
            with self._lock:
                pending, self._pending = self._pending, []
                self._mode = "live"
            for action, old, new in pending:
                handler(self.name, action, old, new)

    # ----------------------------------------------------------- the loop
    def _key(self, obj: dict[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))

    def _error(self, exc: BaseException) -> None:
        self.stats["errors"] += 1
        text = str(exc) if isinstance(exc, KschedError) else f"{type(exc).__name__}: {exc}"
        text = " ".join(text.split())
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        if text != self.last_error:
            log.warning("%s: %s (retrying)", self.name, text)
        self.last_error = text
        self.last_exception = exc

    def _ok(self) -> None:
        self.failing_since = None
        self.last_error = ""
        self.last_exception = None

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _run(self) -> None:
        backoff = Backoff(BackoffPolicy(self.cluster.backoff_initial, cap=self.cluster.backoff_cap, jitter=(0.9, 1.1)))
        need_list = True
        while not self._stop.is_set():
            try:
                if self.ref is None:
                    self.ref = self.cluster.discover(self.group, self.plural, self.version)
                if need_list:
                    self._list_and_sync()
                    need_list = False
                    backoff.reset()
                while self._paused.is_set() and not self._stop.is_set():
                    self._stop.wait(0.05)
                if self._stop.is_set():
                    break
                if self._force_rv is not None:
                    self._rv, self._force_rv = self._force_rv, None
                started = time.monotonic()
                got = self._watch()
                if got or time.monotonic() - started > 2.0:
                    backoff.reset()
            except _Relist as exc:
                self.stats["relists"] += 1
                log.info("%s: %s; listing again", self.name, exc)
                need_list = True
                if self.stats["relists"] > 1 and not self._synced.is_set():
                    self._sleep(backoff.next())
            except Exception as exc:
                if self._stop.is_set():
                    break
                if self._aborting:
                    self._aborting = False
                    continue
                if isinstance(exc, ResourceNotServed):
                    exc = ApiError(str(exc), status=404)
                self._error(exc)
                if isinstance(exc, ApiError) and exc.status == 410:
                    need_list = True
                self._sleep(backoff.next())
            finally:
                self._resp = None

    def _selectors(self) -> dict[str, Any]:
        q: dict[str, Any] = {}
        if self.field_selector:
            q["fieldSelector"] = self.field_selector
        if self.label_selector:
            q["labelSelector"] = self.label_selector
        return q

    def _list_all(self) -> tuple[builtins.list[dict[str, Any]], str]:
        assert self.ref is not None
        client = self.cluster.client
        path = self.ref.path()
        base = self._selectors()
        limit: int | None = self.page_size if self.page_size > 0 else None
        restarts = 0
        while True:
            items: list[dict[str, Any]] = []
            cont = ""
            rv = ""
            restart = False
            while True:
                q = dict(base)
                if limit:
                    q["limit"] = limit
                if cont:
                    q["continue"] = cont
                resp = client.request("GET", path, query=q, timeout=self.cluster.list_timeout)
                if resp.status == 410 and cont:  # the continue token expired mid-list: start over
                    restarts += 1
                    if restarts >= 2:
                        limit = None  # then one unpaginated list, as client-go falls back to
                    restart = True
                    break
                if not resp.ok:
                    raise client.error(resp, "GET", path, q)
                body = resp.json()
                kind = str(body.get("kind") or "")
                kind = kind[:-4] if kind.endswith("List") else kind
                api_version = body.get("apiVersion") or self.ref.group_version
                for it in body.get("items") or ():
                    it.setdefault("kind", kind or self.ref.kind)
                    it.setdefault("apiVersion", api_version)
                    items.append(self.transform(it))
                meta = body.get("metadata") or {}
                rv = str(meta.get("resourceVersion") or "")
                cont = meta.get("continue") or ""
                self.stats["pages"] += 1
                if not cont:
                    break
            if not restart:
                return items, rv

    def _list_and_sync(self) -> None:
        items, rv = self._list_all()
        self.stats["lists"] += 1
        new = {self._key(o): o for o in items}
        changes: builtins.list[Change] = []
        with self._lock:
            old = self._store
            want = self._mode != "quiet" or bool(self._handlers)
            if want:
                for k, o in old.items():
                    if k not in new:
                        changes.append(("DELETED", o, None))
                for k, o in new.items():
                    prev = old.get(k)
                    if prev is None:
                        changes.append(("ADDED", None, o))
                    elif (prev.get("metadata") or {}).get("resourceVersion") != \
                            (o.get("metadata") or {}).get("resourceVersion"):
                        changes.append(("MODIFIED", prev, o))
            self._store = new
            self._rv = rv
            mode = self._mode
            if mode == "buffer":
                self._pending.extend(changes)
        self._synced.set()
        self._ok()
        if changes:
            self._deliver(changes, mode)

    def _deliver(self, changes: builtins.list[Change], mode: str) -> None:
        handler = self.cluster.live_handler
        if mode == "live" and handler is not None:
            with self._deliver_lock:
                for action, old, new in changes:
                    handler(self.name, action, old, new)
        for fn in list(self._handlers):
            for action, old, new in changes:
                try:
                    fn(action, old, new)
                except Exception as exc:  # a plugin's handler must not kill the reflector
                    log.error("%s handler failed on %s: %s", self.name, action, exc)

    def _watch(self) -> bool:
        """One watch request; returns whether any event arrived. Raises _Relist on 410."""
        assert self.ref is not None
        lo = max(1, int(self.min_watch_timeout))
        timeout_s = random.randint(lo, 2 * lo)
        q = self._selectors()
        q.update({"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": self._rv,
                  "timeoutSeconds": timeout_s})
        path = self.ref.path()
        client = self.cluster.client
        read_timeout = min(timeout_s + 30.0, self.watch_read_timeout)
        self._aborting = False
        resp = client.open_stream(path, q, read_timeout=read_timeout)
        self._resp = resp
        got = False
        clean = False
        try:
            if resp.status != 200:
                r = Response(resp.status, resp.headers, resp.read())
                if resp.status == 410:
                    raise _Relist(f"watch from resourceVersion {self._rv}: {r.message()}")
                raise client.error(r, "GET", path, q)
            self.stats["watches"] += 1
            self._ok()
            buf = b""
            held = False  # pause() while a chunk was in hand: drop the rest, the next watch resumes at _rv
            for chunk in resp.stream(65536):
                if self._stop.is_set() or self._paused.is_set():
                    held = True
                    break
                parts = (buf + chunk).split(b"\n") if buf else chunk.split(b"\n")
                buf = parts.pop()
                for line in parts:
                    if self._paused.is_set():
                        held = True
                        break
                    if line.strip():
                        self._event(line)
                        got = True
                if held:
                    break
            if buf.strip() and not held and not self._stop.is_set():
                self._event(buf)
            clean = not held and not self._aborting and not self._stop.is_set()
        finally:
            try:
                if not clean:
                    resp.close()  # the connection is in an unknown state: do not reuse it
                resp.release_conn()
            except Exception:  # noqa: BLE001
                pass
        return got

    def _event(self, line: bytes) -> None:
        ev = orjson.loads(line)
        typ = ev.get("type")
        obj = ev.get("object") or {}
        if typ == "BOOKMARK":
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self._rv = str(rv)
            self.stats["bookmarks"] += 1
            return
        if typ == "ERROR":
            code = obj.get("code")
            reason = obj.get("reason") or ""
            msg = " ".join(str(obj.get("message") or "").split())
            if code == 410 or reason in ("Expired", "Gone"):
                raise _Relist(f"watch from resourceVersion {self._rv}: {msg or reason}")
            if too_large_resource_version(obj):
                raise _Relist(msg)
            raise ApiError(f"watch {self.name}: {code} {reason}: {msg}", status=int(code or 0), reason=reason)
        self.stats["events"] += 1
        self.transform(obj)
        key = self._key(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        change: Change | None = None
        with self._lock:
            if typ in ("ADDED", "MODIFIED"):
                prev = self._store.get(key)
                if prev is not None and (prev.get("metadata") or {}).get("resourceVersion") == rv:
                    self._rv = rv or self._rv
                    self.stats["duplicates"] += 1
                    return
                self._store[key] = obj
                change = ("MODIFIED", prev, obj) if prev is not None else ("ADDED", None, obj)
            elif typ == "DELETED":
                prev = self._store.pop(key, None)
                if prev is not None:
                    change = ("DELETED", obj, None)
            if rv:
                self._rv = rv
            mode = self._mode
            if change is not None and mode == "buffer":
                self._pending.append(change)
        if change is not None:
            self._deliver([change], mode)

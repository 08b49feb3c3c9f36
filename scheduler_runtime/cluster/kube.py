"""The real API server backend: reflectors (list + watch) into raw-dict stores, binding, events, status.

The official `kubernetes` client is used only to read a kubeconfig (or the in-cluster service account)
into a host, TLS material and credentials. Every request after that goes over one shared urllib3
PoolManager with orjson decoding, client-side timeouts and a client-side token bucket, because the
generated client is too slow for list/watch at scale and mis-handles `pods/binding` (see
shared/reference/python-k8s-client.md).

Semantics follow client-go and kube-scheduler:
  * one reflector thread per resource: paginated list, then watch with bookmarks from the list's
    resourceVersion; on 410 Gone / "Expired" it re-lists and emits the difference against its store as
    ADDED / MODIFIED / DELETED, so no change is lost and none is delivered twice; connection errors are
    retried with exponential backoff (0.8 s doubling to 30 s) from the last resourceVersion seen;
  * pods are watched with the field selector kube-scheduler uses (not Succeeded, not Failed), and
    `metadata.managedFields` is stripped from every stored object, as kube-scheduler's informers do;
  * `start(handler)` waits for the initial lists, delivers namespaces and nodes, then the other
    resources, then pods as ADDED, then live changes in order;
  * binding is `POST pods/{name}/binding` with the pod UID as precondition; events are
    events.k8s.io/v1; PodScheduled goes through a strategic-merge patch of `pods/status`;
  * events, status patches and annotations are written by background workers (bounded, never blocking
    the scheduling loop); binds and deletes are synchronous (the caller is already a worker);
  * results annotations go through `pods/status` too (or ride on the Binding), so the scheduler needs no
    write on `pods`, exactly as system:kube-scheduler grants; a 409 on a binding is a success only when a
    read of the pod shows this pod (UID) on the chosen node;
  * with `leader_gate` set, every write of a scheduling cycle is checked against it right before it is
    sent (after the rate limiter's wait): a replica that lost its lease sends nothing more.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import urllib3

from ..backoff import Backoff, BackoffPolicy
from ..errors import KschedError
from ..objects import Pod
from ..ratelimit import TokenBucket
from .base import NOT_LEADER, BindError, ClusterBackend, EventHandler, LeadershipLost, PatchError

log = logging.getLogger("ksched.kube")

USER_AGENT = "ksched/0.1.0 (kube-scheduler compatible)"
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
NOTE_LENGTH_LIMIT = 1024

# --------------------------------------------------------------------------------------------- errors


class KubeConfigError(KschedError):
    """No usable kubeconfig / in-cluster configuration."""


class ApiError(KschedError):
    """A request the API server refused (or could not be made); `str()` is one line."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "", verb: str = "", resource: str = "",
                 group: str = "", namespace: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.verb = verb
        self.resource = resource
        self.group = group
        self.namespace = namespace
        self.retry_after = retry_after


class ApiUnreachableError(ApiError):
    """Connection refused, DNS, TLS or timeout: the server could not be asked."""


class ApiUnauthorizedError(ApiError):
    """401: the credentials are invalid or expired."""


class ApiForbiddenError(ApiError):
    """403: RBAC (or another authorizer) denied the verb on the resource."""


class _Relist(Exception):
    """The watch's resourceVersion is gone (410) or unusable: list again and diff."""


class _NotServed(Exception):
    """Discovery does not know the resource (CRD not installed yet)."""


# ---------------------------------------------------------------------------------------------- times


def micro_time(ts: float | None = None, *, ns: int | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fractional digits (the server rejects other forms)."""
    if ns is None:
        ns = time.time_ns() if ts is None else int(round(ts * 1_000_000)) * 1000
    secs, rem = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem // 1000:06d}Z"


def rfc3339(ts: float | None = None) -> str:
    """metav1.Time: RFC 3339 with whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


# ------------------------------------------------------------------------------------------ resources


@dataclass(frozen=True, slots=True)
class ResourceRef:
    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""

    @property
    def group_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{_q(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{_q(name)}"
        if sub:
            base += f"/{sub}"
        return base


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


_B = ResourceRef
BUILTIN: dict[str, ResourceRef] = {r.plural: r for r in (
    _B("", "v1", "pods", True, "Pod"), _B("", "v1", "nodes", False, "Node"),
    _B("", "v1", "namespaces", False, "Namespace"), _B("", "v1", "services", True, "Service"),
    _B("", "v1", "replicationcontrollers", True, "ReplicationController"),
    _B("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim"),
    _B("", "v1", "persistentvolumes", False, "PersistentVolume"), _B("", "v1", "configmaps", True, "ConfigMap"),
    _B("", "v1", "endpoints", True, "Endpoints"),
    _B("apps", "v1", "replicasets", True, "ReplicaSet"), _B("apps", "v1", "statefulsets", True, "StatefulSet"),
    _B("apps", "v1", "deployments", True, "Deployment"), _B("apps", "v1", "daemonsets", True, "DaemonSet"),
    _B("policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget"),
    _B("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass"),
    _B("storage.k8s.io", "v1", "storageclasses", False, "StorageClass"),
    _B("storage.k8s.io", "v1", "csinodes", False, "CSINode"),
    _B("storage.k8s.io", "v1", "csidrivers", False, "CSIDriver"),
    _B("storage.k8s.io", "v1", "csistoragecapacities", True, "CSIStorageCapacity"),
    _B("storage.k8s.io", "v1", "volumeattachments", False, "VolumeAttachment"),
    _B("resource.k8s.io", "v1", "deviceclasses", False, "DeviceClass"),
    _B("resource.k8s.io", "v1", "resourceslices", False, "ResourceSlice"),
    _B("resource.k8s.io", "v1", "resourceclaims", True, "ResourceClaim"),
    _B("resource.k8s.io", "v1", "resourceclaimtemplates", True, "ResourceClaimTemplate"),
    _B("coordination.k8s.io", "v1", "leases", True, "Lease"),
    _B("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"),
)}

#: what kube-scheduler watches; start() waits for all of these
CORE_RESOURCES = ("namespaces", "nodes", "pods", "poddisruptionbudgets", "services", "replicasets",
                  "statefulsets")
#: start() delivery order: these first, pods last, everything else in between
_FIRST = ("namespaces", "nodes")


def parse_resource(resource: str) -> tuple[str, str, str | None]:
    """'pods' | 'podgroups.scheduling.x-k8s.io' | 'scheduling.x-k8s.io/v1alpha1/podgroups' | 'v1/pods'
    -> (group, plural, version or None)."""
    resource = resource.strip().strip("/")
    if "/" in resource:
        parts = resource.split("/")
        if len(parts) == 2:  # "v1/pods" (core) ; "apps/deployments" is ambiguous, treat as group/plural
            if parts[0].startswith("v") and parts[0][1:2].isdigit():
                return "", parts[1], parts[0]
            return parts[0], parts[1], None
        if len(parts) == 3:
            return parts[0], parts[2], parts[1]
        raise ValueError(f"resource {resource!r}: expected plural, plural.group or group/version/plural")
    if "." in resource:
        plural, group = resource.split(".", 1)
        return group, plural, None
    b = BUILTIN.get(resource)
    return (b.group if b else ""), resource, None


# ----------------------------------------------------------------------------------------- connection


@dataclass
class Connection:
    """Where the server is and how to authenticate, as read from a kubeconfig or the pod's account."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    source: str = ""
    #: returns the Authorization header value (or None); `force=True` re-reads expiring credentials
    auth: Callable[[bool], str | None] | None = None


def _kubeconfig_candidates(explicit: str | os.PathLike[str] | None) -> str | None:
    if explicit:
        return str(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    return None


_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account (client-go's InClusterConfig inputs)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(_SERVICE_ACCOUNT_TOKEN).is_file()


def find_kubeconfig(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """Where `load_connection` would read from: the kubeconfig path(s), "in-cluster", or None if nowhere."""
    path = _kubeconfig_candidates(explicit)
    if path is not None:
        return path
    if in_cluster():
        return "in-cluster"
    home = Path("~/.kube/config").expanduser()
    return str(home) if home.is_file() else None


def _kc_error(message: str, *, usage: bool) -> KubeConfigError:
    return KubeConfigError(message, usage=usage)


def _read_kubeconfig_file(p: str) -> dict[str, Any]:
    """One kubeconfig file as a mapping; unreadable, empty or malformed files are usage/I-O errors (exit 2)."""
    from .. import yamlio
    from ..errors import InputError
    from . import apishape

    try:
        doc = yamlio.load_file_one(Path(p).expanduser(), what="a kubeconfig mapping (apiVersion: v1, kind: Config)")
    except InputError as exc:
        raise _kc_error(f"{p}: {exc.detail} (kubeconfig)", usage=True) from None
    try:  # client-go decodes into typed structs: a list where a string belongs is refused there too
        apishape.check(doc, apishape.KUBECONFIG)
    except InputError as exc:
        raise _kc_error(f"{p}: {exc.field}: {exc.detail}", usage=False) from None
    return doc


def _named_entries(doc: dict[str, Any], key: str, inner: str, where: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """`clusters`, `contexts` or `users` by name: name -> (index, the inner mapping)."""
    items = doc.get(key)
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _kc_error(f"{where}: {key}: must be a list, got a {type(items).__name__}", usage=False)
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _kc_error(f"{where}: {key}[{i}]: must be a mapping", usage=False)
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise _kc_error(f"{where}: {key}[{i}].name: Required value", usage=False)
        body = item.get(inner)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise _kc_error(f"{where}: {key}[{i}].{inner}: must be a mapping", usage=False)
        out.setdefault(name, (i, body))  # the first one wins, as when kubeconfig files are merged
    return out


def check_kubeconfig(path: str, context: str | None = None) -> None:
    """Check kubeconfig file(s) (`path` may list several, separated as in $KUBECONFIG) before the client reads
    them, so every problem is one line naming the file and the field: read/parse problems are usage errors
    (exit 2), a parsed file missing what a connection needs is invalid (exit 1)."""
    files = [p for p in path.split(os.pathsep) if p]
    docs = [(p, _read_kubeconfig_file(p)) for p in files]
    if not docs:
        raise _kc_error("no kubeconfig found: KUBECONFIG is empty", usage=True)
    where = docs[0][0] if len(docs) == 1 else path
    merged: dict[str, dict[str, tuple[int, dict[str, Any], str]]] = {"clusters": {}, "contexts": {}, "users": {}}
    current = None
    for p, doc in docs:
        for key, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            for name, (i, body) in _named_entries(doc, key, inner, p).items():
                merged[key].setdefault(name, (i, body, p))
        cc = doc.get("current-context")
        if current is None and cc:
            current = (str(cc), p)
    if context is not None:
        name, src, field_ = context, where, "context"
    elif current is None:
        if not merged["clusters"]:
            raise _kc_error(f"{where}: clusters: Required value: the kubeconfig defines no cluster", usage=False)
        raise _kc_error(f"{where}: current-context: Required value: no context is selected "
                        f"(kubectl config use-context NAME)", usage=False)
    else:
        (name, src), field_ = current, "current-context"
    if name not in merged["contexts"]:
        raise _kc_error(f'{src}: {field_}: Invalid value: "{name}": no such entry in contexts', usage=False)
    i, ctx, src = merged["contexts"][name]
    cluster = ctx.get("cluster")
    if not cluster:
        raise _kc_error(f"{src}: contexts[{i}].context.cluster: Required value", usage=False)
    if not merged["clusters"]:
        raise _kc_error(f"{where}: clusters: Required value: the kubeconfig defines no cluster", usage=False)
    if cluster not in merged["clusters"]:
        raise _kc_error(f'{src}: contexts[{i}].context.cluster: Invalid value: "{cluster}": no such entry in '
                        f'clusters', usage=False)
    user = ctx.get("user")
    if user and user not in merged["users"]:
        raise _kc_error(f'{src}: contexts[{i}].context.user: Invalid value: "{user}": no such entry in users',
                        usage=False)
    j, cl, csrc = merged["clusters"][cluster]
    if not cl.get("server"):
        raise _kc_error(f"{csrc}: clusters[{j}].cluster.server: Required value", usage=False)


def load_connection(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None, *,
                    fallbacks: bool = True, master: str | None = None) -> Connection:
    """Read connection details: an explicit kubeconfig, else $KUBECONFIG, else the in-cluster service
    account, else ~/.kube/config. Raises KubeConfigError with a one-line message.

    `fallbacks=False` is kube-scheduler's rule (client-go's BuildConfigFromFlags): the explicit kubeconfig,
    else the in-cluster account; never $KUBECONFIG or ~/.kube/config. `master` overrides the server, and
    with no kubeconfig is used alone (no credentials), as kube-scheduler's --master."""
    if master and not kubeconfig and not fallbacks:
        return Connection(host=master.rstrip("/"), source=f"--master {master}")
    import yaml
    from kubernetes import client as kclient
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    cfg = kclient.Configuration()
    path = _kubeconfig_candidates(kubeconfig) if fallbacks else (str(kubeconfig) if kubeconfig else None)
    source = ""
    try:
        if path is None and (in_cluster() or not fallbacks):
            kconfig.load_incluster_config(client_configuration=cfg)
            source = "in-cluster service account"
        else:
            if path is None:
                home = Path("~/.kube/config").expanduser()
                if not home.is_file():
                    raise _kc_error("no kubeconfig found: pass --kubeconfig, set KUBECONFIG or "
                                    "clientConnection.kubeconfig, or run in a pod with a service account", usage=True)
                path = str(home)
            check_kubeconfig(path, context)
            kconfig.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                     persist_config=False)
            source = f"kubeconfig {path}"
    except KubeConfigError:
        raise
    except ConfigException as exc:
        msg = " ".join(str(exc).split())
        raise KubeConfigError(f"{source or ('kubeconfig ' + str(path)) if path else 'in-cluster config'}: "
                              f"{msg}", usage=False) from None
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeConfigError(f"kubeconfig {path}: {msg}", usage=isinstance(exc, OSError)) from None

    lock = threading.Lock()
    cache: dict[str, Any] = {"at": -1e9, "value": None}

    def auth(force: bool = False) -> str | None:
        with lock:
            now = time.monotonic()
            if force or now - cache["at"] > 10.0:
                value = None
                if cfg.api_key or cfg.refresh_api_key_hook is not None:
                    value = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
                if not value and (cfg.username or cfg.password):
                    value = cfg.get_basic_auth_token()
                cache["value"], cache["at"] = value, now
            return cache["value"]

    host = (master or cfg.host).rstrip("/")
    return Connection(host=host, ca_file=cfg.ssl_ca_cert, cert_file=cfg.cert_file, key_file=cfg.key_file,
                      verify=bool(cfg.verify_ssl), tls_server_name=getattr(cfg, "tls_server_name", None),
                      proxy=getattr(cfg, "proxy", None), source=source, auth=auth)


class Response:
    __slots__ = ("status", "headers", "data")

    def __init__(self, status: int, headers: Any, data: bytes) -> None:
        self.status = status
        self.headers = headers
        self.data = data

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return orjson.loads(self.data) if self.data else {}

    def message(self) -> str:
        try:
            body = orjson.loads(self.data)
            if isinstance(body, dict) and body.get("message"):
                return " ".join(str(body["message"]).split())
        except orjson.JSONDecodeError:
            pass
        text = self.data[:300].decode("utf-8", "replace")
        return " ".join(text.split()) or f"HTTP {self.status}"

    def retry_after(self) -> float | None:
        v = self.headers.get("Retry-After") if self.headers is not None else None
        try:
            return float(v) if v is not None else None
        except ValueError:
            return None


def describe_request(method: str, path: str, query: dict[str, Any] | None = None) -> tuple[str, str, str, str]:
    """(verb, resource[/subresource], group, namespace) as RBAC sees the request."""
    parts = [urllib.parse.unquote(p) for p in path.split("?", 1)[0].strip("/").split("/")]
    if parts and parts[0] == "api" and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts and parts[0] == "apis" and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return method.lower(), "/" + "/".join(parts), "", ""
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return method.lower(), "", group, namespace
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource += "/" + rest[2]
    q = query or {}
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
    if method == "GET":
        verb = "watch" if str(q.get("watch", "")).lower() in ("1", "true") else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    return verb, resource, group, namespace


def error_from_response(resp: Response, method: str, path: str, query: dict[str, Any] | None = None,
                        host: str = "", source: str = "") -> ApiError:
    verb, resource, group, namespace = describe_request(method, path, query)
    msg = resp.message()
    reason = ""
    try:
        body = orjson.loads(resp.data)
        if isinstance(body, dict):
            reason = str(body.get("reason") or "")
    except orjson.JSONDecodeError:
        pass
    kw = dict(status=resp.status, reason=reason, verb=verb, resource=resource, group=group, namespace=namespace,
              retry_after=resp.retry_after())
    if resp.status == 401:
        return ApiUnauthorizedError(
            f"the API server at {host} rejected the credentials from {source or 'the kubeconfig'} "
            f"(401 Unauthorized): the token or client certificate is invalid or expired", **kw)
    if resp.status == 403:
        scope = f'in namespace "{namespace}"' if namespace else "cluster-wide"
        return ApiForbiddenError(
            f'{msg} (RBAC: grant verb "{verb}" on resource "{resource}" in API group "{group}" {scope})', **kw)
    return ApiError(f"{verb or method} {resource or path}: {resp.status} {reason or 'error'}: {msg}", **kw)


def _keepalive_options() -> list[tuple[int, int, int]]:
    opts = list(urllib3.connection.HTTPConnection.default_socket_options)
    opts.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            opts.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return opts


def _error_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (urllib3's `reason`, `__cause__`, `__context__`), outermost first."""
    chain = [exc]
    for _ in range(6):
        cur = chain[-1]
        nxt = getattr(cur, "reason", None) or cur.__cause__ or cur.__context__
        if not isinstance(nxt, BaseException) or nxt in chain:
            break
        chain.append(nxt)
    return chain


def _conn_error_text(exc: BaseException) -> str:
    """A short reason for a failed connection, decided by exception type and errno, never by message text."""
    chain = _error_chain(exc)
    if any(isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED)
           for e in chain):
        return "connection refused"
    tls = next((e for e in chain if isinstance(e, ssl.SSLError | ssl.CertificateError | urllib3.exceptions.SSLError)),
               None)
    if tls is not None:
        return "TLS error: " + " ".join(str(chain[-1]).split())[:200]
    if any(isinstance(e, socket.gaierror | urllib3.exceptions.NameResolutionError) for e in chain):
        return "host name not found"
    # urllib3's NewConnectionError subclasses its ConnectTimeoutError for history's sake: not a timeout
    if any(isinstance(e, TimeoutError | urllib3.exceptions.TimeoutError)
           and not isinstance(e, urllib3.exceptions.NewConnectionError) for e in chain):
        return "timed out"
    return " ".join(str(chain[-1]).split())[:200] or type(exc).__name__


def too_large_resource_version(status: dict[str, Any]) -> bool:
    """apimachinery's IsTooLargeResourceVersion on a watch ERROR Status: a Timeout whose details carry the
    ResourceVersionTooLarge cause (the reflector then relists), read from the fields, not the message."""
    if status.get("reason") != "Timeout" and status.get("code") != 504:
        return False
    causes = (status.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason", c.get("type")) == "ResourceVersionTooLarge" for c in causes)


_CONN_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, OSError)


class KubeClient:
    """Raw-JSON REST calls over a shared urllib3 pool, with a token bucket and one-line errors."""

    def __init__(self, conn: Connection, *, qps: float = 50.0, burst: int = 100, pool_size: int = 32,
                 timeout: float = 30.0, connect_timeout: float = 5.0, user_agent: str = USER_AGENT) -> None:
        self.conn = conn
        self.host = conn.host
        self.limiter = TokenBucket(qps, burst)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.user_agent = user_agent
        self.pool_size = pool_size
        self._pool = self._make_pool(pool_size)
        self._pool_for_host: Any = None
        self._base_path = urllib.parse.urlsplit(self.host).path.rstrip("/")  # a server URL may carry a prefix
        self._timeouts: dict[float, urllib3.Timeout] = {}
        self._extra_headers: dict[str, str] = {}

    def _make_pool(self, size: int) -> urllib3.PoolManager:
        kw: dict[str, Any] = dict(num_pools=4, maxsize=size, block=False, retries=False,
                                  socket_options=_keepalive_options())
        if self.host.startswith("https"):
            if self.conn.verify:
                kw["cert_reqs"] = "CERT_REQUIRED"
                if self.conn.ca_file:
                    kw["ca_certs"] = self.conn.ca_file
            else:
                kw["cert_reqs"] = "CERT_NONE"
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            if self.conn.cert_file:
                kw["cert_file"] = self.conn.cert_file
                kw["key_file"] = self.conn.key_file
            if self.conn.tls_server_name:
                kw["server_hostname"] = self.conn.tls_server_name
        if self.conn.proxy:
            return urllib3.ProxyManager(self.conn.proxy, **kw)
        return urllib3.PoolManager(**kw)

    def clone(self, *, qps: float | None = None, burst: int | None = None, pool_size: int | None = None,
              timeout: float | None = None, headers: dict[str, str] | None = None) -> KubeClient:
        """Same server and credentials; its own pool and token bucket (like a second clientset)."""
        c = KubeClient(self.conn, qps=self.limiter.qps if qps is None else qps,
                       burst=self.limiter.burst if burst is None else burst,
                       pool_size=pool_size or self.pool_size, timeout=timeout or self.timeout,
                       connect_timeout=self.connect_timeout, user_agent=self.user_agent)
        c._extra_headers = dict(self._extra_headers)
        if headers:
            c._extra_headers.update(headers)
        return c

    def _headers(self, content_type: str | None, force_auth: bool = False) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            h["Content-Type"] = content_type
        if self.conn.auth is not None:
            v = self.conn.auth(force_auth)
            if v:
                h["Authorization"] = v
        h.update(self._extra_headers)
        return h

    def _host_pool(self) -> Any:
        pool = self._pool_for_host
        if pool is None or pool.pool is None:  # first use, or closed by close()
            pool = self._pool_for_host = self._pool.connection_from_url(self.host)
        return pool

    def _timeout(self, read: float) -> urllib3.Timeout:
        to = self._timeouts.get(read)
        if to is None:
            to = self._timeouts[read] = urllib3.Timeout(connect=self.connect_timeout, read=read)
        return to

    def _target(self, path: str, query: dict[str, Any] | None = None) -> str:
        """Path (after the server URL's own path prefix) and query string of a request."""
        t = self._base_path + path
        if query:
            t += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None and v != ""})
        return t

    def url(self, path: str, query: dict[str, Any] | None = None) -> str:
        parts = urllib.parse.urlsplit(self.host)
        return f"{parts.scheme}://{parts.netloc}{self._target(path, query)}"

    def _unreachable(self, exc: BaseException, method: str, path: str) -> ApiUnreachableError:
        verb, resource, group, ns = describe_request(method, path)
        return ApiUnreachableError(f"cannot reach the API server at {self.host}: {_conn_error_text(exc)}",
                                   verb=verb, resource=resource, group=group, namespace=ns)

    def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str | None = None, timeout: float | None = None, limit: bool = True,
                conn_retries: int = 1) -> Response:
        """One call; returns any HTTP status (callers decide), raises ApiUnreachableError if no answer."""
        if limit:
            self.limiter.acquire()
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            content_type = content_type or "application/json"
        target = self._target(path, query)
        to = self._timeout(timeout or self.timeout)
        pool = self._host_pool()
        force = False
        attempt = 0
        while True:
            try:
                # straight to the host's connection pool: PoolManager's URL parsing and pool lookup cost a
                # bound pod more Python time than the scheduling cycle itself
                r = pool.urlopen(method, target, body=data, headers=self._headers(content_type, force),
                                 timeout=to, retries=False, redirect=False, preload_content=True,
                                 assert_same_host=False)
            except urllib3.exceptions.ReadTimeoutError as exc:
                raise self._unreachable(exc, method, path) from None
            except _CONN_ERRORS as exc:
                if attempt < conn_retries:
                    attempt += 1
                    time.sleep(0.05)
                    continue
                raise self._unreachable(exc, method, path) from None
            if r.status == 401 and not force and self.conn.auth is not None:
                force = True  # credentials may have rotated (exec plugin / projected token): re-read once
                continue
            return Response(r.status, r.headers, r.data)

    def open_stream(self, path: str, query: dict[str, Any], read_timeout: float,
                    limit: bool = True) -> urllib3.BaseHTTPResponse:
        """A streaming GET (watch); the caller reads `.stream()` and must `release_conn()`."""
        if limit:
            self.limiter.acquire()
        url = self.url(path, query)
        to = urllib3.Timeout(connect=self.connect_timeout, read=read_timeout)
        try:
            return self._pool.request("GET", url, headers=self._headers(None), timeout=to, retries=False,
                                      redirect=False, preload_content=False)
        except _CONN_ERRORS as exc:
            raise self._unreachable(exc, "GET", path) from None

    def error(self, resp: Response, method: str, path: str, query: dict[str, Any] | None = None) -> ApiError:
        return error_from_response(resp, method, path, query, self.host, self.conn.source)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """request() that raises ApiError on non-2xx and returns the decoded body."""
        resp = self.request(method, path, **kw)
        if not resp.ok:
            raise self.error(resp, method, path, kw.get("query"))
        return resp.json()

    def close(self) -> None:
        self._pool.clear()


# ------------------------------------------------------------------------------------------ reflector


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


class Reflector:
    """List + watch of one resource into a store of raw dicts; also the `informer(resource)` handle:
    `list(namespace)`, `get(name, namespace)`, `add_handler(fn(action, old, new))`, `synced`,
    `wait_for_sync(timeout)`."""

    def __init__(self, cluster: KubeCluster, name: str, group: str, plural: str, version: str | None = None,
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
        self._handlers: list[Callable[[str, dict | None, dict | None], None]] = []
        self._mode = "quiet"  # quiet (before start) -> buffer (start is replaying) -> live
        self._pending: list[tuple[str, dict | None, dict | None]] = []
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
        self.stats = collections.Counter()
        self.min_watch_timeout = cluster.min_watch_timeout
        self.watch_read_timeout = cluster.watch_read_timeout

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

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def add_handler(self, fn: Callable[[str, dict | None, dict | None], None]) -> None:
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
    def snapshot_for_start(self) -> list[dict[str, Any]]:
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
                if isinstance(exc, _NotServed):
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

    def _list_all(self) -> tuple[list[dict[str, Any]], str]:
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
                    items.append(_strip(it))
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
        changes: list[tuple[str, dict | None, dict | None]] = []
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

    def _deliver(self, changes: list[tuple[str, dict | None, dict | None]], mode: str) -> None:
        handler = self.cluster._handler
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
        _strip(obj)
        key = self._key(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        change: tuple[str, dict | None, dict | None] | None = None
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


# ------------------------------------------------------------------------------------- async writers


# client-go tools/events (the events.k8s.io/v1 broadcaster kube-scheduler uses): an isomorphic event
# seen again within EVENT_SERIES_FINISH_TIME of its last sighting becomes an EventSeries; every
# EVENT_SERIES_REFRESH_TIME open series are re-patched, every EVENT_SERIES_FINISH_TIME ended ones are
# written with their final count and forgotten; a write the API server did not answer is tried
# EVENT_MAX_TRIES times, EVENT_RETRY_SLEEP apart (jittered by a quarter).
EVENT_SERIES_FINISH_TIME = 6 * 60.0
EVENT_SERIES_REFRESH_TIME = 30 * 60.0
EVENT_MAX_TRIES = 12
EVENT_RETRY_SLEEP = 10.0
#: ksched's bound on remembered isomorphic events (client-go's map is unbounded); the least recently
#: seen one is forgotten first, its series written with the count reached
EVENT_CACHE_SIZE = 20000


def _event_key(body: dict[str, Any]) -> tuple[Any, ...]:
    """client-go's eventKey: type, action, reason, reporting controller and instance, and the full
    regarding/related references (resourceVersion included). The note is not part of it."""
    return (body.get("type"), body.get("action"), body.get("reason"), body.get("reportingController"),
            body.get("reportingInstance"), tuple(sorted((body.get("regarding") or {}).items())),
            tuple(sorted((body.get("related") or {}).items())))


class _Isomorphic:
    """One remembered event: the body as first created and its series, counted in memory."""

    __slots__ = ("body", "first", "count", "last", "gen")

    def __init__(self, body: dict[str, Any], now: float) -> None:
        self.body = body
        self.first = now  # eventTime: when a singleton is forgotten
        self.count = 1  # 1: no series yet
        self.last = now  # series.lastObservedTime
        self.gen = 0  # bumped on every sighting: a write in flight never forgets a newer count

    def series(self) -> dict[str, Any]:
        return {"count": self.count, "lastObservedTime": micro_time(self.last)}


class _EventWriter:
    """Events aggregated into EventSeries as client-go's events/v1 broadcaster does: the first of
    isomorphic events is created, the second PATCHes the stored one with series {count: 2}, later ones
    only count in memory until the periodic refresh or the end of the series writes the count.

    `put` never waits on the API: it updates the in-memory cache and queues a write. Writes go through
    bounded FIFOs (when full the oldest write is dropped) served by worker threads; the writes of one
    isomorphic event go to the same worker, so a series patch never overtakes its create. A
    housekeeping thread refreshes and finishes series. `clock` (wall seconds) is injectable."""

    def __init__(self, client: KubeClient, maxlen: int = 2000, workers: int = 2, *,
                 clock: Callable[[], float] = time.time, cache_size: int = EVENT_CACHE_SIZE,
                 retry_sleep: float = EVENT_RETRY_SLEEP, housekeeping: bool = True) -> None:
        self.client = client
        self.maxlen = maxlen
        self.clock = clock
        self.cache_size = cache_size
        self.retry_sleep = retry_sleep
        self._retry = BackoffPolicy(retry_sleep, factor=1.0, jitter=(1.0, 1.25))
        self._cache: collections.OrderedDict[tuple[Any, ...], _Isomorphic] = collections.OrderedDict()
        self._shards: list[collections.deque[tuple[str, dict[str, Any], dict[str, Any] | None]]] = [
            collections.deque() for _ in range(max(1, workers))]
        self._queued = 0
        self._cv = threading.Condition()
        self._busy = 0
        self._stopping = False
        self._stop_evt = threading.Event()
        self.sent = self.dropped = self.failed = self.aggregated = 0
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"events-{i}", daemon=True)
                         for i in range(len(self._shards))]
        if housekeeping:
            self._threads.append(threading.Thread(target=self._housekeeping, name="events-series", daemon=True))
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------- recording (any thread, never blocks)
    def put(self, namespace: str, body: dict[str, Any]) -> None:
        key = _event_key(body)
        with self._cv:
            if self._stopping:
                return
            now = self.clock()
            ent = self._cache.get(key)
            if ent is None:
                self._cache[key] = _Isomorphic(body, now)
                while len(self._cache) > self.cache_size:
                    okey, old = self._cache.popitem(last=False)
                    if old.count > 1:  # write the count reached before forgetting the series
                        self._enqueue(okey, old.body["metadata"]["namespace"], old.body, old.series())
                self._enqueue(key, namespace, body, None)
                return
            self._cache.move_to_end(key)
            ent.gen += 1
            ent.count += 1
            ent.last = now
            if ent.count == 2:
                self._enqueue(key, namespace, ent.body, ent.series())
            else:
                self.aggregated += 1

    def _enqueue(self, key: tuple[Any, ...], namespace: str, body: dict[str, Any],
                 series: dict[str, Any] | None) -> None:
        shard = self._shards[hash(key) % len(self._shards)]
        if self._queued >= self.maxlen:
            victim = shard if shard else max(self._shards, key=len)
            victim.popleft()
            self._queued -= 1
            self.dropped += 1
        shard.append((namespace, body, series))
        self._queued += 1
        self._cv.notify_all()

    def series_count(self, body: dict[str, Any]) -> int:
        """How many times an event isomorphic to `body` was seen (0: not remembered)."""
        with self._cv:
            ent = self._cache.get(_event_key(body))
            return ent.count if ent is not None else 0

    def __len__(self) -> int:
        with self._cv:
            return len(self._cache)

    # ------------------------------------------------------------- writing
    def _write(self, namespace: str, body: dict[str, Any], series: dict[str, Any] | None) -> bool:
        """One attempt, as client-go's recordEvent: a series is PATCHed onto the stored event (created
        with the series if it is gone). Returns True if it should be tried again later."""
        base = f"/apis/events.k8s.io/v1/namespaces/{_q(namespace)}/events"
        name = body["metadata"]["name"]
        try:
            if series is not None:
                path = f"{base}/{_q(name)}"
                resp = self.client.request("PATCH", path, body={"series": series}, timeout=15,
                                           content_type="application/strategic-merge-patch+json")
                if resp.ok:
                    self.sent += 1
                    return False
                if resp.status != 404:
                    return self._failed(resp, "PATCH", path, name)
            path = base
            resp = self.client.request("POST", path, body=body if series is None else {**body, "series": series},
                                       timeout=15)
            if resp.ok:
                self.sent += 1
                return False
            if resp.status == 409:
                if series is not None:  # created meanwhile by the isomorphic event's own create: patch it
                    return True
                self.sent += 1  # already written (a retried create)
                return False
            return self._failed(resp, "POST", path, name)
        except ApiError as exc:
            log.warning("could not write event %s (may retry): %s", name, exc)
            return True

    def _failed(self, resp: Response, method: str, path: str, name: str) -> bool:
        if resp.status == 429 or resp.status >= 500:
            log.warning("could not write event %s (may retry): %s", name, self.client.error(resp, method, path))
            return True
        self.failed += 1
        if resp.status != 404:  # 404: namespace being deleted
            log.warning("could not write event %s: %s", name, self.client.error(resp, method, path))
        return False

    def _record(self, namespace: str, body: dict[str, Any], series: dict[str, Any] | None,
                tries: int = EVENT_MAX_TRIES) -> bool:
        """Write with retries; False if given up."""
        for attempt in range(tries):
            if not self._write(namespace, body, series):
                return True
            if attempt + 1 < tries and self._stop_evt.wait(self._retry.delay(attempt + 1)):
                break
        self.failed += 1
        if not self._stop_evt.is_set():
            log.error("could not write event %s: retry limit exceeded", body["metadata"]["name"])
        return False

    def _run(self, i: int) -> None:
        shard = self._shards[i]
        while True:
            with self._cv:
                while not shard and not self._stopping:
                    self._cv.wait()
                if not shard:
                    return
                ns, body, series = shard.popleft()
                self._queued -= 1
                self._busy += 1
            try:
                self._record(ns, body, series)
            except Exception as exc:  # noqa: BLE001 - keep the worker alive
                self.failed += 1
                log.error("event worker: %s", exc)
            finally:
                with self._cv:
                    self._busy -= 1
                    self._cv.notify_all()

    # ------------------------------------------------------------- series upkeep (housekeeping thread)
    def refresh_series(self) -> int:
        """Re-patch every open series with its current count (client-go: every 30 minutes)."""
        with self._cv:
            snaps = [(e.body, e.series()) for e in self._cache.values() if e.count > 1]
        for body, series in snaps:
            if self._stop_evt.is_set():
                break
            try:
                self._write(body["metadata"]["namespace"], body, series)
            except Exception as exc:  # noqa: BLE001
                log.error("event series refresh: %s", exc)
        return len(snaps)

    def finish_series(self) -> int:
        """Write the final count of series not seen for EVENT_SERIES_FINISH_TIME and forget them, and
        singletons older than that (client-go: every 6 minutes). Returns how many were forgotten."""
        with self._cv:
            cutoff = self.clock() - EVENT_SERIES_FINISH_TIME
            snaps = [(k, e, e.gen, e.series() if e.count > 1 else None) for k, e in self._cache.items()
                     if (e.last if e.count > 1 else e.first) < cutoff]
        done = 0
        for key, ent, gen, series in snaps:
            if series is not None:
                try:
                    if self._write(ent.body["metadata"]["namespace"], ent.body, series):
                        continue  # not written: kept for the next round
                except Exception as exc:  # noqa: BLE001
                    log.error("event series finish: %s", exc)
                    continue
            with self._cv:
                if self._cache.get(key) is ent and ent.gen == gen:  # not seen again meanwhile
                    del self._cache[key]
                    done += 1
        return done

    def _housekeeping(self) -> None:
        now = time.monotonic()
        due_refresh, due_finish = now + EVENT_SERIES_REFRESH_TIME, now + EVENT_SERIES_FINISH_TIME
        while not self._stop_evt.wait(max(0.0, min(due_refresh, due_finish) - time.monotonic())):
            try:
                if time.monotonic() >= due_finish:
                    self.finish_series()
                    due_finish = time.monotonic() + EVENT_SERIES_FINISH_TIME
                if time.monotonic() >= due_refresh:
                    self.refresh_series()
                    due_refresh = time.monotonic() + EVENT_SERIES_REFRESH_TIME
            except Exception as exc:  # noqa: BLE001 - keep the thread alive
                log.error("event series upkeep: %s", exc)

    # ------------------------------------------------------------- lifecycle
    def flush(self, timeout: float = 5.0) -> bool:
        end = time.monotonic() + timeout
        with self._cv:
            while self._queued or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self, timeout: float = 2.0) -> None:
        self.flush(timeout)
        with self._cv:
            self._stopping = True
            self._stop_evt.set()
            for s in self._shards:
                s.clear()
            self._queued = 0
            self._cv.notify_all()


class _PodWriter:
    """Status patches and annotation patches, coalesced per pod (the latest wins), written by a few
    workers; a pod always goes to the same worker, so writes to one pod stay in order."""

    def __init__(self, cluster: KubeCluster, shards: int = 4, max_per_shard: int = 20000) -> None:
        self.cluster = cluster
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
                    done = self.cluster._write_status(pod, *payload)
                else:
                    done = self.cluster._write_annotations(pod, payload)
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


# ------------------------------------------------------------------------------------------- cluster


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
                 backoff_initial: float = 0.8, backoff_cap: float = 30.0, bind_retries: int = 2,
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
        self._discovery: dict[tuple[str, str, str | None], ResourceRef] = {}
        self._event_writer: _EventWriter | None = None
        self._event_queue = event_queue
        self._pod_writer: _PodWriter | None = None
        self._last_event_ns = 0
        self.stats = collections.Counter()
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
                raise _NotServed(f"resource {label} is not served by the API server (is its CRD installed?)")
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
        raise _NotServed(f"resource {label} is not served by the API server (is its CRD installed?)")

    def informer(self, resource: str) -> Reflector:
        """The store of any resource: 'pods', 'podgroups.scheduling.x-k8s.io', 'group/version/plural'.
        Started at once if the cluster is running, else with start()."""
        group, plural, version = parse_resource(resource)
        with self._lock:
            r = self._reflectors.get((group, plural))
            if r is None:
                fs = self._pod_field_selector if (group, plural) == ("", "pods") else None
                r = Reflector(self, plural, group, plural, version, field_selector=fs, page_size=self.page_size)
                self._reflectors[(group, plural)] = r
                if self._started:
                    r.snapshot_for_start()
                    if self._handler is not None:
                        r.go_live(self._handler)
                    r.start()
            return r

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
        path = f"/api/v1/namespaces/{_q(pod.namespace)}/pods/{_q(pod.name)}/binding"
        meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if annotations:
            meta["annotations"] = annotations  # the API server copies a Binding's annotations onto the pod
        body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                             "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}})
        attempt = 0
        while True:
            try:
                resp = self._write("POST", path, body=body, conn_retries=0)  # checked again before a retry
                if resp is None:
                    self.stats["binds_dropped_not_leader"] += 1
                    raise LeadershipLost(f"not binding {pod.key} to {node_name}: {NOT_LEADER}")
            except ApiUnreachableError as exc:
                # the bind may have happened; a retry then answers 409 "already assigned" to our node
                if attempt >= self.bind_retries:
                    self.stats["bind_errors"] += 1
                    raise BindError(f"binding {pod.key} to {node_name}: {exc}") from None
                attempt += 1
                time.sleep(0.2 * 2 ** (attempt - 1))
                continue
            if resp.status in (200, 201):
                self.stats["binds"] += 1
                return
            msg = resp.message()
            if resp.status == 409 and self._bound_to(pod, node_name):
                # an earlier try whose answer was lost (connection cut, 5xx while the server went down)
                # did bind it, or someone bound it where we would: either way it sits on our node
                self.stats["binds"] += 1
                return
            if resp.status in (404, 409):
                self.stats["bind_gone"] += 1
                raise BindError(msg, gone=True)
            if (resp.status == 429 or resp.status >= 500) and attempt < self.bind_retries:
                attempt += 1
                ra = resp.retry_after()
                time.sleep(min(ra, 10.0) if ra is not None else 0.2 * 2 ** (attempt - 1))
                continue
            self.stats["bind_errors"] += 1
            raise BindError(str(self.client.error(resp, "POST", path)))

    def _write(self, method: str, path: str, **kw: Any) -> Response | None:
        """A write of a scheduling cycle. The leader gate is checked after the rate limiter's wait, right
        before the request goes out, so a replica that lost its lease meanwhile sends nothing (None)."""
        self.client.limiter.acquire()
        if not self.may_write():
            self.stats["writes_dropped_not_leader"] += 1
            return None
        return self.client.request(method, path, limit=False, **kw)

    def _bound_to(self, pod: Pod, node_name: str) -> bool:
        """After a 409 on a binding: does the API server hold this very pod (same UID) on `node_name`? Read
        from the server, not the cache, and from structured fields (the 409's details name no node)."""
        path = f"/api/v1/namespaces/{_q(pod.namespace)}/pods/{_q(pod.name)}"
        try:
            resp = self.client.request("GET", path, conn_retries=1)
        except ApiError:
            return False
        if not resp.ok:
            return False
        raw = resp.json()
        return ((raw.get("metadata") or {}).get("uid") == pod.uid
                and (raw.get("spec") or {}).get("nodeName") == node_name)

    # ----------------------------------------------------------------- generic writes
    def patch_object(self, resource: str, name: str, namespace: str | None,
                     patch: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        """PATCH (application/merge-patch+json) any object or its `subresource` (status); resourceVersion in the
        patch is a precondition."""
        group, plural, version = parse_resource(resource)
        try:
            ref = self.discover(group, plural, version)
        except _NotServed as exc:
            raise PatchError(str(exc), status=404) from None
        path = ref.path(namespace if ref.namespaced else None, name, subresource)
        resp = self._write("PATCH", path, body=patch, content_type="application/merge-patch+json")
        if resp is None:
            raise PatchError(f"not patching {resource} {name}: {NOT_LEADER}", status=0)
        if resp.ok:
            return _strip(resp.json())
        raise PatchError(str(self.client.error(resp, "PATCH", path)), status=resp.status)

    # ----------------------------------------------------------------- events
    def _events(self) -> _EventWriter:
        w = self._event_writer
        if w is None:
            with self._lock:
                if self._event_writer is None:
                    self._event_writer = _EventWriter(self.event_client, maxlen=self._event_queue)
                w = self._event_writer
        return w

    def record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                     reporting_controller: str = "default-scheduler") -> None:
        with self._lock:
            now_ns = time.time_ns()
            if now_ns <= self._last_event_ns:
                now_ns = self._last_event_ns + 1
            self._last_event_ns = now_ns
        if len(note) > NOTE_LENGTH_LIMIT:
            note = note[: NOTE_LENGTH_LIMIT - 4] + " ..."
        controller = reporting_controller or self.scheduler_name
        body = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{pod.name}.{now_ns:x}", "namespace": pod.namespace},
            "eventTime": micro_time(ns=now_ns),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.hostname}"[:128],
            "action": action[:128], "reason": reason[:128], "note": note, "type": type_,
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace, "name": pod.name,
                          "uid": pod.uid, "resourceVersion": pod.resource_version},
        }
        self._events().put(pod.namespace, body)

    @property
    def events_dropped(self) -> int:
        return self._event_writer.dropped if self._event_writer is not None else 0

    # ----------------------------------------------------------------- pod writes (async)
    def _writer(self) -> _PodWriter:
        w = self._pod_writer
        if w is None:
            with self._lock:
                if self._pod_writer is None:
                    self._pod_writer = _PodWriter(self)
                w = self._pod_writer
        return w

    def patch_pod_status(self, pod: Pod, condition: dict[str, Any] | None,
                         nominated_node_name: str | None = None) -> None:
        if condition is None and nominated_node_name is None:
            return
        self._writer().put("status", pod, (condition, nominated_node_name))

    def annotate_pod(self, pod: Pod, annotations: dict[str, str | None]) -> None:
        if annotations:
            self._writer().put("annotate", pod, annotations)

    def _write_status(self, pod: Pod, condition: dict[str, Any] | None, nnn: str | None) -> bool:
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
        path = f"/api/v1/namespaces/{_q(pod.namespace)}/pods/{_q(pod.name)}/status"
        body = {"metadata": {"uid": pod.uid}, "status": patch_status}
        resp = self._write("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")
        if resp is None:
            return False
        if resp.ok:
            return True
        if resp.status == 404 or (resp.status in (409, 422) and not self._same_pod(pod)):
            return False  # the pod is gone (or was replaced by one with the same name)
        raise self.client.error(resp, "PATCH", path)

    def _same_pod(self, pod: Pod) -> bool:
        raw = self.get_pod(pod.namespace, pod.name)
        return raw is not None and (raw.get("metadata") or {}).get("uid") == pod.uid

    def _write_annotations(self, pod: Pod, annotations: dict[str, str | None]) -> bool:
        have = pod.annotations or {}
        changes = {k: v for k, v in annotations.items() if have.get(k) != v}
        if not changes:
            return False
        # through pods/status, which system:kube-scheduler may patch (a patch of `pods` could change the image);
        # the API server keeps the spec on a status write and takes the metadata
        path = f"/api/v1/namespaces/{_q(pod.namespace)}/pods/{_q(pod.name)}/status"
        body = {"metadata": {"uid": pod.uid, "annotations": changes}}
        resp = self._write("PATCH", path, body=body, content_type="application/merge-patch+json")
        if resp is None:
            return False
        if resp.ok:
            return True
        if resp.status == 404 or (resp.status in (409, 422) and not self._same_pod(pod)):
            return False
        raise self.client.error(resp, "PATCH", path)

    # ----------------------------------------------------------------- delete
    def delete_pod(self, pod: Pod, reason: str = "") -> None:
        """Delete a pod (a preemption victim): DisruptionTarget condition first, as kube-scheduler does,
        then DELETE with the pod's grace period and its UID as precondition."""
        path = f"/api/v1/namespaces/{_q(pod.namespace)}/pods/{_q(pod.name)}"
        if reason == "preempted":
            body = {"metadata": {"uid": pod.uid}, "status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{pod.scheduler_name or self.scheduler_name}: preempting to accommodate a higher "
                           f"priority pod", "lastTransitionTime": rfc3339()}]}}
            try:
                r = self._write("PATCH", path + "/status", body=body,
                                content_type="application/strategic-merge-patch+json")
                if r is None:
                    log.info("not deleting pod %s: %s", pod.key, NOT_LEADER)
                    return
                if r.status == 404:
                    return
            except ApiError as exc:
                log.warning("could not mark %s as a disruption target: %s", pod.key, exc)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": pod.termination_grace_period,
                "preconditions": {"uid": pod.uid}}
        resp = self._write("DELETE", path, body=body)
        if resp is None:
            log.info("not deleting pod %s: %s", pod.key, NOT_LEADER)
            return
        if resp.ok or resp.status in (404, 409):
            self.stats["deletes"] += 1
            return
        raise self.client.error(resp, "DELETE", path)

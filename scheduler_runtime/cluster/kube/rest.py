"""The REST client: raw-JSON calls over keep-alive HTTP/1.1 (`http11`; watches over urllib3), a client-side
token bucket, one-line API errors.

Follows client-go v0.36.3 rest (request.go: one retry of a connection error, 401 re-reads rotating
credentials once, Retry-After honoured by callers; client-side rate limiting as flowcontrol's token bucket)
and apimachinery v0.36.3 pkg/api/errors (status reasons, IsTooLargeResourceVersion). The generated
`kubernetes` client is not used for requests: it is too slow for list/watch at scale and mis-handles
`pods/binding` (see shared/reference/python-k8s-client.md). Errors name the RBAC verb, resource and group
the request needed, decided from the request path and the status code, never from message text.
"""

from __future__ import annotations

import collections
import errno
import socket
import ssl
import time
import urllib.parse
from typing import Any, Protocol

import orjson
import urllib3

from ...errors import KschedError
from ...ratelimit import TokenBucket
from .http11 import Http11Pool, tls_context
from .kubeconfig import Connection

USER_AGENT = "ksched/0.1.0 (kube-scheduler compatible)"


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
    kw: dict[str, Any] = dict(status=resp.status, reason=reason, verb=verb, resource=resource, group=group,
                              namespace=namespace, retry_after=resp.retry_after())
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


def _read_timeout(exc: BaseException) -> bool:
    """The request was sent and the answer did not come in time (urllib3's ReadTimeoutError, or the lean
    pool's TimeoutError marked `sent`)."""
    return isinstance(exc, urllib3.exceptions.ReadTimeoutError) or bool(getattr(exc, "sent", False))


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
        self._lean = self._make_lean_pool(pool_size)
        self._pool_mgr: urllib3.PoolManager | None = None  # watches (and every request through a proxy)
        self._pool_for_host: Any = None
        self._base_path = urllib.parse.urlsplit(self.host).path.rstrip("/")  # a server URL may carry a prefix
        self._timeouts: dict[float, urllib3.Timeout] = {}
        self._extra_headers: dict[str, str] = {}

    @property
    def _pool(self) -> urllib3.PoolManager:
        """urllib3's pool, made at first use: it takes the lean pool's TLS context, whose files are read then."""
        pool = self._pool_mgr
        if pool is None:
            pool = self._pool_mgr = self._make_pool(self.pool_size)
        return pool

    def _make_pool(self, size: int) -> urllib3.PoolManager:
        kw: dict[str, Any] = dict(num_pools=4, maxsize=size, block=False, retries=False,
                                  socket_options=_keepalive_options())
        ctx = self._lean.tls_context() if self._lean is not None else None
        if ctx is not None:
            # one context for both pools: urllib3 would otherwise build one, and read the CA and the client
            # certificate, for each watch's connection
            kw["ssl_context"] = ctx
            kw["cert_reqs"] = "CERT_REQUIRED" if self.conn.verify else "CERT_NONE"
            if not self.conn.verify:
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            if self.conn.tls_server_name:
                kw["server_hostname"] = self.conn.tls_server_name
        elif self.host.startswith("https"):
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

    def _make_lean_pool(self, size: int) -> Http11Pool | None:
        """The pool for request(): straight HTTP/1.1 to the server (through a proxy, urllib3 serves)."""
        if self.conn.proxy:
            return None
        parts = urllib.parse.urlsplit(self.host)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        conn = self.conn
        ctx = (lambda: tls_context(conn.ca_file, conn.cert_file, conn.key_file, conn.verify)) \
            if parts.scheme == "https" else None
        return Http11Pool(parts.scheme, parts.hostname, parts.port, ssl_context=ctx,
                          server_hostname=self.conn.tls_server_name, connect_timeout=self.connect_timeout,
                          socket_options=_keepalive_options(), maxsize=size)

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
        force = False
        attempt = 0
        while True:
            try:
                status, headers, payload = self._send(method, target, data, content_type, force, timeout)
            except _CONN_ERRORS as exc:
                # a read timeout (the request went out): the server may be acting on it, never resent here
                if attempt < conn_retries and not _read_timeout(exc):
                    attempt += 1
                    time.sleep(0.05)
                    continue
                raise self._unreachable(exc, method, path) from None
            if status == 401 and not force and self.conn.auth is not None:
                force = True  # credentials may have rotated (exec plugin / projected token): re-read once
                continue
            return Response(status, headers, payload)

    def _send(self, method: str, target: str, data: bytes | None, content_type: str | None, force: bool,
              timeout: float | None) -> tuple[int, Any, bytes]:
        """One try: the lean pool, or urllib3 when a proxy is in between."""
        headers = self._headers(content_type, force)
        if self._lean is not None:
            return self._lean.request(method, target, headers, data, timeout or self.timeout)
        # straight to the host's connection pool: PoolManager's URL parsing and pool lookup cost a bound pod
        # more Python time than the scheduling cycle itself
        r = self._host_pool().urlopen(method, target, body=data, headers=headers,
                                      timeout=self._timeout(timeout or self.timeout), retries=False,
                                      redirect=False, preload_content=True, assert_same_host=False)
        return r.status, r.headers, r.data

    def open_stream(self, path: str, query: dict[str, Any], read_timeout: float,
                    limit: bool = True) -> urllib3.BaseHTTPResponse:
        """A streaming GET (watch); the caller reads `.stream()` and must `release_conn()`."""
        if limit:
            self.limiter.acquire()
        url = self.url(path, query)
        to = urllib3.Timeout(connect=self.connect_timeout, read=read_timeout)
        try:
            pool = self._pool  # inside: reading the TLS files may fail, as connecting may
            return pool.request("GET", url, headers=self._headers(None), timeout=to, retries=False,
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
        if self._pool_mgr is not None:
            self._pool_mgr.clear()
        if self._lean is not None:
            self._lean.clear()


# ------------------------------------------------------------------------------------------ reflector


class GatedWriter(Protocol):
    """The backend as the binder and the pod status writer see it: its client, its counters, and the write
    of a scheduling cycle, which returns None when the leader gate refused it (a replica that lost its lease
    sends nothing)."""

    client: KubeClient
    stats: collections.Counter[str]

    def gated_write(self, method: str, path: str, **kw: Any) -> Response | None: ...

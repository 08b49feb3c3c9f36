"""A lean persistent HTTP/1.1 client for the API server's short calls (binding, status patches, events, lists).

urllib3 (over http.client) parses every response's headers with the `email` package and checks each pooled
connection through several layers: on a pod's binding POST that costs more Python time than the answer is
worth. Here a request is one `sendall` of a prebuilt head and body, and the answer is read from a buffered
socket: status line, headers split by hand (names lower-cased), a Content-Length or chunked body.
Connections are kept alive in a small LIFO pool; one the server has closed while idle is noticed before reuse
(a zero-timeout poll, as urllib3's `is_connection_dropped`). TLS, client certificates, the server name and
both timeouts are those urllib3 was given; errors are the socket's and ssl's own exceptions (OSError family),
so callers keep deciding by type. Watches (long streams) stay on urllib3, sharing this pool's TLS context.

Go's client multiplexes everything over one HTTP/2 connection, so it pays for one TLS handshake; this pool
opens one connection per concurrent request (a binding worker each), and a full handshake with a client
certificate costs about 2 ms of CPU. New connections therefore resume the TLS session of an earlier one
(same context, same server): the certificate chain is not verified again, which halves the handshake's cost.
A server that declines resumption does a full handshake, so nothing depends on it.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

#: the longest status line or header line accepted (Go's net/http server writes far shorter ones)
_MAX_LINE = 65536
#: at most this many header lines in an answer
_MAX_HEADERS = 200


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.1 as expected (or the connection ended inside it)."""


class Headers(dict[str, str]):
    """Response headers keyed by lower-cased name; `get` takes any case."""

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key.lower() if isinstance(key, str) else key)


def tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool) -> ssl.SSLContext:
    """A client context as urllib3 builds one from the same kubeconfig fields."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file if verify else None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


class _Conn:
    __slots__ = ("sock", "rfile", "fresh")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb", buffering=65536)
        #: no exchange completed yet: the TLS 1.3 session ticket comes with the first answer
        self.fresh = True

    def dropped(self) -> bool:
        """Readable while idle: the server closed it (EOF) or sent something unasked; either way unusable."""
        try:
            p = select.poll()
            p.register(self.sock, select.POLLIN)
            return bool(p.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


class Http11Pool:
    """Keep-alive connections to one server (`scheme://host:port`), at most `maxsize` kept idle; more are
    opened when all are busy and closed after use (urllib3's `block=False`). Thread-safe."""

    def __init__(self, scheme: str, host: str, port: int | None, *,
                 ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
                 server_hostname: str | None = None, connect_timeout: float = 5.0,
                 socket_options: list[tuple[int, int, int]] | None = None, maxsize: int = 32) -> None:
        self.tls = scheme == "https"
        self.host = host
        self.port = port or (443 if self.tls else 80)
        # a factory is called at the first connection, so unreadable TLS files fail a request (as with
        # urllib3), not the client's construction
        self._ssl_context = ssl_context if self.tls else None
        self.server_hostname = server_hostname or host
        self.connect_timeout = connect_timeout
        self.socket_options = socket_options or []
        self.maxsize = maxsize
        netloc = f"[{host}]" if ":" in host else host
        if port is not None:
            netloc += f":{port}"
        self._host_header = f"Host: {netloc}\r\n"
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        #: the TLS session new connections resume (the latest one that can be resumed)
        self._session: ssl.SSLSession | None = None

    def _connect(self) -> _Conn:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        try:
            for level, opt, value in self.socket_options:
                sock.setsockopt(level, opt, value)
            ctx = self.tls_context()
            if ctx is not None:
                sock = ctx.wrap_socket(sock, server_hostname=self.server_hostname, session=self._session)
        except BaseException:
            sock.close()
            raise
        return _Conn(sock)

    def tls_context(self) -> ssl.SSLContext | None:
        """The pool's TLS context (None over plain HTTP), built at the first call when given as a factory."""
        ctx = self._ssl_context
        if ctx is None or isinstance(ctx, ssl.SSLContext):
            return ctx
        with self._lock:
            if not isinstance(self._ssl_context, ssl.SSLContext) and self._ssl_context is not None:
                self._ssl_context = self._ssl_context()
            return self._ssl_context

    def _get(self) -> _Conn:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect()
            if not conn.dropped():
                return conn
            conn.close()

    def _put(self, conn: _Conn) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                read_timeout: float) -> tuple[int, Headers, bytes]:
        """One exchange: (status, headers, body). Raises OSError (socket, ssl, ProtocolError) with nothing
        answered; a `TimeoutError` raised after the request was sent is a read timeout (`sent` attribute)."""
        head = [f"{method} {target} HTTP/1.1\r\n", self._host_header]
        for k, v in headers.items():
            head.append(f"{k}: {v}\r\n")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body) if body else 0}\r\n")
        head.append("\r\n")
        data = "".join(head).encode("latin-1")
        if body:
            data += body
        conn = self._get()
        sent = False
        try:
            conn.sock.settimeout(read_timeout)
            conn.sock.sendall(data)
            sent = True
            status, hdrs, payload, keep = _read_response(conn.rfile, method)
        except BaseException as exc:
            conn.close()
            if sent and isinstance(exc, TimeoutError):
                exc.sent = True  # type: ignore[attr-defined]
            raise
        if conn.fresh:
            conn.fresh = False
            if self.tls:
                self._remember_session(conn)
        if keep:
            self._put(conn)
        else:
            conn.close()
        return status, hdrs, payload

    def _remember_session(self, conn: _Conn) -> None:
        sess = getattr(conn.sock, "session", None)
        if sess is not None and (sess.has_ticket or sess.id):
            self._session = sess

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


def _readline(rfile: Any) -> bytes:
    line: bytes = rfile.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise ProtocolError("response line too long")
    return line


def _read_response(rfile: Any, method: str) -> tuple[int, Headers, bytes, bool]:
    """Status, headers, body and whether the connection may be reused. 1xx interim answers are skipped."""
    while True:
        line = _readline(rfile)
        if not line:
            raise ProtocolError("the server closed the connection without an answer")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise ProtocolError(f"not an HTTP status line: {line[:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status code in {line[:80]!r}") from None
        hdrs = Headers()
        for _ in range(_MAX_HEADERS):
            h = _readline(rfile)
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise ProtocolError("the connection ended inside the response headers")
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep:
                raise ProtocolError(f"bad header line {h[:80]!r}")
            key = name.strip().lower()
            value = value.strip()
            prev = dict.get(hdrs, key)
            dict.__setitem__(hdrs, key, value if prev is None else f"{prev}, {value}")
        else:
            raise ProtocolError("too many response headers")
        if status >= 200 or status == 101:
            break
    keep = parts[0] == b"HTTP/1.1" and "close" not in dict.get(hdrs, "connection", "").lower()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, hdrs, b"", keep
    te = dict.get(hdrs, "transfer-encoding", "").lower()
    if "chunked" in te:
        return status, hdrs, _read_chunked(rfile), keep
    cl = dict.get(hdrs, "content-length")
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise ProtocolError(f"bad Content-Length {cl!r}") from None
        body: bytes = rfile.read(n) if n else b""
        if len(body) < n:
            raise ProtocolError(f"the connection ended after {len(body)} of {n} body bytes")
        return status, hdrs, body, keep
    return status, hdrs, rfile.read(), False  # delimited by the server closing the connection


def _read_chunked(rfile: Any) -> bytes:
    chunks: list[bytes] = []
    while True:
        line = _readline(rfile)
        if not line:
            raise ProtocolError("the connection ended inside a chunked body")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line {line[:80]!r}") from None
        if size == 0:
            while _readline(rfile) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise ProtocolError("the connection ended inside a chunk")
        chunks.append(chunk)
        _readline(rfile)  # the CRLF after the chunk

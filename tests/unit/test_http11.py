"""The lean HTTP/1.1 client KubeClient.request uses: bodies by length and by chunks, keep-alive reuse, an idle
connection the server closed is replaced before use, a read timeout is never resent, and the client's
error semantics (retry of an unanswered request, 401 re-reading credentials) hold over it."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube.http11 import Headers, Http11Pool, tls_context
from scheduler_runtime.cluster.kube.kubeconfig import Connection
from scheduler_runtime.cluster.kube.rest import ApiUnreachableError, KubeClient

Answer = Callable[[bytes], bytes | None]  # request head+body -> raw answer (None: say nothing)


class Server:
    """A raw TCP server: each connection reads requests and writes what `answer` returns; it closes the
    connection after an answer when `close_after` is set. Counts connections and requests. With `tls` (a
    server context) connections are TLS, and `resumed` says, per connection, whether it resumed a session."""

    def __init__(self, answer: Answer, close_after: bool = False, tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.resumed: list[bool] = []
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._conns.append(c)
            threading.Thread(target=self._conn, args=(c,), daemon=True).start()

    def _conn(self, c: socket.socket) -> None:
        if self.tls is not None:
            try:
                c = self.tls.wrap_socket(c, server_side=True)
            except OSError:
                return
            self.resumed.append(c.session_reused)
        f = c.makefile("rb")
        try:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = f.readline()
                    if not line:
                        return
                    head += line
                n = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                          if h.lower().startswith(b"content-length")), 0)
                req = head + f.read(n)
                self.requests.append(req)
                out = self.answer(req)
                if out is not None:
                    c.sendall(out)
                if self.close_after:
                    c.close()
                    self.closed.set()
                    return
        except OSError:
            return

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass
        self.thread.join(5)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(answer: Answer, **kw: Any) -> Server:
        servers.append(Server(answer, **kw))
        return servers[-1]
    yield make
    for s in servers:
        s.stop()


def _ok(body: bytes = b'{"kind":"Status"}', extra: bytes = b"") -> Answer:
    return lambda req: (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
                        + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def test_content_length_and_keep_alive(serve: Callable[..., Server]) -> None:
    srv = serve(_ok(extra=b"Retry-After: 3\r\n"))
    pool = Http11Pool("http", "127.0.0.1", srv.port)
    for _ in range(3):
        status, headers, body = pool.request("POST", "/api/v1/x", {"Accept": "application/json"}, b"{}", 5)
        assert (status, body) == (201, b'{"kind":"Status"}')
        assert headers.get("Retry-After") == "3" and headers["content-type"] == "application/json"
    assert srv.connections == 1 and len(srv.requests) == 3
    assert srv.requests[0].startswith(b"POST /api/v1/x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 2\r\n" in srv.requests[0] and srv.requests[0].endswith(b"\r\n\r\n{}")
    pool.clear()


def test_chunked_body(serve: Callable[..., Server]) -> None:
    srv = serve(lambda req: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n")
    pool = Http11Pool("http", "127.0.0.1", srv.port)
    assert pool.request("GET", "/", {}, None, 5)[::2] == (200, b"hello, world")
    assert pool.request("GET", "/", {}, None, 5)[2] == b"hello, world"  # the connection stayed usable
    assert srv.connections == 1
    pool.clear()


def test_connection_close_and_eof_delimited(serve: Callable[..., Server]) -> None:
    srv = serve(lambda req: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", close_after=True)
    pool = Http11Pool("http", "127.0.0.1", srv.port)
    assert pool.request("GET", "/", {}, None, 5)[2] == b"until the end"
    assert pool.request("GET", "/", {}, None, 5)[2] == b"until the end"
    assert srv.connections == 2


def test_idle_connection_closed_by_the_server_is_replaced(serve: Callable[..., Server]) -> None:
    """The server drops the connection after answering (without saying so): the next request, sent with no
    retry allowed, goes out on a fresh connection instead of failing on the dead one."""
    srv = serve(_ok(), close_after=True)
    client = KubeClient(Connection(host=f"http://127.0.0.1:{srv.port}"))
    assert client.request("POST", "/api/v1/a", body={}, conn_retries=0).status == 201
    assert srv.closed.wait(5)
    # the server's FIN reaches the client's socket asynchronously; on a loaded machine the idle check could
    # otherwise run before it (what is tested is the check, not the kernel's delivery time)
    idle = client._lean._idle  # noqa: SLF001
    deadline = time.monotonic() + 5
    while idle and not idle[-1].dropped() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.request("POST", "/api/v1/b", body={}, conn_retries=0).status == 201
    assert srv.connections == 2 and len(srv.requests) == 2


def test_read_timeout_is_not_resent(serve: Callable[..., Server]) -> None:
    srv = serve(lambda req: None)
    client = KubeClient(Connection(host=f"http://127.0.0.1:{srv.port}"))
    with pytest.raises(ApiUnreachableError, match="timed out"):
        client.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={}, timeout=0.3, conn_retries=3)
    assert len(srv.requests) == 1


def test_unanswered_request_is_retried(serve: Callable[..., Server]) -> None:
    """The connection ends before any answer: resent once (conn_retries=1), as with urllib3."""
    calls: list[int] = []

    def answer(req: bytes) -> bytes | None:
        calls.append(1)
        return None if len(calls) == 1 else _ok()(req)
    srv = serve(answer, close_after=True)
    client = KubeClient(Connection(host=f"http://127.0.0.1:{srv.port}"))
    assert client.request("GET", "/api/v1/pods").status == 201
    assert len(srv.requests) == 2
    with pytest.raises(ApiUnreachableError, match="cannot reach the API server"):
        calls.clear()
        client.request("GET", "/api/v1/pods", conn_retries=0)


def test_refused_connection_is_named() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    client = KubeClient(Connection(host=f"http://127.0.0.1:{port}"))
    with pytest.raises(ApiUnreachableError, match="connection refused"):
        client.request("GET", "/api/v1/pods")


def test_401_re_reads_the_credentials_once(serve: Callable[..., Server]) -> None:
    def answer(req: bytes) -> bytes:
        if b"Authorization: Bearer fresh\r\n" in req:
            return _ok()(req)
        return b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
    srv = serve(answer)
    seen: list[bool] = []

    def auth(force: bool) -> str:
        seen.append(force)
        return "Bearer fresh" if force else "Bearer stale"
    client = KubeClient(Connection(host=f"http://127.0.0.1:{srv.port}", auth=auth))
    assert client.request("GET", "/api/v1/pods").status == 201
    assert seen == [False, True] and srv.connections == 1


def test_headers_any_case() -> None:
    h = Headers()
    dict.__setitem__(h, "retry-after", "1")
    assert h.get("Retry-After") == "1" and "RETRY-AFTER" in h and h["retry-after"] == "1"


def test_unreadable_tls_files_fail_the_request_not_the_client() -> None:
    """As with urllib3: the client is built, the first request reports the problem as unreachable."""
    client = KubeClient(Connection(host="https://127.0.0.1:1", ca_file="/nonexistent/ca.crt"))
    with pytest.raises(ApiUnreachableError, match="cannot reach the API server"):
        client.request("GET", "/api", conn_retries=0)


def test_new_tls_connections_resume_the_session(serve: Callable[..., Server], tmp_path: Path, test_pki: Any) -> None:
    """A connection opened after one that completed an exchange resumes its TLS session (no second full
    handshake); the answers are the same either way."""
    ca = test_pki.make_ca(tmp_path, "ca")
    cert, key = test_pki.client_cert(tmp_path, ca, "server")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    srv = serve(_ok(), tls=server_ctx)
    pool = Http11Pool("https", "127.0.0.1", srv.port, ssl_context=lambda: tls_context(None, None, None, False))
    for _ in range(3):
        assert pool.request("POST", "/api/v1/x", {}, b"{}", 5)[::2] == (201, b'{"kind":"Status"}')
        pool.clear()  # the next request needs a new connection
    assert srv.connections == 3 and srv.resumed == [False, True, True]

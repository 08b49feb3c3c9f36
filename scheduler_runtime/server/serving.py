"""The secure port's listener: plain TCP accept, TLS and HTTP/1.1 per connection, with kube's limits.

Follows kube-apiserver's `SecureServingOptions` (k8s.io/apiserver serving.go) as kube-scheduler uses them:
`--bind-address`, `--secure-port` (0 = no serving), `--cert-dir`, `--tls-cert-file`/`--tls-private-key-file`,
`--tls-min-version`, `--tls-cipher-suites`, a self-signed pair for localhost/127.0.0.1 when none is given, and
Go's net/http limits as kube sets them (1 MiB of request headers, a header read timeout of 32 s that also
bounds the TLS handshake, 90 s keep-alive idle timeout).

Why not `ssl.wrap_socket` on the listener: then the handshake runs inside `accept()`, and one client that
connects and sends nothing stops every probe. Here the accept loop only accepts; each connection gets its
own thread, which does the handshake and the reads under deadlines, so a slow client only ever costs its
own time. At `max_connections`, the oldest stalled connection (handshaking, sending headers or idle) is
closed to make room; only when every connection is running a handler is the newcomer closed at once.
Nothing is ever queued behind a slow client.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

from ..errors import KschedError, UsageError
from .tls import client_cert_verdict, request_client_cert, self_signed_pem, start_handshake, tls_settings

log = logging.getLogger("ksched.serving")

_STATUS_TEXT = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                405: "Method Not Allowed", 408: "Request Timeout", 413: "Request Entity Too Large",
                431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
                503: "Service Unavailable"}
_HEAD_END = re.compile(rb"\r?\n\r?\n")
CERT_RECHECK = 10.0  # seconds between checks of --tls-cert-file/--tls-private-key-file for changes


class ServingError(KschedError):
    """The secure port cannot be opened (address in use, not local, not permitted): exit 1."""

    usage = False


@dataclass
class ServingOptions:
    bind_address: str = "0.0.0.0"
    port: int = 10259
    cert_file: str | None = None
    key_file: str | None = None
    cert_dir: str | None = None
    min_version: str | None = None  # VersionTLS12 | VersionTLS13; Go's server default is TLS 1.2
    cipher_suites: list[str] = field(default_factory=list)
    #: kube sets ReadHeaderTimeout 32s; Go bounds the handshake by it too
    handshake_timeout: float = 32.0
    header_timeout: float = 32.0
    idle_timeout: float = 90.0
    write_timeout: float = 60.0
    max_connections: int = 256
    max_header_bytes: int = 1 << 20  # kube's MaxHeaderBytes
    max_body_bytes: int = 1 << 20
    #: --permit-port-sharing: SO_REUSEPORT, so several processes may bind the same address and port
    reuse_port: bool = False


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, list[str]]  # lower-case names
    peer_cert: bytes | None  # DER of the client certificate, verified against the client CAs unless ...
    client: str = ""
    body: bytes = b""
    peer_cert_error: str | None = None  # ... this says why it did not verify (the request is then a 401)

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def header(self, name: str) -> str | None:
        v = self.headers.get(name.lower())
        return v[0] if v else None


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Response]


class _Closed(Exception):
    """The peer went away or timed out: drop the connection without an answer."""


class _Reject(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SecureServer:
    """HTTPS on a plain TCP listener; `start()` runs the accept loop, `stop()` closes every connection."""

    def __init__(self, opts: ServingOptions, handler: Handler) -> None:
        self.opts = opts
        self.handler = handler
        self._min_version, self._ciphers = tls_settings(opts.min_version, opts.cipher_suites)
        self._pem: tuple[bytes, bytes] | None = None
        if not (opts.cert_file and opts.key_file):
            if opts.cert_file or opts.key_file:
                raise UsageError("--tls-cert-file and --tls-private-key-file must be given together")
            self._pem = self._default_pair()
        self._client_ca: bytes | None = None
        self._ctx = self._build_context()
        self._cert_stamp = self._stamp()
        self._next_cert_check = time.monotonic() + CERT_RECHECK
        self._sock = self._listen()
        self.port: int = self._sock.getsockname()[1]
        self.scheme = "https"
        self._conns: dict[int, _Conn] = {}
        self._evicting = 0  # stalled connections told to close to make room, not gone yet
        self.evicted = 0  # stalled connections closed to make room for a new one
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.rejected = 0  # connections closed because the cap was reached
        self._thread = threading.Thread(target=self._accept_loop, name="secure-serving", daemon=True)

    # ------------------------------------------------------------------ setup
    def _default_pair(self) -> tuple[bytes, bytes]:
        """`--cert-dir`: reuse <dir>/kube-scheduler.crt|.key when readable, else generate and write them;
        without it the pair lives in memory only."""
        if self.opts.cert_dir:
            d = Path(self.opts.cert_dir)
            crt, key = d / "kube-scheduler.crt", d / "kube-scheduler.key"
            try:
                return crt.read_bytes(), key.read_bytes()
            except OSError:
                pass
            pair = self_signed_pem(bind_address=self.opts.bind_address)
            try:
                d.mkdir(parents=True, exist_ok=True)
                crt.write_bytes(pair[0])
                key.touch(mode=0o600)
                key.write_bytes(pair[1])
            except OSError as exc:
                raise ServingError(f"--cert-dir {d}: cannot write the self-signed certificate: "
                                   f"{exc.strerror or exc}") from None
            log.info("generated a self-signed certificate in %s", d)
            return pair
        return self_signed_pem(bind_address=self.opts.bind_address)

    def _build_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = self._min_version
        if self._ciphers:
            ctx.set_ciphers(self._ciphers)
        ctx.set_alpn_protocols(["http/1.1"])
        if self._pem is not None:
            tmp = tempfile.mkdtemp(prefix="ksched-serving-")  # mode 0700; removed right after loading
            try:
                crt, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                crt.write_bytes(self._pem[0])
                key.touch(mode=0o600)
                key.write_bytes(self._pem[1])
                ctx.load_cert_chain(str(crt), str(key))
            except ssl.SSLError as exc:  # only a --cert-dir pair can be bad; a generated one is not
                raise UsageError(f"--cert-dir {self.opts.cert_dir}: kube-scheduler.crt/kube-scheduler.key cannot "
                                 f"be used ({exc.reason or exc}): fix or remove them to have new ones made") from None
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        else:
            assert self.opts.cert_file and self.opts.key_file
            try:
                ctx.load_cert_chain(self.opts.cert_file, self.opts.key_file)
            except FileNotFoundError as exc:
                raise UsageError(f"{exc.filename}: no such file (--tls-cert-file/--tls-private-key-file)") from None
            except (ssl.SSLError, OSError) as exc:
                raise UsageError(f"--tls-cert-file {self.opts.cert_file} / --tls-private-key-file "
                                 f"{self.opts.key_file}: cannot load the key pair: {exc}") from None
        if self._client_ca:
            # ask for a client certificate (anonymous stays possible), verified without failing the handshake
            ctx.load_verify_locations(cadata=self._client_ca.decode("ascii", "replace"))
            request_client_cert(ctx)
        return ctx

    def _stamp(self) -> tuple[tuple[float, int], ...]:
        out = []
        for f in (self.opts.cert_file, self.opts.key_file) if self._pem is None else ():
            try:
                st = Path(f).stat()  # type: ignore[arg-type]
                out.append((st.st_mtime, st.st_size))
            except OSError:
                out.append((0.0, -1))
        return tuple(out)

    def _reload_cert_if_changed(self) -> None:
        """`--tls-cert-file`/`--tls-private-key-file` rewritten (cert-manager, kubeadm renewal): serve the new
        pair from the next connection on, as kube's dynamic serving certificate does; a broken pair is
        logged and the old one kept."""
        self._next_cert_check = time.monotonic() + CERT_RECHECK
        stamp = self._stamp()
        if stamp == self._cert_stamp:
            return
        self._cert_stamp = stamp
        try:
            self._ctx = self._build_context()
            log.info("loaded the new serving certificate %s", self.opts.cert_file)
        except (UsageError, ssl.SSLError) as exc:
            log.error("keeping the current serving certificate: %s", exc)

    def set_client_ca(self, pem: bytes | None) -> None:
        """New client-CA bundle (files or the extension-apiserver-authentication ConfigMap changed):
        connections accepted from now on use it."""
        if pem == self._client_ca:
            return
        old = self._client_ca
        self._client_ca = pem or None
        try:
            self._ctx = self._build_context()
        except ssl.SSLError as exc:
            self._client_ca = old
            log.error("ignoring an unusable client CA bundle: %s", exc)

    def _listen(self) -> socket.socket:
        host, port = self.opts.bind_address, self.opts.port
        try:
            family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        except ValueError:
            raise UsageError(f'--bind-address: "{host}" is not a valid IP address') from None
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's net.Listen does
        if self.opts.reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise ServingError(f"cannot serve on {where}: the address is already in use (another "
                                   "kube-scheduler or ksched?): stop it, or pick another port with --secure-port "
                                   "(0 disables the secure port)") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ServingError(f"cannot serve on {where}: {host} is not an address of this host: fix "
                                   "--bind-address") from None
            if exc.errno == errno.EACCES:
                raise ServingError(f"cannot serve on {where}: permission denied (ports below 1024 need "
                                   "privileges): pick another port with --secure-port") from None
            raise ServingError(f"cannot serve on {where}: {exc.strerror or exc}") from None
        sock.settimeout(0.25)  # the accept loop checks for stop() between waits
        return sock

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SecureServer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            _wake(c.sock)

    @property
    def active(self) -> int:
        with self._lock:
            return len(self._conns)

    def _admit(self) -> bool:
        """Room for one more connection? At the cap, the oldest connection that is not running a handler
        (handshaking, sending headers, idle between requests) is closed to make room, so stalled clients
        cannot lock out a probe; if every connection is busy, the newcomer is refused."""
        with self._lock:
            if len(self._conns) - self._evicting < self.opts.max_connections:
                return True
            stalled = [c for c in self._conns.values() if not c.busy and not c.evicted]
            if not stalled:
                return False
            victim = min(stalled, key=lambda c: c.since)
            victim.evicted = True
            self._evicting += 1
            self.evicted += 1
        _wake(victim.sock)
        return True

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            if self._pem is None and time.monotonic() >= self._next_cert_check:
                self._reload_cert_if_changed()
            try:
                raw, addr = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._stopping.is_set():
                    return
                log.warning("accept on the secure port failed: %s", exc)
                time.sleep(0.05)  # e.g. EMFILE: do not spin
                continue
            if not self._admit():
                self.rejected += 1
                _close_now(raw)
                continue
            state = _Conn(raw)
            with self._lock:
                self._conns[id(state)] = state
            try:
                threading.Thread(target=self._serve, args=(state, addr), name="secure-conn", daemon=True).start()
            except RuntimeError:  # cannot start a thread (resource limits): drop this one, keep accepting
                self._forget(state)
                _close_now(raw)
                self.rejected += 1

    def _forget(self, state: _Conn) -> None:
        with self._lock:
            if self._conns.pop(id(state), None) is not None and state.evicted:
                self._evicting -= 1

    # ------------------------------------------------------------------ one connection
    def _serve(self, state: _Conn, addr: tuple[str, int]) -> None:
        raw = state.sock
        conn: socket.socket = raw
        try:
            raw.settimeout(self.opts.handshake_timeout)
            try:
                conn = self._ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
                state.sock = conn
                if state.evicted:
                    return
                start_handshake()
                conn.do_handshake()
            except (ssl.SSLError, OSError, ValueError):
                return  # handshake failed or timed out: that client's problem only
            peer = conn.getpeercert(binary_form=True) if self._client_ca else None
            peer_error = client_cert_verdict() if peer is not None else None
            buf = bytearray()
            first = True
            while not self._stopping.is_set() and not state.evicted:
                state.since = time.monotonic()
                try:
                    req, buf = self._read_request(conn, buf, first, peer, addr[0])
                    req.peer_cert_error = peer_error
                except _Closed:
                    return
                except _Reject as rej:
                    self._write(conn, Response(rej.status, f"{rej.status} {_STATUS_TEXT.get(rej.status, '')}: "
                                               f"{rej}\n".encode()), head=False, close=True)
                    return
                first = False
                with self._lock:
                    if state.evicted:
                        return
                    state.busy = True
                try:
                    resp = self.handler(req)
                except Exception:  # a broken endpoint must not kill the connection thread silently
                    log.exception("serving %s %s failed", req.method, req.path)
                    resp = Response(500, b"Internal Server Error\n")
                close = _wants_close(req)
                ok = self._write(conn, resp, head=req.method == "HEAD", close=close)
                state.busy = False
                if not ok or close:
                    return
        finally:
            self._forget(state)
            _close_now(conn)

    def _recv_until(self, conn: socket.socket, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or self._stopping.is_set():
            raise _Closed
        conn.settimeout(min(left, 1.0))
        try:
            data = conn.recv(65536)
        except TimeoutError:
            return b""
        except (OSError, ssl.SSLError):
            raise _Closed from None
        if not data:
            raise _Closed
        return data

    def _read_request(self, conn: socket.socket, buf: bytearray, first: bool, peer: bytes | None,
                      client: str) -> tuple[Request, bytearray]:
        o = self.opts
        # the first request's headers must be complete within the header timeout (Go's ReadHeaderTimeout);
        # on a kept-alive connection the wait for the next request is the idle timeout, then the same
        start = time.monotonic()
        deadline = start + o.header_timeout
        if not buf and not first:
            wait_until = start + o.idle_timeout
            while not buf:
                buf += self._recv_until(conn, wait_until)
            deadline = time.monotonic() + o.header_timeout
        while True:
            m = _HEAD_END.search(buf, 0, o.max_header_bytes + 4)
            if m:
                break
            if len(buf) > o.max_header_bytes:
                raise _Reject(431, "request headers larger than 1 MiB")
            buf += self._recv_until(conn, deadline)
        head = bytes(buf[:m.start()]).decode("latin-1")
        rest = bytearray(buf[m.end():])
        lines = re.split(r"\r?\n", head)
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
            raise _Reject(400, "malformed request line")
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise _Reject(400, "malformed header line")
            headers.setdefault(name.lower(), []).append(value.strip())
        if "chunked" in ",".join(headers.get("transfer-encoding", [])).lower():
            raise _Reject(501, "chunked request bodies are not supported")
        try:
            length = int((headers.get("content-length") or ["0"])[0])
        except ValueError:
            raise _Reject(400, "bad Content-Length") from None
        if length < 0 or length > o.max_body_bytes:
            raise _Reject(413, "request body too large")
        while len(rest) < length:
            rest += self._recv_until(conn, deadline)
        req = Request(parts[0], parts[1], parts[2], headers, peer, client, bytes(rest[:length]))
        return req, rest[length:]

    def _write(self, conn: socket.socket, resp: Response, *, head: bool, close: bool) -> bool:
        lines = [f"HTTP/1.1 {resp.status} {_STATUS_TEXT.get(resp.status, 'Status')}",
                 f"Content-Type: {resp.content_type}", f"Content-Length: {len(resp.body)}",
                 "X-Content-Type-Options: nosniff", f"Date: {formatdate(usegmt=True)}"]
        lines += [f"{k}: {v}" for k, v in resp.headers.items()]
        if close:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else resp.body)
        try:
            conn.settimeout(self.opts.write_timeout)
            conn.sendall(data)
            return True
        except (OSError, ssl.SSLError):
            return False


class _Conn:
    """One accepted connection: its socket (raw, then TLS), when its current wait began, whether a handler
    is running for it, whether it was told to close to make room."""

    __slots__ = ("sock", "since", "busy", "evicted")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.since = time.monotonic()
        self.busy = False
        self.evicted = False


def _wake(sock: socket.socket) -> None:
    """Shut a connection down from another thread, waking whatever read or handshake waits on it (the plain
    socket's shutdown: an SSLSocket's own would drop its TLS state under the reading thread)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


def _wants_close(req: Request) -> bool:
    tokens = ",".join(req.headers.get("connection", [])).lower()
    if req.version == "HTTP/1.0":
        return "keep-alive" not in tokens
    return "close" in tokens


def _close_now(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass

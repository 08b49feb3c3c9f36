"""The secure port: /healthz, /livez, /readyz without auth and /metrics, over HTTPS like kube-scheduler.

A kubeadm static pod probes https://127.0.0.1:10259/livez and /readyz; serving the same paths on the
same port with a self-signed certificate keeps a patched manifest's probes working unchanged.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import ssl
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: a readiness check returns None when fine, or the reason it is not
Check = Callable[[], str | None]


def self_signed_cert(directory: Path, host: str = "localhost") -> tuple[Path, Path]:
    """An in-memory-style self-signed pair for localhost/127.0.0.1, as kube-scheduler makes when given none."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = _dt.datetime.now(_dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(now.timestamp())}")])
    san = x509.SubjectAlternativeName([x509.DNSName(host), x509.DNSName("localhost"),
                                       x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - _dt.timedelta(minutes=5))
            .not_valid_after(now + _dt.timedelta(days=365)).add_extension(san, critical=False)
            .sign(key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    crt, pem = directory / "kube-scheduler.crt", directory / "kube-scheduler.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pem.chmod(0o600)
    return crt, pem


class HealthServer:
    """Serves the health and metrics endpoints on a background thread."""

    def __init__(self, bind_address: str = "0.0.0.0", port: int = 10259, registry: CollectorRegistry | None = None,
                 cert_file: str | None = None, key_file: str | None = None, tls: bool = True,
                 cert_dir: str | None = None) -> None:
        self.checks: dict[str, Check] = {}
        self.live_checks: dict[str, Check] = {}
        self.registry = registry
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: object) -> None:  # quiet: probes hit this every second
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                path = self.path.split("?", 1)[0]
                verbose = "verbose" in self.path
                if path in ("/healthz", "/livez", "/readyz"):
                    checks = server.checks if path == "/readyz" else server.live_checks
                    code, body = server.evaluate(checks, verbose)
                    self._send(code, body.encode(), "text/plain; charset=utf-8")
                elif path == "/metrics" and server.registry is not None:
                    self._send(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer((bind_address, port), Handler)
        self._httpd.daemon_threads = True
        if tls:
            if not (cert_file and key_file):
                d = Path(cert_dir) if cert_dir else Path(tempfile.mkdtemp(prefix="ksched-serving-"))
                crt, key = self_signed_cert(d)
                cert_file, key_file = str(crt), str(key)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert_file, key_file)
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="health-server", daemon=True)

    @staticmethod
    def evaluate(checks: dict[str, Check], verbose: bool) -> tuple[int, str]:
        lines, failed = [], []
        for name, fn in checks.items():
            try:
                reason = fn()
            except Exception as exc:  # a broken check is a failed check
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                failed.append(name)
                lines.append(f"[-]{name} failed: {reason}")
            else:
                lines.append(f"[+]{name} ok")
        if failed:
            return 500, "\n".join(lines) + f"\n{'readyz' if checks else 'healthz'} check failed\n"
        return 200, ("\n".join(lines) + "\nok\n") if verbose else "ok"

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

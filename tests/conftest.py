"""Fixtures shared by unit and integration tests: a real extender process (tests/extender_server.py) and a
small certificate authority for the secure-port tests (test files cannot import each other)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("extender_server.py")


class ExtenderProcess:
    """One running extender: its URL, its behaviour file and the requests it received."""

    def __init__(self, proc: subprocess.Popen[str], port: int, scheme: str, behaviour: Path, log: Path) -> None:
        self.proc, self.port, self.behaviour_file, self.log = proc, port, behaviour, log
        self.url = f"{scheme}://127.0.0.1:{port}/scheduler"

    def set(self, behaviour: dict[str, Any]) -> None:
        tmp = self.behaviour_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(behaviour))
        tmp.replace(self.behaviour_file)  # the server never reads half a file

    def requests(self, verb: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        out = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in out if verb is None or r["verb"] == verb]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def extender_server(tmp_path: Path) -> Iterator[Callable[..., ExtenderProcess]]:
    """Start extender processes: `extender_server(behaviour, cert=..., key=..., client_ca=..., kubeconfig=...)`
    (client_ca: the extender requires a client certificate that CA signed); all are
    stopped (SIGTERM, then SIGKILL) when the test ends."""
    started: list[ExtenderProcess] = []

    def start(behaviour: dict[str, Any] | None = None, *, cert: str | None = None, key: str | None = None,
              client_ca: str | None = None, kubeconfig: str | None = None) -> ExtenderProcess:
        n = len(started)
        bfile, log = tmp_path / f"ext{n}-behaviour.json", tmp_path / f"ext{n}-requests.jsonl"
        bfile.write_text(json.dumps(behaviour or {}))
        cmd = [sys.executable, str(SERVER), "--behaviour", str(bfile), "--log", str(log)]
        if cert:
            cmd += ["--cert", cert, "--key", str(key)]
            if client_ca:
                cmd += ["--client-ca", client_ca]
        if kubeconfig:
            cmd += ["--kubeconfig", kubeconfig]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            proc.kill()
            raise RuntimeError(f"extender server did not start: {line!r}")
        ext = ExtenderProcess(proc, int(line.split()[1]), "https" if cert else "http", bfile, log)
        started.append(ext)
        return ext

    try:
        yield start
    finally:
        for e in started:
            e.stop()


class TestPKI:
    """Self-signed CAs and client certificates (ECDSA P-256, valid one day) written as PEM files."""

    __test__ = False  # not a test class, despite the name pytest collects by

    @staticmethod
    def pem_key(key: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def make_ca(self, d: Path, name: str) -> tuple[Any, Any]:
        """A CA certificate at d/NAME.crt; returns (certificate, key) for signing client certificates."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = _dt.datetime.now(_dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - _dt.timedelta(hours=1))
                .not_valid_after(now + _dt.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert, key

    def client_cert(self, d: Path, ca: tuple[Any, Any], cn: str) -> tuple[str, str]:
        """A client-auth certificate for user CN signed by CA: returns (cert path, key path)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = _dt.datetime.now(_dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                .issuer_name(ca[0].subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - _dt.timedelta(hours=1)).not_valid_after(now + _dt.timedelta(days=1))
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca[1], hashes.SHA256()))
        crt, pem = d / f"{cn}.crt", d / f"{cn}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.write_bytes(self.pem_key(key))
        return str(crt), str(pem)


@pytest.fixture(scope="session")
def test_pki() -> TestPKI:
    return TestPKI()

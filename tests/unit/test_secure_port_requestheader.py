"""Front-proxy (request-header) and client-certificate authentication on the real TLS listener: the
request-header CA and allowed names decide whether X-Remote-* headers are believed (kube-scheduler honours
--requestheader-* and the ConfigMap's requestheader keys)."""

from __future__ import annotations

import datetime as _dt
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.server import DelegatedAuthOptions, HealthServer, ServingOptions


# the same small PKI helpers as tests/integration/test_secure_port_auth.py (test files do not import each other)
def _pem_key(k: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption())


def _make_ca(d: Path, name: str) -> tuple[Any, Any]:
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


def _client_cert(d: Path, ca: tuple[Any, Any], cn: str) -> tuple[str, str]:
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
    pem.write_bytes(_pem_key(key))
    return str(crt), str(pem)


def _get(port: int, cert: tuple[str, str] | None, headers: dict[str, str]) -> tuple[int, dict | str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(*cert)
    req = urllib.request.Request(f"https://127.0.0.1:{port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        data = e.read()
        return e.code, json.loads(data) if e.headers.get("Content-Type") == "application/json" else data.decode()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, object]:
    proxy_ca, client_ca = _make_ca(tmp_path, "front-proxy-ca"), _make_ca(tmp_path, "client-ca")
    return {"proxy_ca": str(tmp_path / "front-proxy-ca.crt"), "client_ca": str(tmp_path / "client-ca.crt"),
            "proxy": _client_cert(tmp_path, proxy_ca, "front-proxy-client"),
            "other_proxy": _client_cert(tmp_path, proxy_ca, "somebody-else"),
            "user": _client_cert(tmp_path, client_ca, "carol")}


@pytest.fixture
def port(pki: dict) -> Iterator[int]:
    hs = HealthServer(ServingOptions(bind_address="127.0.0.1", port=0), None, DelegatedAuthOptions(
        client_ca_file=pki["client_ca"], requestheader_client_ca_file=pki["proxy_ca"],
        requestheader_allowed_names=["front-proxy-client"], skip_lookup=True)).start()
    try:
        yield hs.port
    finally:
        hs.stop()


def test_front_proxy_headers_name_the_user(port: int, pki: dict) -> None:
    code, body = _get(port, pki["proxy"], {"X-Remote-User": "alice", "X-Remote-Group": "team"})
    assert code == 403 and body["message"] == 'forbidden: User "alice" cannot get path "/metrics"', body
    code, _ = _get(port, pki["proxy"], {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 404  # allowed (system:masters); this server has no metrics registry


def test_headers_from_an_unlisted_proxy_or_a_plain_client_are_not_believed(port: int, pki: dict) -> None:
    code, body = _get(port, pki["other_proxy"], {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 401 and body["reason"] == "Unauthorized", body
    # a client certificate from --client-ca-file is that user, whatever headers it adds
    code, body = _get(port, pki["user"], {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 403 and body["message"] == 'forbidden: User "carol" cannot get path "/metrics"', body
    code, body = _get(port, None, {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 403 and '"system:anonymous"' in body["message"], body

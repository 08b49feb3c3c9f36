"""Front-proxy (request-header) and client-certificate authentication on the real TLS listener: the
request-header CA and allowed names decide whether X-Remote-* headers are believed (kube-scheduler honours
--requestheader-* and the ConfigMap's requestheader keys)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.server import DelegatedAuthOptions, HealthServer, ServingOptions


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
def pki(tmp_path: Path, test_pki: Any) -> dict[str, object]:
    proxy_ca, client_ca = test_pki.make_ca(tmp_path, "front-proxy-ca"), test_pki.make_ca(tmp_path, "client-ca")
    return {"proxy_ca": str(tmp_path / "front-proxy-ca.crt"), "client_ca": str(tmp_path / "client-ca.crt"),
            "proxy": test_pki.client_cert(tmp_path, proxy_ca, "front-proxy-client"),
            "other_proxy": test_pki.client_cert(tmp_path, proxy_ca, "somebody-else"),
            "user": test_pki.client_cert(tmp_path, client_ca, "carol"),
            "stranger": test_pki.client_cert(tmp_path, test_pki.make_ca(tmp_path, "stranger-ca"), "mallory")}


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


def test_a_certificate_from_an_unknown_authority_completes_the_handshake_and_gets_401(port: int, pki: dict) -> None:
    """kube-scheduler asks for a client certificate without requiring a verifiable one (crypto/tls
    RequestClientCert) and its x509 authenticator rejects it: 401, not a failed TLS handshake."""
    code, body = _get(port, pki["stranger"], {"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 401 and body["reason"] == "Unauthorized", body
    # the same server still knows its own clients, on new connections after the stranger's
    code, body = _get(port, pki["user"], {})
    assert code == 403 and body["message"] == 'forbidden: User "carol" cannot get path "/metrics"', body

"""Secure-port flags as a user meets them: a busy port, unknown TLS names and bad always-allow paths are one
line and a non-zero exit, never "internal error: OSError 98" (issue 11)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from .test_cli_errors import one_line_error


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                  "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
                  "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    return kc


def test_port_in_use_names_address_port_and_what_to_do(ksched, kubeconfig: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = ksched("run", f"--kubeconfig={kubeconfig}", f"--secure-port={port}", "--bind-address=127.0.0.1",
                   "--leader-elect=false", timeout=60)
    line = one_line_error(r, 1)
    assert f"127.0.0.1:{port}" in line and "already in use" in line and "--secure-port" in line, line


@pytest.mark.parametrize(("flag", "needle"), [
    ("--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_BOGUS", "TLS_BOGUS"),
    ("--tls-min-version=VersionTLS99", "unknown tls version"),
    ("--authorization-always-allow-paths=/a*b", 'only trailing * allowed in "a*b"'),
    ("--authentication-token-webhook-cache-ttl=ten", "invalid duration"),
    ("--secure-port=70000", "--secure-port"),
])
def test_bad_serving_flags_are_usage_errors(ksched, kubeconfig: Path, flag: str, needle: str) -> None:
    r = ksched("run", f"--kubeconfig={kubeconfig}", "--leader-elect=false", flag, timeout=60)
    line = one_line_error(r, 2)
    assert needle in line, line


def test_missing_client_ca_file_is_a_usage_error(ksched, kubeconfig: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    missing = tmp_path / "nope.crt"
    r = ksched("run", f"--kubeconfig={kubeconfig}", "--leader-elect=false", f"--secure-port={port}",
               "--bind-address=127.0.0.1", f"--client-ca-file={missing}", timeout=60)
    line = one_line_error(r, 2)
    assert f"--client-ca-file {missing}: no such file" in line, line


def test_missing_authentication_kubeconfig_names_the_flag(ksched, kubeconfig: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    r = ksched("run", f"--kubeconfig={kubeconfig}", "--leader-elect=false", f"--secure-port={_free_port()}",
               "--bind-address=127.0.0.1", f"--authentication-kubeconfig={missing}", timeout=60)
    line = one_line_error(r, 2)
    assert line.startswith(f"error: --authentication-kubeconfig: {missing}: no such file"), line


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

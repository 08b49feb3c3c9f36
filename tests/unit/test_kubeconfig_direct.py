"""A kubeconfig naming only a server, TLS material and a static token or client certificate is read without the
`kubernetes` client (whose import is most of a start's CPU), with the same result as its loader; anything
else (exec plugins, token files, proxies...) still goes through that loader."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_runtime.cluster.kube.kubeconfig import KubeConfigError, load_connection

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _write(path: Path, cluster: str, user: str) -> str:
    path.write_text(f"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n"
                    f"  user:\n{user}contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n")
    return str(path)


def test_files_relative_to_the_kubeconfig_and_a_token(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    for f in ("ca.crt", "u.crt", "u.key"):
        (tmp_path / "pki" / f).write_bytes(PEM)
    key = tmp_path / "pki" / "u.key"
    kc = _write(tmp_path / "config", "    server: https://10.0.0.1:6443/\n    certificate-authority: pki/ca.crt\n"
                "    tls-server-name: api.internal\n",
                f"    token: abc\n    client-certificate: pki/u.crt\n    client-key: {key}\n")
    c = load_connection(kc)
    assert (c.host, c.ca_file, c.cert_file, c.key_file) == (
        "https://10.0.0.1:6443", str(tmp_path / "pki" / "ca.crt"), str(tmp_path / "pki" / "u.crt"), str(key))
    assert c.verify and c.tls_server_name == "api.internal" and c.source == f"kubeconfig {kc}"
    assert c.auth is not None and c.auth(False) == c.auth(True) == "Bearer abc"
    assert load_connection(kc, master="https://m:6443/").host == "https://m:6443"
    (tmp_path / "pki" / "u.crt").unlink()  # checked when read, as the kubernetes loader does, in its words
    with pytest.raises(KubeConfigError, match=f"kubeconfig {kc}: File does not exist: {tmp_path}/pki/u.crt$"):
        load_connection(kc)


def test_data_fields_become_private_files_and_insecure_skips_verification(tmp_path: Path) -> None:
    data = base64.b64encode(PEM).decode()
    kc = _write(tmp_path / "config", f"    server: https://h:1\n    certificate-authority-data: {data}\n"
                "    insecure-skip-tls-verify: true\n", f"    client-certificate-data: {data}\n")
    c = load_connection(kc)
    assert c.cert_file is not None and Path(c.cert_file).read_bytes() == PEM
    assert Path(c.cert_file).stat().st_mode & 0o077 == 0
    assert not c.verify and c.auth is None
    bad = _write(tmp_path / "bad", "    server: https://h:1\n    certificate-authority-data: '%%%'\n", "    {}\n")
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*bad: .*certificate-authority-data: not valid base64"):
        load_connection(bad)


def test_the_kubernetes_client_is_imported_only_when_needed(tmp_path: Path) -> None:
    plain = _write(tmp_path / "plain", "    server: https://h:1\n", "    token: t\n")
    exec_ = _write(tmp_path / "exec", "    server: https://h:1\n",
                   "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}\n")
    code = ("import sys; from scheduler_runtime.cluster.kube.kubeconfig import KubeConfigError, load_connection; "
            "load_connection(sys.argv[1]); print('kubernetes' in sys.modules)")
    out = [subprocess.run([sys.executable, "-c", code, p], capture_output=True, text=True, timeout=60).stdout.strip()
           for p in (plain, exec_)]
    assert out == ["False", "True"]

"""Bad uses of `deploy --static-pod --wait` and `build --load-into` end in one line and the documented exit code,
before anything is written or built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
KSCHED = Path(sys.executable).parent / "ksched"


def ksched(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1", **env})


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_load_into_unknown_target_is_a_usage_error() -> None:
    r = ksched("build", "--load-into", "docker")
    assert r.returncode == 2 and "unsupported target 'docker' (allowed: containerd)" in _one_line(r)


def test_load_into_without_a_containerd_socket_fails_before_the_build(tmp_path: Path) -> None:
    if shutil.which("ctr") is None:
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "ctr").write_text("#!/bin/sh\nexit 0\n")
        (fake / "ctr").chmod(0o755)
        path = f"{fake}:{os.environ['PATH']}"
    else:
        path = os.environ["PATH"]
    # no engine either: the containerd check comes first, so that is what is reported
    r = ksched("build", "--load-into", "containerd", CONTAINERD_ADDRESS=str(tmp_path / "nope.sock"),
               DOCKER_HOST="unix:///nonexistent.sock", PATH=path)
    line = _one_line(r)
    assert r.returncode == 3 and f"no containerd socket at {tmp_path / 'nope.sock'}" in line
    assert "nothing was built" in line


def test_load_into_without_ctr(tmp_path: Path) -> None:
    r = ksched("build", "--load-into", "containerd", PATH=str(tmp_path))
    assert r.returncode == 3 and "`ctr` not found on PATH" in _one_line(r)


def _node(tmp_path: Path) -> tuple[Path, list[str]]:
    etc = tmp_path / "etc"
    (etc / "manifests").mkdir(parents=True)
    m = etc / "manifests" / "kube-scheduler.yaml"
    m.write_text((REPO / "tests/data/manifests/kubeadm-1.32.yaml").read_text())
    m.chmod(0o600)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    return m, ["deploy", "--static-pod", "--config", str(cfg), "--image", "localhost/ksched:v1", "--manifest", str(m),
               "--config-dest", str(etc / "ksched-config.yaml"), "--backup-dir", str(etc / "backups"), "--yes"]


def test_wait_needs_a_duration(tmp_path: Path) -> None:
    m, args = _node(tmp_path)
    before = m.read_bytes()
    r = ksched(*args, "--wait", "soon")
    assert r.returncode == 2 and "--wait: 'soon' is not a duration" in _one_line(r)
    assert m.read_bytes() == before


def test_kubeconfig_without_wait_is_refused(tmp_path: Path) -> None:
    _, args = _node(tmp_path)
    r = ksched(*args, "--kubeconfig", str(tmp_path / "kc"))
    assert r.returncode == 2 and "--kubeconfig, --context and --node-name are for --wait" in _one_line(r)


def test_wait_with_an_unreachable_api_writes_nothing(tmp_path: Path) -> None:
    m, args = _node(tmp_path)
    before = m.read_bytes()
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                  "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                  "current-context: x\n")
    r = ksched(*args, "--wait", "30s", "--kubeconfig", str(kc))
    line = _one_line(r)
    assert r.returncode == 2 and "--wait: cannot reach the API server" in line and "nothing was written" in line
    assert m.read_bytes() == before and not (tmp_path / "etc" / "ksched-config.yaml").exists()

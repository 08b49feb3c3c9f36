"""`ksched run` picks its cluster and kubeconfig as documented in `ksched run --help`: the embedded cluster
unless a kubeconfig or kube-scheduler flag is given, and then kube-scheduler's rule, never $KUBECONFIG.

Each case points the chosen kubeconfig at a missing file, so the error names which one was used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import KSCHED, REPO

VALID_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _run(*args: str, env: dict[str, str], tmp: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return subprocess.run([str(KSCHED), "run", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**base, "HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1", **env})


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    f = tmp_path / "valid.kubeconfig"
    f.write_text(VALID_KUBECONFIG)
    return f


def _config(tmp: Path, kubeconfig: str | None) -> Path:
    f = tmp / "cfg.yaml"
    cc = f"clientConnection:\n  kubeconfig: {kubeconfig}\n" if kubeconfig else ""
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + cc)
    return f


def test_config_kubeconfig_wins_over_the_flag_and_the_environment(tmp_path: Path, valid: Path) -> None:
    chosen = tmp_path / "from-config.kubeconfig"  # missing: the error proves it was the one read
    cfg = _config(tmp_path, str(chosen))
    r = _run("--config", str(cfg), "--kubeconfig", str(valid), env={"KUBECONFIG": str(valid)}, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    assert (f"using kubeconfig {chosen} from --config clientConnection.kubeconfig (--kubeconfig is ignored when "
            "--config is given, as in kube-scheduler; $KUBECONFIG is not read, as in kube-scheduler)") in r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: {chosen}: no such file or directory (kubeconfig)"


def test_flag_kubeconfig_with_a_config_that_names_none_is_refused_outside_a_pod(tmp_path: Path, valid: Path) -> None:
    cfg = _config(tmp_path, None)
    r = _run("--config", str(cfg), "--kubeconfig", str(valid), env={"KUBECONFIG": str(valid)}, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"error: no kubeconfig: because clientConnection.kubeconfig in {cfg} is empty, so "
                               "the in-cluster service account would be used, but this is not a pod")
    assert f"set clientConnection.kubeconfig: {valid} in {cfg}" in lines[0]


def test_flag_kubeconfig_wins_over_the_environment(tmp_path: Path, valid: Path) -> None:
    chosen = tmp_path / "flag.kubeconfig"
    r = _run("--kubeconfig", str(chosen), "--leader-elect=false", env={"KUBECONFIG": str(valid)}, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"using kubeconfig {chosen} from --kubeconfig ($KUBECONFIG is not read, as in kube-scheduler)" in r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: {chosen}: no such file or directory (kubeconfig)"


def test_kube_scheduler_flags_never_fall_back_to_the_environment(tmp_path: Path, valid: Path) -> None:
    (tmp_path / "home" / ".kube").mkdir(parents=True)
    (tmp_path / "home" / ".kube" / "config").write_text(VALID_KUBECONFIG)
    r = _run("--leader-elect=false", env={"KUBECONFIG": str(valid)}, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        "error: kube-scheduler flags (--leader-elect=false) run against an API server and no kubeconfig was given "
        "(--kubeconfig, clientConnection.kubeconfig in --config, or in-cluster); $KUBECONFIG is not read, as in "
        'kube-scheduler: pass --kubeconfig "$KUBECONFIG"; drop them to run on the embedded cluster')


def test_plain_run_stays_on_the_embedded_cluster_when_kubeconfig_is_set(tmp_path: Path, valid: Path) -> None:
    r = _run(env={"KUBECONFIG": str(valid)}, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "embedded cluster:" in r.stdout


def test_help_states_the_rule(tmp_path: Path) -> None:
    r = _run("--help", env={}, tmp=tmp_path)
    text = " ".join(r.stdout.replace("│", " ").split())
    assert "$KUBECONFIG never selects a real cluster" in text and "--kubeconfig is then ignored" in text

"""`--kubeconfig` + `--context` against the real kube-apiserver (issue 17): `ksched version` shows the
server's version, `--context` picks a context other than the current one in every command that reaches a
cluster, and a context the kubeconfig does not have is one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.kubeversion import KUBE_VERSION

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def ksched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, timeout=120, env=ENV, cwd=ROOT)


@pytest.fixture
def two_contexts(control_plane: Any, tmp_path: Path) -> Path:
    """The control plane's kubeconfig with a second context `real`; the current one points at a dead port."""
    doc = yaml.safe_load(Path(control_plane.kubeconfig_path).read_text())
    real_ctx = doc["contexts"][0]["context"]
    dead = {**doc["clusters"][0], "name": "dead"}
    dead["cluster"] = {**dead["cluster"], "server": "https://127.0.0.1:1"}
    doc["clusters"].append(dead)
    doc["contexts"] = [{"name": "dead", "context": {**real_ctx, "cluster": "dead"}},
                       {"name": "real", "context": real_ctx}]
    doc["current-context"] = "dead"
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump(doc))
    return kc


def test_version_shows_the_server_version(control_plane: Any, two_contexts: Path) -> None:
    r = ksched("version", "--kubeconfig", str(two_contexts), "--context", "real", "-o", "json")
    assert r.returncode == 0, r.stderr
    server = json.loads(r.stdout)["serverVersion"]
    assert server["gitVersion"] == f"v{KUBE_VERSION}", server  # the pinned control plane
    t = ksched("version", "--kubeconfig", str(two_contexts), "--context", "real")
    assert f"Server Version: {server['gitVersion']}" in t.stdout


def test_context_selects_and_a_missing_one_is_named(control_plane: Any, two_contexts: Path, namespace: str) -> None:
    dead = ksched("version", "--kubeconfig", str(two_contexts))  # current-context: the dead server
    assert dead.returncode != 0 and dead.stderr.count("\n") == 1, dead.stderr
    missing = ksched("describe-pod", "x", "-n", namespace, "--kubeconfig", str(two_contexts), "--context", "nope")
    assert missing.returncode == 1 and '"nope": no such entry in contexts' in missing.stderr, missing.stderr
    r = ksched("describe-pod", "no-such-pod", "-n", namespace, "--kubeconfig", str(two_contexts), "--context",
               "real")
    assert r.returncode == 1 and 'pods "no-such-pod" not found' in r.stderr, r.stderr
    u = ksched("undeploy", "--second-scheduler", "--name", "nothing-here", "-n", namespace, "--kubeconfig",
               str(two_contexts), "--context", "real")
    assert u.returncode == 0 and "nothing to remove" in u.stdout, u.stderr


def test_run_context_is_refused_without_a_kubeconfig() -> None:
    r = ksched("run", "--context", "real")
    assert r.returncode == 2 and "--context real: no kubeconfig" in r.stderr, r.stderr


def test_run_uses_the_chosen_context(control_plane: Any, two_contexts: Path) -> None:
    """The current context points at a dead server: `--context real` must be what the caches sync from."""
    import selectors
    import signal
    import time

    p = subprocess.Popen([str(KSCHED), "run", "--kubeconfig", str(two_contexts), "--context", "real",
                          "--leader-elect=false", "--secure-port=0", "-v=2"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    seen: list[str] = []
    try:
        assert p.stderr is not None
        sel = selectors.DefaultSelector()
        sel.register(p.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any("caches synced" in ln for ln in seen):
            if sel.select(timeout=1):
                line = p.stderr.readline()
                if not line:
                    break
                seen.append(line)
        assert any("context real" in ln for ln in seen), "".join(seen)
        assert any("caches synced" in ln for ln in seen), "".join(seen)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


def test_namespace_defaults_to_the_contexts(control_plane: Any, two_contexts: Path, namespace: str) -> None:
    """kubectl's rule: without -n, the namespace of the chosen context."""
    doc = yaml.safe_load(two_contexts.read_text())
    next(c for c in doc["contexts"] if c["name"] == "real")["context"]["namespace"] = namespace
    two_contexts.write_text(yaml.safe_dump(doc))
    r = ksched("describe-pod", "no-such-pod", "--kubeconfig", str(two_contexts), "--context", "real")
    assert r.returncode == 1 and f"not found in namespace '{namespace}'" in r.stderr, r.stderr

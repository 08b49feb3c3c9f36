"""`ksched describe-pod` at 80 columns: an attempt that ended in a plugin error says which plugin failed and
why, without a misleading feasible count; the score table's headers stay distinguishable."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from .conftest import KSCHED, REPO

SIM = ("--cluster", "examples/cluster", "--pods", "examples/pods.yaml")

BOOM = """\
    from scheduler_runtime.framework.plugin import Plugin


    class Boom(Plugin):
        name = "Boom"

        def filter(self, state, pod, node_info):
            if pod.name == "web-1":
                raise RuntimeError("quota service unreachable")
            return None
    """

CONFIG = """\
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
      - schedulerName: default-scheduler
        plugins:
          multiPoint:
            enabled:
              - name: Boom
    """


def _ksched80(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run([str(KSCHED), *args], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def test_error_attempt_names_the_plugin_and_the_retry(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "boom"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(textwrap.dedent(BOOM))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(textwrap.dedent(CONFIG))
    r = _ksched80("describe-pod", "web-1", "-n", "shop", *SIM, "--plugin-dir", str(tmp_path / "plugins"),
                  "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    last = next(ln for ln in out.splitlines() if ln.startswith("Result since attempt"))
    assert "error in plugin Boom" in last and "feasible" not in last, last
    assert 'Error: running "Boom" filter plugin: quota service unreachable' in out
    why = out[out.index("Why pending"):]
    assert "Plugin Boom failed at Filter: quota service unreachable; the pod is retried with backoff." in why


def test_score_headers_distinguishable_at_80_columns() -> None:
    r = _ksched80("describe-pod", "web-2", "-n", "shop", *SIM)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("Scores of the best nodes"))
    header = lines[i + 1].split()
    assert "…" not in lines[i + 1]
    assert header[:2] == ["node", "total"] and len(set(header)) == len(header)
    assert {"Fit", "Balanced"} <= set(header)
    legend = " ".join(lines[i + 2:])
    assert "Fit = NodeResourcesFit" in legend and "Balanced = NodeResourcesBalancedAllocation" in legend
    assert all(len(ln) <= 80 for ln in lines[i:])


def test_score_headers_in_full_when_they_fit() -> None:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    r = subprocess.run([str(KSCHED), "describe-pod", "web-2", "-n", "shop", *SIM], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "NodeResourcesBalancedAllocation" in r.stdout and "Balanced = " not in r.stdout

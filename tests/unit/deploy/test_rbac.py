"""The runtime's RBAC: nothing beyond the built-in scheduler roles, and no write on pods."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ksched_cli.deploy.rbac import ANNOTATION_PREFIXES, RUNTIME_RULES
from scheduler_runtime.cluster.kube import REQUIRED_PERMISSIONS
from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.simresults import PREFIX

REPO = Path(__file__).resolve().parents[3]


def test_the_runtime_asks_for_no_pod_write_and_no_extra_rule() -> None:
    assert RUNTIME_RULES == []
    pod_writes = [p for p in REQUIRED_PERMISSIONS if p[2] == "pods" and p[0] not in ("list", "watch", "get")]
    assert sorted(pod_writes) == [("create", "", "pods", "binding"), ("delete", "", "pods", ""),
                                  ("patch", "", "pods", "status")]
    assert all(any(k.startswith(p) for p in ANNOTATION_PREFIXES) for k in (RESULT_ANNOTATION, PREFIX + "score"))


def test_print_rbac_for_a_config_that_needs_nothing_says_so(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    r = subprocess.run([sys.executable, "-m", "ksched_cli", "deploy", "--static-pod", "--config", str(cfg),
                        "--print-rbac"], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "nothing to grant" in r.stderr

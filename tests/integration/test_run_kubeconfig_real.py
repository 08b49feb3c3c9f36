"""On the real API server: `ksched run --config X --kubeconfig K` uses X's clientConnection.kubeconfig (K and
$KUBECONFIG point nowhere and are never read), says so in its first lines, and schedules."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import KSCHED


def test_config_kubeconfig_is_used_and_the_flag_and_environment_are_not(control_plane: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {control_plane.kubeconfig_path}
leaderElection:
  leaderElect: false
profiles:
- schedulerName: ksched-kubeconfig-test
""")
    log = tmp_path / "run.log"
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "env-nowhere"), "COLUMNS": "200"}
    with log.open("wb") as fh:
        proc = subprocess.Popen([str(KSCHED), "run", f"--config={cfg}", f"--kubeconfig={tmp_path / 'flag-nowhere'}",
                                 "--secure-port=0"], stdout=fh, stderr=subprocess.STDOUT, env=env)
        try:
            for _ in range(600):
                if "starting to schedule pods" in log.read_text() or proc.poll() is not None:
                    break
                time.sleep(0.1)
            text = log.read_text()
            assert proc.poll() is None, text
            assert "starting to schedule pods" in text, text
            assert (f"using kubeconfig {control_plane.kubeconfig_path} from --config clientConnection.kubeconfig "
                    "(--kubeconfig is ignored when --config is given, as in kube-scheduler; $KUBECONFIG is not "
                    "read, as in kube-scheduler)") in text
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

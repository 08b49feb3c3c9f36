"""Capture a real kube-scheduler's reference outputs into tests/data, for the unit tests that run without it:

    kube-scheduler-<version>-help.txt                 `kube-scheduler --help`
    kube-scheduler-<version>-write-config-to.yaml     `--write-config-to` of a config with only
                                                      clientConnection.kubeconfig and leaderElect: false
    kube-scheduler-<version>-metric-families.json     its scheduler_* metric families (type, labels, buckets, help)
                                                      after it scheduled 5 pods on 2 nodes of the test control
                                                      plane (a real kube-apiserver, scheduler_runtime.controlplane)

Usage: python hack/kube_scheduler_reference.py /path/to/kube-scheduler VERSION [help|config|metrics ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data"

from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG  # noqa: E402  (after the sys.path line)


def capture_help(binary: Path, version: str) -> None:
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    (DATA / f"kube-scheduler-{version}-help.txt").write_text(out)


def capture_config(binary: Path, version: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        cfg, out, kc = Path(d) / "c.yaml", Path(d) / "written.yaml", Path(d) / "scheduler.conf"
        kc.write_text(DUMMY_KUBECONFIG)  # kube-scheduler stats the file; the output names the kubeadm path
        cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                       f"clientConnection:\n  kubeconfig: {kc}\nleaderElection:\n  leaderElect: false\n")
        subprocess.run([str(binary), f"--config={cfg}", f"--write-config-to={out}", "--secure-port=0"],
                       capture_output=True, text=True, timeout=60, check=True)
        (DATA / f"kube-scheduler-{version}-write-config-to.yaml").write_text(
            out.read_text().replace(str(kc), "/etc/kubernetes/scheduler.conf"))


def _families(text: str) -> dict[str, dict[str, object]]:
    """scheduler_* families of a Prometheus text page: type, label names (without le), finite buckets, HELP text
    (with component-base's stability and deprecation prefixes)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, object]] = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        if not name.startswith("scheduler_"):
            continue
        buckets = sorted({float(s.labels["le"]) for s in fam.samples if "le" in s.labels} - {float("inf")})
        out[name] = {"buckets": buckets or None, "labels": sorted({k for s in fam.samples for k in s.labels
                                                                    if k != "le"}), "type": fam.type,
                     "help": fam.documentation}
    return dict(sorted(out.items()))


def capture_metrics(binary: Path, version: str) -> None:
    from scheduler_runtime.cluster.kube import KubeClient, load_connection
    from scheduler_runtime.controlplane import ControlPlane, free_port

    cp = ControlPlane()
    cp.start()
    proc = None
    try:
        kc = str(cp.kubeconfig_path)
        client = KubeClient(load_connection(kc))
        with tempfile.TemporaryDirectory() as d:
            cfg = Path(d) / "c.yaml"
            cfg.write_text(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                           f"clientConnection:\n  kubeconfig: {kc}\nleaderElection:\n  leaderElect: false\n")
            port = free_port()
            proc = subprocess.Popen([str(binary), f"--config={cfg}", f"--secure-port={port}",
                                     "--authorization-always-allow-paths=/metrics,/healthz", "-v=1"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(2):
                client.call("POST", "/api/v1/nodes", body={
                    "apiVersion": "v1", "kind": "Node", "metadata": {"name": f"ref-{i}"},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                               "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}})
            for i in range(5):
                client.call("POST", "/api/v1/namespaces/default/pods", body={
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"ref-{i}"},
                    "spec": {"containers": [{"name": "c", "image": "x",
                                             "resources": {"requests": {"cpu": "100m" if i < 4 else "100"}}}]}})
            time.sleep(2)  # the pods wait on the not-ready taint, so lifting it runs queueing hints
            for i in range(2):  # the API server's TaintNodesByCondition admission added not-ready: lift it
                client.call("PATCH", f"/api/v1/nodes/ref-{i}", body={"spec": {"taints": None}},
                            content_type="application/merge-patch+json")
            import ssl

            ctx = ssl._create_unverified_context()  # noqa: S323 - its self-signed serving certificate
            deadline = time.monotonic() + 60
            while True:
                bound = [p for p in client.call("GET", "/api/v1/namespaces/default/pods")["items"]
                         if p["spec"].get("nodeName")]
                if len(bound) >= 4:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("kube-scheduler did not bind the pods")
                time.sleep(0.5)
            time.sleep(2)
            text = urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=10).read().decode()
        doc = {"families": _families(text),
               "source": f"kube-scheduler v{version} /metrics after scheduling 5 pods on 2 nodes (test control plane)"}
        (DATA / f"kube-scheduler-{version}-metric-families.json").write_text(json.dumps(doc, indent=1,
                                                                                         sort_keys=True) + "\n")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        cp.stop()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    exe, ver = Path(sys.argv[1]), sys.argv[2]
    for what in sys.argv[3:] or ["help", "config", "metrics"]:
        {"help": capture_help, "config": capture_config, "metrics": capture_metrics}[what](exe, ver)

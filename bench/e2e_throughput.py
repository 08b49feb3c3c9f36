"""kube-scheduler vs ksched on a real kube-apiserver: scheduler_perf's SchedulingBasic workload.

For each size, a fresh local control plane gets the nodes; for each scheduler in turn the pods are
created first (scheduler stopped), then the scheduler starts and a watch records when each pod is bound.
Both schedulers use the same config file (same clientConnection QPS/burst, leader election off).
Prints pods/s (first to last bind), p50/p99 time-to-bound after the scheduler started, scheduler CPU
seconds and peak RSS, and the ratios. Not a test: `python bench/e2e_throughput.py [--sizes 500x1000]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from e2e_common import CONFIG, ksched_command, measure_scheduler, parallel  # noqa: E402
from simulate_throughput import node  # noqa: E402 - scheduler_perf's node and pod templates
from simulate_throughput import pod as sched_perf_pod  # noqa: E402

from scheduler_runtime.cluster.kube import KubeClient, load_connection  # noqa: E402
from scheduler_runtime.controlplane import ControlPlane  # noqa: E402


def pod(ns: str, i: int) -> dict:
    p = sched_perf_pod(f"pod-{i}")
    p["metadata"]["namespace"] = ns
    return p


def measure(cp: ControlPlane, client: KubeClient, label: str, cmd: list[str], n_pods: int, ns: str) -> dict:
    client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns}})
    parallel(lambda i: client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=pod(ns, i)), range(n_pods))
    r = measure_scheduler(client, cp.dir / f"{label}.log", label, cmd, ns, n_pods)
    if "error" in r:
        raise SystemExit(f"{label}: {r['error']}")
    return r


def run_size(n_nodes: int, n_pods: int, qps: int, results_mode: str) -> list[dict]:
    with ControlPlane() as cp:
        client = KubeClient(load_connection(str(cp.kubeconfig_path)), qps=5000, burst=5000, pool_size=32)
        parallel(lambda i: client.call("POST", "/api/v1/nodes", body=node(i)), range(n_nodes))
        parallel(lambda i: client.call("PATCH", f"/api/v1/nodes/node-{i}", body={"spec": {"taints": None}},
                                       content_type="application/merge-patch+json"), range(n_nodes))
        cfg = Path(tempfile.mkdtemp()) / "config.yaml"
        cfg.write_text(CONFIG.format(kubeconfig=cp.kubeconfig_path, qps=qps, burst=qps))
        kube = [str(cp.bin_dir / "kube-scheduler"), f"--config={cfg}", "--secure-port=0"]
        ours = ksched_command(cfg, f"--results={results_mode}")
        return [measure(cp, client, "kube-scheduler", kube, n_pods, "bench-kube"),
                measure(cp, client, f"ksched(results={results_mode})", ours, n_pods, "bench-ksched")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="500x1000,5000x10000")
    ap.add_argument("--qps", type=int, default=5000, help="clientConnection qps and burst for both schedulers")
    ap.add_argument("--results", default="ksched", choices=["ksched", "simulator", "off"])
    args = ap.parse_args()
    print(f"{'workload':<26}{'scheduler':<26}{'pods/s':>9}{'p50 s':>8}{'p99 s':>8}{'CPU s':>8}{'RSS MB':>8}")
    for size in args.sizes.split(","):
        n, p = (int(x) for x in size.lower().split("x"))
        rows = run_size(n, p, args.qps, args.results)
        for r in rows:
            print(f"{f'{n} nodes/{p} pods':<26}{r['label']:<26}{r['pods_per_second']:>9.0f}{r['p50']:>8.2f}"
                  f"{r['p99']:>8.2f}{r['cpu']:>8.1f}{r['rss']:>8.0f}", flush=True)
        k, o = rows
        print(f"{'':<26}{'ratio ksched/kube':<26}{o['pods_per_second'] / k['pods_per_second']:>9.2f}"
              f"{'':>16}{o['cpu'] / max(k['cpu'], 0.01):>8.2f}{o['rss'] / max(k['rss'], 1):>8.2f}", flush=True)


if __name__ == "__main__":
    main()

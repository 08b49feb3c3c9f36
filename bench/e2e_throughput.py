"""kube-scheduler vs ksched on a real kube-apiserver: scheduler_perf's SchedulingBasic workload.

For each size, a fresh local control plane gets the nodes; for each scheduler in turn the pods are
created first (scheduler stopped), then the scheduler starts and a watch records when each pod is bound.
Both schedulers use the same config file (same clientConnection QPS/burst, leader election off).
Prints pods/s (first to last bind), p50/p99 time-to-bound after the scheduler started, scheduler CPU
seconds and peak RSS, and the ratios. Not a test: `python bench/e2e_throughput.py [--sizes 500x1000]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from simulate_throughput import node  # noqa: E402 - scheduler_perf's node and pod templates
from simulate_throughput import pod as sched_perf_pod  # noqa: E402

from scheduler_runtime.cluster.kube import KubeClient, load_connection  # noqa: E402
from scheduler_runtime.controlplane import ControlPlane  # noqa: E402

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: {qps}
  burst: {burst}
leaderElection:
  leaderElect: false
"""


def pod(ns: str, i: int) -> dict:
    p = sched_perf_pod(f"pod-{i}")
    p["metadata"]["namespace"] = ns
    return p


def parallel(fn, items, workers: int = 16) -> None:
    with ThreadPoolExecutor(workers) as ex:
        for _ in ex.map(fn, items):
            pass


def proc_stats(pid: int) -> tuple[float, float]:
    """(cpu seconds, peak RSS MB) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = 100.0
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def measure(cp: ControlPlane, client: KubeClient, label: str, cmd: list[str], n_pods: int, ns: str) -> dict:
    client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns}})
    parallel(lambda i: client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=pod(ns, i)), range(n_pods))
    rv = client.call("GET", f"/api/v1/namespaces/{ns}/pods", query={"limit": 1})["metadata"]["resourceVersion"]
    bound: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        """Record first-seen bind times. The API server closes a watch that falls behind during a burst
        (its per-watcher buffer fills while this machine's cores are busy); resume from the last version."""
        last = rv
        while not done.is_set():
            resp = client.open_stream(f"/api/v1/namespaces/{ns}/pods",
                                      {"watch": "1", "resourceVersion": last, "allowWatchBookmarks": "true"},
                                      600, limit=False)
            buf = b""
            for chunk in resp.stream(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    ev = orjson.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    meta = obj.get("metadata") or {}
                    last = meta.get("resourceVersion") or last
                    name = meta.get("name")
                    if (obj.get("spec") or {}).get("nodeName") and name not in bound:
                        bound[name] = time.monotonic()
                        if len(bound) >= n_pods:
                            done.set()
                            resp.close()  # mid-stream: never hand this connection back to the pool
                            return
            resp.close()

    def guarded_watch() -> None:
        try:
            watch()
        except Exception as exc:  # surfaced by the main loop: a silent watch would hang the run
            errors.append(exc)
            done.set()

    errors: list[BaseException] = []
    t = threading.Thread(target=guarded_watch, daemon=True)
    t.start()
    time.sleep(0.5)
    log = open(cp.dir / f"{label}.log", "wb")  # noqa: SIM115
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    peak_cpu, peak_rss = 0.0, 0.0
    while not done.wait(0.5):
        if proc.poll() is not None:
            raise SystemExit(f"{label} exited early; see {cp.dir / (label + '.log')}")
        cpu, rss = proc_stats(proc.pid)
        peak_cpu, peak_rss = max(peak_cpu, cpu), max(peak_rss, rss)
        if time.monotonic() - start > 900:
            raise SystemExit(f"{label}: only {len(bound)}/{n_pods} bound after 15 minutes")
    if errors:
        proc.terminate()
        raise SystemExit(f"{label}: the bench's watch failed after {len(bound)} binds: {errors[0]!r}")
    cpu, rss = proc_stats(proc.pid)
    proc.send_signal(signal.SIGINT if os.environ.get("KSCHED_PYSPY") else signal.SIGTERM)
    proc.wait(60)
    times = sorted(bound.values())
    lat = sorted(t - start for t in times)
    span = times[-1] - times[0] if len(times) > 1 else 1e-9
    return {"label": label, "pods_per_second": n_pods / span, "p50": statistics.median(lat),
            "p99": lat[int(len(lat) * 0.99) - 1], "cpu": max(cpu, peak_cpu), "rss": max(rss, peak_rss)}


def run_size(n_nodes: int, n_pods: int, qps: int, results_mode: str) -> list[dict]:
    with ControlPlane() as cp:
        client = KubeClient(load_connection(str(cp.kubeconfig_path)), qps=5000, burst=5000, pool_size=32)
        parallel(lambda i: client.call("POST", "/api/v1/nodes", body=node(i)), range(n_nodes))
        parallel(lambda i: client.call("PATCH", f"/api/v1/nodes/node-{i}", body={"spec": {"taints": None}},
                                       content_type="application/merge-patch+json"), range(n_nodes))
        cfg = Path(tempfile.mkdtemp()) / "config.yaml"
        cfg.write_text(CONFIG.format(kubeconfig=cp.kubeconfig_path, qps=qps, burst=qps))
        kube = [str(cp.bin_dir / "kube-scheduler"), f"--config={cfg}", "--secure-port=0"]
        ours = [str(Path(sys.executable).parent / "kube-scheduler"), f"--config={cfg}", "--secure-port=0",
                f"--results={results_mode}"]
        if os.environ.get("KSCHED_PYSPY"):  # profile ksched: collapsed stacks into this file (py-spy on PATH)
            ours = ["py-spy", "record", "--format", "raw", "-r", "250", "-o", os.environ["KSCHED_PYSPY"], "--",
                    *ours]
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

"""scheduler_perf's SchedulingBasic workload, in memory, with the default profile.

Nodes: cpu 4, memory 32Gi, pods 110, Ready. Pods: one container requesting 100m / 500Mi.
Prints pods/s, p50/p99 scheduling-cycle time and peak RSS for each size. Not a test: run it by hand,
`python bench/simulate_throughput.py [--sizes 500x1000,5000x10000]`.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_runtime.cluster.memory import MemoryCluster  # noqa: E402
from scheduler_runtime.config import load_config  # noqa: E402
from scheduler_runtime.plugins.registry import build_registry  # noqa: E402
from scheduler_runtime.scheduler import Scheduler  # noqa: E402


def node(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
            "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                       "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "sched-perf"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "ports": [{"containerPort": 80}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                                                   "limits": {"cpu": "100m", "memory": "500Mi"}}}]}}


def run(nodes: int, init_pods: int, pods: int, seed: int = 1) -> dict:
    reg = build_registry([])
    cfg = load_config(None, reg)
    cluster = MemoryCluster()
    for i in range(nodes):
        cluster.create(node(i), emit=False)
    for i in range(init_pods):
        cluster.create(pod(f"init-{i}"), emit=False)
    sched = Scheduler(cluster, cfg, reg, seed=seed, record_breakdown=False)
    sched.start()
    sched.run(until_idle=True)  # init pods, not measured
    assert sched.scheduled == init_pods, (sched.scheduled, init_pods)
    for i in range(pods):
        cluster.create(pod(f"pod-{i}"), emit=True)
    sched.drain_inbox()
    sched.keep_cycle_times = True
    sched.cycle_seconds.clear()
    before = sched.scheduled
    t0 = time.perf_counter()
    sched.run(until_idle=True)
    elapsed = time.perf_counter() - t0
    done = sched.scheduled - before
    cycles = sorted(sched.cycle_seconds)
    return {
        "nodes": nodes, "init_pods": init_pods, "pods": pods, "scheduled": done,
        "seconds": elapsed, "pods_per_second": done / elapsed if elapsed else 0.0,
        "p50_ms": 1000 * statistics.median(cycles) if cycles else 0.0,
        "p99_ms": 1000 * cycles[int(len(cycles) * 0.99) - 1] if cycles else 0.0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="500x1000,5000x10000",
                    help="comma-separated NODESxPODS (init pods: 500 for 500 nodes, 1000 otherwise)")
    args = ap.parse_args()
    print(f"{'workload':<34}{'pods/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'peak RSS MB':>13}")
    for size in args.sizes.split(","):
        n, p = (int(x) for x in size.lower().split("x"))
        init = 500 if n <= 500 else 1000
        r = run(n, init, p)
        print(f"{f'SchedulingBasic {n} nodes/{p} pods':<34}{r['pods_per_second']:>10.0f}{r['p50_ms']:>10.3f}"
              f"{r['p99_ms']:>10.3f}{r['peak_rss_mb']:>13.0f}", flush=True)
        if r["scheduled"] != p:
            print(f"  warning: only {r['scheduled']} of {p} pods scheduled", flush=True)


if __name__ == "__main__":
    main()

"""scheduler_perf's DRA workloads (test/integration/scheduler_perf/dra), in memory, with the default profile.

SchedulingWithResourceClaimTemplate: nodes `scheduler-perf-dra-<i>` each publish one ResourceSlice with
`maxClaimsPerNode` devices of driver test-driver.cdi.k8s.io (createResourceDriver); a DeviceClass selects the
driver; every pod has its own claim from a ResourceClaimTemplate asking for one device (the embedded cluster
instantiates the claims, as kube-controller-manager does). Init pods are scheduled first (not measured), then
the measured pods; SchedulingThroughput is the measured pods over the time to schedule them.

Upstream thresholds (minimum average pods/s, scheduler_perf on kube-scheduler): 5000pods_500nodes 40 with
queueing hints off, 56 with them on. Run by hand:
`python bench/dra_perf.py [--workloads 2000pods_100nodes,5000pods_500nodes]`.
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

DRIVER = "test-driver.cdi.k8s.io"
#: name -> (nodes, maxClaimsPerNode, init pods, measured pods, upstream threshold pods/s or None)
WORKLOADS = {
    "2000pods_100nodes": (100, 20, 1000, 1000, None),
    "2000pods_200nodes": (200, 10, 1000, 1000, None),
    "5000pods_500nodes": (500, 10, 2500, 2500, 56),
}


def node(i: int) -> dict:
    name = f"scheduler-perf-dra-{i}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                       "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}}


def resource_slice(i: int, devices: int) -> dict:
    name = f"scheduler-perf-dra-{i}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"item-{k}"} for k in range(devices)]}}


BASE = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
     "metadata": {"name": "test-claim-template", "namespace": "sched-perf"},
     "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}},
]


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "sched-perf"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "resource"}]}}],
                     "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}]}}


def run(nodes: int, per_node: int, init_pods: int, pods: int, seed: int = 1) -> dict:
    reg = build_registry([])
    cfg = load_config(None, reg)
    cluster = MemoryCluster()
    for o in BASE:
        cluster.create(o, emit=False)
    for i in range(nodes):
        cluster.create(node(i), emit=False)
        cluster.create(resource_slice(i, per_node), emit=False)
    for i in range(init_pods):
        cluster.create(pod(f"init-{i}"), emit=False)
    cluster._sync_claims()
    sched = Scheduler(cluster, cfg, reg, seed=seed, record_breakdown=False)
    sched.start()
    sched.run(until_idle=True)
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
    return {"scheduled": done, "seconds": elapsed, "pods_per_second": done / elapsed if elapsed else 0.0,
            "p50_ms": 1000 * statistics.median(cycles) if cycles else 0.0,
            "p99_ms": 1000 * cycles[int(len(cycles) * 0.99) - 1] if cycles else 0.0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workloads", default="2000pods_100nodes,5000pods_500nodes",
                    help=f"comma-separated SchedulingWithResourceClaimTemplate workloads: {', '.join(WORKLOADS)}")
    args = ap.parse_args()
    print(f"{'SchedulingWithResourceClaimTemplate':<38}{'pods/s':>9}{'upstream':>10}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'RSS MB':>8}")
    for name in args.workloads.split(","):
        nodes, per_node, init, pods, threshold = WORKLOADS[name]
        r = run(nodes, per_node, init, pods)
        print(f"{name:<38}{r['pods_per_second']:>9.0f}{threshold or '-':>10}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
              f"{r['peak_rss_mb']:>8.0f}", flush=True)
        if r["scheduled"] != pods:
            print(f"  warning: only {r['scheduled']} of {pods} pods scheduled", flush=True)


if __name__ == "__main__":
    main()

"""Per-cycle cost of a plugin written through the scaffold's per-node methods.

A no-op Filter + Score plugin (`filter()` and `score()` per node: `ksched new-plugin NoOp --points filter,score`
rendered into a temporary folder and loaded unedited) is added to the default profile, at 5,000 nodes
(SchedulingBasic nodes and pods), and the median scheduling-cycle time is compared with the default profile
alone. The framework's node sampling (percentageOfNodesToScore, adaptive by default) applies to both. Not a
test: `python bench/plugin_overhead.py [--nodes 5000] [--pods 2000]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from simulate_throughput import node, pod  # noqa: E402

from ksched_cli.newplugin import parse_points, scaffold  # noqa: E402
from scheduler_runtime.cluster.memory import MemoryCluster  # noqa: E402
from scheduler_runtime.config.loader import build  # noqa: E402
from scheduler_runtime.framework.plugin import Plugin  # noqa: E402
from scheduler_runtime.plugins.registry import build_registry  # noqa: E402
from scheduler_runtime.scheduler import Scheduler  # noqa: E402
from scheduler_runtime.testing import config_for, plugin_from_folder  # noqa: E402


def scaffolded_noop(workdir: Path) -> type[Plugin]:
    """`ksched new-plugin NoOp --points filter,score` into `workdir`, loaded like `--plugin-dir` loads it: the
    neutral per-node `filter()` and `score()` plus the template's `normalize_score()` loop, unedited."""
    folder = scaffold("NoOp", parse_points("filter,score"), [], workdir, known=set())
    return plugin_from_folder(folder, "NoOp")


def cycle_times(plugin: type[Plugin], n_nodes: int, n_pods: int, with_plugin: bool,
                pct: int | None) -> tuple[list[float], int]:
    reg = build_registry([])
    reg.register(plugin, "bench")
    doc = config_for(plugin if with_plugin else None, scheduler_name="default-scheduler")
    if pct is not None:
        doc["percentageOfNodesToScore"] = pct
    cfg = build(doc, reg)
    cluster = MemoryCluster()
    for i in range(n_nodes):
        cluster.create(node(i), emit=False)
    sched = Scheduler(cluster, cfg, reg, seed=1, record_breakdown=False)
    sched.start()
    for i in range(n_pods):
        cluster.create(pod(f"pod-{i}"), emit=True)
    sched.drain_inbox()
    sched.keep_cycle_times = True
    sched.run(until_idle=True)
    return sched.cycle_seconds, sched.scheduled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--percentage", type=int, default=None, help="percentageOfNodesToScore (default: adaptive)")
    a = ap.parse_args()
    print(f"{a.nodes} nodes, {a.pods} pods, percentageOfNodesToScore={a.percentage or 'adaptive'}")
    print(f"{'profile':<36}{'p50 ms':>9}{'p99 ms':>9}{'pods/s':>9}")
    res = {}
    workdir = Path(tempfile.mkdtemp(prefix="ksched-bench-"))
    plugin = scaffolded_noop(workdir)
    for label, on in (("default", False), ("default + NoOp (per-node)", True)):
        t0 = time.perf_counter()
        cycles, done = cycle_times(plugin, a.nodes, a.pods, on, a.percentage)
        wall = time.perf_counter() - t0
        cycles.sort()
        res[label] = statistics.median(cycles) * 1000
        print(f"{label:<36}{res[label]:>9.3f}{cycles[int(len(cycles) * 0.99) - 1] * 1000:>9.3f}"
              f"{done / wall:>9.0f}", flush=True)
    added = res["default + NoOp (per-node)"] - res["default"]
    print(f"added per cycle by the plugin: {added:.3f} ms (target < 5 ms)")


if __name__ == "__main__":
    main()

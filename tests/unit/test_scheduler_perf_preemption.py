"""bench/scheduler_perf.py's memory mode when a churn preemptor evicts a measured pod (PreemptionAsync): the
measured pod was bound, so the bench counts it, as upstream's scheduler_perf does (there the victim stays
Terminating with its nodeName); it must not wait for it until the timeout. The benchmark itself is not run."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import scheduler_perf as sp  # noqa: E402

from scheduler_runtime.cluster.memory import MemoryCluster  # noqa: E402
from scheduler_runtime.config import load_config  # noqa: E402


def _bound_now(cluster: MemoryCluster, ns: str) -> int:
    return sum(1 for raw in cluster.list("pods", ns)
               if raw["metadata"]["name"].startswith("m-") and raw["spec"].get("nodeName"))


def test_a_measured_pod_preempted_after_binding_still_counts_as_bound() -> None:
    cluster = MemoryCluster()
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "churn"}}, emit=False)
    for i in range(2):  # two 4-CPU nodes, each holding one measured pod of 100m
        cluster.create(sp.NODE_DEFAULT(i), emit=False)
    reg = sp.build_registry([])
    sched = sp.Scheduler(cluster, load_config(None, reg), reg, seed=1, record_breakdown=False)
    sched.start()
    try:
        for i in range(2):
            cluster.create(sp._named(sp.POD_DEFAULT, i, "default", "m"), emit=True)
        sched.run(until_idle=True)
        ever = sp._EverBound(cluster, "default")
        assert ever.count() == 2 and _bound_now(cluster, "default") == 2
        # PreemptionAsync's churn pod (3970m, priority 9999999) fits only where every other pod is evicted
        cluster.create(sp._named(sp.POD_PREEMPTOR, 0, "churn", "churn"), emit=True)
        sched.run(until_idle=True)  # the preemptor nominated, its victims deleted
        sched.finish_bindings()  # any deletion still on a binding worker done
        sched.run(until_idle=True)  # the preemptor bound
        assert cluster.get_pod("churn", "churn-0")["spec"].get("nodeName")
        assert len([k for k in cluster.deleted if k.startswith("default/m-")]) == 1
        assert _bound_now(cluster, "default") == 1  # what the bench counted: it waited for this pod forever
        assert ever.count() == 2
        assert ever.preempted() == 1
    finally:
        sched.stop()

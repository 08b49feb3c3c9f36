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


class _ListClient:
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def call(self, method: str, path: str, **kw: object) -> dict:
        assert (method, path) == ("GET", "/api/v1/namespaces/default/pods")
        return {"items": self.items}


def test_an_e2e_timeout_says_whether_the_watch_or_the_scheduler_stalled() -> None:
    import e2e_common

    def pod(name: str, node: str = "", **status: object) -> dict:
        return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}, "status": status}
    items = [pod("m-0", "node-0"), pod("m-1", "node-1"), pod("init-0"),
             pod("m-2", nominatedNodeName="node-3", conditions=[
                 {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes"}])]
    out = e2e_common._unbound_summary(_ListClient(items), "default", "m-", {"m-0": 1.0})
    assert "1 bound per the API server but not seen by the watch" in out
    assert "1 unbound, e.g. m-2 nominated=node-3 Unschedulable: 0/4 nodes" in out
    assert "init-0" not in out
    assert e2e_common._unbound_summary(_ListClient(items[:1]), "default", "m-", {"m-0": 1.0}) == ""

"""InterPodAffinity reuses existing pods' anti-affinity sums between alike pods: never past a change."""

from __future__ import annotations

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

from .test_preemption_dry_run import _node, _pod


def test_existing_anti_affinity_sums_follow_new_pods() -> None:
    """InterPodAffinity reuses the existing pods' anti-affinity sums between alike pods only while no pod
    carrying such a term came or went: a later pod sees the newcomer's term."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    cluster = MemoryCluster()
    for n in ("a", "b", "c"):
        cluster.create(_node(n, "4"), emit=False)
    cluster.create({**_pod("guard-a", "100m", 0, "a"), "spec": {**_pod("guard-a", "100m", 0, "a")["spec"],
                                                                  "affinity": anti}}, emit=False)
    reg = build_registry([])
    s = Scheduler(cluster, load_config(None, reg), reg, seed=1)
    s.start()
    cluster.create(_pod("g1", "1", 0, labels={"color": "green"}))
    s.run(until_idle=True)
    g1 = cluster.get_pod("ns", "g1")["spec"]["nodeName"]
    assert g1 in ("b", "c")
    other = "c" if g1 == "b" else "b"
    guard = _pod("guard-2", "100m", 0, other)
    guard["spec"]["affinity"] = anti
    cluster.create(guard)
    cluster.create(_pod("g2", "1", 0, labels={"color": "green"}))
    s.run(until_idle=True)
    assert cluster.get_pod("ns", "g2")["spec"]["nodeName"] == g1

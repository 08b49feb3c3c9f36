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


def test_reused_existing_anti_sums_are_copied_before_add_pod_changes_them() -> None:
    """Alike pods share the cached anti-affinity sums; a cycle's AddPod (nominated pods, preemption's
    what-if) changes its own copy only, never the next pod's."""
    from scheduler_runtime.framework.cycle_state import CycleState
    from scheduler_runtime.framework.nodelist import NodeList
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.plugins.interpodaffinity import _PRE_FILTER, InterPodAffinity
    from scheduler_runtime.testing.builders import make_node, make_pod, snapshot_of

    def guarded(name: str, node: str) -> Pod:
        raw = make_pod(name).on_node(node).build()
        raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        return Pod.from_dict(raw)

    nodes = [make_node(n).label("kubernetes.io/hostname", n).record() for n in ("a", "b", "c")]
    snap = snapshot_of(*nodes, placed={"a": [guarded("guard-a", "a")]})
    ipa = InterPodAffinity()
    green = [make_pod(f"g{i}").label("color", "green").record() for i in range(3)]
    first, second = CycleState(), CycleState()
    assert ipa.pre_filter(first, green[0], NodeList(snap)) is None
    assert ipa.pre_filter(second, green[1], NodeList(snap)) is None
    ipa.add_pod(first, green[0], guarded("guard-b", "b"), snap.get("b"))
    assert first.get(_PRE_FILTER).existing_anti.get(("kubernetes.io/hostname", "b")) == 1
    assert second.get(_PRE_FILTER).existing_anti.get(("kubernetes.io/hostname", "b")) == 0
    third = CycleState()
    assert ipa.pre_filter(third, green[2], NodeList(snap)) is None
    assert third.get(_PRE_FILTER).existing_anti.get(("kubernetes.io/hostname", "b")) == 0
    assert ipa.filter_batch(third, green[2], snap).ok.tolist() == [False, True, True]

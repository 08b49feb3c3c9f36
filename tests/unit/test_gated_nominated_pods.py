"""A pod nominated to a node keeps that node's room for itself while it waits, gated or not: lower-priority
pods do not take it (kube-scheduler 1.37, #139057: a gated pod's nomination is recorded when it is added;
an update that sets or clears status.nominatedNodeName moves the nomination, as kube's UpdateNominatedPod)."""

from __future__ import annotations

from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

NS = "default"


def _pod(name: str, priority: int, cpu: str, *, gated: bool = False, nominated: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
                           "spec": spec}
    if nominated:
        pod["status"] = {"nominatedNodeName": nominated}
    return pod


def _setup() -> tuple[MemoryCluster, Scheduler]:
    m = MemoryCluster()
    m.create({"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    return m, s


def _node(m: MemoryCluster, name: str) -> str:
    return ((m.get_pod(NS, name) or {}).get("spec") or {}).get("nodeName") or ""


def test_a_gated_pod_added_with_a_nomination_keeps_its_room() -> None:
    m, s = _setup()
    m.create(_pod("big", 100, "3", gated=True, nominated="n1"))
    m.create(_pod("small", 1, "2"))
    s.run(until_idle=True)
    assert _node(m, "small") == ""  # 3 of 4 CPUs are held for the nominated pod


def test_a_nomination_set_by_an_update_holds_the_room_and_clearing_it_frees_it() -> None:
    m, s = _setup()
    m.create(_pod("big", 100, "3", gated=True))
    s.run(until_idle=True)
    m.patch_object("pods", "big", NS, {"status": {"nominatedNodeName": "n1"}}, subresource="status")
    m.create(_pod("small", 1, "2"))
    s.run(until_idle=True)
    assert _node(m, "small") == ""
    m.patch_object("pods", "big", NS, {"status": {"nominatedNodeName": None}}, subresource="status")
    s.run(until_idle=True)
    m.create(_pod("small-2", 1, "2"))
    s.run(until_idle=True)
    assert "n1" in (_node(m, "small"), _node(m, "small-2"))

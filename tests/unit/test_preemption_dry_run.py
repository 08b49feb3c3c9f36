"""The preemption dry run's shortcuts (outcomes reused across nodes alike, Node-only filters not re-run when a
victim is added back) and Filter's reuse of nominated-pods outcomes between nodes alike decide exactly as
the plain per-node walk: same victims, nominations, messages and scheduler_plugin_evaluation_total, on
clusters where some nodes look alike and others do not."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.filtering import FilterRunner
from scheduler_runtime.metrics import SchedulerMetrics
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins import defaultpreemption
from scheduler_runtime.plugins.noderesources import NodeResourcesFit
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def _node(name: str, cpu: str, pods: str = "110", unschedulable: bool = False) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": pods}}}


def _pod(name: str, cpu: str, priority: int, node_name: str = "", start: str = "", port: int = 0,
         labels: dict | None = None) -> dict:
    c: dict = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    if port:
        c["ports"] = [{"containerPort": port, "hostPort": port}]
    s: dict = {"containers": [c], "priority": priority}
    if node_name:
        s["nodeName"] = node_name
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
           "spec": s}
    if start:
        out["status"] = {"startTime": start}
    return out


def _scenario(seed: int) -> tuple[list[dict], list[dict]]:
    """Nodes made from a few templates (a shape and the pods it holds: sizes, priorities; start times and
    labels drawn per pod), so some nodes look alike to the dry run and others do not; then preemptors."""
    rng = random.Random(seed)
    templates = [(rng.choice(["2", "4", "4"]), rng.choice(["110", "110", "5"]),
                  [(rng.choice(["500m", "900m", "1"]), rng.choice([0, 1, 1, 5])) for _ in range(rng.randint(0, 5))])
                 for _ in range(3)]
    objs: list[dict] = []
    for i in range(rng.randint(6, 30)):
        name = f"n{i}"
        cpu, max_pods, pods = rng.choice(templates)
        objs.append(_node(name, cpu, max_pods, unschedulable=rng.random() < 0.05))
        for k, (req, prio) in enumerate(pods):
            objs.append(_pod(f"{name}-p{k}", req, prio, name,
                             start=rng.choice(["", "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z"]),
                             port=8080 if rng.random() < 0.05 else 0, labels={"app": rng.choice(["a", "b"])}))
    if rng.random() < 0.3:
        objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "pdb", "namespace": "ns"},
                     "spec": {"selector": {"matchLabels": {"app": "a"}}}, "status": {"disruptionsAllowed": 1}})
    preemptors = [_pod(f"hi{j}", rng.choice(["1", "2", "3"]), rng.choice([3, 10, 10]),
                       port=8080 if rng.random() < 0.1 else 0) for j in range(rng.randint(1, 10))]
    return objs, preemptors


def _run(objs: list[dict], preemptors: list[dict]) -> tuple[list[str], dict, list[str], dict]:
    cluster = MemoryCluster()
    for o in objs:
        cluster.create(o, emit=False)
    reg = build_registry([])
    metrics = SchedulerMetrics(CollectorRegistry())
    s = Scheduler(cluster, load_config(None, reg), reg, seed=7, metrics=metrics)
    s.start()
    # pods nominated to some nodes (as by an earlier preemption whose preemptor waits): the first Filter pass
    # of the dry run adds them; nodes alike but for them must not share an outcome
    extra = {f"n{i}": [Pod.from_dict(_pod(f"nominated-{i}", rng_cpu, 20))]
             for i, rng_cpu in enumerate(["1", "", "3", "", "1", "2", "", "3"] * 4) if rng_cpu and i % 3 == 0}
    for fw in s.frameworks.values():
        real = fw.handle.nominated_pods_for_node
        fw.handle.nominated_pods_for_node = lambda name, real=real: extra.get(name, []) + real(name)
        names = fw.handle.nominated_node_names
        fw.handle.nominated_node_names = lambda names=names: set(extra) | names()
        fw.handle.nominated_pods_by_node = fw.handle._nominated_pods_by_node  # made of the two above
    for p in preemptors:
        cluster.create(p)
    s.run(until_idle=True)
    placed = {f"{p['metadata']['name']}": (p["spec"].get("nodeName"), (p.get("status") or {}).get("nominatedNodeName"),
                                           [c.get("message") for c in (p.get("status") or {}).get("conditions") or []])
              for p in cluster.list("pods")}
    evaluations = {labels: v for labels, v in _samples(metrics)}
    return list(cluster.deleted), placed, sorted(e.note for p in placed for e in cluster.events_for("ns", p)), \
        evaluations


def _samples(metrics: SchedulerMetrics):
    for fam in metrics.plugin_evaluation.collect():
        for smp in fam.samples:
            if smp.name.endswith("_total"):
                yield tuple(sorted(smp.labels.items())), smp.value


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run without its shortcuts: no reuse, every Filter plugin run on every re-check."""
    monkeypatch.setattr(defaultpreemption._DryRun, "select_remembered",
                        lambda self, ni, lower, nominated, compute: compute())
    monkeypatch.setattr(defaultpreemption._DryRun, "refilter",
                        lambda self, state, ni: self.fw.run_filter(state, self.pod, ni))
    monkeypatch.setattr(FilterRunner, "_nominated_reuse", lambda self, state, pod, replays: None)


@pytest.mark.parametrize("seed", range(40))
def test_dry_run_shortcuts_decide_as_the_plain_walk(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    objs, preemptors = _scenario(seed)
    fast = _run(objs, preemptors)
    with monkeypatch.context() as m:
        _plain(m)
        plain = _run(objs, preemptors)
    assert fast == plain


def test_alike_nodes_are_dry_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 nodes holding the same four pods: the victims of a node are worked out by running Filter on a
    handful of nodes, not on the 100 candidates kube-scheduler's sampling asks for."""
    objs = []
    for i in range(200):
        objs.append(_node(f"n{i}", "4"))
        objs += [_pod(f"n{i}-p{k}", "900m", 0, f"n{i}") for k in range(4)]
    calls = 0
    real = NodeResourcesFit.filter

    def counting(self, state, pod, node_info):  # noqa: ANN001, ANN202
        nonlocal calls
        calls += 1
        return real(self, state, pod, node_info)

    monkeypatch.setattr(NodeResourcesFit, "filter", counting)
    deleted, placed, _, _ = _run(objs, [_pod("hi", "3", 10)])
    assert len(deleted) == 3 and placed["hi"][0]
    assert calls < 20, calls


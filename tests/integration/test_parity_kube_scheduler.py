"""Parity with the real kube-scheduler (built from the same Go release as the test control plane).

kube-scheduler schedules a fixed scenario of 60 pods over 24 nodes one pod at a time on the real API
server. ksched then replays the same sequence in its embedded cluster, decision by decision, keeping its
state aligned with kube-scheduler's choices. Wherever ksched's best score is unique, it must choose the
node kube-scheduler chose; both must leave the same pods pending.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.results import ResultStore
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing.kube import kube_scheduler, put_node, scheduler_config, wait_decision

pytestmark = pytest.mark.integration
NS = "parity"
#: its own profile name: pods other tests left on the shared API server (default-scheduler, in namespaces
#: that no namespace controller empties here) must not be scheduled by kube-scheduler during this run
SCHEDULER = "parity-scheduler"
ZONES = ["z1", "z2", "z3"]


def scenario(seed: int = 11) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    nodes = []
    for i in range(24):
        cpu = rng.choice([2, 4, 8, 16])
        mem = rng.choice([4, 8, 16, 32])
        labels = {"kubernetes.io/hostname": f"pn-{i}", "topology.kubernetes.io/zone": ZONES[i % 3],
                  "parity": "yes"}
        if i % 5 == 0:
            labels["disktype"] = "ssd"
        spec: dict = {}
        if i in (3, 11, 19):
            spec["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
        if i in (7, 15):
            spec["taints"] = [{"key": "spot", "effect": "PreferNoSchedule"}]
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"pn-{i}", "labels": labels},
                      "spec": spec,
                      "status": {"capacity": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"},
                                 "allocatable": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
    pods = []
    for i in range(60):
        cpu = rng.choice(["100m", "250m", "500m", "1", "2", "3"])
        mem = rng.choice(["128Mi", "512Mi", "1Gi", "2Gi", "6Gi"])
        app = rng.choice(["web", "api", "batch", "cache"])
        spec: dict = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                      "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
                      "nodeSelector": {"parity": "yes"}, "schedulerName": SCHEDULER}
        kind = i % 6
        if kind == 1:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
        elif kind == 2:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [{"key": "disktype", "operator": "In",
                                                                      "values": ["ssd"]}]}}]}}
        elif kind == 3:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": {"app": app}}}]
        elif kind == 4:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if i in (17, 41):
            spec["containers"][0]["resources"]["requests"]["cpu"] = "32"  # fits nowhere
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"pp-{i:02d}", "namespace": NS, "labels": {"app": app}}, "spec": spec})
    return nodes, pods


def run_kube_scheduler(cp, nodes: list[dict], pods: list[dict]) -> dict[str, str | None]:
    c = KubeClient(load_connection(str(cp.kubeconfig_path)))
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for n in nodes:
        put_node(c, n)
    cfg = cp.dir / "parity-config.yaml"
    cfg.write_text(scheduler_config(SCHEDULER, cp.kubeconfig_path))
    out: dict[str, str | None] = {}
    with kube_scheduler(cp.bin_dir, cfg, cp.dir / "kube-scheduler.log"):
        for p in pods:
            name = p["metadata"]["name"]
            c.call("POST", f"/api/v1/namespaces/{NS}/pods", body=p)
            state, what = wait_decision(c, NS, name)
            out[name] = what if state == "bound" else None
            if state == "pending":  # keep it from being retried later, so each decision stands alone
                c.call("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", body={"gracePeriodSeconds": 0})
    return out


def run_ksched_aligned(nodes: list[dict], pods: list[dict], kube: dict[str, str | None], cfg_file: Path):
    reg = build_registry([])
    cluster = MemoryCluster()
    for n in nodes:
        cluster.create(n, emit=False)
    results = ResultStore()
    sched = Scheduler(cluster, load_config(cfg_file, reg), reg, seed=5, results=results)
    sched.start()
    decisions = []
    for p in pods:
        name = p["metadata"]["name"]
        cluster.create(p)
        sched.run(until_idle=True)
        raw = cluster.get_pod(NS, name)
        ours = (raw.get("spec") or {}).get("nodeName")
        r = results.get(f"{NS}/{name}")
        top = [s["total"] for s in (r.scores if r else [])]
        unique = ours is not None and (len(top) <= 1 or top[0] > top[1])
        decisions.append((name, kube[name], ours, unique))
        # align with kube-scheduler's choice before the next pod
        cluster.delete("pods", name, NS)
        sched.drain_inbox()
        if kube[name] is not None:
            aligned = dict(p)
            aligned["spec"] = {**p["spec"], "nodeName": kube[name]}
            cluster.create(aligned)
            sched.drain_inbox()
    return decisions


def test_decisions_match_kube_scheduler(control_plane, tmp_path: Path):
    nodes, pods = scenario()
    kube = run_kube_scheduler(control_plane, nodes, pods)
    cfg = tmp_path / "ksched.yaml"
    cfg.write_text(scheduler_config(SCHEDULER))
    decisions = run_ksched_aligned(nodes, pods, kube, cfg)
    pending_kube = {n for n, k, _, _ in decisions if k is None}
    pending_ours = {n for n, _, o, _ in decisions if o is None}
    assert pending_kube == pending_ours, (pending_kube, pending_ours)
    unique = [(n, k, o) for n, k, o, u in decisions if u and k is not None]
    mismatches = [(n, k, o) for n, k, o in unique if k != o]
    report = tmp_path / "parity.txt"
    report.write_text("\n".join(f"{n}: kube={k} ksched={o} unique={u}" for n, k, o, u in decisions))
    assert len(unique) >= 30, f"too few unique-best decisions to compare ({len(unique)})"
    assert not mismatches, mismatches

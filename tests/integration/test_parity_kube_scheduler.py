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
from scheduler_runtime.testing.kube import kube_scheduler, put_node, run_ksched_aligned, scheduler_config, wait_decision

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


def test_decisions_match_kube_scheduler(control_plane, tmp_path: Path):
    nodes, pods = scenario()
    kube = run_kube_scheduler(control_plane, nodes, pods)
    cfg = tmp_path / "ksched.yaml"
    cfg.write_text(scheduler_config(SCHEDULER))
    decisions = run_ksched_aligned(cfg, nodes, pods, kube, NS)
    pending_kube = {d.name for d in decisions if d.kube is None}
    pending_ours = {d.name for d in decisions if d.ours is None}
    assert pending_kube == pending_ours, (pending_kube, pending_ours)
    unique = [(d.name, d.kube, d.ours) for d in decisions if d.unique and d.kube is not None]
    mismatches = [(n, k, o) for n, k, o in unique if k != o]
    report = tmp_path / "parity.txt"
    report.write_text("\n".join(f"{d.name}: kube={d.kube} ksched={d.ours} unique={d.unique}" for d in decisions))
    assert len(unique) >= 30, f"too few unique-best decisions to compare ({len(unique)})"
    assert not mismatches, mismatches

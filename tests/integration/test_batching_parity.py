"""Opportunistic batching against the real kube-scheduler: the same batchable workload (scheduler_perf's
HostPortConflict: equivalent pods that each need host port 80, so one per node, with the PodTopologySpread
configuration of scheduler_perf's batching tests) is scheduled by kube-scheduler, then by ksched, on the same
nodes; placements and the scheduler_batch_* counters must be equal.

The pods exist before each scheduler starts, so it pops them in consecutive cycles well within the 500 ms a
cached ranking lives. A preferred node affinity ranks the nodes, so every decision is unique (no ties)."""

from __future__ import annotations

import socket
import ssl
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.testing.kube import create_node, ksched_runner, kube_scheduler, wait_decision, wait_for

pytestmark = pytest.mark.integration
N = 8
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
{client}leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {name}
"""
#: scheduler_perf's batching/scheduler-config-no-topology.yaml; kube's default (system default spreading)
#: refuses to sign every pod
NO_TOPOLOGY = """  pluginConfig:
  - name: PodTopologySpread
    args: {defaultingType: List, defaultConstraints: []}
"""


def _pods(ns: str, group: str, scheduler: str, prefix: str, host_port: bool = True) -> list[dict[str, Any]]:
    ranked = [{"weight": i + 1, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"{group}-{i}"]}]}} for i in range(N)]
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{prefix}-{i}", "namespace": ns},
             "spec": {"schedulerName": scheduler, "nodeSelector": {"test-group": group},
                      "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ranked}},
                      "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                                      **({"ports": [{"containerPort": 80, "hostPort": 80}]} if host_port else {}),
                                      "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}
            for i in range(N)]


def _batch_counts(text: str, profile: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("profile") != profile:
                continue
            if s.name == "scheduler_batch_attempts_total":
                out[("attempt", s.labels["result"])] = s.value
            elif s.name == "scheduler_batch_cache_flushed_total":
                out[("flush", s.labels["reason"])] = s.value
            elif s.name == "scheduler_get_node_hint_duration_seconds_count":
                out[("hinted", s.labels["hinted"])] = s.value
            elif s.name == "scheduler_store_schedule_results_duration_seconds_count":
                out[("stored", "")] = s.value
            elif s.name == "scheduler_batch_rescore_attempts_total":
                out[("rescore", "")] = s.value
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=10) as r:
        return r.read().decode()


def _run(admin: KubeClient, ns: str, pods: list[dict[str, Any]]) -> dict[str, str]:
    return {p["metadata"]["name"].split("-", 1)[1]: wait_decision(admin, ns, p["metadata"]["name"])[1] for p in pods}


def _kube_bin(control_plane: Any, minor: int, prev_kube_scheduler: Path) -> tuple[Path, tuple[str, ...]]:
    """kube-scheduler of that minor: the control plane's own (the pinned 1.37) or the previous minor's."""
    if minor == 37:
        return Path(control_plane.bin_dir), ()
    return prev_kube_scheduler.parent, ()


@pytest.mark.parametrize(("workload", "profile", "minor"), [
    ("hostport", "no-topology", 36), ("hostport", "default", 36), ("small", "no-topology", 36),
    ("hostport", "no-topology", 37), ("hostport", "default", 37), ("small", "no-topology", 37)])
def test_batched_placements_and_counters_match_kube_scheduler(workload: str, profile: str, minor: int,
                                                              control_plane: Any, namespace: str,
                                                              tmp_path: Path, prev_kube_scheduler: Path) -> None:
    """hostport: one pod per node, batched. small: every pod fits the best node again: 1.36 flushes the cache
    each time (node_not_full), 1.37 rescores that node and hints it again; all pods go to the best node."""
    cp = control_plane
    bin_dir, kube_flags = _kube_bin(cp, minor, prev_kube_scheduler)
    extra = NO_TOPOLOGY if profile == "no-topology" else ""
    host_port = workload == "hostport"
    admin = KubeClient(load_connection(str(cp.kubeconfig_path)))
    group = f"bp-{uuid.uuid4().hex[:6]}"
    for i in range(N):
        create_node(admin, f"{group}-{i}", cpu="4", labels={"test-group": group})
    try:
        kube_name, ours_name = f"{group}-kube", f"{group}-ksched"
        kube_pods = _pods(namespace, group, kube_name, "kube", host_port)
        for p in kube_pods:
            admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=p)
        cfg = tmp_path / "kube.yaml"
        cfg.write_text(CONFIG.format(client=f"clientConnection: {{kubeconfig: {cp.kubeconfig_path}}}\n",
                                     name=kube_name) + extra)
        port = _free_port()
        with kube_scheduler(bin_dir, cfg, tmp_path / "kube-scheduler.log", args=(
                f"--secure-port={port}", "--bind-address=127.0.0.1",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", *kube_flags)):
            kube = _run(admin, namespace, kube_pods)
            kube_counts = wait_for(lambda: _batch_counts(_scrape(port), kube_name), 30, "kube-scheduler's metrics")
        for p in kube_pods:  # free the host ports
            admin.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}",
                       query={"gracePeriodSeconds": "0"})
        wait_for(lambda: not any(admin.request("GET", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}")
                                 .ok for p in kube_pods), 30, "kube-scheduler's pods deleted")

        ours_pods = _pods(namespace, group, ours_name, "ours", host_port)
        for p in ours_pods:
            admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=p)
        ours_cfg = tmp_path / "ksched.yaml"
        ours_cfg.write_text(CONFIG.format(client="", name=ours_name) + extra)
        with ksched_runner(ours_cfg, cp.kubeconfig_path, batch_rescore=minor >= 37) as runner:
            ours = _run(admin, namespace, ours_pods)
            ours_counts = _batch_counts(generate_latest(runner.metrics.registry).decode(), ours_name)
    finally:
        for i in range(N):
            admin.request("DELETE", f"/api/v1/nodes/{group}-{i}")

    print(f"\nkube-scheduler: {kube}\n{kube_counts}\nksched: {ours}\n{ours_counts}")
    if host_port:  # one pod per node; which pod comes first is the queue's order of pods queued at once
        assert sorted(kube.values()) == sorted(ours.values()) == sorted(f"{group}-{i}" for i in range(N))
    else:
        assert kube == ours == {str(i): f"{group}-{N - 1}" for i in range(N)}
    if workload == "small" and minor == 36:
        assert kube_counts[("flush", "node_not_full")] == N - 1
    elif profile == "no-topology":  # the workload is batched by kube-scheduler
        assert kube_counts[("attempt", "hint_used")] == N - 1
    else:  # signed by nobody: every cycle flushes, the last one with a single feasible node
        assert kube_counts[("flush", "pod_not_batchable")] == N - 1 and kube_counts[("flush", "empty_list")] == 1
    assert ours_counts == kube_counts

"""KubeSchedulerConfiguration fields that change behaviour, set through a real configuration file (the walker
in test_flag_and_field_coverage.py points at these by name)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def _config(tmp: Path, doc: dict[str, Any]) -> Any:
    p = tmp / "config.yaml"
    p.write_text(yaml.safe_dump({**HEAD, **doc}))
    return load_config(p, build_registry([]))


def _node(name: str, cpu: str = "4", **extra: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", **extra}}}


def _pod(name: str, cpu: str = "100m", node: str = "", priority: int = 0, labels: dict | None = None,
         **spec: Any) -> dict:
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "app:1",
                                         "resources": {"requests": {"cpu": cpu}}}], "priority": priority, **spec}
    if node:
        s["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": s}


def _schedule(cfg: Any, objs: list[dict], pending: list[dict], seed: int = 1) -> MemoryCluster:
    cluster = MemoryCluster()
    for o in objs:
        cluster.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(cluster, cfg, reg, seed=seed)
    s.start()
    for p in pending:
        cluster.create(p)
    s.run(until_idle=True)
    return cluster


def _profile(plugin: str, args: dict) -> dict:
    return {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{"name": plugin, "args": args}]}]}


def test_leader_election_and_client_connection_reach_the_runner(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    cfg = _config(tmp_path, {
        "leaderElection": {"leaderElect": True, "leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s",
                           "resourceName": "my-lock", "resourceNamespace": "my-ns"},
        "clientConnection": {"kubeconfig": str(kc), "qps": 11, "burst": 22}, "delayCacheUntilActive": True})
    r = Runner(cfg, build_registry([]), RunOptions(kubeconfig=str(kc), secure_port=0))
    try:
        e = r.elector
        assert e is not None
        assert (e.name, e.namespace, e.lease_duration, e.renew_deadline, e.retry_period) == \
            ("my-lock", "my-ns", 30.0, 20.0, 4.0)
        assert (r.cluster.client.limiter.qps, r.cluster.client.limiter.burst) == (11.0, 22)
        # delayCacheUntilActive: the informers' thread starts only when this replica starts leading
        started = threading.Event()
        r._sched_thread = threading.Thread(target=started.set)
        assert r._delay_cache
        r._start_scheduling()
        assert started.wait(5)
    finally:
        r.cluster.stop()
    cfg = _config(tmp_path, {"clientConnection": {"kubeconfig": str(kc)}})
    r = Runner(cfg, build_registry([]), RunOptions(kubeconfig=str(kc), secure_port=0))
    try:
        assert not r._delay_cache  # default: a standby keeps its caches warm
    finally:
        r.cluster.stop()


def test_node_resources_fit_ignored_resources(tmp_path: Path) -> None:
    gpu_pod = _pod("g")
    gpu_pod["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    m = _schedule(_config(tmp_path, {}), [_node("plain")], [gpu_pod])
    assert not m.get_pod("ns", "g")["spec"].get("nodeName")
    cfg = _config(tmp_path, _profile("NodeResourcesFit", {"ignoredResources": ["example.com/gpu"]}))
    m = _schedule(cfg, [_node("plain")], [gpu_pod])
    assert m.get_pod("ns", "g")["spec"]["nodeName"] == "plain"


def test_inter_pod_affinity_ignore_preferred_terms_of_existing_pods(tmp_path: Path) -> None:
    """An existing pod's preferred affinity to the incoming pod pulls it to that pod's node, unless
    ignorePreferredTermsOfExistingPods (then the emptier node wins on resources)."""
    fan = _pod("fan", node="n2", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "leader"}},
                                            "topologyKey": "kubernetes.io/hostname"}}]}})
    leader = _pod("leader", labels={"app": "leader"})
    m = _schedule(_config(tmp_path, {}), [_node("n1"), _node("n2"), fan], [leader])
    assert m.get_pod("ns", "leader")["spec"]["nodeName"] == "n2"
    cfg = _config(tmp_path, _profile("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": True}))
    m = _schedule(cfg, [_node("n1"), _node("n2"), fan], [leader])
    assert m.get_pod("ns", "leader")["spec"]["nodeName"] == "n1"


def test_default_preemption_min_candidate_nodes(tmp_path: Path) -> None:
    """With every potential node a candidate (the default, 100 absolute) the node needing the fewest victims
    is always chosen; with minCandidateNodesAbsolute 1 and percentage 0 the search stops at the first
    candidate from a random offset, so some seeds preempt on another node."""
    objs = [_node("n1", "2"), _node("n2", "2"), _node("n3", "2"), _node("n4", "2"),
            _pod("one", "2", "n1")] + [_pod(f"{n}-{i}", "1", n) for n in ("n2", "n3", "n4") for i in (1, 2)]

    def chosen(cfg: Any, seed: int) -> str:
        m = _schedule(cfg, objs, [_pod("urgent", "2", priority=100)], seed=seed)
        return m.get_pod("ns", "urgent")["status"].get("nominatedNodeName") or \
            m.get_pod("ns", "urgent")["spec"].get("nodeName")

    default = _config(tmp_path, {})
    assert {chosen(default, s) for s in range(6)} == {"n1"}
    one = _config(tmp_path, _profile("DefaultPreemption", {"minCandidateNodesAbsolute": 1,
                                                           "minCandidateNodesPercentage": 0}))
    assert {chosen(one, s) for s in range(12)} - {"n1"}

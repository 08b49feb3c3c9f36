"""-v as kube-scheduler means it: V(2) logs each bound pod (evaluatedNodes, feasibleNodes) and each pod left
pending, V(3) each attempt, V(1) a failed bind; V(4) and above is Python's DEBUG. A lower -v hides them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.loader import build
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.status import Code, Status
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.server.profiling import _set_log_verbosity
from scheduler_runtime.testing.cycle import SCHEDULER_NAME, config_for
from scheduler_runtime.verbosity import V1, V2, V3, klog_v, threshold


def _node(name: str, taint: bool = False) -> dict:
    spec = {"taints": [{"key": "x", "effect": "NoSchedule"}]} if taint else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": name}},
            "spec": spec, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                     "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedulerName": SCHEDULER_NAME,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec}}


def _run(nodes: list[dict], pods: list[dict], level: int, caplog: pytest.LogCaptureFixture,
         cfg: dict | None = None, plugin: type[Plugin] | None = None) -> list[str]:
    cluster = MemoryCluster()
    for n in nodes:
        cluster.create(n, emit=False)
    reg = build_registry([])
    if plugin is not None:
        reg.register(plugin, "test")
    s = Scheduler(cluster, build(cfg or config_for(None), reg), reg, seed=1)
    s.start()
    with caplog.at_level(level, logger="ksched.scheduler"):
        for p in pods:
            cluster.create(p)
        s.run(until_idle=True)
    return [r.getMessage() for r in caplog.records if r.name == "ksched.scheduler"]


def test_levels_map_klog_verbosity() -> None:
    assert [threshold(v) for v in (-1, 0, 1, 2, 3, 4, 9)] == [
        logging.WARNING, logging.INFO, V1, V2, V3, logging.DEBUG, logging.DEBUG]
    assert [klog_v(lv) for lv in (logging.ERROR, logging.INFO, V1, V2, V3, logging.DEBUG)] == [0, 0, 1, 2, 3, 4]
    assert logging.getLevelName(V2) == "INFO2" and logging.getLevelName("INFO") == logging.INFO


def test_v2_logs_each_bound_and_each_pending_pod(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [_node("a"), _node("b"), _node("c", taint=True)]
    msgs = _run(nodes, [_pod("fits"), _pod("nowhere", nodeSelector={"zone": "none"})], V2, caplog)
    bound = [m for m in msgs if m.startswith("Successfully bound pod to node")]
    # three nodes evaluated (one failed TaintToleration), two feasible: kube's EvaluatedNodes / FeasibleNodes
    assert len(bound) == 1 and bound[0].startswith("Successfully bound pod to node: pod=ns/fits node=")
    assert bound[0].endswith(" evaluatedNodes=3 feasibleNodes=2")
    assert "Unable to schedule pod; no fit; waiting: pod=ns/nowhere err=0/3 nodes are available: " in msgs[-1]
    assert not [m for m in msgs if m.startswith("Attempting")]  # V(3)


def test_v3_logs_each_attempt_and_v1_hides_v2(caplog: pytest.LogCaptureFixture) -> None:
    msgs = _run([_node("a")], [_pod("p")], V3, caplog)
    assert msgs[0] == "Attempting to schedule pod: pod=ns/p"
    assert msgs[1] == "Successfully bound pod to node: pod=ns/p node=a evaluatedNodes=1 feasibleNodes=1"
    caplog.clear()
    assert _run([_node("a")], [_pod("p")], V1, caplog) == []


def test_v2_says_when_no_node_is_registered(caplog: pytest.LogCaptureFixture) -> None:
    msgs = _run([], [_pod("p")], V2, caplog)
    assert msgs == ["Unable to schedule pod; no nodes are registered to the cluster; waiting: pod=ns/p"]


class _RefusingBinder(Plugin):
    name = "RefusingBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return Status(Code.Error, "the binder is broken")


def test_v1_logs_a_failed_bind(caplog: pytest.LogCaptureFixture) -> None:
    cfg = config_for(_RefusingBinder)
    cfg["profiles"][0]["plugins"]["bind"] = {"enabled": [{"name": "RefusingBinder"}], "disabled": [{"name": "*"}]}
    msgs = _run([_node("a")], [_pod("p")], V1, caplog, cfg, _RefusingBinder)
    assert "Failed to bind pod: pod=ns/p" in msgs
    assert not [m for m in msgs if m.startswith("Successfully bound")]


def test_flags_and_the_debug_endpoint_set_the_level() -> None:
    code = ("from scheduler_runtime.options.resolve import setup_logging; import logging, sys; "
            "from scheduler_runtime.verbosity import V2, V3; setup_logging(2, 'json'); "
            "logging.getLogger('ksched.x').log(V2, 'two'); logging.getLogger('ksched.x').log(V3, 'three')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in out.stderr.strip().splitlines()]
    assert [(x["msg"], x["v"]) for x in lines] == [("two", 2)]
    root = logging.getLogger()
    before = root.level
    try:
        _set_log_verbosity(3)
        assert root.level == V3
        _set_log_verbosity(0)
        assert root.level == logging.INFO
    finally:
        root.setLevel(before)

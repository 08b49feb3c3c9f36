"""Result recording modes (ksched, simulator, off) and the stuck-plugin watchdog."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.simresults import PREFIX, TRUNCATED
from scheduler_runtime.watchdog import CycleWatchdog


def _node(name: str, cpu: str, taint: bool = False) -> dict:
    n: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                         "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}
    if taint:
        n["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    return n


def _pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def _schedule(mode: str, nodes: list[dict], pods: list[dict]) -> MemoryCluster:
    m = MemoryCluster()
    for o in nodes:
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1, results_mode=mode)
    s.start()
    for p in pods:
        m.create(p)
    s.run(until_idle=True)
    return m


def _ann(m: MemoryCluster, name: str) -> dict[str, str]:
    return m.get_pod("ns", name)["metadata"].get("annotations") or {}


def test_simulator_mode_writes_the_simulators_keys_with_string_numbers() -> None:
    m = _schedule("simulator", [_node("small", "1"), _node("big", "8"), _node("tainted", "8", taint=True)],
                  [_pod("p", "2")])
    ann = _ann(m, "p")
    assert RESULT_ANNOTATION not in ann
    assert ann[PREFIX + "selected-node"] == "big"
    filt = json.loads(ann[PREFIX + "filter-result"])
    assert filt["big"]["NodeResourcesFit"] == "passed" and filt["big"]["TaintToleration"] == "passed"
    assert filt["small"]["NodeResourcesFit"] == "Insufficient cpu"
    assert "untolerated taint" in filt["tainted"]["TaintToleration"]
    assert "NodeResourcesFit" not in filt["tainted"]  # the framework stops at the first failing plugin
    # one feasible node: no scoring, as kube-scheduler
    assert json.loads(ann[PREFIX + "score-result"]) == {}
    assert set(json.loads(ann[PREFIX + "reserve-result"]).values()) <= {"success"}
    assert json.loads(ann[PREFIX + "bind-result"]) == {"DefaultBinder": "success"}
    pre = json.loads(ann[PREFIX + "prefilter-result-status"])
    assert pre["NodeResourcesFit"] == "success"
    hist = json.loads(ann[PREFIX + "result-history"])
    assert len(hist) == 1 and hist[0][PREFIX + "selected-node"] == "big"
    assert TRUNCATED not in ann


def test_simulator_scores_are_raw_and_weighted_strings() -> None:
    m = _schedule("simulator", [_node("a", "4"), _node("b", "8")], [_pod("p", "1")])
    ann = _ann(m, "p")
    score = json.loads(ann[PREFIX + "score-result"])
    final = json.loads(ann[PREFIX + "finalscore-result"])
    assert set(score) == {"a", "b"}
    for node in score:
        for plugin, v in score[node].items():
            assert isinstance(v, str) and v.lstrip("-").isdigit()
            assert isinstance(final[node][plugin], str)
    # TaintToleration has weight 3 in the default profile: its final score is normalised x 3
    assert int(final["a"]["TaintToleration"]) % 3 == 0
    assert int(final["b"]["NodeResourcesFit"]) > int(final["a"]["NodeResourcesFit"])  # LeastAllocated


def test_simulator_history_grows_per_attempt_and_pending_pod_has_reasons() -> None:
    m = _schedule("simulator", [_node("a", "1")], [_pod("huge", "4")])
    ann = _ann(m, "huge")
    assert ann[PREFIX + "selected-node"] == ""
    assert json.loads(ann[PREFIX + "filter-result"])["a"]["NodeResourcesFit"] == "Insufficient cpu"
    from scheduler_runtime.simresults import SimRecord

    again = SimRecord(selected_node="x").annotations(ann[PREFIX + "result-history"])
    assert len(json.loads(again[PREFIX + "result-history"])) == 2


def test_simulator_maps_are_cut_to_the_annotation_budget_at_5000_nodes() -> None:
    nodes = [_node(f"node-{i:05d}", "1") for i in range(5000)]
    m = _schedule("simulator", nodes, [_pod("p", "500m"), _pod("huge", "64")])
    for name in ("p", "huge"):
        ann = _ann(m, name)
        assert ann[TRUNCATED] == "true"
        assert sum(len(k) + len(v) for k, v in ann.items()) < 256 * 1024


@pytest.mark.parametrize("mode", ["off", "ksched"])
def test_off_and_ksched_modes(mode: str) -> None:
    m = _schedule(mode, [_node("a", "4")], [_pod("p", "1")])
    ann = _ann(m, "p")
    assert not any(k.startswith(PREFIX) for k in ann)
    assert (RESULT_ANNOTATION in ann) == (mode == "ksched")


class _Sleepy(Plugin):
    name = "Sleepy"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def filter(self, state: Any, pod: Any, node_info: Any) -> None:
        self.gate.wait(5)


def test_watchdog_names_the_stuck_plugin_and_the_pod() -> None:
    gate = threading.Event()
    wd = CycleWatchdog(deadline=0.2)
    plugin = _Sleepy(gate)

    def cycle() -> None:
        wd.begin("ns/stuck", "scheduling")
        try:
            plugin.filter(None, None, None)
        finally:
            wd.end()

    t = threading.Thread(target=cycle)
    t.start()
    try:
        assert wd.check() == []  # not yet past the deadline
        time.sleep(0.4)
        stuck = wd.check()
        assert len(stuck) == 1 and stuck[0].plugin == "Sleepy" and stuck[0].method == "filter"
        assert stuck[0].pod == "ns/stuck"
        msg = wd.readyz()
        assert msg and "plugin Sleepy (filter)" in msg and "ns/stuck" in msg
    finally:
        gate.set()
        t.join()
    assert wd.check() == [] and wd.readyz() is None


class _HangingPreBind(Plugin):
    name = "HangingPreBind"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.gate = threading.Event()

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> None:
        if pod.name == "stuck":
            self.gate.wait(10)


class _Raising(Plugin):
    name = "Raising"

    def filter(self, state: Any, pod: Any, node_info: Any) -> None:
        if pod.name == "boom":
            raise RuntimeError("kaboom")

    def score(self, state: Any, pod: Any, node_info: Any) -> int:
        return 1000 if pod.name == "outofrange" else 0


def test_a_plugin_hanging_in_prebind_blocks_no_other_pod_and_is_named() -> None:
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_HangingPreBind, "test")
    cfg = build(config_for(_HangingPreBind, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a", "8"), emit=False)
    wd = CycleWatchdog(deadline=0.3)
    s = Scheduler(m, cfg, reg, seed=1, bind_async=True, watchdog=wd)
    s.start()
    for name in ("stuck", "p1", "p2"):
        m.create(_pod(name, "100m"))
    stop = threading.Event()
    t = threading.Thread(target=s.run, kwargs={"until_idle": False, "stop": stop}, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (m.get_pod("ns", "p1")["spec"].get("nodeName")
                                                    and m.get_pod("ns", "p2")["spec"].get("nodeName")):
            time.sleep(0.05)
        assert m.get_pod("ns", "p1")["spec"].get("nodeName") == "a"
        assert m.get_pod("ns", "p2")["spec"].get("nodeName") == "a"
        assert not m.get_pod("ns", "stuck")["spec"].get("nodeName")
        time.sleep(0.4)
        stuck = wd.check()
        assert [(x.pod, x.phase, x.plugin, x.method) for x in stuck] == [
            ("ns/stuck", "binding", "HangingPreBind", "pre_bind")]
        assert wd.readyz() is None  # only its own pod waits: the replica stays Ready
    finally:
        s.frameworks["default-scheduler"].plugins["HangingPreBind"].gate.set()
        stop.set()
        t.join(10)
    assert m.get_pod("ns", "stuck")["spec"].get("nodeName") == "a"


def test_raising_and_out_of_range_plugins_fail_only_their_pod_with_scheduler_error() -> None:
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_Raising, "test")
    cfg = build(config_for(_Raising, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    for n in ("a", "b"):
        m.create(_node(n, "8"), emit=False)
    s = Scheduler(m, cfg, reg, seed=1)
    s.start()
    for name in ("boom", "outofrange", "fine"):
        m.create(_pod(name, "100m"))
    s.run(until_idle=True)
    assert m.get_pod("ns", "fine")["spec"].get("nodeName")
    for name, words in (("boom", ("Raising", "kaboom")), ("outofrange", ("Raising", "1000"))):
        pod = m.get_pod("ns", name)
        assert not pod["spec"].get("nodeName")
        cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert cond["reason"] == "SchedulerError", cond
        for w in words:
            assert w in cond["message"], cond["message"]


def test_embedded_mode_stops_waiting_for_a_hanging_prebind_and_names_it() -> None:
    """`ksched run`/`simulate` bind on the loop; a user's PreBind that hangs holds up nothing past the deadline."""
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_HangingPreBind, "test")
    cfg = build(config_for(_HangingPreBind, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a", "8"), emit=False)
    s = Scheduler(m, cfg, reg, seed=1, bind_deadline=0.3)
    s.start()
    for name in ("stuck", "p1", "p2"):
        m.create(_pod(name, "100m"))
    t0 = time.monotonic()
    s.run(until_idle=True)
    assert time.monotonic() - t0 < 5
    assert [m.get_pod("ns", n)["spec"].get("nodeName") for n in ("stuck", "p1", "p2")] == [None, "a", "a"]
    assert s.detached_bindings == {"ns/stuck": "plugin HangingPreBind (pre_bind)"}
    r = s.results.get("ns/stuck")
    assert r is not None and r.outcome == "error" and "HangingPreBind (pre_bind)" in r.message
    s.frameworks["default-scheduler"].plugins["HangingPreBind"].gate.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and s.detached_bindings:
        time.sleep(0.02)
    assert s.detached_bindings == {}
    assert m.get_pod("ns", "stuck")["spec"].get("nodeName") == "a"


class _RejectOddPreBind(Plugin):
    name = "RejectOddPreBind"

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> Any:
        from scheduler_runtime.framework.status import Status

        return Status.unschedulable("volume not ready") if int(pod.name[1:]) % 2 else None


def test_bounded_binding_keeps_embedded_runs_deterministic() -> None:
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_RejectOddPreBind, "test")
    cfg_doc = config_for(_RejectOddPreBind, scheduler_name="default-scheduler")

    def once() -> list[Any]:
        m = MemoryCluster()
        for n in ("a", "b", "c"):
            m.create(_node(n, "4"), emit=False)
        s = Scheduler(m, build(cfg_doc, reg), reg, seed=7)
        assert s.frameworks["default-scheduler"].has_foreign_binding_plugins
        s.start()
        for i in range(30):
            m.create(_pod(f"p{i}", "300m"))
        s.run(until_idle=True)
        return [m.get_pod("ns", f"p{i}")["spec"].get("nodeName") for i in range(30)]

    first = once()
    assert first == once()
    assert all(first[i] is None for i in range(1, 30, 2)) and all(first[i] for i in range(0, 30, 2))


class _HangingPreBindMany(_HangingPreBind):
    name = "HangingPreBindMany"

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> None:
        if pod.name.startswith("stuck"):
            self.gate.wait(20)


def test_more_hanging_prebinds_than_binding_workers_still_bind_the_others() -> None:
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_HangingPreBindMany, "test")
    cfg = build(config_for(_HangingPreBindMany, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a", "8"), emit=False)
    s = Scheduler(m, cfg, reg, seed=1, bind_async=True, bind_workers=2, bind_deadline=0.3)
    s.start()
    for name in ("stuck1", "stuck2", "stuck3", "p1", "p2"):
        m.create(_pod(name, "100m"))
    stop = threading.Event()
    t = threading.Thread(target=s.run, kwargs={"until_idle": False, "stop": stop}, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(m.get_pod("ns", n)["spec"].get("nodeName")
                                                       for n in ("p1", "p2")):
            time.sleep(0.05)
        assert [m.get_pod("ns", n)["spec"].get("nodeName") for n in ("p1", "p2", "stuck1")] == ["a", "a", None]
    finally:
        s.frameworks["default-scheduler"].plugins["HangingPreBindMany"].gate.set()
        stop.set()
        t.join(10)

    def stuck_bound() -> bool:
        return all(m.get_pod("ns", f"stuck{i}")["spec"].get("nodeName") == "a" for i in (1, 2, 3))
    deadline = time.monotonic() + 10  # the released binds finish on the binding workers, after the loop stopped
    while not stuck_bound() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stuck_bound()


def test_pods_whose_resource_claim_is_missing_stay_pending_without_the_old_warning(caplog) -> None:
    """DynamicResources runs now: a pod naming a claim that does not exist waits (PreEnqueue), others go on."""
    pvc = _pod("with-pvc", "100m")
    pvc["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    rc = _pod("with-rc", "100m")
    rc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    with caplog.at_level("WARNING", logger="ksched.scheduler"):
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "data", "namespace": "ns",
                              "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                          "volumeName": "pv-data"}}
        vol = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "claimRef": {"namespace": "ns", "name": "data"}}}
        m = _schedule("ksched", [_node("a", "8"), claim, vol], [_pod("plain", "100m"), pvc, rc])
    assert all(m.get_pod("ns", n)["spec"].get("nodeName") == "a" for n in ("plain", "with-pvc"))
    assert not m.get_pod("ns", "with-rc")["spec"].get("nodeName")
    assert not [r for r in caplog.records if "DynamicResources plugin" in r.getMessage()]


def test_a_raising_plugin_is_logged_with_its_traceback(caplog) -> None:
    import traceback

    from scheduler_runtime.config.loader import build
    from scheduler_runtime.testing import config_for

    reg = build_registry([])
    reg.register(_Raising, "test")
    cfg = build(config_for(_Raising, scheduler_name="default-scheduler"), reg)
    m = MemoryCluster()
    m.create(_node("a", "8"), emit=False)
    s = Scheduler(m, cfg, reg, seed=1)
    s.start()
    m.create(_pod("boom", "100m"))
    with caplog.at_level("ERROR", logger="ksched.scheduler"):
        s.run(until_idle=True)
    recs = [r for r in caplog.records if r.getMessage().startswith("Error scheduling pod; retrying: pod=ns/boom")]
    assert recs and 'running "Raising" filter plugin: kaboom' in recs[0].getMessage()
    tb = "".join(traceback.format_exception(*recs[0].exc_info))
    assert "RuntimeError: kaboom" in tb and "in filter" in tb and "test_results_modes.py" in tb


def test_an_unchanged_result_is_not_rewritten_so_the_pod_keeps_its_resource_version() -> None:
    m = MemoryCluster()
    m.create(_node("small", "1"), emit=False)
    reg = build_registry([])
    clock = [0.0]
    s = Scheduler(m, load_config(None, reg), reg, seed=1, clock=lambda: clock[0])
    s.start()
    m.create(_pod("big", "4"))
    s.run(until_idle=True)
    first = m.get_pod("ns", "big")
    rv, ann = first["metadata"]["resourceVersion"], json.loads(first["metadata"]["annotations"][RESULT_ANNOTATION])
    assert ann["outcome"] == "unschedulable" and ann["attempt"] == 1
    for _ in range(2):  # retried (the 5-minute flush) with the same verdict each time
        clock[0] += 400
        assert s.queue.flush_unschedulable_leftover() == 1
        s.run(until_idle=True)
    assert s.attempts == 3
    same = m.get_pod("ns", "big")
    assert same["metadata"]["resourceVersion"] == rv
    assert json.loads(same["metadata"]["annotations"][RESULT_ANNOTATION])["attempt"] == 1  # not rewritten
    m.create(_node("tiny", "500m"))  # another node: the result differs, so it is written
    clock[0] += 400
    s.queue.flush_unschedulable_leftover()
    s.run(until_idle=True)
    after = m.get_pod("ns", "big")
    assert after["metadata"]["resourceVersion"] != rv
    assert json.loads(after["metadata"]["annotations"][RESULT_ANNOTATION])["num_nodes"] == 2


def test_simulator_filter_budget_keeps_every_rejecting_plugin_and_the_feasible_nodes() -> None:
    """Thousands of nodes failing one plugin (a nodeSelector) used to fill the filter map's budget before the
    nodes other plugins rejected, and the nodes that passed, were reached: each kind now keeps its first nodes
    in turn, and the record says it was cut."""
    from types import SimpleNamespace

    import numpy as np

    from scheduler_runtime.framework.status import Status
    from scheduler_runtime.simresults import SimRecord

    names = ["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding"]
    fw = SimpleNamespace(filter=[SimpleNamespace(name=n) for n in names])
    taint = Status.unschedulable("node(s) had untolerated taint(s)").with_plugin("TaintToleration")
    selector = Status.unschedulable("node(s) didn't match Pod's node affinity/selector").with_plugin("NodeAffinity")
    cpu = Status.unschedulable("Insufficient cpu").with_plugin("NodeResourcesFit")
    statuses = {"gpu": taint, **{f"other-{i}": selector for i in range(3000)}, "small": cpu}
    snapshot = SimpleNamespace(node_infos=[SimpleNamespace(name="big")])
    rec = SimRecord()
    rec.filters(fw, snapshot, np.array([0]), statuses)
    assert rec.truncated
    assert rec.filter["gpu"] == {"NodeUnschedulable": "passed", "TaintToleration": "node(s) had untolerated taint(s)"}
    assert rec.filter["small"]["NodeResourcesFit"] == "Insufficient cpu"
    assert rec.filter["big"] == {n: "passed" for n in names}
    assert 100 < sum(k.startswith("other-") for k in rec.filter) < 3000
    small = SimRecord()
    small.filters(fw, snapshot, np.array([0]), {"gpu": taint, "small": cpu})
    assert not small.truncated and list(small.filter) == ["gpu", "small", "big"]

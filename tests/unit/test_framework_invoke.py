"""Every plugin call goes through one conversion (`Framework._invoke`): an exception or a wrong return at any
extension point becomes an Error status with kube-scheduler's message, naming the plugin and keeping the
plugin's exception as the cause."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from scheduler_runtime.api import CycleState, NodeScore, Plugin, Status
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.runtime import CycleError, Diagnosis, Framework
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod

POD = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                     "spec": {"containers": [{"name": "c"}]}})
BOOM = RuntimeError("boom")


def _snapshot() -> Snapshot:
    s = Snapshot()
    for i in range(2):
        s.add_node(NodeInfo(Node.from_dict({"metadata": {"name": f"n{i}"},
                                            "status": {"allocatable": {"cpu": "4", "pods": "110"}}})))
    return s


def _raise(*_: Any) -> Any:
    raise BOOM


def _framework(point: str, **methods: Callable[..., Any]) -> Framework:
    cls = type("Bad", (Plugin,), {"name": "Bad", **{k: (lambda f: lambda self, *a: f(*a))(v)
                                                    for k, v in methods.items()}})
    return Framework("default-scheduler", Handle(_snapshot()), {point: [(cls(), 1)]}, rng=random.Random(0))


def _error(st: Status | None, message: str) -> None:
    assert st is not None and st.code == Code.Error, st
    assert st.plugin == "Bad" and st.message == message
    assert st.error is not None and st.error.__cause__ is BOOM


def _cycle_error(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(CycleError) as e:
        call()
    _error(e.value.status, message)


def test_exceptions_at_each_point_become_named_errors() -> None:
    state = CycleState()
    f = _framework("preEnqueue", pre_enqueue=_raise)
    _error(f.run_pre_enqueue(POD), 'running PreEnqueue plugin "Bad": boom')
    f = _framework("preFilter", pre_filter=_raise)
    _error(f.run_pre_filter(state, POD, NodeList(f.handle.snapshot))[1], 'running PreFilter plugin "Bad": boom')
    f = _framework("filter", filter=_raise)
    ni = f.handle.snapshot.node_infos[0]
    _error(f.run_filter(state, POD, ni), 'running "Bad" filter plugin: boom')
    _cycle_error(lambda: f.find_nodes_that_pass_filters(state, POD, f.handle.snapshot, None, Diagnosis()),
                 'running "Bad" filter plugin: boom')
    f = _framework("postFilter", post_filter=_raise)
    _error(f.run_post_filter(state, POD, {})[1], 'running PostFilter plugin "Bad": boom')
    f = _framework("preScore", pre_score=_raise)
    _error(f.run_pre_score(state, POD, NodeList(f.handle.snapshot)), 'running PreScore plugin "Bad": boom')
    f = _framework("score", score=_raise)
    _cycle_error(lambda: f.run_score(state, POD, f.handle.snapshot, np.arange(2)),
                 'running Score plugin "Bad": boom')
    f = _framework("reserve", reserve=_raise)
    _error(f.run_reserve(state, POD, "n0"), 'running Reserve plugin "Bad": boom')
    f = _framework("permit", permit=_raise)
    _error(f.run_permit(state, POD, "n0"), 'running Permit plugin "Bad": boom')
    f = _framework("preBind", pre_bind=_raise)
    _error(f.run_pre_bind(state, POD, "n0"), 'running PreBind plugin "Bad": boom')
    f = _framework("bind", bind=_raise)
    _error(f.run_bind(state, POD, "n0"), 'running Bind plugin "Bad": boom')


def test_prefilter_extensions_that_raise_are_errors_not_crashes() -> None:
    """AddPod/RemovePod (preemption's what-if) used to let a plugin's exception escape the framework."""
    f = _framework("preFilter", pre_filter=lambda *a: None, add_pod=_raise, remove_pod=_raise)
    ni = f.handle.snapshot.node_infos[0]
    _error(f.run_pre_filter_add_pod(CycleState(), POD, POD, ni), 'running AddPod on PreFilter plugin "Bad": boom')
    _error(f.run_pre_filter_remove_pod(CycleState(), POD, POD, ni),
           'running RemovePod on PreFilter plugin "Bad": boom')
    f = _framework("preFilter", pre_filter=lambda *a: None, add_pod=lambda *a: Status.unschedulable("no"))
    st = f.run_pre_filter_add_pod(CycleState(), POD, POD, ni)
    assert st is not None and st.code == Code.Error and st.message == 'running AddPod on PreFilter plugin "Bad": no'


def test_wrong_returns_are_errors() -> None:
    state = CycleState()
    f = _framework("reserve", reserve=lambda *a: "fine")
    st = f.run_reserve(state, POD, "n0")
    assert st is not None and st.code == Code.Error
    assert st.message == 'running Reserve plugin "Bad": returned str, expected Status or None'
    f = _framework("score", score=lambda *a: 1.5)
    with pytest.raises(CycleError, match='running Score plugin "Bad": score returned float, expected int'):
        f.run_score(state, POD, f.handle.snapshot, np.arange(2))
    f = _framework("filter", filter_batch=lambda *a: [True, True])
    with pytest.raises(CycleError, match='"Bad" filter plugin: filter_batch returned list, expected FilterBatch'):
        f.find_nodes_that_pass_filters(state, POD, f.handle.snapshot, None, Diagnosis())


def test_normalize_score_status_and_non_rejection_codes() -> None:
    state = CycleState()

    def normalize(s: CycleState, p: Pod, scores: list[NodeScore]) -> Status:
        return Status.unschedulable("cannot")

    f = _framework("score", score=lambda *a: 1, normalize_score=normalize)
    with pytest.raises(CycleError, match='running Normalize on Score plugin "Bad": cannot'):
        f.run_score(state, POD, f.handle.snapshot, np.arange(2))
    f = _framework("reserve", reserve=lambda *a: Status.wait("later"))  # Wait is not Reserve's to return
    st = f.run_reserve(state, POD, "n0")
    assert st is not None and st.code == Code.Error and st.message == 'running Reserve plugin "Bad": later'
    f = _framework("permit", permit=lambda *a: (Status.wait(), 5))
    st = f.run_permit(state, POD, "n0")
    assert st is not None and st.code == Code.Wait and f.waiting_pods.get(POD.uid) is not None


def test_unreserve_and_postbind_failures_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    f = _framework("reserve", reserve=lambda *a: None, unreserve=_raise)
    g = _framework("postBind", post_bind=_raise)
    with caplog.at_level(logging.ERROR):
        f.run_unreserve(CycleState(), POD, "n0")
        g.run_post_bind(CycleState(), POD, "n0")
    assert "Unreserve plugin Bad failed for pod ns/p: boom" in caplog.text
    assert "PostBind plugin Bad failed for pod ns/p: boom" in caplog.text


def test_one_invoke_times_each_call_with_its_status_and_counts_evaluations() -> None:
    """The metrics of a plugin call come from the same `_invoke` as its status: one duration observation per
    call in a sampled cycle, labelled with the code it ended with (Error when it raised), and PreFilter counted
    as evaluated unless it returned Skip."""
    from scheduler_runtime.metrics import SchedulerMetrics

    def run(**methods: Callable[..., Any]) -> SchedulerMetrics:
        m = SchedulerMetrics()
        cls = type("P", (Plugin,), {"name": "P", **{k: (lambda f: lambda self, *a: f(*a))(v)
                                                  for k, v in methods.items()}})
        plan = {point: [(cls(), 1)] for point in ("preFilter", "reserve", "preBind", "bind")}
        fw = Framework("default-scheduler", Handle(_snapshot()), plan, rng=random.Random(0), metrics=m)
        state = CycleState()
        state.record_plugin_metrics = True
        fw.run_pre_filter(state, POD, NodeList(fw.handle.snapshot))
        fw.run_reserve(state, POD, "n0")
        fw.run_pre_bind(state, POD, "n0")
        fw.run_bind(state, POD, "n0")
        return m

    def observed(m: SchedulerMetrics, point: str, code: str) -> float | None:
        return m.registry.get_sample_value("scheduler_plugin_execution_duration_seconds_count",
                                           {"plugin": "P", "extension_point": point, "status": code})

    def evaluated(m: SchedulerMetrics) -> float | None:
        return m.registry.get_sample_value("scheduler_plugin_evaluation_total",
                                           {"plugin": "P", "extension_point": "PreFilter",
                                            "profile": "default-scheduler"})

    m = run(pre_filter=lambda *_: None, reserve=_raise, pre_bind=lambda *_: Status(Code.Skip),
            bind=lambda *_: None)
    assert [observed(m, p, c) for p, c in (("PreFilter", "Success"), ("Reserve", "Error"), ("PreBind", "Skip"),
                                           ("Bind", "Success"))] == [1.0, 1.0, 1.0, 1.0]
    assert evaluated(m) == 1.0
    skipped = run(pre_filter=lambda *_: Status(Code.Skip), reserve=lambda *_: None, pre_bind=lambda *_: None,
                  bind=lambda *_: None)
    assert observed(skipped, "PreFilter", "Skip") == 1.0 and evaluated(skipped) == 0.0

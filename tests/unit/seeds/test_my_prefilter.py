"""MyPreFilter (seed tutorial 01): pods with a forbidden annotation are refused before filtering."""

from __future__ import annotations

import pydantic
import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.status import Code
from scheduler_runtime.scheduler import Scheduler

from .conftest import TestBinder, handle_for, node, parsed_pod, pod, registry_with, scheduler_config


@pytest.fixture
def cls(plugin_classes):
    return plugin_classes["MyPreFilter"]


def _nodes(handle):
    return NodeList(handle.snapshot)


def test_rejects_annotated_pod_unresolvable_with_message(cls):
    mc = MemoryCluster()
    mc.create(node("n1"))
    handle, _ = handle_for(mc)
    p = cls(None, handle)
    st = p.pre_filter(CycleState(), parsed_pod("test-pod", annotations={"mycompany.com/environment": "abc"}),
                      _nodes(handle))
    assert st is not None
    assert st.code == Code.UnschedulableAndUnresolvable  # preemption is not tried
    assert "mycompany.com/environment" in st.message


def test_plain_pod_passes(cls):
    p = cls(None, None)
    assert p.pre_filter(CycleState(), parsed_pod("ok", annotations={"other": "x"}), []) is None
    assert p.pre_filter(CycleState(), parsed_pod("bare"), []) is None


def test_annotation_value_does_not_matter_even_empty(cls):
    p = cls(None, None)
    st = p.pre_filter(CycleState(), parsed_pod("e", annotations={"mycompany.com/environment": ""}), [])
    assert st is not None and st.code == Code.UnschedulableAndUnresolvable


def test_configurable_keys(cls):
    args = cls.args_model.model_validate({"annotationKeys": ["a.example.com/x", "b.example.com/y"]})
    p = cls(args, None)
    assert p.pre_filter(CycleState(), parsed_pod("d", annotations={"mycompany.com/environment": "v"}), []) is None
    st = p.pre_filter(CycleState(), parsed_pod("y", annotations={"b.example.com/y": "1"}), [])
    assert st is not None and 'annotation "b.example.com/y"' in st.message


def test_args_defaults_and_validation(cls):
    m = cls.args_model
    assert m.__name__ == "MyPreFilterArgs"
    assert m().annotation_keys == ["mycompany.com/environment"]
    assert m.model_validate({"annotationKeys": []}).annotation_keys == []
    for bad in ({"annotationKeys": [""]}, {"annotationKeys": ["a/b/c"]}, {"annotationKeys": ["x", "x"]},
                {"annotationKeys": ["p/" + "n" * 64]}, {"unknownKey": 1}):
        with pytest.raises(pydantic.ValidationError):
            m.model_validate(bad)


def test_through_the_scheduler_failed_scheduling_message(cls):
    mc = MemoryCluster()
    for n in ("n1", "n2", "n3"):
        mc.create(node(n))
    mc.create(pod("test-pod", annotations={"mycompany.com/environment": "abc"}))
    mc.create(pod("fine"))
    plan = {"preFilter": [("MyPreFilter", 0)], "bind": [("TestBinder", 0)]}
    sched = Scheduler(mc, scheduler_config(plan, {"MyPreFilter": None}), registry_with(cls, TestBinder), seed=1)
    sched.start()
    sched.run(until_idle=True)
    assert [k for k, _ in mc.bindings] == ["default/fine"]
    events = [e for e in mc.events_for("default", "test-pod") if e.reason == "FailedScheduling"]
    assert events, "the rejected pod gets a FailedScheduling event"
    assert events[0].note == ('0/3 nodes are available: pod has annotation "mycompany.com/environment", '
                              'which MyPreFilter does not allow.')


def test_example_config_on_the_example_cluster(tmp_path):
    from .conftest import REPO, example_config

    mc = MemoryCluster.from_paths([REPO / "examples" / "cluster" / "nodes.yaml"])
    mc.create(pod("tagged", annotations={"mycompany.com/environment": "abc"}, requests={"cpu": "100m"}))
    mc.create(pod("untagged", requests={"cpu": "100m"}))
    cfg, reg = example_config("my-prefilter.yaml", tmp_path)
    sched = Scheduler(mc, cfg, reg, seed=1)
    sched.start()
    sched.run(until_idle=True)
    assert [k for k, _ in mc.bindings] == ["default/untagged"]
    note = [e.note for e in mc.events_for("default", "tagged") if e.reason == "FailedScheduling"][0]
    # Unresolvable: DefaultPreemption runs but looks for no victims on any node, as in kube-scheduler
    assert note == ('0/6 nodes are available: pod has annotation "mycompany.com/environment", '
                    'which MyPreFilter does not allow. preemption: 0/6 nodes are '
                    'available: 6 Preemption is not helpful for scheduling.')

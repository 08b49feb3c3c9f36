"""NodeCRDResourceFit (seed tutorial 05): filter and score on per-node ClusterScopedResource objects."""

from __future__ import annotations

import pydantic
import pytest
import yaml

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import ActionType, ClusterEvent
from scheduler_runtime.scheduler import Scheduler

from .conftest import REPO, TestBinder, handle_for, node, parsed_pod, pod, registry_with, scheduler_config

CRDS = REPO / "examples" / "crds"


@pytest.fixture
def cls(plugin_classes):
    return plugin_classes["NodeCRDResourceFit"]


def cr(node_name: str, filt: dict | None = None, score: dict | None = None) -> dict:
    spec = {}
    if filt is not None:
        spec["resourcesFilter"] = filt
    if score is not None:
        spec["resourcesScore"] = score
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ClusterScopedResource",
            "metadata": {"name": node_name}, "spec": spec}


def setup(cls, nodes=("n1", "n2"), crs=()):
    mc = MemoryCluster()
    for n in nodes:
        mc.create(node(n))
    for c in crs:
        mc.create(c)
    handle, _ = handle_for(mc)
    return mc, handle, cls(None, handle)


def ni(handle, name):
    return handle.snapshot.get(name)


def test_missing_object_filters_node_out(cls):
    _, handle, p = setup(cls, crs=[cr("n1", {"company.net/memory": True})])
    st = p.filter(CycleState(), parsed_pod("x", requests={"company.net/memory": "100Mi"}), ni(handle, "n2"))
    assert st is not None and st.code == Code.UnschedulableAndUnresolvable
    assert st.message == "CRD for node not found"


def test_resource_must_be_enabled(cls):
    _, handle, p = setup(cls, crs=[cr("n1", {"company.net/memory": True, "cpu": False}), cr("n2", {})])
    req = parsed_pod("x", requests={"company.net/memory": "100Mi"})
    assert p.filter(CycleState(), req, ni(handle, "n1")) is None
    st = p.filter(CycleState(), req, ni(handle, "n2"))
    assert st is not None and st.message == "Node does not enable resource company.net/memory"
    both = parsed_pod("y", requests={"company.net/memory": "1", "cpu": "100m"})
    st = p.filter(CycleState(), both, ni(handle, "n1"))
    assert st is not None and st.message == "Node does not enable resource cpu"


def test_pod_without_requests_passes_nodes_with_an_object_and_scores_zero(cls):
    _, handle, p = setup(cls, crs=[cr("n1", {}, {"cpu": 90})])
    bare = parsed_pod("bare")
    assert p.filter(CycleState(), bare, ni(handle, "n1")) is None
    assert p.filter(CycleState(), bare, ni(handle, "n2")).message == "CRD for node not found"
    assert p.score(CycleState(), bare, ni(handle, "n1")) == 0


def test_score_is_rounded_up_mean_with_clamping(cls):
    _, handle, p = setup(cls, crs=[
        cr("n1", {}, {"a.io/x": 55, "b.io/y": 20}),              # (55 + 20) / 2 = 37.5 -> 38
        cr("n2", {}, {"a.io/x": 500, "b.io/y": -3}),             # (100 + 0) / 2 = 50
    ])
    two = parsed_pod("two", requests={"a.io/x": "1", "b.io/y": "1"})
    assert p.score(CycleState(), two, ni(handle, "n1")) == 38
    assert p.score(CycleState(), two, ni(handle, "n2")) == 50
    three = parsed_pod("three", requests={"a.io/x": "1", "b.io/y": "1", "c.io/z": "1"})  # missing -> 0
    assert p.score(CycleState(), three, ni(handle, "n1")) == 25  # ceil(75 / 3)


def test_zero_quantity_requests_count_as_requested(cls):
    _, handle, p = setup(cls, crs=[cr("n1", {"cpu": True})])
    st = p.filter(CycleState(), parsed_pod("z", requests={"cpu": "100m", "company.net/memory": "0"}),
                  ni(handle, "n1"))
    assert st is not None and st.message == "Node does not enable resource company.net/memory"


def test_store_changes_are_seen_without_listing_per_call(cls, monkeypatch):
    mc, handle, p = setup(cls)
    calls = []
    real_list = mc.list
    monkeypatch.setattr(mc, "list", lambda *a, **kw: calls.append(a) or real_list(*a, **kw))
    req = parsed_pod("x", requests={"company.net/memory": "1"})
    assert p.filter(CycleState(), req, ni(handle, "n1")).message == "CRD for node not found"
    created = mc.create(cr("n1", {"company.net/memory": True}, {"company.net/memory": 70}))
    assert p.filter(CycleState(), req, ni(handle, "n1")) is None
    assert p.score(CycleState(), req, ni(handle, "n1")) == 70
    created["spec"]["resourcesFilter"]["company.net/memory"] = False
    mc.update(created)
    assert p.filter(CycleState(), req, ni(handle, "n1")).message == \
        "Node does not enable resource company.net/memory"
    mc.delete("clusterscopedresources", "n1")
    assert p.filter(CycleState(), req, ni(handle, "n1")).message == "CRD for node not found"
    for _ in range(1000):
        p.filter(CycleState(), req, ni(handle, "n2"))
    assert calls == [], "filtering must read the watched store, never list the API"


def test_requeue_events(cls):
    p = cls(None, None)
    evs = [e.event for e in p.events_to_register()]
    assert any(e.matches(ClusterEvent("scheduling.sigs.k8s.io/ClusterScopedResource", ActionType.Add)) for e in evs)
    assert any(e.matches(ClusterEvent("Node", ActionType.Add)) for e in evs)


def test_args(cls):
    m = cls.args_model
    assert m.__name__ == "NodeCRDResourceFitArgs"
    assert m().resource == "clusterscopedresources.scheduling.sigs.k8s.io"
    for bad in ("Bad Name", "clusterscopedresources", ".x"):
        with pytest.raises(pydantic.ValidationError):
            m.model_validate({"resource": bad})
    assert cls.rbac == [{"apiGroups": ["scheduling.sigs.k8s.io"], "resources": ["clusterscopedresources"],
                         "verbs": ["get", "list", "watch"]}]


def _run(mc, cls):
    plan = {"filter": [("NodeCRDResourceFit", 0)], "score": [("NodeCRDResourceFit", 1)],
            "bind": [("TestBinder", 0)]}
    sched = Scheduler(mc, scheduler_config(plan, {"NodeCRDResourceFit": None}), registry_with(cls, TestBinder),
                      seed=5)
    sched.start()
    sched.run(until_idle=True)
    return dict(mc.bindings)


def test_tutorial_scenario_through_the_scheduler(cls):
    mc = MemoryCluster()
    for n in ("AAA", "BBB", "CCC", "DDD", "EEE", "FFF"):
        mc.create(node(n))
    for n in ("EEE", "FFF"):
        mc.create(cr(n, {"company.net/memory": True}, {"company.net/memory": 55}))
    mc.create(pod("nginx", requests={"company.net/memory": "100Mi"}))
    assert _run(mc, cls)["default/nginx"] in ("EEE", "FFF")


def test_example_objects_steer_pods(cls):
    mc = MemoryCluster.from_paths([REPO / "examples" / "cluster" / "nodes.yaml",
                                   CRDS / "clusterscopedresources-example.yaml"])
    mc.create(pod("wants-company-memory", requests={"company.net/memory": "100Mi"}))
    mc.create(pod("plain", requests={"cpu": "100m", "memory": "64Mi"}))
    placed = _run(mc, cls)
    assert placed["default/wants-company-memory"] == "node-b1"  # 90 beats node-a1's 55; node-c1 refuses it
    assert placed["default/plain"] == "node-c1"  # mean(100, 100) beats 65 and 40


def test_crd_manifest_matches_the_plugin(cls):
    crd = yaml.safe_load((CRDS / "clusterscopedresource-crd.yaml").read_text())
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
    spec = crd["spec"]
    assert spec["scope"] == "Cluster"
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
    assert crd["metadata"]["name"] == cls.args_model().resource
    assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("unapproved")
    props = spec["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert props["resourcesFilter"]["additionalProperties"] == {"type": "boolean"}
    assert props["resourcesScore"]["additionalProperties"]["type"] == "integer"
    for doc in yaml.safe_load_all((CRDS / "clusterscopedresources-example.yaml").read_text()):
        assert doc["apiVersion"] == f"{spec['group']}/{spec['versions'][0]['name']}"
        assert doc["kind"] == spec["names"]["kind"]


def test_batch_forms_agree_with_per_node_forms(cls):
    import numpy as np
    objs = [cr("n0", {"a.io/x": True, "b.io/y": True}, {"a.io/x": 80, "b.io/y": 7}),
            cr("n1", {"a.io/x": True}, {"a.io/x": 120}),
            cr("n2", {"a.io/x": "true", "b.io/y": True}, {"a.io/x": "high"}),
            cr("n4", {}, {})]
    _, handle, p = setup(cls, nodes=[f"n{i}" for i in range(5)], crs=objs)
    snap = handle.snapshot
    for requests in ({"a.io/x": "1", "b.io/y": "1"}, {"a.io/x": "1"}, None):
        q = parsed_pod("q", requests=requests)
        state = CycleState()
        fb = p.filter_batch(state, q, snap)
        for ni in snap:
            st = p.filter(CycleState(), q, ni)
            assert bool(fb.ok[ni.row]) == (st is None), (requests, ni.name)
            if st is not None:
                assert fb.status_at(ni.row).message == st.message
        rows = np.arange(len(snap))
        assert p.score_batch(state, q, snap, rows).tolist() == [p.score(CycleState(), q, ni) for ni in snap]


def test_example_config_secondary_profile(tmp_path):
    from .conftest import example_config

    mc = MemoryCluster.from_paths([REPO / "examples" / "cluster" / "nodes.yaml",
                                   CRDS / "clusterscopedresources-example.yaml"])
    crd_pod = pod("wants-company-memory", requests={"company.net/memory": "100Mi", "cpu": "100m"})
    crd_pod["spec"]["schedulerName"] = "secondary-scheduler"
    mc.create(crd_pod)
    mc.create(pod("default-profile", requests={"cpu": "100m"}))
    cfg, reg = example_config("node-crd-resource-fit.yaml", tmp_path)
    sched = Scheduler(mc, cfg, reg, seed=1)
    sched.start()
    sched.run(until_idle=True)
    placed = dict(mc.bindings)
    # NodeResourcesFit ignores company.net/*, so the custom objects decide: node-b1 scores 90 + 70 -> 80
    assert placed["default/wants-company-memory"] == "node-b1"
    assert "default/default-profile" in placed

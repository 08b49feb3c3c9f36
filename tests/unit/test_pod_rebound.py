"""Pod.rebound: the bound pod carried over from the assumed one must equal a fresh parse in every field."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.objects import LabelSelector, Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def _norm(v: Any) -> Any:
    """A comparable form: parsed selectors hold closures, compared by their raw form or code and cells."""
    if isinstance(v, LabelSelector):
        return ("LabelSelector", repr(v.raw))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, tuple(_norm(getattr(v, f.name)) for f in dataclasses.fields(v)))
    if callable(v) and hasattr(v, "__code__"):  # parsed expressions: the same code over the same values
        return ("fn", v.__qualname__, tuple(_norm(c.cell_contents) for c in v.__closure__ or ()))
    if isinstance(v, tuple | list):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    slots = getattr(type(v), "__slots__", None)
    if slots and not isinstance(v, str | int | float):
        return (type(v).__name__, tuple(_norm(getattr(v, s, None)) for s in slots))
    return v


def _fields(p: Pod) -> dict[str, Any]:
    return {s: _norm(getattr(p, s)) for s in Pod.__slots__ if s != "raw"}


def _raw() -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["tier"],
            "topologyKey": "kubernetes.io/hostname"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "5",
                         "labels": {"app": "a", "tier": "web"}, "annotations": {"x": "y"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                              "uid": "rs1", "controller": True}]},
            "spec": {"containers": [{"name": "c", "image": "img:1",
                                     "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}},
                                     "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                     "initContainers": [{"name": "i", "image": "init:1"}],
                     "priority": 7, "tolerations": [{"key": "k", "operator": "Exists"}],
                     "nodeSelector": {"zone": "z1"},
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                    "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"app": "a"}},
                                                    "matchLabelKeys": ["tier"]}],
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                                  "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                      "nodeSelectorTerms": [{"matchExpressions": [
                                          {"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}},
            "status": {"phase": "Pending", "nominatedNodeName": "n0"}}


def _bound(raw: dict[str, Any]) -> dict[str, Any]:
    new = copy.copy(raw)
    new["metadata"] = {**raw["metadata"], "resourceVersion": "6", "annotations": {"x": "y", "r": "s"}}
    new["spec"] = {**raw["spec"], "nodeName": "n1"}
    new["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return new


def test_rebound_equals_a_fresh_parse_in_every_field():
    raw = _raw()
    held = Pod.from_dict(raw)
    new = _bound(raw)
    got = held.rebound(new)
    assert got is not None and got.raw is new
    assert _fields(got) == _fields(Pod.from_dict(new))
    assert got.node_name == "n1" and got.resource_version == "6" and got.nominated_node_name == ""
    assert got.annotations == {"x": "y", "r": "s"} and held.annotations == {"x": "y"}
    assert got.labels is not held.labels and got.requests is not held.requests


def test_rebound_refuses_any_other_change():
    raw = _raw()
    held = Pod.from_dict(raw)
    changes = [
        lambda r: r["metadata"].__setitem__("labels", {"app": "b", "tier": "web"}),
        lambda r: r["metadata"].__setitem__("deletionTimestamp", "2020-01-01T00:00:00Z"),
        lambda r: r["spec"].__setitem__("priority", 8),
        lambda r: r["spec"].pop("tolerations"),
        lambda r: r.__setitem__("extra", 1),
        lambda r: r.pop("kind"),
        lambda r: r.__setitem__("spec", None),
    ]
    for change in changes:
        new = copy.deepcopy(_bound(raw))
        change(new)
        assert held.rebound(new) is None


def test_scheduler_takes_the_assumed_pod_over_on_its_bind_event():
    m = MemoryCluster()
    m.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "z1"}},
              "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}, emit=False)
    raw = _raw()
    raw["status"] = {}
    reg = build_registry([])
    sched = Scheduler(m, load_config(None, reg), reg, seed=1, record_breakdown=False)
    sched.start()
    m.create(raw)
    taken: list[bool] = []
    real = Pod.rebound

    def spy(self: Pod, new: dict[str, Any]) -> Pod | None:
        out = real(self, new)
        taken.append(out is not None)
        if out is not None:
            assert _fields(out) == _fields(Pod.from_dict(new))
        return out

    Pod.rebound = spy  # type: ignore[method-assign]
    try:
        sched.run(until_idle=True)
    finally:
        Pod.rebound = real  # type: ignore[method-assign]
    assert taken == [True]
    assert m.get_pod("ns", "p")["spec"]["nodeName"] == "n1"
    assert [p.resource_version for p in sched.cache.pods()] == [m.get_pod("ns", "p")["metadata"]["resourceVersion"]]

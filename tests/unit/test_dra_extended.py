"""Extended resources backed by DRA (DRAExtendedResource): kube's request/mapping table, the class mapping, the
NodeResourcesFit delegation, and whole scheduling cycles on the embedded cluster (the claim created, allocated
and reserved, the pod's extendedResourceClaimStatus, the metric)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.types import QUEUE, QUEUE_SKIP, NodeInfo
from scheduler_runtime.metrics import SchedulerMetrics
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.dynamicresources.extended import (
    ANN_EXTENDED,
    after_device_class_change,
    class_mapping,
    requests_and_mappings,
)
from scheduler_runtime.plugins.noderesources import NodeResourcesFit
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

TABLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "dra_tables" / "extended_requests.json")
                   .read_text())
NS = "ml"
DRIVER = "gpu.example.com"
GPU = "example.com/gpu"


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["name"] for c in TABLE["cases"]])
def test_requests_and_mappings_table(case: dict[str, Any]) -> None:
    """kube's Test_createRequestsAndMappings_requests/_mappings."""
    mapping = {res: {"metadata": {"name": cls}, "spec": {}} for res, cls in case["classes"].items()}
    requests, mappings = requests_and_mappings(Pod.from_dict(case["pod"]), case["resources"], mapping)
    if "wantRequests" in case:
        assert requests == case["wantRequests"]
    else:  # kube's test sorts the mappings by request name, then container name
        assert sorted(mappings, key=lambda x: (x["requestName"], x["containerName"])) == case["wantMappings"]


def _cls(name: str, ext: str | None, ts: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if ext:
        spec["extendedResourceName"] = ext
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "creationTimestamp": ts}, "spec": spec}


def test_class_mapping_newest_class_wins_ties_go_to_the_first_name() -> None:
    got = class_mapping([_cls("b", GPU), _cls("a", GPU), _cls("old", GPU, "2025-01-01T00:00:00Z"), _cls("x", None)])
    assert got[GPU]["metadata"]["name"] == "a"
    assert {k for k in got if k.startswith("deviceclass.")} == {
        f"deviceclass.resource.kubernetes.io/{n}" for n in ("a", "b", "old", "x")}
    newer = class_mapping([_cls("b", GPU, "2027-01-01T00:00:00Z"), _cls("a", GPU)])
    assert newer[GPU]["metadata"]["name"] == "b"


def _node(name: str, gpus: str | None = None) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    if gpus is not None:
        alloc[GPU] = gpus
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc}}


def _slice(node: str, n: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(n)]}}


def _pod(name: str, gpus: str = "1", claim: str | None = None, res: str = GPU) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": {
        "requests": {"cpu": "100m", res: gpus}, "limits": {res: gpus}}}]}
    if claim:
        spec["resourceClaims"] = [{"name": "extra", "resourceClaimName": claim}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _run(objects: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[MemoryCluster, SchedulerMetrics]:
    m = MemoryCluster()
    for o in objects:
        m.create(o, emit=False)
    reg = build_registry([])
    metrics = SchedulerMetrics()
    s = Scheduler(m, load_config(None, reg), reg, seed=1, metrics=metrics)
    s.start()
    for p in pods:
        m.create(p)
        s.run(until_idle=True)
    return m, metrics


def _where(m: MemoryCluster, name: str) -> str:
    return (m.get_pod(NS, name) or {}).get("spec", {}).get("nodeName") or ""


def _message(m: MemoryCluster, name: str) -> str:
    conds = ((m.get_pod(NS, name) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conds if c["type"] == "PodScheduled"), "")


def _ext_claims(m: MemoryCluster) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["ownerReferences"][0]["name"]: c for c in m.list("resourceclaims")
            if (c["metadata"].get("annotations") or {}).get(ANN_EXTENDED) == "true"}


def test_extended_resource_requests_are_allocated_from_devices_and_the_claim_is_created() -> None:
    m, metrics = _run([_node("n1"), _node("n2"), _node("dp", gpus="1"), _cls("gpu", GPU), _slice("n1", 2),
                       _slice("n2", 1)],
                      [_pod("two", "2"), _pod("one"), _pod("plugin"), _pod("none")])
    assert (_where(m, "two"), _where(m, "one"), _where(m, "plugin"), _where(m, "none")) == ("n1", "n2", "dp", "")
    claims = _ext_claims(m)
    assert set(claims) == {"two", "one"}  # the device plugin's pod needs no claim
    c = claims["two"]
    assert c["metadata"]["name"].startswith("two-extended-resources-") and len(c["metadata"]["name"]) == 28
    assert c["metadata"]["generateName"] == "two-extended-resources-"
    pod_uid = m.get_pod(NS, "two")["metadata"]["uid"]
    assert c["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "two", "uid": pod_uid,
                                                 "controller": True}]
    assert c["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert c["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]
    assert sorted(r["device"] for r in c["status"]["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]
    assert c["status"]["reservedFor"] == [{"resource": "pods", "name": "two", "uid": pod_uid}]
    ers = m.get_pod(NS, "two")["status"]["extendedResourceClaimStatus"]
    assert ers == {"resourceClaimName": c["metadata"]["name"], "requestMappings": [
        {"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}]}
    assert f"1 Insufficient {GPU}" in _message(m, "none") and "2 cannot allocate all claims" in _message(m, "none")
    assert metrics.registry.get_sample_value("dynamic_resource_allocation_resourceclaim_creates_total", {
        "status": "success", "admin_access": "false", "owner_api_group": "", "owner_api_kind": "Pod"}) == 2


def test_a_pod_with_its_own_claim_and_an_extended_resource_gets_both() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "mine", "namespace": NS},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}
    m, _ = _run([_node("n1"), _cls("gpu", GPU), _slice("n1", 2), claim], [_pod("both", claim="mine")])
    assert _where(m, "both") == "n1"
    own = m.informer("resourceclaims").get("mine", NS)
    ext = _ext_claims(m)["both"]
    devices = [r["device"] for c in (own, ext) for r in c["status"]["allocation"]["devices"]["results"]]
    assert sorted(devices) == ["gpu-0", "gpu-1"]  # two different devices


def test_the_implicit_resource_name_of_a_class() -> None:
    m, _ = _run([_node("n1"), _cls("gpu", None), _slice("n1", 1)],
                [_pod("imp", res="deviceclass.resource.kubernetes.io/gpu")])
    assert _where(m, "imp") == "n1"
    assert _ext_claims(m)["imp"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu"


def test_deleting_the_pod_deletes_its_claim() -> None:
    m, _ = _run([_node("n1"), _cls("gpu", GPU), _slice("n1", 1)], [_pod("a")])
    assert _ext_claims(m)
    m.delete("pods", "a", NS)
    assert not _ext_claims(m)


def _fit(cluster: MemoryCluster | None) -> NodeResourcesFit:
    return NodeResourcesFit(None, Handle(Snapshot(), cluster=cluster) if cluster is not None else None)


@pytest.mark.parametrize("with_cluster", [True, False])
def test_node_resources_fit_leaves_class_backed_resources_to_dra(with_cluster: bool) -> None:
    m = MemoryCluster()
    m.create(_cls("gpu", GPU), emit=False)
    pl = _fit(m if with_cluster else None)
    pod = Pod.from_dict(_pod("p", "2"))
    snap = Snapshot()
    infos = []
    for raw in (_node("none"), _node("zero", gpus="0"), _node("one", gpus="1"), _node("three", gpus="3")):
        ni = NodeInfo(Node.from_dict(raw))
        snap.add_node(ni)
        infos.append(ni)
    state = CycleState()
    pl.pre_filter(state, pod, NodeList(snap))
    got = [pl.filter(state, pod, ni) for ni in infos]
    texts = [None if s is None else s.message for s in got]
    if with_cluster:
        assert texts == [None, None, f"Insufficient {GPU}", None]
    else:  # no DRA manager (kube: nil draManager): checked like any extended resource
        assert texts == [f"Insufficient {GPU}", f"Insufficient {GPU}", f"Insufficient {GPU}", None]
    batch = pl.filter_batch(CycleState(), pod, snap)
    assert np.asarray(batch.ok).tolist() == [t is None for t in texts]
    for row, t in enumerate(texts):
        if t is not None:
            assert batch.status(row).message == t


def test_device_class_events_wake_pods_that_request_its_resource() -> None:
    pod = Pod.from_dict(_pod("p", res=GPU))
    implicit = Pod.from_dict(_pod("q", res="deviceclass.resource.kubernetes.io/gpu"))
    assert after_device_class_change(pod, None, _cls("gpu", GPU))
    assert not after_device_class_change(pod, None, _cls("gpu", "example.com/other"))
    assert after_device_class_change(implicit, None, _cls("gpu", None))
    assert not after_device_class_change(pod, _cls("gpu", GPU), _cls("gpu", GPU))
    assert after_device_class_change(pod, _cls("gpu", None), _cls("gpu", GPU))
    events = [e for e in _fit(MemoryCluster()).events_to_register() if e.event.resource.endswith("DeviceClass")]
    assert len(events) == 1 and events[0].hint(pod, None, _cls("gpu", GPU)) == QUEUE
    assert events[0].hint(pod, None, _cls("x", None)) == QUEUE_SKIP


def test_describe_pod_explains_a_pod_pending_on_extended_resources() -> None:
    from scheduler_runtime.describe import describe

    m, _ = _run([_node("n1"), _node("dp", gpus="1"), _cls("gpu", GPU), _slice("n1", 2)],
                [_pod("a", "2"), _pod("b", "2")])
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    text = "\n".join(describe(m.get_pod(NS, "b"), [], nodes, m.list).summary)
    assert (f"Extended resource {GPU} (2 requested) is backed by DeviceClass gpu (spec.extendedResourceName)"
            in text)
    assert "dp offers it through a device plugin (status.allocatable) and is checked by NodeResourcesFit" in text
    assert ("The pod's extended resources, request container-0-request-1: no node has 2 free devices of class gpu: "
            "none is free anywhere.") in text
    # a claim an earlier attempt left behind is named
    left = dict(_ext_claims(m)["a"])
    left["metadata"] = {**left["metadata"], "ownerReferences": [
        {**left["metadata"]["ownerReferences"][0], "name": "b", "uid": m.get_pod(NS, "b")["metadata"]["uid"]}]}
    text = "\n".join(describe(m.get_pod(NS, "b"), [], nodes, lambda r: [left] if r == "resourceclaims"
                              else m.list(r)).summary)
    assert f"ResourceClaim {NS}/{left['metadata']['name']} (annotation {ANN_EXTENDED}) was created for the pod" in text


def test_the_extended_resource_example_in_simulate() -> None:
    """examples/dra/extended*.yaml: placements, the created claims and the pending pod's reason, as the example's
    comments promise."""
    from scheduler_runtime.describe import describe
    from scheduler_runtime.simulate import simulate

    root = Path(__file__).resolve().parents[2] / "examples" / "dra"
    reg = build_registry([])
    res = simulate([root / "cluster.yaml", root / "extended.yaml"], [root / "extended-pods.yaml"],
                   load_config(None, reg), reg, seed=0, keep_cluster=True)
    assert {k: v or "" for k, v in res.placements.items()} == {
        "ml/t4-job": "gpu-2", "ml/any-gpu": "gpu-1", "ml/t4-big": ""}
    m = res.cluster
    assert m is not None
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c for c in m.list("resourceclaims")
              if (c["metadata"].get("annotations") or {}).get(ANN_EXTENDED) == "true"}
    assert sorted(claims) == ["any-gpu", "t4-job"]
    assert len(claims["t4-job"]["status"]["allocation"]["devices"]["results"]) == 2
    assert claims["any-gpu"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"
    assert res.devices["gpu-2"].allocated == 2 and res.devices["gpu-1"].allocated == 1
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    text = "\n".join(describe(m.get_pod("ml", "t4-big"), [], nodes, m.list).summary)
    assert "no node has 3 free devices of class t4.example.com: the most on one node is 2 (gpu-2)" in text


def test_the_class_mapping_follows_class_events() -> None:
    from scheduler_runtime.plugins.dynamicresources.claims import DraManager

    m = MemoryCluster()
    resolver = DraManager(Handle(Snapshot(), cluster=m)).resolver
    assert resolver.get_device_class(GPU) is None
    m.create(_cls("gpu", GPU))
    assert resolver.get_device_class(GPU)["metadata"]["name"] == "gpu"
    m.patch_object("deviceclasses", "gpu", None, {"spec": {"extendedResourceName": "example.com/other"}})
    assert resolver.get_device_class(GPU) is None
    assert resolver.get_device_class("example.com/other") is not None
    m.delete("deviceclasses", "gpu", None)
    assert resolver.get_device_class("deviceclass.resource.kubernetes.io/gpu") is None


def test_pods_asking_for_class_backed_resources_are_not_signed() -> None:
    """kube's SignPod (opportunistic batching) in NodeResourcesFit and BalancedAllocation."""
    from scheduler_runtime.plugins.noderesources import NodeResourcesBalancedAllocation

    m = MemoryCluster()
    m.create(_cls("gpu", GPU), emit=False)
    for plugin in (NodeResourcesFit(None, Handle(Snapshot(), cluster=m)),
                   NodeResourcesBalancedAllocation(None, Handle(Snapshot(), cluster=m))):
        got = plugin.sign_pod(Pod.from_dict(_pod("p")))
        assert got is not None and not isinstance(got, list)
        assert got.message == "signature disabled when dra extended resources are used in the cluster"
        assert isinstance(plugin.sign_pod(Pod.from_dict(_pod("q", res="example.com/other"))), list)


def test_node_events_wake_pods_whose_resources_dra_provides() -> None:
    """isSchedulableAfterNodeChange with the DRA manager: a node that does not advertise a class-backed resource
    fits as far as NodeResourcesFit is concerned, and counts as changed for it."""
    m = MemoryCluster()
    m.create(_cls("gpu", GPU), emit=False)
    pl = NodeResourcesFit(None, Handle(Snapshot(), cluster=m))
    hint = next(e.hint for e in pl.events_to_register() if e.event.resource == "Node")
    pod = Pod.from_dict(_pod("p", "2"))
    assert hint(pod, None, Node.from_dict(_node("new"))) == QUEUE
    assert hint(pod, None, Node.from_dict(_node("plugin", gpus="1"))) == QUEUE_SKIP
    assert hint(pod, Node.from_dict(_node("a")), Node.from_dict(_node("a"))) == QUEUE
    no_dra = NodeResourcesFit(None, Handle(Snapshot(), cluster=MemoryCluster()))
    hint = next(e.hint for e in no_dra.events_to_register() if e.event.resource == "Node")
    assert hint(pod, None, Node.from_dict(_node("new"))) == QUEUE_SKIP


def test_feature_gate_off_means_no_class_backs_an_extended_resource() -> None:
    """--feature-gates DRAExtendedResource=false (1.36; locked on in 1.37): NodeResourcesFit checks the resource
    like any extended resource, DynamicResources creates no claim, no DeviceClass event is registered."""
    from scheduler_runtime.featuregates import parse_feature_gates

    gates = parse_feature_gates(["DRAExtendedResource=false"], "1.36")
    m = MemoryCluster()
    for o in (_node("n1"), _cls("gpu", GPU), _slice("n1", 2)):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=gates), reg, seed=1, feature_gates=gates)
    s.start()
    m.create(_pod("a"))
    s.run(until_idle=True)
    assert _where(m, "a") == "" and f"1 Insufficient {GPU}" in _message(m, "a")
    assert not _ext_claims(m)
    assert not [e for p in s._events.values() for regs in p.values() for e in regs or []
                if e.event.resource.endswith("DeviceClass") and e.hint is _after_fit_device_class_hint()]


def _after_fit_device_class_hint() -> Any:
    from scheduler_runtime.plugins import noderesources

    return noderesources._after_device_class_change


def test_extended_claim_index_follows_claim_events() -> None:
    """DraManager.extended_claim answers findExtendedResourceClaim from an index kept by claim events: the
    annotated claim the pod controls, not one without the annotation or controlled by another pod, and nothing
    once it is deleted or loses its annotation."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.framework.handle import Handle
    from scheduler_runtime.framework.snapshot import Snapshot
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.plugins.dynamicresources.claims import DraManager
    from scheduler_runtime.plugins.dynamicresources.extended import ANN_EXTENDED

    def claim(name: str, owner: str, annotated: bool = True) -> dict:
        m: dict = {"name": name, "namespace": "ns",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}",
                                        "controller": True}]}
        if annotated:
            m["annotations"] = {ANN_EXTENDED: "true"}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": m,
                "spec": {"devices": {"requests": []}}}

    m = MemoryCluster()
    mgr = DraManager(Handle(Snapshot(), cluster=m))
    pod = Pod.from_dict({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"}, "spec": {"containers": []}})
    m.create(claim("plain", "p", annotated=False))
    m.create(claim("other", "q"))
    assert mgr.extended_claim(pod) is None
    m.create(claim("p-extended-resources-abcde", "p"))
    assert mgr.extended_claim(pod)["metadata"]["name"] == "p-extended-resources-abcde"
    stripped = copy.deepcopy(m.informer("resourceclaims").get("p-extended-resources-abcde", "ns"))
    stripped["metadata"]["annotations"] = {}
    m.update(stripped)
    assert mgr.extended_claim(pod) is None
    m.create(claim("p-extended-resources-fghij", "p"))
    m.delete("resourceclaims", "p-extended-resources-fghij", "ns")
    assert mgr.extended_claim(pod) is None


def test_an_explanation_that_fails_is_a_line_in_describe_and_simulate() -> None:
    """explain_claims never raises (describe-pod and simulate rely on it): a failure while reading the claims
    is one line in their output."""
    from scheduler_runtime.describe import describe
    from scheduler_runtime.plugins.dynamicresources.explain import explain_claims
    from scheduler_runtime.simulate import explain_devices

    m, _ = _run([_node("n1"), _cls("gpu", GPU), _slice("n1", 2)], [_pod("a", "2"), _pod("b", "2")])
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    pod = copy.deepcopy(m.get_pod(NS, "b"))
    pod["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": "c"}]
    unbroken = m.list

    def broken(resource: str) -> list[dict[str, Any]]:
        if resource == "resourceclaims":
            raise RuntimeError(f"cannot list {resource}")
        return unbroken(resource)

    assert explain_claims(pod, broken, nodes) == ["Could not explain the pod's ResourceClaims: cannot list "
                                                  "resourceclaims"]
    assert describe(pod, [], nodes, broken).summary[-1:] == explain_claims(pod, broken, nodes)
    m.update(pod)
    m.list = broken  # type: ignore[method-assign]
    try:
        assert explain_devices(m, [f"{NS}/b"]) == {f"{NS}/b": explain_claims(pod, broken, nodes)}
    finally:
        m.list = unbroken  # type: ignore[method-assign]

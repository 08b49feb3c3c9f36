"""kube's DRA test tables as data (tests/data/dra_tables/): the structured allocator's (allocator.yaml) run against
ksched's allocator, the DynamicResources plugin's (plugin.yaml) stage by stage, and its queueing hints' (hints.yaml)
through the hint ksched registers for each event at the release's minor."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.objects import Node
from scheduler_runtime.plugins.dynamicresources.allocator import AllocationError, Allocator, Features
from scheduler_runtime.plugins.dynamicresources.cel import CelCache
from scheduler_runtime.quantity import parse_quantity

TABLE = Path(__file__).resolve().parents[1] / "data" / "dra_tables" / "allocator.yaml"
CASES = yaml.safe_load(TABLE.read_text())
#: kube's table default: every optional feature off
NO_FEATURES = Features(admin_access=False, prioritized_list=False, partitionable_devices=False, device_taints=False,
                       device_binding_and_status=False, consumable_capacity=False)


def _node(spec: dict[str, Any] | None) -> Node:
    spec = spec or {}
    return Node.from_dict({"metadata": {"name": spec.get("name", "node-1"),
                                        "labels": {"region": spec.get("region", "region-1"), "planet": "earth"}}})


def _class(c: Any) -> dict[str, Any]:
    if isinstance(c, str):
        name, driver, *multi = c.split(":")
        c = {"name": name, "driver": driver}
        if multi:  # kube's classWithAllowMultipleAllocations
            c["selectors"] = [f'device.driver == "{driver}" && device.allowMultipleAllocations == {multi[0]}']
    sels = c.get("selectors") or [f'device.driver == "{c["driver"]}"']
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in sels]}
    if c.get("config"):
        spec["config"] = [{"opaque": _opaque(c["driver"], c["config"])}]
    return {"metadata": {"name": c["name"]}, "spec": spec}


def _opaque(driver: str, attr: str) -> dict[str, Any]:
    return {"driver": driver, "parameters": {attr: attr + "Value"}}


def _qty_map(m: dict[str, Any]) -> dict[str, Any]:
    return {k: {"value": str(v)} for k, v in m.items()}


def _device(d: Any) -> dict[str, Any]:
    if isinstance(d, str):
        return {"name": d}
    out: dict[str, Any] = {"name": d["name"]}
    if "memory" in d:
        out["capacity"] = _qty_map({"memory": d["memory"]})
    if "attrs" in d:
        out["attributes"] = d["attrs"]
    if "caps" in d:  # capacities without a request policy
        out["capacity"] = _qty_map(d["caps"])
    if "rangeCaps" in d:  # kube's withCapacityRequestPolicyRange: default 2, validRange min 2 step 2 max 4
        out.setdefault("capacity", {}).update({k: {"value": str(v), "requestPolicy": {
            "default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}} for k, v in d["rangeCaps"].items()})
    if "validCaps" in d:  # kube's withCapacityRequestPolicyValidValues: {default, values: [more], caps: {..}}
        vc = d["validCaps"]
        values = [str(vc["default"])] + [str(x) for x in vc.get("values", [])]
        out.setdefault("capacity", {}).update({k: {"value": str(v), "requestPolicy": {
            "default": str(vc["default"]), "validValues": values}} for k, v in vc["caps"].items()})
    if "capacityRaw" in d:
        out.setdefault("capacity", {}).update(d["capacityRaw"])
    if d.get("multi"):
        out["allowMultipleAllocations"] = True
    if "consumes" in d:
        groups = d.get("groups") or {}  # compatibilityGroups per counter set (DRADeviceCompatibilityGroups)
        out["consumesCounters"] = [{"counterSet": s, "counters": _qty_map(c),
                                    **({"compatibilityGroups": groups[s]} if s in groups else {})}
                                   for s, c in d["consumes"].items()]
    for k in ("taints", "nodeName", "allNodes", "nodeSelector", "bindingConditions", "bindingFailureConditions",
              "bindsToNode"):
        if k in d:
            out[k] = d[k]
    return out


def _slice(s: dict[str, Any]) -> dict[str, Any]:
    pool = s["pool"] if isinstance(s["pool"], dict) else {"name": s["pool"]}
    spec: dict[str, Any] = {"driver": s["driver"], "pool": {
        "name": pool["name"], "generation": pool.get("generation", 1), "resourceSliceCount": pool.get("count", 1)}}
    node = s["node"]
    if "nodeSelectorRaw" in s:
        spec["nodeSelector"] = s["nodeSelectorRaw"]
    elif node == "all":
        spec["allNodes"] = True
    elif node == "perDevice":
        spec["perDeviceNodeSelection"] = True
    elif isinstance(node, dict):
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": [v]} for k, v in node.items()]}]}
    else:
        spec["nodeName"] = node
    if "manyDevices" in s:
        spec["devices"] = [{"name": f"device-{i}"} for i in range(s["manyDevices"])]
    elif "devices" in s:
        spec["devices"] = [_device(d) for d in s["devices"]]
    if "counterSets" in s:
        spec["sharedCounters"] = [{"name": n, "counters": _qty_map(c)} for n, c in s["counterSets"].items()]
    return {"metadata": {"name": s["name"]}, "spec": spec}


def _request_body(r: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": r.get("class", "")}
    if r.get("all"):
        body["allocationMode"] = "All"
    elif r.get("mode"):
        body["allocationMode"] = r["mode"]
    else:
        body["allocationMode"] = "ExactCount"
        body["count"] = r.get("count", 1)
    if "selectors" in r:
        body["selectors"] = [{"cel": {"expression": e}} for e in r["selectors"]]
    if "rawSelectors" in r:
        body["selectors"] = r["rawSelectors"]
    if r.get("admin"):
        body["adminAccess"] = True
    if "tolerations" in r:
        body["tolerations"] = r["tolerations"]
    if "capacity" in r:  # kube's withCapacityRequest: an amount of capacity-0
        body["capacity"] = {"requests": {"capacity-0": str(r["capacity"])}}
    return body


def _claim(c: dict[str, Any]) -> dict[str, Any]:
    reqs = []
    for r in c.get("requests") or []:
        if "firstAvailable" in r:
            reqs.append({"name": r["name"], "firstAvailable": [{"name": s["name"], **_request_body(s)}
                                                               for s in r["firstAvailable"]]})
        else:
            reqs.append({"name": r["name"], "exactly": _request_body(r)})
    devices: dict[str, Any] = {"requests": reqs}
    if "constraints" in c:
        devices["constraints"] = c["constraints"]
    if "config" in c:
        devices["config"] = [{**_config_requests(x), "opaque": _opaque(x["driver"], x["attr"])} for x in c["config"]]
    return {"metadata": {"name": c["name"]}, "spec": {"devices": devices}}


def _config_requests(x: dict[str, Any]) -> dict[str, Any]:
    """A config's `requests`, absent when the entry has none (it then applies to every request)."""
    return {"requests": x["requests"]} if "requests" in x else {}


def _expand(results: list[str]) -> list[str]:
    """`device-{0..15}` in a result stands for device-0 ... device-15 (kube's multipleDeviceAllocationResults)."""
    out = []
    for r in results:
        m = re.search(r"\{(\d+)\.\.(\d+)\}", r)
        if m is None:
            out.append(r)
            continue
        out.extend(r[:m.start()] + str(i) + r[m.end():] for i in range(int(m[1]), int(m[2]) + 1))
    return out


def _expected(e: dict[str, Any], node: Node) -> dict[str, Any]:
    results = []
    for r in _expand(e.get("results") or []):
        req, driver, pool, device, *flags = r.split()
        out: dict[str, Any] = {"request": req, "driver": driver, "pool": pool, "device": device}
        for f in flags:  # per-result binding conditions: bc:<c>,<c> / bfc:<c>,<c>
            kind, _, conds = f.partition(":")
            if kind in ("bc", "bfc") and conds:
                out["bindingConditions" if kind == "bc" else "bindingFailureConditions"] = conds.split(",")
        if "admin" in flags:
            out["adminAccess"] = True
        if "share" in flags:  # a share of a device allowing multiple allocations; `name=qty` what it consumes
            out["shareID"] = SHARE_ID
            consumed = {f.split("=")[0]: f.split("=")[1] for f in flags if "=" in f}
            if consumed:
                out["consumedCapacity"] = consumed
        if e.get("tolerations"):
            out["tolerations"] = e["tolerations"]
        if e.get("bindingConditions"):
            out["bindingConditions"] = e["bindingConditions"]
        if e.get("bindingFailureConditions"):
            out["bindingFailureConditions"] = e["bindingFailureConditions"]
        results.append(out)
    sel = e.get("selector")
    selector: dict[str, Any] | None
    if "selectorRaw" in e:
        selector = e["selectorRaw"]
    elif sel == "local":
        selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                             "values": [node.name]}]}]}
    elif isinstance(sel, dict):
        selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]}
                                                                for k, v in sel.items()]}]}
    else:
        selector = None
    config = [{"source": x["source"], **_config_requests(x), "opaque": _opaque(x["driver"], x["attr"])}
              for x in e.get("config") or []]
    return {"results": results, "selector": selector, "config": config}


SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"  # kube's fixedShareID


def _fixed_shares(allocations: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Share IDs are random UUIDs (as kube's): check their form, then replace them by kube's fixed one; consumed
    amounts are compared by value."""
    if allocations is None:
        return None
    out = []
    for a in allocations:
        results = []
        for r in a["devices"]["results"]:
            r = dict(r)
            if "shareID" in r:
                assert str(uuid.UUID(r["shareID"])) == r["shareID"]
                r["shareID"] = SHARE_ID
            if "consumedCapacity" in r:
                r["consumedCapacity"] = {k: parse_quantity(v) for k, v in r["consumedCapacity"].items()}
            results.append(r)
        out.append({**a, "devices": {**a["devices"], "results": results}})
    return out


def _canon(v: Any) -> Any:
    """Order-insensitive form (kube's matchers use ConsistOf for results, terms, requirements and values)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(sorted((_canon(x) for x in v), key=repr))
    return v


#: why an upstream case is not run (`na: <key>: <detail>`): alpha features ksched refuses
NA_REASONS = {
    "list-attributes": "list-typed attributes (DRAListTypeAttributes, alpha)",
    "compatibility-groups": "device compatibility groups (DRADeviceCompatibilityGroups, alpha)",
    "derived-attributes": "derived attributes (DRADerivedAttributes, alpha)",
    "optional-node-operations": "optional node operations (DRAOptionalNodeOperations, alpha)",
    "fractional-capacity": "fractional capacity ranges (DRAFractionalCapacityRange, refused by ksched)",
}


def _param(case: dict[str, Any]) -> Any:
    """A table entry as a test; `known_failure` ones are strict xfails (they must keep failing until ksched is
    fixed, then the marker goes). `na` entries are not run: test_allocator_table_accounting checks them."""
    if "known_failure" in case:
        return pytest.param(case, id=case["name"], marks=pytest.mark.xfail(strict=True, reason=case["known_failure"]))
    return pytest.param(case, id=case["name"])


def test_allocator_table_accounting() -> None:
    """Every entry is unique by name, and an n/a one names a known reason and carries nothing to run."""
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), [n for n, k in Counter(names).items() if k > 1]
    for c in CASES:
        if "na" in c:
            assert c["na"].split(":")[0] in NA_REASONS, c["name"]
            assert set(c) <= {"name", "na"}, c["name"]


@pytest.mark.parametrize("case", [_param(c) for c in CASES if "na" not in c])
def test_allocator_table(case: dict[str, Any]) -> None:
    features = dataclasses.replace(NO_FEATURES, **case.get("features", {}))
    classes = {c["metadata"]["name"]: c for c in (_class(x) for x in case.get("classes") or [])}
    node = _node(case.get("node"))
    allocated = {tuple(d.split("/")) for d in case.get("allocated") or []}
    # allocatedCapacity: kube's allocatedCapacityDevices ({"driver/pool/device": {capacity: qty}});
    # allocatedShares: kube's allocatedSharedDeviceIDs (the devices)
    capacity = {tuple(k.split("/")): {n: parse_quantity(v) for n, v in c.items()}
                for k, c in (case.get("allocatedCapacity") or {}).items()}
    shares = {tuple(d.split("/")) for d in case.get("allocatedShares") or []}
    alloc = Allocator(features=features, allocated=allocated, class_lister=classes.get,  # type: ignore[arg-type]
                      slices=[_slice(s) for s in case.get("slices") or []], cel_cache=CelCache(),
                      allocated_capacity=capacity, shared_devices=shares)  # type: ignore[arg-type]
    claims = [_claim(c) for c in case.get("claims") or []]
    if "error" in case:
        with pytest.raises(AllocationError) as exc:
            alloc.allocate(node, claims)
        assert case["error"] in str(exc.value)
        return
    got = _fixed_shares(alloc.allocate(node, claims))
    # a second node of the same cycle reuses the checked requests (Allocator.plans): same answer
    assert _fixed_shares(alloc.allocate(node, claims)) == got
    expect = case.get("expect")
    if expect == "none":
        assert got is None
        return
    assert got is not None, "no allocation found"
    assert len(got) == len(expect)
    for g, e in zip(got, expect, strict=True):
        want = _expected(e, node)
        for r in want["results"]:
            if "consumedCapacity" in r:
                r["consumedCapacity"] = {k: parse_quantity(v) for k, v in r["consumedCapacity"].items()}
        assert Counter(map(_canon, g["devices"]["results"])) == Counter(map(_canon, want["results"]))
        assert _canon(g.get("nodeSelector")) == _canon(want["selector"])
        assert g["devices"].get("config", []) == want["config"]


# ------------------------------------------------------------------------------------------ plugin table
PLUGIN_TABLE = TABLE.parent / "plugin.yaml"
PLUGIN_CASES = yaml.safe_load(PLUGIN_TABLE.read_text())
POD_UID = "1234"
CLAIM = "my-pod-my-resource"
CLASS = "my-resource-class"
DRIVER = "some-driver"
BROKEN_CEL = f'device.attributes["{DRIVER}"].healthy'


def _local(node_name: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


EXT = "example.com/gpu"
EXT2 = "example.com/gpu2"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
ANN_EXT = "resource.kubernetes.io/extended-resource-claim"


def _extended_claim(node: str) -> dict[str, Any]:
    """kube's extendedResourceClaim(Node2): created by an earlier cycle, allocated on `node`."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "my-pod-extended-resources-0", "generateName": "my-pod-extended-resources-",
                         "namespace": "default", "annotations": {ANN_EXT: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": POD_UID,
                                              "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "container-0-request-0", "driver": DRIVER,
                                                               "pool": "worker", "device": "instance-1"}]},
                                      "nodeSelector": _local(node)}}}


def _plugin_claim(spec: Any) -> dict[str, Any]:
    if spec in ("extended-allocated", "extended-allocated-node2"):
        return _extended_claim("worker-2" if spec.endswith("node2") else "worker")
    spec = {"base": spec} if isinstance(spec, str) else dict(spec)
    base = spec["base"]
    name = "not-my-claim" if base.startswith("other") else CLAIM
    body: dict[str, Any] = {"deviceClassName": spec.get("class", CLASS)}
    if spec.get("brokenCEL"):
        body["selectors"] = [{"cel": {"expression": BROKEN_CEL}}]
    if spec.get("admin"):
        body["adminAccess"] = True
    if spec.get("prioritized"):
        request = {"name": "req-1", "firstAvailable": [{"name": "subreq-1", "count": 1, **body}]}
    else:
        request = {"name": "req-1", "exactly": {"count": 1, **body}}
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if name == CLAIM:
        uid = POD_UID + ("123" if spec.get("wrongOwner") else "")
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": uid,
                                    "controller": True}]
    if spec.get("deleting"):
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    if spec.get("finalizer"):
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
                             "spec": {"devices": {"requests": [request]}}}
    result = {"request": "req-1", "driver": DRIVER, "pool": "worker", "device": "instance-1"}
    if spec.get("admin"):
        result["adminAccess"] = True
    if base in ("allocated", "other-allocated", "in-use"):
        claim["status"] = {"allocation": {"devices": {"results": [result]}, "nodeSelector": _local("worker")}}
    if base == "in-use":
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]
    if base == "allocated-wrong-topology":
        claim["status"] = {"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]}}}
    if base == "allocated-good-topology":
        claim["status"] = {"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker"]}]}]}}}
    return claim


#: kube's pods with extended-resource requests (st.MakePod().Req(...): one container per Req)
EXT_PODS: dict[str, list[dict[str, str]]] = {
    "extended": [{EXT: "1"}], "extended2": [{EXT: "1", EXT2: "1"}], "implicit": [{IMPLICIT: "1", EXT: "2"}],
    "implicit-two": [{IMPLICIT: "1"}, {EXT: "2"}]}


def _plugin_pod(kind: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if kind in EXT_PODS:
        spec["containers"] = [{"name": f"c{i}", "image": "x", "resources": {"requests": r}}
                              for i, r in enumerate(EXT_PODS[kind])]
    status: dict[str, Any] = {}
    if kind == "claim":
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
    elif kind in ("template", "template-in-status"):
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimTemplateName": CLAIM}]
        if kind == "template-in-status":
            status["resourceClaimStatuses"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "my-pod", "namespace": "default", "uid": POD_UID}, "spec": spec, "status": status}


def _plugin_node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "8Gi", "pods": "110"}
    if name.startswith("worker-ext"):  # worker with example.com/gpu from a device plugin (0 or 1)
        alloc[EXT] = name.removeprefix("worker-ext")
        name = "worker"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc}}


def _plugin_slice(name: str) -> dict[str, Any]:
    if name == "worker-large":
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "worker-slice"},
                "spec": {"driver": DRIVER, "nodeName": "worker",
                         "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"instance-{i}"} for i in range(1, 5)]}}
    node = name.removesuffix("-tainted")
    device: dict[str, Any] = {"name": "instance-1"}
    if node == "worker-2":
        device["attributes"] = {"healthy": {"bool": True}}
    if name.endswith("-tainted"):
        device["taints"] = [{"key": "example.com/taint", "effect": "NoExecute"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": [device]}}


def _status_text(st: Any) -> str:
    from scheduler_runtime.framework.status import Code

    if st is None or st.code == Code.Success:
        return "Success"
    return f"{st.code.name}: {st.message}" if st.message else st.code.name


def _check_claim(m: Any, want: dict[str, Any]) -> None:
    claim = m.informer("resourceclaims").get(CLAIM, "default")
    st = claim.get("status") or {}
    if "reservedFor" in want:
        assert [r["name"] for r in st.get("reservedFor") or []] == want["reservedFor"]
    if "allocated" in want:
        assert bool(st.get("allocation")) is want["allocated"]
    if "results" in want:
        got = []
        for r in ((st.get("allocation") or {}).get("devices") or {}).get("results") or []:
            got.append(" ".join([r["request"], r["device"]] + (["admin"] if r.get("adminAccess") else [])))
        assert got == want["results"]
    if want.get("finalizer"):
        assert "resource.kubernetes.io/delete-protection" in (claim["metadata"].get("finalizers") or [])


def _plugin_class(c: Any) -> dict[str, Any]:
    """class (selects the driver), {brokenCEL: true}, class-ext / class-ext2 (kube's classes with an
    extendedResourceName and no selectors)."""
    if c in ("class-ext", "class-ext2"):
        suffix = "2" if c.endswith("2") else ""
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS + suffix},
                "spec": {"extendedResourceName": EXT + suffix}}
    expr = BROKEN_CEL if isinstance(c, dict) and c.get("brokenCEL") else f'device.driver == "{DRIVER}"'
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def _extended_claims(m: Any) -> list[dict[str, Any]]:
    return [c for c in m.list("resourceclaims") if (c["metadata"].get("annotations") or {}).get(ANN_EXT) == "true"]


def _check_created(m: Any, want: dict[str, Any]) -> None:
    """The claim PreBind created for the pod's extended resources, and the pod's extendedResourceClaimStatus."""
    got = _extended_claims(m)
    assert len(got) == 1, got
    claim = got[0]
    meta = claim["metadata"]
    assert meta["name"].startswith("my-pod-extended-resources-") and len(meta["name"]) == len("my-pod") + 25
    assert meta["generateName"] == "my-pod-extended-resources-"
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": POD_UID,
                                        "controller": True}]
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    reqs = [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
            for r in claim["spec"]["devices"]["requests"]]
    assert reqs == [tuple(r.split()[:2]) + (int(r.split()[2]),) for r in want["requests"]]
    st = claim["status"]
    assert [f"{r['request']} {r['device']}" for r in st["allocation"]["devices"]["results"]] == want["results"]
    assert st["allocation"]["nodeSelector"] == _local("worker")
    assert st["allocation"].get("allocationTimestamp")
    assert [r["name"] for r in st["reservedFor"]] == ["my-pod"]
    ers = (m.get_pod("default", "my-pod")["status"] or {}).get("extendedResourceClaimStatus")
    if "mappings" in want:
        assert ers["resourceClaimName"] == meta["name"]
        assert [f"{x['containerName']} {x['resourceName']} {x['requestName']}" for x in ers["requestMappings"]] == \
            want["mappings"]


class _FailingCluster:
    """What kube's table does with reactors: the pod status patch fails (failPatch), or creating a claim does
    (failCreate)."""

    @staticmethod
    def make(case: dict[str, Any]) -> Any:
        from scheduler_runtime.cluster.base import PatchError
        from scheduler_runtime.cluster.memory import MemoryCluster

        class Failing(MemoryCluster):
            def patch_object(self, resource: str, name: str, namespace: str | None, patch: dict[str, Any],
                             subresource: str | None = None) -> dict[str, Any]:
                if case.get("failPatch") and resource == "pods":
                    raise PatchError("patch error", status=500)
                return super().patch_object(resource, name, namespace, patch, subresource)

            def create_object(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
                if case.get("failCreate") and resource.startswith("resourceclaims"):
                    raise PatchError("claim creation errors", status=400)
                return super().create_object(resource, namespace, obj)

        return Failing()


@pytest.mark.parametrize("case", PLUGIN_CASES, ids=[c["name"] for c in PLUGIN_CASES])
def test_plugin_table(case: dict[str, Any]) -> None:
    from types import SimpleNamespace

    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.featuregates import default_gates
    from scheduler_runtime.framework.handle import Handle
    from scheduler_runtime.framework.snapshot import Snapshot
    from scheduler_runtime.metrics import SchedulerMetrics
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.plugins.dynamicresources import DynamicResources

    m = _FailingCluster.make(case) if case.get("failPatch") or case.get("failCreate") else MemoryCluster()
    nodes = [Node.from_dict(_plugin_node(n)) for n in case.get("nodes", ["worker"])]
    for n in case.get("nodes", ["worker"]):
        m.create(_plugin_node(n), emit=False)
    for c in case.get("claims") or []:
        m.create(_plugin_claim(c), emit=False)
    for c in case.get("classes") or []:
        m.create(_plugin_class(c), emit=False)
    for s in case.get("slices") or []:
        m.create(_plugin_slice(s), emit=False)
    raw_pod = _plugin_pod(case["pod"])
    m.create(raw_pod, emit=False)
    pod = Pod.from_dict(raw_pod)
    handle = Handle(Snapshot(), cluster=m)
    handle.feature_gates = default_gates("1.36")  # the tables are kube 1.36.3's (1.37 drops PostFilter's reasons)
    metrics = SchedulerMetrics()
    handle.framework = SimpleNamespace(metrics=metrics)
    pl = DynamicResources(None, handle)
    want = case.get("want") or {}
    try:
        _run_plugin_case(case, want, m, pl, pod, nodes)
    finally:
        creates = {r: metrics.registry.get_sample_value(
            "dynamic_resource_allocation_resourceclaim_creates_total",
            {"status": r, "admin_access": "false", "owner_api_group": "", "owner_api_kind": "Pod"})
            for r in ("success", "failure")}
        assert {k: int(v) for k, v in creates.items() if v} == want.get("creates", {})


def _run_plugin_case(case: dict[str, Any], want: dict[str, Any], m: Any, pl: Any, pod: Any, nodes: list[Any]
                     ) -> None:
    from scheduler_runtime.framework.cycle_state import CycleState
    from scheduler_runtime.framework.status import Code
    from scheduler_runtime.framework.types import NodeInfo

    assert _status_text(pl.pre_enqueue(pod)) == want.get("preenqueue", "Success")
    if "preenqueue" in want:
        return
    state = CycleState()
    _res, st = pl.pre_filter(state, pod, None)  # type: ignore[arg-type]
    assert _status_text(st) == want.get("prefilter", "Success")
    unschedulable = st is not None and st.code not in (Code.Success, Code.Skip)
    feasible = []
    if st is None or st.code == Code.Success:
        for n in nodes:
            fst = pl.filter(state, pod, NodeInfo(n))
            assert _status_text(fst) == (want.get("filter") or {}).get(n.name, "Success"), n.name
            if fst is not None and fst.code == Code.Error:
                return  # an error aborts the scheduling cycle: no PostFilter
            if fst is not None and fst.code != Code.Success:
                unschedulable = True
            else:
                feasible.append(n.name)
    elif st.code == Code.Skip:
        unschedulable = True  # nothing to filter for the plugin; the pod failed elsewhere
    if unschedulable or not feasible:
        _r, pst = pl.post_filter(state, pod, {})
        assert _status_text(pst) == want.get("postfilter", "Success")
        if "claimAfterPostFilter" in want:
            _check_claim(m, want["claimAfterPostFilter"])
        if "claimsAfterPostFilter" in want:
            assert sorted(c["metadata"]["name"] for c in m.list("resourceclaims")) == want["claimsAfterPostFilter"]
        return
    assert _status_text(pl.reserve(state, pod, feasible[0])) == want.get("reserve", "Success")
    ext_uid = ""
    if "inFlightAfterReserve" in want:
        for name in want["inFlightAfterReserve"]:
            if name == "<extended-resources>":
                ext = state.get("DynamicResources").ext_claim()
                assert ext["metadata"]["name"] == name
                ext_uid = ext["metadata"]["uid"]
                assert pl.mgr.has_pending(ext_uid)
                continue
            uid = m.informer("resourceclaims").get(name, "default")["metadata"]["uid"]
            assert pl.mgr.has_pending(uid)
    if want.get("unreserveBeforePreBind"):
        pl.unreserve(state, pod, feasible[0])
        if ext_uid:
            assert not pl.mgr.has_pending(ext_uid) and not _extended_claims(m)
            return
        assert not pl.mgr.has_pending(m.informer("resourceclaims").get(CLAIM, "default")["metadata"]["uid"])
        _check_claim(m, want["claim"])
        return
    pst = _status_text(pl.pre_bind(state, pod, feasible[0]))
    assert pst == want.get("prebind", "Success") or (pst.startswith("Error: ") and pst.endswith(want["prebind"]))
    if ext_uid:
        assert not pl.mgr.has_pending(ext_uid)
    if "claim" in want:
        _check_claim(m, want["claim"])
    if "created" in want:
        _check_created(m, want["created"])
    elif case["pod"] in EXT_PODS:
        assert not _extended_claims(m)
    if "unreserveAfterPreBind" in want:
        pl.unreserve(state, pod, feasible[0])
        if "claim" in want:
            _check_claim(m, want["unreserveAfterPreBind"])
        else:
            assert not _extended_claims(m)


# ------------------------------------------------------------------------------------------ hint table
#: kube's queueing-hint tests (tests/data/dra_tables/hints.yaml), each run at its release's minor
HINT_CASES = yaml.safe_load((TABLE.parent / "hints.yaml").read_text())
HINT_APPLICABLE = [c for c in HINT_CASES if "na" not in c]


def _hint_id(case: dict[str, Any]) -> str:
    return f"{case['release']} {case['test']}" + (f"/{case['name']}" if case["name"] else "")


def _hint_claim(spec: Any) -> dict[str, Any]:
    """plugin.yaml's claim, with the name, finalizers or status.allocation a hint case changes."""
    over = {k: spec[k] for k in ("name", "finalizers", "allocation") if isinstance(spec, dict) and k in spec}
    claim = _plugin_claim({k: v for k, v in spec.items() if k not in over} if isinstance(spec, dict) else spec)
    if "name" in over:
        claim["metadata"]["name"] = over["name"]
    if "finalizers" in over:
        claim["metadata"]["finalizers"] = list(over["finalizers"])
    if "allocation" in over:
        st = claim.setdefault("status", {})
        if over["allocation"] is None:
            st.pop("allocation", None)
        else:
            st["allocation"] = over["allocation"]
    return claim


def _hint_pod(spec: Any) -> dict[str, Any]:
    """plugin.yaml's pod; two-templates is kube's podWithTwoClaimTemplates (a second pod claim, my-resource-2,
    from the same template)."""
    base = spec if isinstance(spec, str) else spec["base"]
    raw = _plugin_pod("template" if base == "two-templates" else base)
    if base == "two-templates":
        raw["spec"]["resourceClaims"].append({"name": "my-resource-2", "resourceClaimTemplateName": CLAIM})
    if isinstance(spec, dict):
        for k in ("name", "uid"):
            if k in spec:
                raw["metadata"][k] = spec[k]
        if "statuses" in spec:
            raw["status"]["resourceClaimStatuses"] = [{"name": n, "resourceClaimName": CLAIM}
                                                      for n in spec["statuses"]]
    return raw


def test_hint_table_cases_are_run_or_say_why_not() -> None:
    for c in HINT_CASES:
        assert ("na" in c) != ("want" in c), _hint_id(c)
        assert "na" not in c or c["na"].strip(), _hint_id(c)
        assert c["release"] in ("1.36.3", "1.37.2"), _hint_id(c)
    assert len({_hint_id(c) for c in HINT_CASES}) == len(HINT_CASES)


@pytest.mark.parametrize("case", HINT_APPLICABLE, ids=[_hint_id(c) for c in HINT_APPLICABLE])
def test_hint_table(case: dict[str, Any]) -> None:
    """The hint ksched registers for the case's event at the release's minor, on kube's (pod, old, new)."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.featuregates import default_gates
    from scheduler_runtime.framework.handle import Handle
    from scheduler_runtime.framework.snapshot import Snapshot
    from scheduler_runtime.framework.types import QUEUE, ActionType, ClusterEvent
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.plugins.dynamicresources import DynamicResources, DynamicResourcesArgs
    from scheduler_runtime.plugins.dynamicresources.claims import EV_CLAIM
    from scheduler_runtime.plugins.gates import GATES_CONTEXT

    m = MemoryCluster()
    for c in case.get("claims") or []:
        m.create(_hint_claim(c), emit=False)
    handle = Handle(Snapshot(), cluster=m)
    handle.feature_gates = default_gates(".".join(case["release"].split(".")[:2]))
    pl = DynamicResources(DynamicResourcesArgs.model_validate({}, context={GATES_CONTEXT: handle.feature_gates}),
                          handle)
    resource, action = case["event"].split()
    happened = ClusterEvent(EV_CLAIM if resource == "ResourceClaim" else resource, ActionType[action])
    hints = [r.hint for r in pl.events_to_register() if r.event.matches(happened)]
    assert hints and hints[0] is not None, f"no hint registered for {case['event']}"
    old, new = case.get("old"), case.get("new")
    if resource == "Pod":
        old_obj = None if old is None else Pod.from_dict(_hint_pod(old))
        new_obj = None if new is None else Pod.from_dict(_hint_pod(new))
    else:
        old_obj = None if old is None else _hint_claim(old)
        new_obj = None if new is None else _hint_claim(new)
        if new_obj is not None:  # written first, as kube's test does through its client
            new_obj = m.update(new_obj) if old is not None else m.create(new_obj)
    got = hints[0](Pod.from_dict(_hint_pod(case["pod"])), old_obj, new_obj)
    assert ("Queue" if got == QUEUE else "QueueSkip") == case["want"]

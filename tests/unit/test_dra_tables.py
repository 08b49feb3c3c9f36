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
    node: dict[str, Any] = {"metadata": {"name": spec.get("name", "node-1"),
                                         "labels": {"region": spec.get("region", "region-1"), "planet": "earth"}}}
    if spec.get("features"):  # status.declaredFeatures (kube's nodeWithDRAOptionalNodeOperations)
        node["status"] = {"declaredFeatures": sorted(spec["features"])}
    return Node.from_dict(node)


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
    if s.get("skipNodeOps"):  # DRAOptionalNodeOperations' slice field, as an API server with that gate stores it
        spec["skipNodeOperations"] = ["*"]
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
    if "derived" in r:  # kube's requestWithDerivedAttributes / subRequest with DeviceDerivedAttribute entries
        body["derivedAttributes"] = r["derived"]
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
        if "skip" in flags:  # the slice's skipNodeOperations (["*"]), copied by the experimental allocator
            out["skipNodeOperations"] = ["*"]
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


#: why an upstream case is not run (`na: <key>: <detail>`): an alpha feature ksched refuses (none at v0.37.2)
NA_REASONS: dict[str, str] = {}


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
# kube's TestPlugin (tests/data/dra_tables/plugin.yaml; its header describes the format). The runner follows
# kube's test loop stage by stage and, like kube's verify, checks after every stage the status, every stored
# claim (what the case lists as changed, the rest unchanged) and the claims in flight.
PLUGIN_TABLE = TABLE.parent / "plugin.yaml"
PLUGIN_CASES: list[dict[str, Any]] = yaml.safe_load(PLUGIN_TABLE.read_text())
PLUGIN_RUN = [c for c in PLUGIN_CASES if "na" not in c]
POD_UID = "1234"
NA_DRIVER = "node-allocatable-resource-driver"  # kube's nodeAllocatableResourceDriver
NA_CAPACITY = "example.com/cpus"  # kube's nodeAllocatableResourceCapacityName
CLAIM = "my-pod-my-resource"
CLAIM2 = "my-pod-my-resource-2"
CLASS = "my-resource-class"
DRIVER = "some-driver"
DRIVER2 = "some-driver-2"
HEALTHY = f'device.attributes["{DRIVER}"].healthy'  # kube's brokenSelector: a key only worker-2/3 have
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_GROUP = {"name": "my-podgroup", "uid": "5678"}
#: kube's bindingConditions / bindingFailureConditions fixtures
BINDING_CONDITIONS, BINDING_FAILURE_CONDITIONS = ["condition"], ["failed"]
#: where the simulated clock starts (wall seconds); fixtures' allocation timestamps are relative to it
T0 = 1_800_000_000.0
#: kube's `new(metav1.Time)`: a non-nil zero timestamp
ZERO_TIME = "0001-01-01T00:00:00Z"
EXT = "example.com/gpu"
EXT2 = "example.com/gpu2"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
ANN_EXT = "resource.kubernetes.io/extended-resource-claim"
#: the name a claim PreBind created for extended resources is shown under (its real name is generated)
EXT_KEY = "<extended-resources>"


def _local(node_name: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def _rfc3339(seconds: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _extended_claim(node: str) -> dict[str, Any]:
    """kube's extendedResourceClaim(Node2): created by an earlier cycle, allocated on `node`."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "my-pod-extended-resources-0", "generateName": "my-pod-extended-resources-",
                         "namespace": "default", "annotations": {ANN_EXT: "true"},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": POD_UID,
                                              "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "container-0-request-0", "driver": DRIVER,
                                                               "pool": "worker", "device": "instance-1"}]},
                                      "nodeSelector": _local(node)}}}


def _claim_spec(spec: Any) -> dict[str, Any]:
    """`base+flag+flag` or a mapping (see the table's header)."""
    if isinstance(spec, str):
        base, *flags = spec.split("+")
        return {"base": base, **dict.fromkeys(flags, True)}
    return dict(spec)


#: bases whose kube fixture went through the wrapper's Allocation(), which adds the finalizer
ALLOCATED_BASES = ("allocated", "in-use", "other-allocated", "allocated-wrong-topology", "allocated-good-topology")


def _exactly(body: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return {"allocationMode": "ExactCount", "count": count, **body}


def _plugin_claim(spec: Any) -> dict[str, Any]:
    spec = _claim_spec(spec)
    base = spec["base"]
    if base in ("extended-allocated", "extended-allocated-node2"):
        return _extended_claim("worker-2" if base.endswith("node2") else "worker")
    name = "not-my-claim" if base.startswith("other") else CLAIM2 if spec.get("second") else CLAIM
    body: dict[str, Any] = {"deviceClassName": spec.get("class", CLASS)}
    if spec.get("brokenCEL"):
        body["selectors"] = [{"cel": {"expression": HEALTHY}}]
    if spec.get("admin"):
        body["adminAccess"] = True
    if "capacity" in spec:  # kube's nodeAllocatableClaimWithCapacity: that much of the device's capacity
        body["capacity"] = {"requests": {NA_CAPACITY: str(spec["capacity"])}}
    requests: list[dict[str, Any]]
    if base == "large":  # kube's largeClaim: five requests of one device
        requests = [{"name": f"req-{i}", "exactly": _exactly(body)} for i in range(1, 6)]
    elif spec.get("prioritized") or spec.get("firstAvailable"):
        lists = spec.get("firstAvailable") or [["subreq-1 1"]]
        requests = []
        for i, subs in enumerate(lists, 1):
            first = []
            for sub in subs:
                sname, count, *sel = sub.split()
                s = {"name": sname, **_exactly(body, int(count))}
                if sel == ["healthy"]:
                    s["selectors"] = [{"cel": {"expression": HEALTHY}}]
                first.append(s)
            requests.append({"name": f"req-{i}", "firstAvailable": first})
    else:
        requests = [{"name": "req-1", "exactly": _exactly(body)}]
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    owner = spec.get("owner", "none" if base.startswith("other") or base in ("plain", "large") else "pod")
    if owner == "pod":
        uid = POD_UID + ("123" if spec.get("wrongOwner") else "")
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": uid,
                                    "controller": True}]
    elif owner == "podgroup":
        meta["ownerReferences"] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                    "name": POD_GROUP["name"], "uid": POD_GROUP["uid"], "controller": True}]
    if spec.get("deleting"):
        meta["deletionTimestamp"] = _rfc3339(T0)
    if spec.get("finalizer") or spec.get("deleting") or base in ALLOCATED_BASES:
        meta["finalizers"] = [FINALIZER]
    claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
                             "spec": {"devices": {"requests": requests}}}
    if base not in ALLOCATED_BASES:
        return claim
    if spec.get("alloc") == 2:  # kube's allocationResult2
        result = {"request": "req-2", "driver": DRIVER2, "pool": "worker", "device": "instance-2"}
    else:
        result = {"request": "req-1", "driver": DRIVER, "pool": "worker", "device": spec.get("device", "instance-1")}
    if spec.get("admin"):
        result["adminAccess"] = True
    if spec.get("skipNodeOps"):  # DRAOptionalNodeOperations' field, as an API server with that gate writes it
        result["skipNodeOperations"] = ["*"]
    alloc: dict[str, Any] = {"devices": {"results": [result]}, "nodeSelector": _local("worker")}
    if spec.get("bc"):
        result["bindingConditions"] = BINDING_CONDITIONS
        result["bindingFailureConditions"] = BINDING_FAILURE_CONDITIONS
        ts = spec.get("timestamp", "zero")
        alloc["allocationTimestamp"] = ZERO_TIME if ts == "zero" else _rfc3339(T0 + float(ts))
    if base == "allocated-wrong-topology":
        alloc = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]}}
    elif base == "allocated-good-topology":
        alloc = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker"]}]}]}}
    status: dict[str, Any] = {"allocation": alloc}
    if base == "in-use":
        status["reservedFor"] = [{"resource": "pods", "name": "my-pod", "uid": POD_UID}]
    if spec.get("reservedFor") == "other":  # kube's node-allocatable sharing cases: another pod, by uid only
        status["reservedFor"] = [{"uid": "other-pod-uid"}]
    if spec.get("reservedFor") == "podgroup":
        status["reservedFor"] = [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", **POD_GROUP}]
    if "deviceStatus" in spec:  # status.devices: one entry for the allocated device, conditions `type=Status`
        conds = [{"type": c.split("=")[0], "status": c.split("=")[1]} for c in spec["deviceStatus"]]
        entry: dict[str, Any] = {k: result[k] for k in ("driver", "pool", "device")}
        if conds:
            entry["conditions"] = conds
        status["devices"] = [entry]
    claim["status"] = status
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
    if kind in ("claim", "grouped"):
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
        if kind == "grouped":  # kube's groupedPodWithClaimName: a PodGroup member (GenericWorkload off here)
            spec["schedulingGroup"] = {"podGroupName": POD_GROUP["name"]}
    elif kind == "claim-in-container":  # kube's podWithClaimReferenceInContainer: container c1 uses the claim
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
        spec["containers"].append({"name": "c1", "image": "x", "resources": {"claims": [{"name": "my-resource"}]}})
    elif kind == "two-claims":
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimName": CLAIM},
                                  {"name": "my-resource-2", "resourceClaimName": CLAIM2}]
    elif kind in ("template", "template-in-status"):
        spec["resourceClaims"] = [{"name": "my-resource", "resourceClaimTemplateName": CLAIM}]
        if kind == "template-in-status":
            status["resourceClaimStatuses"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "my-pod", "namespace": "default", "uid": POD_UID}, "spec": spec, "status": status}


def _plugin_node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "8Gi", "pods": "110"}
    status: dict[str, Any] = {}
    if name.startswith("worker-ext"):  # worker with example.com/gpu from a device plugin (0 or 1)
        alloc[EXT] = name.removeprefix("worker-ext")
        name = "worker"
    elif name == "worker-capacity":  # kube's workerNodeWithCapacity: cpu 10, memory 10Gi
        alloc = {"cpu": "10", "memory": "10Gi"}
        name = "worker"
    elif name == "worker-optional-ops":  # kube's workerNodeWithOptionalNodeOperations
        status["declaredFeatures"] = ["DRAOptionalNodeOperations"]
        name = "worker"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc, **status}}


def _node_slice(node: str, driver: str, devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": devices, **spec}}


def _plugin_slice(spec: Any) -> dict[str, Any]:
    """worker | worker-2 | worker-3 (instance-1 with healthy=true) | <node>-tainted | worker-large (4 devices) |
    fabric | fabric2 (devices binding to the node, with binding conditions) | {node, count, healthy}."""
    if spec == "worker-numa" or isinstance(spec, dict) and spec.get("base") == "worker-numa":
        # kube's workerNodeSliceWithNodeAllocatableResource: a shareable device whose capacity maps to cpu
        nar = {"cpu": {"mapping": {"capacityKey": NA_CAPACITY}}, **(spec.get("nar") or {} if isinstance(spec, dict)
                                                                     else {})}
        return _node_slice("worker", NA_DRIVER, [{"name": "numa-0-cpus", "allowMultipleAllocations": True,
                                                  "capacity": {NA_CAPACITY: {"value": "10"}},
                                                  "nodeAllocatableResources": nar}])
    if isinstance(spec, dict):
        n = spec.get("count", 1)
        devices: list[dict[str, Any]] = [{"name": f"instance-{i}"} for i in range(1, n + 1)]
        if "healthy" in spec:
            devices[0]["attributes"] = {"healthy": {"bool": spec["healthy"]}}
        if "nar" in spec:  # the device's nodeAllocatableResources (DRANodeAllocatableResources)
            devices[0]["nodeAllocatableResources"] = spec["nar"]
        return _node_slice(spec["node"], DRIVER, devices)
    if spec == "worker-large":
        return _plugin_slice({"node": "worker", "count": 4})
    if spec in ("fabric", "fabric2"):
        driver, device = (DRIVER2, "instance-2") if spec == "fabric2" else (DRIVER, "instance-1")
        return _node_slice("worker", driver, [{"name": device, "bindsToNode": True,
                                          "bindingConditions": BINDING_CONDITIONS,
                                          "bindingFailureConditions": BINDING_FAILURE_CONDITIONS}],
                      nodeSelector=_local("worker"))
    node = spec.removesuffix("-tainted")
    device: dict[str, Any] = {"name": "instance-1"}
    if node in ("worker-2", "worker-3"):
        device["attributes"] = {"healthy": {"bool": True}}
    if spec.endswith("-tainted"):  # kube's deviceTaint
        device["taints"] = [{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}]
    return _node_slice(node, DRIVER, [device])


def _plugin_class(c: Any) -> dict[str, Any]:
    """class (selects the driver), {brokenCEL: true}, class-ext / class-ext2 (kube's classes with an
    extendedResourceName and no selectors)."""
    if c in ("class-ext", "class-ext2"):
        suffix = "2" if c.endswith("2") else ""
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS + suffix},
                "spec": {"extendedResourceName": EXT + suffix}}
    if c == "class-any":  # kube's deviceClass: no selectors
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS}, "spec": {}}
    expr = HEALTHY if isinstance(c, dict) and c.get("brokenCEL") else f'device.driver == "{DRIVER}"'
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def _status_text(st: Any) -> str:
    from scheduler_runtime.framework.status import Code

    if st is None or st.code == Code.Success:
        return "Success"
    return f"{st.code.name}: {st.message}" if st.message else st.code.name


def _code(st: Any) -> str:
    return "Success" if st is None else st.code.name


def _result_text(r: dict[str, Any]) -> str:
    flags = ["admin"] if r.get("adminAccess") else []
    if r.get("bindingConditions") or r.get("bindingFailureConditions"):
        assert (r.get("bindingConditions"), r.get("bindingFailureConditions")) == \
            (BINDING_CONDITIONS, BINDING_FAILURE_CONDITIONS), r
        flags.append("bc")
    return " ".join([r["request"], r["device"], *flags])


def _summary(claim: dict[str, Any]) -> dict[str, Any]:
    """What the table says about a stored or in-flight claim (kube's verify compares whole objects; these are
    the fields its cases change)."""
    st = claim.get("status") or {}
    alloc = st.get("allocation") or {}
    return {"allocated": bool(alloc),
            "results": [_result_text(r) for r in (alloc.get("devices") or {}).get("results") or []],
            "reservedFor": [r.get("name") for r in st.get("reservedFor") or []],
            "finalizer": FINALIZER in ((claim.get("metadata") or {}).get("finalizers") or []),
            "timestamp": bool(alloc.get("allocationTimestamp")),
            "devices": bool(st.get("devices"))}


class _SimClock:
    """Simulated time for PreBind's wait for binding conditions: sleeping advances it. It starts half a second
    after T0, as kube's cases run a moment after building their fixtures with time.Now()."""

    def __init__(self) -> None:
        self.now = T0 + 0.5
        self.mono = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.mono += seconds


class _FailingCluster:
    """What kube's table does with reactors: the pod status patch fails (failPatch), creating a claim does
    (failCreate), or every claim update does (failClaimUpdate: the error's message)."""

    @staticmethod
    def make(case: dict[str, Any]) -> Any:
        from scheduler_runtime.cluster.base import PatchError
        from scheduler_runtime.cluster.memory import MemoryCluster

        class Failing(MemoryCluster):
            def patch_object(self, resource: str, name: str, namespace: str | None, patch: dict[str, Any],
                             subresource: str | None = None) -> dict[str, Any]:
                if case.get("failPatch") and resource == "pods":
                    raise PatchError("patch error", status=500)
                if case.get("failClaimUpdate") and resource.startswith("resourceclaims"):
                    raise PatchError(case["failClaimUpdate"], status=400)
                return super().patch_object(resource, name, namespace, patch, subresource)

            def create_object(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
                if case.get("failCreate") and resource.startswith("resourceclaims"):
                    raise PatchError("claim creation errors", status=400)
                return super().create_object(resource, namespace, obj)

        return Failing()


class _PluginRun:
    """One case: the cluster, the plugin (built at the case's minor, on simulated time) and what the last stage
    left in the API."""

    def __init__(self, case: dict[str, Any]) -> None:
        from types import SimpleNamespace

        from scheduler_runtime.cluster.memory import MemoryCluster
        from scheduler_runtime.featuregates import default_gates, parse_feature_gates
        from scheduler_runtime.framework.handle import Handle
        from scheduler_runtime.framework.snapshot import Snapshot
        from scheduler_runtime.metrics import SchedulerMetrics
        from scheduler_runtime.objects import Pod
        from scheduler_runtime.plugins.dynamicresources import DynamicResources
        from scheduler_runtime.plugins.dynamicresources.args import DynamicResourcesArgs
        from scheduler_runtime.plugins.gates import GATES_CONTEXT

        self.case = case
        failing = any(case.get(k) for k in ("failPatch", "failCreate", "failClaimUpdate"))
        self.m = m = _FailingCluster.make(case) if failing else MemoryCluster()
        names = case.get("nodes", ["worker"])
        self.nodes = [Node.from_dict(_plugin_node(n)) for n in names]
        for n in names:
            m.create(_plugin_node(n), emit=False)
        for c in case.get("claims") or []:
            m.create(_plugin_claim(c), emit=False)
        self.fixture_names = {c["metadata"]["name"] for c in m.list("resourceclaims")}
        for c in case.get("classes") or []:
            m.create(_plugin_class(c), emit=False)
        for s in case.get("slices") or []:
            m.create(_plugin_slice(s), emit=False)
        raw_pod = _plugin_pod(case["pod"])
        m.create(raw_pod, emit=False)
        self.pod = Pod.from_dict(raw_pod)
        handle = Handle(Snapshot(), cluster=m)
        handle.feature_gates = gates = (parse_feature_gates(
            [f"{k}={str(v).lower()}" for k, v in case["gates"].items()], case["minor"]) if "gates" in case
            else default_gates(case["minor"]))
        self.metrics = SchedulerMetrics()
        handle.framework = SimpleNamespace(metrics=self.metrics)
        args = DynamicResourcesArgs.model_validate(case.get("args") or {}, context={GATES_CONTEXT: gates})
        self.pl = DynamicResources(args, handle)
        self.pl.clock = self.clock = _SimClock()
        for c in case.get("inFlight") or []:  # kube's tc.inFlightClaims, signalled before the run
            claim = _plugin_claim(c)
            stored = m.informer("resourceclaims").get(claim["metadata"]["name"], "default")
            uid = (stored or claim)["metadata"].get("uid", "")
            self.pl.mgr.signal_pending(uid, claim)
        self.before = self._claims()
        self.pod_before = self._pod_statuses()

    def _pod_statuses(self) -> Any:
        """The stored pod's status.nodeAllocatableResourceClaimStatuses (DRANodeAllocatableResources)."""
        return (self.m.get_pod("default", "my-pod").get("status") or {}).get("nodeAllocatableResourceClaimStatuses")

    def _key(self, claim: dict[str, Any]) -> str:
        name = claim["metadata"]["name"]
        annotated = (claim["metadata"].get("annotations") or {}).get(ANN_EXT) == "true"
        return EXT_KEY if annotated and name not in self.fixture_names else name

    def _claims(self) -> dict[str, dict[str, Any]]:
        return {self._key(c): _summary(c) for c in self.m.list("resourceclaims")}

    def prepare(self, stage: str) -> None:
        """kube's `prepare`: changes another party makes to stored claims before the stage (whole-object
        updates, as kube's test writes them)."""
        import copy

        for name, change in ((self.case.get("prepare") or {}).get(stage) or {}).items():
            stored = self.m.informer("resourceclaims").get(name, "default")
            claim = copy.deepcopy(stored)
            if change == "removeFinalizer":
                claim["metadata"].pop("finalizers", None)
            elif change == "addFinalizer":
                claim["metadata"]["finalizers"] = [FINALIZER]
            elif change == "deallocate":
                claim.setdefault("status", {}).pop("allocation", None)
            else:
                raise AssertionError(f"unknown change {change!r}")
            if claim != stored:  # kube's updateAPIServer writes only what changed
                self.m.update(claim)
        self.before = self._claims()

    def check(self, stage: str, status: Any, want: Any) -> None:
        """kube's verify: the status, the stored claims (listed changes, all else as before the stage) and the
        claims in flight."""
        want = {"status": want} if isinstance(want, str) else dict(want or {})
        assert _status_text(status) == want.get("status", "Success"), stage
        after = self._claims()
        expected = {k: dict(v) for k, v in self.before.items()}
        for name, change in (want.get("claims") or {}).items():
            if change == "gone":
                assert name in expected, (stage, name)
                del expected[name]
            else:
                assert name in expected, (stage, name, "use `created` for a claim the stage creates")
                expected[name].update(change)
        if "created" in want:
            _check_created(self.m, self.pod, want["created"])
            assert EXT_KEY in after and EXT_KEY not in expected, stage
            expected[EXT_KEY] = after[EXT_KEY]
        assert after == expected, stage
        mgr = self.pl.mgr
        with mgr._lock:  # kube's allInFlightAllocations: the claims the plugin holds between Reserve and PreBind
            in_flight = sorted(self._key(c) for c in mgr._in_flight.values())
        assert in_flight == sorted(want.get("inFlight") or []), stage
        self.before = after
        pod_after = self._pod_statuses()
        assert pod_after == want.get("pod", self.pod_before), stage
        self.pod_before = pod_after


def _check_created(m: Any, pod: Any, want: dict[str, Any]) -> None:
    """The claim PreBind created for the pod's extended resources, and the pod's extendedResourceClaimStatus."""
    got = [c for c in m.list("resourceclaims") if c["metadata"]["name"] != "my-pod-extended-resources-0"
           and (c["metadata"].get("annotations") or {}).get(ANN_EXT) == "true"]
    assert len(got) == 1, got
    claim = got[0]
    meta = claim["metadata"]
    assert meta["name"].startswith("my-pod-extended-resources-") and len(meta["name"]) == len("my-pod") + 25
    assert meta["generateName"] == "my-pod-extended-resources-"
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": POD_UID,
                                        "controller": True}]
    assert meta["finalizers"] == [FINALIZER]
    reqs = [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
            for r in claim["spec"]["devices"]["requests"]]
    assert reqs == [tuple(r.split()[:2]) + (int(r.split()[2]),) for r in want["requests"]]
    st = claim["status"]
    assert [f"{r['request']} {r['device']}" for r in st["allocation"]["devices"]["results"]] == want["results"]
    assert st["allocation"]["nodeSelector"] == _local("worker")
    assert st["allocation"].get("allocationTimestamp")
    assert [r["name"] for r in st["reservedFor"]] == ["my-pod"]
    ers = (m.get_pod(pod.namespace, pod.name)["status"] or {}).get("extendedResourceClaimStatus")
    if "mappings" in want:
        assert ers["resourceClaimName"] == meta["name"]
        assert [f"{x['containerName']} {x['resourceName']} {x['requestName']}" for x in ers["requestMappings"]] == \
            want["mappings"]
    else:
        assert ers is None


def _plugin_case_id(case: dict[str, Any]) -> str:
    return f"{case['minor']}/{case['name']}"


def test_plugin_table_lists_kube_cases() -> None:
    """Every case of kube's table once at its pinned release (run, or `na` with the reason), plus the earlier
    minor's expectations where they differ."""
    names = [c["name"] for c in PLUGIN_CASES if "na" in c or c["minor"] == "1.37"]
    assert len(names) == len(set(names)) == 94
    for c in PLUGIN_CASES:
        assert ("na" in c) != ("minor" in c), c["name"]
        assert "na" not in c or c["na"].strip()
        assert c.get("minor") in (None, "1.36", "1.37"), c["name"]
    assert len({_plugin_case_id(c) for c in PLUGIN_RUN}) == len(PLUGIN_RUN)


@pytest.mark.parametrize("case", [
    pytest.param(c, id=_plugin_case_id(c), marks=[pytest.mark.xfail(strict=True, reason=c["xfail"])] if "xfail" in c
                 else []) for c in PLUGIN_RUN])
def test_plugin_table(case: dict[str, Any]) -> None:
    """One case (`xfail`: where ksched is known to disagree with kube, and why)."""
    run = _PluginRun(case)
    try:
        _run_plugin_case(run, case.get("want") or {})
    finally:
        _check_plugin_metrics(run, case.get("metrics") or {})


def test_skip_node_operations_checked_from_1_37() -> None:
    """kube 1.36's Filter has no skipNodeOperations check: at emulated 1.36 the claim of kube's
    allocated-skip-node-operations-missing-feature case is usable on a node that does not declare the feature."""
    run = _PluginRun({"name": "skip-node-operations", "minor": "1.36", "pod": "claim",
                      "claims": ["allocated+skipNodeOps"]})
    _run_plugin_case(run, {"prebind": {"claims": {CLAIM: {"reservedFor": ["my-pod"], "timestamp": True}}}})


def test_node_allocatable_status_cleared_by_unreserve_and_a_failed_write_fails_prebind() -> None:
    """kube's clearNodeAllocatableResourceClaimStatus (Unreserve writes an empty list once Filter found statuses
    for the node) and patchNodeAllocatableResourceClaimStatus's error (PreBind fails with the patch's error)."""
    case = next(c for c in PLUGIN_RUN if c["name"] == "node-allocatable-resource-multiplier")
    run = _PluginRun(case)
    _run_plugin_case(run, case["want"])
    assert run._pod_statuses()
    from scheduler_runtime.framework.cycle_state import CycleState
    from scheduler_runtime.framework.types import NodeInfo

    state = CycleState()
    run.pl.pre_filter(state, run.pod, None)  # type: ignore[arg-type]
    assert run.pl.filter(state, run.pod, NodeInfo(run.nodes[0])) is None  # the claim is allocated now
    run.pl.unreserve(state, run.pod, "worker")
    assert run._pod_statuses() == []
    failing = _PluginRun({**case, "failPatch": True})
    _run_plugin_case(failing, {**case["want"], "prebind": {
        "status": "Error: updating pod default/my-pod NodeAllocatableResourceClaimStatuses: patch error",
        "claims": case["want"]["prebind"]["claims"], "inFlight": [CLAIM]}})


def test_score_counts_the_alternatives_of_allocated_claims() -> None:
    """kube's computeScore adds up the chosen firstAvailable alternatives of every claim of the pod: the one of a
    claim allocated earlier (here shared, on a device outside these nodes) counts on every node, which changes
    the normalised scores (15 and 14 give 100 and 93; the pending claim's 8 and 7 alone would give 100 and 87)."""
    import copy

    run = _PluginRun({"name": "score-allocated", "minor": "1.37", "pod": "two-claims",
                      "nodes": ["worker", "worker-2"], "classes": ["class"],
                      "claims": [{"base": "pending", "firstAvailable": [["subreq-1 1", "subreq-2 1"]]},
                                 {"base": "pending", "second": True, "firstAvailable": [["subreq-1 2", "subreq-2 1"]]}],
                      "slices": [{"node": "worker", "count": 2}, {"node": "worker-2", "count": 1}]})
    shared = copy.deepcopy(run.m.informer("resourceclaims").get(CLAIM, "default"))
    shared["status"] = {"allocation": {"devices": {"results": [
        {"request": "req-1/subreq-2", "driver": DRIVER, "pool": "elsewhere", "device": "shared-instance"}]}},
        "reservedFor": [{"resource": "pods", "name": "other-pod", "uid": "other"}]}
    run.m.update(shared)
    run.before = run._claims()
    _run_plugin_case(run, {
        "score": {"worker": 15, "worker-2": 14}, "normalized": {"worker": 100, "worker-2": 93},
        "reserve": {"inFlight": [CLAIM2]},
        "prebind": {"claims": {
            CLAIM: {"reservedFor": ["other-pod", "my-pod"], "timestamp": True},
            CLAIM2: {"allocated": True, "results": ["req-1/subreq-1 instance-1", "req-1/subreq-1 instance-2"],
                     "reservedFor": ["my-pod"], "timestamp": True, "finalizer": True}}}})


def _samples(run: _PluginRun, family: str, suffix: str = "") -> dict[str, int]:
    """A metric family's samples summed by their `status` label."""
    out: dict[str, int] = {}
    for metric in run.metrics.registry.collect():
        if metric.name != family:
            continue
        for s in metric.samples:
            if s.name == family + suffix and s.value:
                out[s.labels["status"]] = out.get(s.labels["status"], 0) + int(s.value)
    return out


def _check_plugin_metrics(run: _PluginRun, want: dict[str, Any]) -> None:
    assert _samples(run, "dynamic_resource_allocation_resourceclaim_creates", "_total") == want.get("creates", {})
    binding = want.get("binding") or {}
    assert _samples(run, "scheduler_dra_bindingconditions_allocations", "_total") == binding.get("allocations", {})
    assert _samples(run, "scheduler_dra_bindingconditions_wait_duration_seconds", "_count") == \
        binding.get("waits", {})


def _run_plugin_case(run: _PluginRun, want: dict[str, Any]) -> None:
    """kube's testPlugin loop: PreEnqueue, PreFilter, Filter per node, Score and NormalizeScore when more than
    one node fits, Reserve on the best, then Unreserve (before or after PreBind, as the case asks) and PreBind,
    or PostFilter when no node fits."""
    from scheduler_runtime.framework.cycle_state import CycleState
    from scheduler_runtime.framework.types import NodeInfo, NodeScore

    pl, pod = run.pl, run.pod
    st = pl.pre_enqueue(pod)
    run.check("preenqueue", st, want.get("preenqueue"))
    if _code(st) != "Success":
        return
    state = CycleState()
    _res, st = pl.pre_filter(state, pod, None)  # type: ignore[arg-type]
    run.check("prefilter", st, want.get("prefilter"))
    unschedulable = _code(st) in ("Unschedulable", "UnschedulableAndUnresolvable", "Pending")
    potential: list[Node] = []
    if not unschedulable:
        for n in run.nodes:
            st = pl.filter(state, pod, NodeInfo(n))
            run.check(f"filter/{n.name}", st, (want.get("filter") or {}).get(n.name))
            if _code(st) == "Success":
                potential.append(n)
            if _code(st) == "Error":
                return  # an error aborts the scheduling cycle
        unschedulable = not potential
    scores: list[Any] = []
    if not unschedulable and len(potential) > 1:
        for n in potential:
            score = pl.score(state, pod, NodeInfo(n))
            assert score == (want.get("score") or {}).get(n.name, 0), f"score/{n.name}"
            scores.append(NodeScore(n.name, score))
        pl.normalize_score(state, pod, scores)
        assert {x.name: x.score for x in scores} == want.get("normalized", {}), "normalizeScore"
    selected = ""
    if not unschedulable and potential:
        selected = potential[0].name
        if scores:
            selected = max(scores, key=lambda x: x.score).name  # the first of the best, as kube's loop
        st = pl.reserve(state, pod, selected)
        run.check("reserve", st, want.get("reserve"))
        unschedulable = _code(st) != "Success"
    if selected:
        if unschedulable:
            pl.unreserve(state, pod, selected)
            run.check("unreserve", None, want.get("unreserve"))
            return
        if "unreserveBeforePreBind" in want:
            pl.unreserve(state, pod, selected)
            run.check("unreserveBeforePreBind", None, want["unreserveBeforePreBind"])
            return
        run.prepare("prebind")
        run.check("prebind", pl.pre_bind(state, pod, selected), want.get("prebind"))
        if "unreserveAfterBindFailure" in want:
            pl.unreserve(state, pod, selected)
            run.check("unreserveAfterBindFailure", None, want["unreserveAfterBindFailure"])
    elif not potential:
        _r, st = pl.post_filter(state, pod, {})
        run.check("postfilter", st, want.get("postfilter"))


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

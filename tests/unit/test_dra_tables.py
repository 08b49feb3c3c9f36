"""kube's structured-allocator test table (tests/data/dra_tables/allocator.yaml) run against ksched's allocator."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.objects import Node
from scheduler_runtime.plugins.dynamicresources.allocator import AllocationError, Allocator, Features
from scheduler_runtime.plugins.dynamicresources.cel import CelCache

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
        name, driver = c.split(":")
        c = {"name": name, "driver": driver}
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
    if "consumes" in d:
        out["consumesCounters"] = [{"counterSet": s, "counters": _qty_map(c)} for s, c in d["consumes"].items()]
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
        devices["config"] = [{"requests": x["requests"], "opaque": _opaque(x["driver"], x["attr"])}
                             for x in c["config"]]
    return {"metadata": {"name": c["name"]}, "spec": {"devices": devices}}


def _expected(e: dict[str, Any], node: Node) -> dict[str, Any]:
    results = []
    for r in e.get("results") or []:
        req, driver, pool, device, *flags = r.split()
        out: dict[str, Any] = {"request": req, "driver": driver, "pool": pool, "device": device}
        if "admin" in flags:
            out["adminAccess"] = True
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
    config = [{"source": x["source"], "requests": x["requests"], "opaque": _opaque(x["driver"], x["attr"])}
              for x in e.get("config") or []]
    return {"results": results, "selector": selector, "config": config}


def _canon(v: Any) -> Any:
    """Order-insensitive form (kube's matchers use ConsistOf for results, terms, requirements and values)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(sorted((_canon(x) for x in v), key=repr))
    return v


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_allocator_table(case: dict[str, Any]) -> None:
    features = dataclasses.replace(NO_FEATURES, **case.get("features", {}))
    classes = {c["metadata"]["name"]: c for c in (_class(x) for x in case.get("classes") or [])}
    node = _node(case.get("node"))
    allocated = {tuple(d.split("/")) for d in case.get("allocated") or []}
    alloc = Allocator(features=features, allocated=allocated, class_lister=classes.get,  # type: ignore[arg-type]
                      slices=[_slice(s) for s in case.get("slices") or []], cel_cache=CelCache())
    claims = [_claim(c) for c in case.get("claims") or []]
    if "error" in case:
        with pytest.raises(AllocationError) as exc:
            alloc.allocate(node, claims)
        assert case["error"] in str(exc.value)
        return
    got = alloc.allocate(node, claims)
    expect = case.get("expect")
    if expect == "none":
        assert got is None
        return
    assert got is not None, "no allocation found"
    assert len(got) == len(expect)
    for g, e in zip(got, expect, strict=True):
        want = _expected(e, node)
        assert Counter(map(_canon, g["devices"]["results"])) == Counter(map(_canon, want["results"]))
        assert _canon(g.get("nodeSelector")) == _canon(want["selector"])
        assert g["devices"].get("config", []) == want["config"]

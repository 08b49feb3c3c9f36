"""Plain-language reasons why a pod waits on its ResourceClaims, for `ksched describe-pod` and `simulate`.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go
(its status messages).

Each line names the object and the field to fix: a claim or template that does not exist, a DeviceClass that
does not exist, a selector that does not compile or fails on a device, a pool that is invalid or incomplete, or
no node with enough free matching devices ("no node has 2 free devices of class gpu.example.com matching
model == "a100"").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...objects import Node, Pod
from .allocator import Features, gather_pools, node_matches
from .capacity import CapacityError, fits, request_amounts
from .cel import CelCache, CelError, DeviceInput
from .claims import allocation_of, claim_devices, claim_shares, meta, status
from .extended import (
    ANN_EXTENDED,
    IMPLICIT_PREFIX,
    IN_MEMORY_NAME,
    class_mapping,
    find_extended_claim,
    is_dra_extended_name,
    mapped_requests,
    requests_and_mappings,
)

ListObjects = Callable[[str], list[dict[str, Any]]]
_ATTR = re.compile(r'device\.(?:attributes|capacity)\["[^"]*"\]\.')


def _spec(o: dict[str, Any] | None) -> dict[str, Any]:
    return (o or {}).get("spec") or {}


def _short(expr: str) -> str:
    return _ATTR.sub("", " ".join(expr.split()))


def explain_claims(pod_raw: dict[str, Any], list_objects: ListObjects, nodes: dict[str, Node]) -> list[str]:
    """The lines for the pod's claims, then for its DRA-backed extended resources. Never raises: describe-pod
    and simulate print whatever went wrong as a line instead, so an explanation cannot break either."""
    try:
        lines = _explain_claim_refs(pod_raw, list_objects, nodes)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return [f"Could not explain the pod's ResourceClaims: {exc}"]
    try:
        lines += explain_extended(pod_raw, list_objects, nodes)
    except Exception as exc:  # noqa: BLE001 - the pod's spec was accepted by the API server; never break describe
        lines.append(f"Could not explain the pod's extended resources: {exc}")
    return lines


def explain_extended(pod_raw: dict[str, Any], list_objects: ListObjects, nodes: dict[str, Node]) -> list[str]:
    """Extended resources a DeviceClass backs (DRAExtendedResource): which class, which nodes offer them
    through a device plugin instead, the claim an earlier attempt left, and whether enough free devices exist."""
    pod = Pod.from_dict(pod_raw)
    if not any(v and is_dra_extended_name(n) for n, v in pod.requests.items()):
        return []
    mapping = class_mapping(list_objects("deviceclasses"))
    backed = mapped_requests(pod, mapping)
    if not backed:
        return []
    lines = []
    for name, amount in sorted(backed.items()):
        cls = mapping[name]
        cname = str(meta(cls).get("name") or "")
        how = "its implicit name" if name.startswith(IMPLICIT_PREFIX) else "spec.extendedResourceName"
        plugin_nodes = sorted(n for n, node in nodes.items() if node.allocatable.get(name, 0) > 0)
        one = len(plugin_nodes) == 1
        where = (f"; {', '.join(plugin_nodes)} offer{'s' if one else ''} it through a device plugin "
                 f"(status.allocatable) and {'is' if one else 'are'} checked by NodeResourcesFit instead"
                 if plugin_nodes else "; no node offers it through a device plugin")
        lines.append(f"Extended resource {name} ({amount} requested) is backed by DeviceClass {cname} ({how}): "
                     f"on a node that does not advertise it, the scheduler allocates {amount} device"
                     f"{'s' if amount != 1 else ''} of that class to a ResourceClaim it creates for the pod{where}.")
    claims = list_objects("resourceclaims")
    stale = find_extended_claim(pod, claims)
    if stale is not None:
        key = f"{meta(stale).get('namespace') or 'default'}/{meta(stale).get('name')}"
        lines.append(f"ResourceClaim {key} (annotation {ANN_EXTENDED}) was created for the pod by an earlier "
                     f"attempt: the next attempt deletes it and allocates anew.")
        return lines
    requests, _ = requests_and_mappings(pod, sorted(backed), mapping)
    virtual = {"metadata": {"name": IN_MEMORY_NAME, "namespace": pod.namespace},
               "spec": {"devices": {"requests": requests}}}
    all_claims = {f"{meta(c).get('namespace') or 'default'}/{meta(c).get('name')}": c for c in claims}
    classes = {str(meta(c).get("name")): c for c in list_objects("deviceclasses")}
    for line in _explain_allocation([virtual], all_claims, classes, list_objects, nodes):
        lines.append(line.replace(f"ResourceClaim {pod.namespace}/{IN_MEMORY_NAME}",
                                  "The pod's extended resources"))
    return lines


def _explain_claim_refs(pod_raw: dict[str, Any], list_objects: ListObjects, nodes: dict[str, Node]) -> list[str]:
    refs = [r for r in (_spec(pod_raw).get("resourceClaims") or []) if isinstance(r, dict)]
    if not refs:
        return []
    pm = meta(pod_raw)
    ns = pm.get("namespace") or "default"
    claims = {f"{meta(c).get('namespace') or 'default'}/{meta(c).get('name')}": c
              for c in list_objects("resourceclaims")}
    templates = {f"{meta(t).get('namespace') or 'default'}/{meta(t).get('name')}": t
                 for t in list_objects("resourceclaimtemplates")}
    classes = {str(meta(c).get("name")): c for c in list_objects("deviceclasses")}
    statuses = {s.get("name"): s for s in (pod_raw.get("status") or {}).get("resourceClaimStatuses") or []}
    lines: list[str] = []
    mine: list[dict[str, Any]] = []
    for i, ref in enumerate(refs):
        rname = ref.get("name") or ""
        if ref.get("resourceClaimName") is not None:
            key = f"{ns}/{ref['resourceClaimName']}"
            if key not in claims:
                lines.append(f"Claim {rname!r}: ResourceClaim {key} does not exist (spec.resourceClaims[{i}]."
                             f"resourceClaimName): create it; the pod is not attempted until then.")
                continue
        elif ref.get("resourceClaimTemplateName") is not None:
            tkey = f"{ns}/{ref['resourceClaimTemplateName']}"
            st = statuses.get(rname)
            if st is None:
                if tkey not in templates:
                    lines.append(f"Claim {rname!r}: ResourceClaimTemplate {tkey} does not exist (spec.resourceClaims"
                                 f"[{i}].resourceClaimTemplateName), so no ResourceClaim is created for the pod: "
                                 f"create the template or fix the name.")
                else:
                    lines.append(f"Claim {rname!r}: waiting for kube-controller-manager's resourceclaim controller "
                                 f"to create a ResourceClaim from template {tkey}.")
                continue
            if st.get("resourceClaimName") is None:
                continue
            key = f"{ns}/{st['resourceClaimName']}"
            if key not in claims:
                lines.append(f"Claim {rname!r}: ResourceClaim {key} (status.resourceClaimStatuses) does not exist.")
                continue
        else:
            continue
        claim = claims[key]
        if meta(claim).get("deletionTimestamp"):
            lines.append(f"Claim {rname!r}: ResourceClaim {key} is being deleted.")
            continue
        mine.append(claim)
    if mine:
        lines += _explain_allocation(mine, claims, classes, list_objects, nodes)
    return lines


def _explain_allocation(mine: list[dict[str, Any]], claims: dict[str, dict[str, Any]],
                        classes: dict[str, dict[str, Any]], list_objects: ListObjects,
                        nodes: dict[str, Node]) -> list[str]:
    lines: list[str] = []
    cache = CelCache(64)
    own = {id(c) for c in mine}
    allocated = {d for c in claims.values() if id(c) not in own for d in claim_devices(c)}
    #: what other claims' shares consume of each device allowing multiple allocations (DRAConsumableCapacity)
    consumed: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in claims.values():
        if id(c) in own:
            continue
        for did, amounts in claim_shares(c):
            total = consumed.setdefault(did, {})
            for name, value in amounts.items():
                total[name] = total.get(name, 0) + value
    slices = list_objects("resourceslices")
    features = Features()
    pools_by_node = {name: gather_pools(slices, node, features, slices) for name, node in nodes.items()}
    reported_pools: set[str] = set()
    for pools in pools_by_node.values():
        for p in pools:
            if p.id in reported_pools:
                continue
            if p.invalid:
                reported_pools.add(p.id)
                lines.append(f"ResourceSlice pool {p.id} is invalid ({p.invalid_reason}): no device of it is "
                             f"allocated until its slices are fixed (spec.devices[].name, spec.pool).")
            elif p.incomplete:
                reported_pools.add(p.id)
                lines.append(f"ResourceSlice pool {p.id} is incomplete: fewer slices than spec.pool."
                             f"resourceSliceCount at its newest spec.pool.generation, so it is skipped while it is "
                             f"being updated.")
    for claim in mine:
        key = f"{meta(claim).get('namespace') or 'default'}/{meta(claim).get('name')}"
        if allocation_of(claim) is not None:
            sel = (allocation_of(claim) or {}).get("nodeSelector")
            devs = ", ".join("/".join(d) for d in claim_devices(claim)) or "admin access"
            where = ""
            if sel is not None:
                fits = [n for n, node in nodes.items() if node_matches(node, None, False, sel)]
                where = f", usable only on {', '.join(fits) or 'no node'}"
            reserved = [r.get("name") for r in status(claim).get("reservedFor") or []]
            lines.append(f"ResourceClaim {key} is already allocated ({devs}{where})"
                         f"{'; reserved for ' + ', '.join(map(str, reserved)) if reserved else ''}.")
            continue
        for ri, req in enumerate(((_spec(claim).get("devices") or {}).get("requests")) or []):
            alternatives = []
            if req.get("exactly") is not None:
                alternatives.append((req["exactly"], f"spec.devices.requests[{ri}].exactly", str(req.get("name"))))
            for si, sub in enumerate(req.get("firstAvailable") or []):
                alternatives.append((sub, f"spec.devices.requests[{ri}].firstAvailable[{si}]",
                                     f"{req.get('name')}/{sub.get('name')}"))
            best: list[str] = []
            for body, path, rname in alternatives:
                line = _explain_request(key, rname, body, path, classes, cache, pools_by_node, nodes, allocated,
                                        consumed)
                if line is None:
                    best = []
                    break
                best.append(line)
            lines += best
    return lines


def _explain_request(key: str, rname: str, body: dict[str, Any], path: str, classes: dict[str, dict[str, Any]],
                     cache: CelCache, pools_by_node: dict[str, list[Any]], nodes: dict[str, Node],
                     allocated: set[tuple[str, str, str]],
                     consumed: dict[tuple[str, str, str], dict[str, Any]] | None = None) -> str | None:
    """Why the request cannot be met, or None when some node has enough free matching devices."""
    cname = str(body.get("deviceClassName") or "")
    cls = classes.get(cname)
    if cls is None:
        return (f"ResourceClaim {key}, request {rname}: DeviceClass {cname!r} does not exist "
                f"({path}.deviceClassName).")
    selectors: list[tuple[str, str, str]] = []
    for k, sel in enumerate(_spec(cls).get("selectors") or []):
        selectors.append((str(((sel or {}).get("cel") or {}).get("expression") or ""),
                          f"DeviceClass {cname} spec.selectors[{k}].cel.expression", "class"))
    for k, sel in enumerate(body.get("selectors") or []):
        selectors.append((str(((sel or {}).get("cel") or {}).get("expression") or ""),
                          f"ResourceClaim {key} {path}.selectors[{k}].cel.expression", "claim"))
    for expr, where, _who in selectors:
        compiled = cache.get_or_compile(expr)
        if compiled.error is not None:
            return f"{where} does not compile: {compiled.error}."
    mode = body.get("allocationMode") or "ExactCount"
    want = int(body.get("count") or 1) if mode == "ExactCount" else 1
    most, most_node = 0, ""
    amounts = request_amounts(body.get("capacity"))
    inputs: dict[int, DeviceInput] = {}
    for node_name, pools in pools_by_node.items():
        free = 0
        for p in pools:
            if p.incomplete or p.invalid:
                continue
            for s in p.slices:
                for d in _spec(s).get("devices") or []:
                    did = (p.driver, p.name, str(d.get("name") or ""))
                    if did in allocated:
                        continue
                    di = inputs.get(id(d)) or inputs.setdefault(id(d), DeviceInput(p.driver, d))
                    ok = True
                    for expr, where, _who in selectors:
                        try:
                            if not cache.get_or_compile(expr).matches(di):
                                ok = False
                                break
                        except CelError as exc:
                            return f"{where} fails on device {'/'.join(did)}: {exc}."
                    if ok and _spec(s).get("perDeviceNodeSelection"):
                        ok = node_matches(nodes[node_name], d.get("nodeName"), bool(d.get("allNodes")),
                                          d.get("nodeSelector"))
                    if ok and (amounts is not None or d.get("allowMultipleAllocations")):
                        try:
                            ok = fits(amounts, d.get("capacity"), (consumed or {}).get(did), None)
                        except CapacityError:
                            ok = False
                    free += ok
        if free > most:
            most, most_node = free, node_name
    if most >= want:
        return None
    matching = " and ".join(f"{_short(e)}" for e, _w, who in selectors if who == "claim")
    noun = "device" if want == 1 else "devices"
    held = f"the most on one node is {most} ({most_node})" if most else "none is free anywhere"
    left = ""
    if amounts is not None:
        left = (" with " + ", ".join(f"{text} of {name}" for name, (_v, text) in amounts.items())
                + f" capacity left ({path}.capacity.requests)")
    return (f"ResourceClaim {key}, request {rname}: no node has {want} free {noun} of class {cname}"
            f"{' matching ' + matching if matching else ''}{left}: {held}.")

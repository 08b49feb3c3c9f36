"""DRANodeAllocatableResources (alpha in kube 1.37): what a pod's claims take of its node's cpu, memory and hugepages.

The building blocks of kube-scheduler v1.37.2's pkg/scheduler/framework/plugins/dynamicresources/
nodeallocatabledynamicresources.go and of k8s.io/component-helpers v0.37.2 resource/helpers.go's DRA additions,
as pure functions on API objects (dicts):

* a ResourceSlice device may declare `nodeAllocatableResources`: per node resource, a `mapping` (the device takes
  `deviceMultiplier` of it, or what the allocation consumed of capacity `capacityKey` times `capacityMultiplier`)
  and/or an `overhead` (`perPod`, `perContainer`);
* from a pod's allocated claims kube builds `status.nodeAllocatableResourceClaimStatuses` (one entry per claim
  whose devices map or add something, naming the containers referencing the claim), adds those amounts to the
  pod's requests and checks them against the node's free cpu, memory, ephemeral storage and hugepages;
* a claim with a mapped device cannot be shared between pods.

The plugin (plugin.py) uses them in PreFilter, Filter, PreBind and Unreserve; the scheduler's assume counts the
statuses on the node (podrequests.py, objects.Pod.with_claim_statuses).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any

from ...framework.status import Status
from ...objects import Node
from ...podrequests import aggregate_containers, claim_resources, container_requests
from ...quantity import parse_quantity, resource_amount
from .allocator import AllocationError, node_matches

_SUFFIX = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(.*)$")
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}

#: a quantity as (value, Go's format: "BinarySI", "DecimalSI" or "DecimalExponent")
Quantity = tuple[Decimal, str]


def parse(raw: object) -> Quantity:
    """A quantity with the format Go's resource.ParseQuantity gives it (the format its String() is written in)."""
    text = str(raw).strip()
    value = parse_quantity(text)
    m = _SUFFIX.match(text)
    suffix = m.group(1) if m else ""
    if suffix.endswith("i"):
        return value, "BinarySI"
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return value, "DecimalExponent"
    return value, "DecimalSI"


def add(a: Quantity | None, b: Quantity) -> Quantity:
    """Quantity.Add: a zero (or absent) left side takes the right side's format."""
    if a is None or a[0] == 0:
        return (a[0] if a is not None else Decimal(0)) + b[0], b[1]
    return a[0] + b[0], a[1]


def text(q: Quantity) -> str:
    """Quantity.String(): the canonical form (binary suffixes only for whole amounts of at least 1Ki)."""
    value, fmt = q
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    a = abs(value)
    if fmt == "BinarySI" and a >= 1024 and a == a.to_integral_value():
        n = int(a)
        for suffix, factor in _BINARY:
            if n % factor == 0:
                return f"{sign}{n // factor}{suffix}"
        return f"{sign}{n}"
    with localcontext() as ctx:
        ctx.prec = 80
        nanos = int((a * 10**9).to_integral_value(rounding=ROUND_CEILING))  # Go rounds up to 1n
        exp = -9
        while exp < 18 and nanos % 1000 == 0:
            nanos //= 1000
            exp += 3
    if fmt == "DecimalExponent":
        return f"{sign}{nanos}" + (f"e{exp}" if exp else "")
    return f"{sign}{nanos}{_DECIMAL[exp]}"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _matches(node: Node, name: Any, all_nodes: Any, selector: Any) -> bool:
    """The allocator's NodeMatches, where an invalid selector matches nothing."""
    try:
        return node_matches(node, name or None, bool(all_nodes), selector)
    except AllocationError:
        return False


def slices_for_node(slices: Iterable[Mapping[str, Any]], node: Node | None) -> list[Mapping[str, Any]]:
    """filterSlicesForNode: the slices naming the node, for all nodes, selecting it, or choosing per device."""
    if node is None:
        return list(slices)
    out = []
    for s in slices:
        sp = _spec(s)
        if sp.get("nodeName"):
            if sp["nodeName"] == node.name:
                out.append(s)
        elif sp.get("allNodes"):
            out.append(s)
        elif sp.get("nodeSelector") is not None:
            if _matches(node, None, False, sp["nodeSelector"]):
                out.append(s)
        elif sp.get("perDeviceNodeSelection"):
            out.append(s)
    return out


def device_for_result(slices: Iterable[Mapping[str, Any]], result: Mapping[str, Any],
                      node: Node | None) -> Mapping[str, Any]:
    """getDeviceFromSlices: the device an allocation result names; LookupError with kube's text otherwise."""
    dev_name = result.get("device") or ""
    for s in slices:
        sp = _spec(s)
        if sp.get("driver") != result.get("driver") or (sp.get("pool") or {}).get("name") != result.get("pool"):
            continue
        for d in sp.get("devices") or []:
            if d.get("name") != dev_name:
                continue
            if sp.get("perDeviceNodeSelection") and node is not None and \
                    not _matches(node, d.get("nodeName"), d.get("allNodes"), d.get("nodeSelector")):
                raise LookupError(f"device {dev_name} does not match node")
            return d
    raise LookupError(f"device {dev_name} not found in pool {result.get('pool') or ''} "
                      f"for driver {result.get('driver') or ''}")


def device_is_mapped(device: Mapping[str, Any]) -> bool:
    """Whether the device maps (not only adds overhead to) some node resource."""
    return any((r or {}).get("mapping") is not None for r in (device.get("nodeAllocatableResources") or {}).values())


def allocation_is_mapped(allocation: Mapping[str, Any], slices: Iterable[Mapping[str, Any]]) -> bool:
    """PreFilter's claimHasNodeAllocatableMappedDevice for one allocation (devices not found count as unmapped)."""
    slices = list(slices)
    for r in ((allocation.get("devices") or {}).get("results") or []):
        try:
            if device_is_mapped(device_for_result(slices, r, None)):
                return True
        except LookupError:
            continue
    return False


def _add_mapping(resource: str, mapping: Mapping[str, Any], result: Mapping[str, Any], ns: str, name: str,
                 totals: dict[str, Quantity]) -> None:
    key = mapping.get("capacityKey")
    if key:
        consumed = result.get("consumedCapacity")
        if consumed is None:
            raise ValueError(f"claim {ns}/{name}, device {result.get('device') or ''}: ConsumedCapacity is nil, but "
                             f"Capacity key '{key}' is set in NodeAllocatableResources for resource {resource}")
        if key in consumed:
            value, fmt = parse(consumed[key])
            mult = mapping.get("capacityMultiplier")
            if mult is not None:
                value = value * parse(mult)[0]
            totals[resource] = add(totals.get(resource), (value, fmt))
        return
    if mapping.get("deviceMultiplier") is not None:
        totals[resource] = add(totals.get(resource), parse(mapping["deviceMultiplier"]))


def _add_overhead(resource: str, overhead: Mapping[str, Any],
                  totals: dict[str, dict[str, Quantity | None]]) -> None:
    if overhead.get("perPod") is None and overhead.get("perContainer") is None:
        return
    cur = totals.setdefault(resource, {"perPod": None, "perContainer": None})
    for k in ("perPod", "perContainer"):
        if overhead.get(k) is not None:
            q = parse(overhead[k])
            old = cur[k]
            cur[k] = q if old is None else (old[0] + q[0], old[1])


def claim_statuses(pod: Mapping[str, Any], allocations: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
                   claim_uids: Mapping[str, str], slices: list[Mapping[str, Any]],
                   node: Node | None) -> list[dict[str, Any]]:
    """buildNodeAllocatableDRAInfo: the pod's `status.nodeAllocatableResourceClaimStatuses` entries, by claim name.

    `allocations`: (claim, its allocation) for the claims to account; `claim_uids`: the pod's claim reference name
    -> claim uid (which containers reference which claim). ValueError with kube's text when a device is missing
    or a capacity mapping has no consumed capacity."""
    by_uid: dict[str, dict[str, Any]] = {}
    for claim, alloc in allocations:
        m = claim.get("metadata") or {}
        ns, name, uid = str(m.get("namespace") or ""), str(m.get("name") or ""), str(m.get("uid") or "")
        mapped: dict[str, Quantity] = {}
        overheads: dict[str, dict[str, Quantity | None]] = {}
        for r in ((alloc.get("devices") or {}).get("results") or []):
            try:
                device = device_for_result(slices, r, node)
            except LookupError as exc:
                raise ValueError(f"claim {ns}/{name}, device {r.get('device') or ''}, driver {r.get('driver') or ''}: "
                                 f"{exc}") from None
            for resource, spec in (device.get("nodeAllocatableResources") or {}).items():
                spec = spec or {}
                if spec.get("mapping") is not None:
                    _add_mapping(str(resource), spec["mapping"], r, ns, name, mapped)
                if spec.get("overhead") is not None:
                    _add_overhead(str(resource), spec["overhead"], overheads)
        if not mapped and not overheads:
            continue
        entry: dict[str, Any] = {"resourceClaimName": name, "containers": [],
                                 "mapping": [{"name": k, "quantity": text(mapped[k])} for k in sorted(mapped)],
                                 "overhead": []}
        for k in sorted(overheads):
            o: dict[str, Any] = {"name": k}
            for part in ("perPod", "perContainer"):
                q = overheads[k][part]
                if q is not None:
                    o[part] = text(q)
            entry["overhead"].append(o)
        by_uid[uid] = entry
    spec = pod.get("spec") or {}
    for containers in (spec.get("initContainers") or [], spec.get("containers") or []):
        for c in containers:
            for ref in ((c.get("resources") or {}).get("claims") or []):
                uid = claim_uids.get(str(ref.get("name") or ""))
                if uid is not None and uid in by_uid:
                    by_uid[uid]["containers"].append(str(c.get("name") or ""))
    # as the API writes them: empty lists are omitted (omitempty)
    out = [{k: v for k, v in e.items() if v != []} for e in by_uid.values()]
    return sorted(out, key=lambda e: str(e["resourceClaimName"]))


def container_allocations(statuses: Iterable[Mapping[str, Any]], container: str) -> dict[str, int]:
    """GetContainerDRAAllocations: what the statuses naming `container` give it (each overhead counted once)."""
    return claim_resources(statuses, container)


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def node_fits(pod_request: Mapping[str, int], allocatable: Mapping[str, int],
              requested: Mapping[str, int]) -> Status | None:
    """nodeFitsResources: the pod's total demand (claims included) against the node's free cpu, memory,
    ephemeral storage and hugepages; Unschedulable, or UnschedulableAndUnresolvable when a resource exceeds the
    node's allocatable outright."""
    reasons: list[str] = []
    unresolvable = False
    for name in ("cpu", "memory", "ephemeral-storage"):
        want = pod_request.get(name, 0)
        cap, used = allocatable.get(name, 0), requested.get(name, 0)
        if want > 0 and want > cap - used:
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or want > cap
    for name, want in pod_request.items():
        if _is_hugepages(name):
            cap, used = allocatable.get(name, 0), requested.get(name, 0)
            if want > cap - used:
                reasons.append(f"Insufficient {name}")
                unresolvable = unresolvable or want > cap
    if not reasons:
        return None
    return (Status.unresolvable if unresolvable else Status.unschedulable)(*reasons)


def _limits(c: Mapping[str, Any], path: str = "") -> dict[str, int]:
    return {str(k): resource_amount(str(k), v) for k, v in ((c.get("resources") or {}).get("limits") or {}).items()}


def pod_level_covers_claims(pod: Mapping[str, Any], statuses: list[Mapping[str, Any]],
                            pod_level_resources: bool) -> Status | None:
    """validatePodLevelResourcesCoverDRA: with pod-level resources set, they must cover the containers' requests
    plus what the claims add, the hugepages limits plus the claims, and each container's limit plus what its
    claims give it; UnschedulableAndUnresolvable with kube's text otherwise."""
    spec = pod.get("spec") or {}
    level = spec.get("resources")
    if not pod_level_resources or level is None or not statuses:
        return None
    dra = claim_resources(statuses)
    if level.get("requests") is not None:
        reqs = aggregate_containers(spec, container_requests)
        for k, v in dra.items():
            reqs[k] = reqs.get(k, 0) + v
        for k, raw in level["requests"].items():
            k = str(k)
            if k not in ("cpu", "memory") and not _is_hugepages(k):
                continue
            if k in reqs and reqs[k] > resource_amount(k, raw):
                return Status.unresolvable(f"pod level request for {k} is insufficient to cover the aggregated "
                                           "container and node-allocatable DRA requests")
    limits_raw = level.get("limits")
    if limits_raw is not None:
        pod_limits = {str(k): resource_amount(str(k), v) for k, v in limits_raw.items()}
        lims = aggregate_containers(spec, _limits)
        for k, v in dra.items():
            if k in lims or _is_hugepages(k):
                lims[k] = lims.get(k, 0) + v
        for k, v in lims.items():
            if _is_hugepages(k) and k in pod_limits and v > pod_limits[k]:
                return Status.unresolvable(f"pod level limit for {k} is insufficient to cover the aggregated "
                                           "container and node-allocatable DRA limits")
        for c in spec.get("containers") or []:
            cname = str(c.get("name") or "")
            given = container_allocations(statuses, cname)
            for k, v in _limits(c).items():
                if _is_hugepages(k) or k not in pod_limits:
                    continue
                if v + given.get(k, 0) > pod_limits[k]:
                    return Status.unresolvable(f"pod level limit for {k} is insufficient to cover the limit and DRA "
                                               f"overhead for container {cname}")
    return None

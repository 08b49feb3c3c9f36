"""The structured allocator: which devices of which ResourceSlices satisfy a pod's ResourceClaims on a node.

Upstream: kube-scheduler v1.36,
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go.

Same search and result as k8s.io/dynamic-resource-allocation/structured (the implementation kube-scheduler
v1.36 selects with its default gates): claims, then their requests (a `firstAvailable` request tries its
sub-requests in order), then one device after the other, depth first over the eligible pools sorted by
(driver, pool); the first complete solution wins. A device is eligible when it is not allocated already (by any
claim, or earlier in this search; admin access ignores that), its DeviceClass's and then the request's CEL
selectors are true, its NoSchedule/NoExecute taints are tolerated, the counters it consumes are still available
(partitionable devices) and every `matchAttribute` constraint of its claim still holds.

Pools (slices grouped by driver and pool name): the highest generation wins; a pool is complete when it has
`resourceSliceCount` slices of that generation, an incomplete pool is skipped (and makes `allocationMode: All`
fail), a pool with duplicate device names or broken counter references is invalid (skipped; if no solution is
found the node fails with `invalid resource pools were encountered`).

Consumable capacity (DRAConsumableCapacity, as kube's incubating allocator_incubating.go of
k8s.io/dynamic-resource-allocation v0.37 does it): a device with `allowMultipleAllocations` is never marked in
use; each request allocated on it is a share (a random UUID `shareID`) that consumes part of its `capacity`
(capacity.py), checked against what allocated shares, in-flight shares and this search's shares consume; its
counters are charged by its first share only.

kube 1.37's allocator (k8s.io/dynamic-resource-allocation v0.37) changed a few rules; `Features.kube_137_allocator`
selects them (off when emulating 1.35/1.36). tests/data/dra_tables/allocator.yaml holds v0.37.2's test table.
Its experimental allocator (alpha gates, `Features.experimental_allocator`, experimental/allocator_experimental.go)
adds list-typed attribute constraints (constraints.py), skipNodeOperations and compatibility groups (`_Groups`).

Raw Kubernetes objects (dicts) are read directly; nothing here talks to a cluster.

Over 600 lines on purpose: it is one depth-first search whose pool, counter, constraint and result pieces
share the search state, like the single upstream allocator_stable.go; split, each piece would need that state
passed around.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Container, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ...errors import InputError
from ...objects import Node, NodeSelector
from ...quantity import parse_quantity
from .capacity import CapacityError, Consumed, add_into, consumed_by, fits, request_amounts
from .cel import CelCache, CelError, DeviceInput
from .constraints import (
    AttributeConstraint,
    DistinctAttributeSets,
    MatchAttributeSets,
    RequestName,
    attribute_of,
)
from .derived import DerivedAttributeError, DerivedAttributes, declared

#: resourceapi.AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32
#: resourceapi.DeviceTaintEffectNoSchedule / NoExecute
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

DeviceID = tuple[str, str, str]  # (driver, pool, device)
_Flat = tuple[DeviceID, dict[str, Any], dict[str, Any]]  # (device id, device, slice), in search order
#: the node feature (status.declaredFeatures) a device of a slice with `skipNodeOperations` needs
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"
#: (device id, device, allows multiple allocations or consumes counters or its slice has skipNodeOperations, has
#: taints, has a capacity request policy)
_Record = tuple[DeviceID, dict[str, Any], bool, bool, bool]


class AllocationError(Exception):
    """Allocation cannot proceed for this pod at all (kube returns it as an Error status)."""


class NodeAllocationFailure(AllocationError):
    """Allocation failed on this node only (kube's ErrFailedAllocationOnNode): other nodes may still fit."""


class _Stop(Exception):
    pass


class _MaxSizeExceeded(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Features:
    """The DRA feature gates the allocator looks at, with kube-scheduler v1.36's defaults."""

    admin_access: bool = True  # DRAAdminAccess, GA
    prioritized_list: bool = True  # DRAPrioritizedList, GA
    partitionable_devices: bool = True  # DRAPartitionableDevices, beta on
    device_taints: bool = True  # DRADeviceTaints, beta on
    device_binding_and_status: bool = True  # DRADeviceBindingConditions + DRAResourceClaimDeviceStatus, beta on
    consumable_capacity: bool = True  # DRAConsumableCapacity, beta on
    #: DRAFractionalCapacityRange (beta, off by default in 1.37): milli-value rounding of capacity request ranges
    fractional_capacity_range: bool = False
    #: kube 1.37's CEL runtime errors: they name the device and hint at optional chaining for a missing key
    #: (dynamic-resource-allocation cel.EnhanceRuntimeError); off when emulating 1.35/1.36
    runtime_error_detail: bool = True
    #: kube 1.37's distinctAttribute: every device's value is kept (a request's later device no longer replaces
    #: its earlier one's, as in 1.36); off when emulating 1.35/1.36
    distinct_every_device: bool = True
    #: kube 1.37's allocator (dynamic-resource-allocation v0.37) where it differs from 1.36's; off when emulating
    #: 1.35/1.36: a request that pushes its claim past 32 devices is named in the error; a claim config is copied
    #: once (1.36 copied it once per matching request) and loses its `requests` when it covers every request;
    #: list-typed attribute values reach CEL selectors as lists (1.36 failed on them with the gate off); a slice
    #: whose devices declare compatibility groups is ignored (DRADeviceCompatibilityGroups off; 1.36 has no field)
    kube_137_allocator: bool = True
    #: DRAListTypeAttributes (alpha, off by default): constraints compare list-typed attributes as sets
    #: (constraints.py); one of the gates that make kube run its experimental allocator
    list_type_attributes: bool = False
    #: DRAOptionalNodeOperations (alpha, off by default): a device of a slice with `skipNodeOperations` is
    #: allocated only on a node declaring that feature (status.declaredFeatures), and its result carries the
    #: slice's list; with the gate off the experimental allocator refuses such devices
    optional_node_operations: bool = False
    #: DRADeviceCompatibilityGroups (alpha, off by default): devices drawing on one counter set are allocated
    #: together only when their counter consumptions' `compatibilityGroups` intersect (see `_Groups`)
    compatibility_groups: bool = False
    #: DRADerivedAttributes (alpha, off by default): a request's CEL-defined attributes, seen by constraints only
    #: (derived.py); with the gate off every allocator refuses a request declaring any
    derived_attributes: bool = False

    @property
    def experimental_allocator(self) -> bool:
        """Whether kube runs its experimental allocator (structured.NewAllocator takes the first of stable,
        incubating, experimental whose supported features cover the enabled ones): it takes distinctAttribute
        whatever DRAConsumableCapacity and checks devices of slices with `skipNodeOperations`; compatibility
        groups are checked only with their own gate on."""
        return (self.list_type_attributes or self.optional_node_operations or self.compatibility_groups
                or self.derived_attributes)

    @property
    def stable_allocator(self) -> bool:
        """Whether kube runs its stable allocator: no feature only the incubating or experimental one has is on.
        Its CEL device has no `allowMultipleAllocations`, which selectors then read as false."""
        return not (self.device_binding_and_status or self.consumable_capacity or self.fractional_capacity_range
                    or self.experimental_allocator)

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool] | None) -> Features:
        """The switches as the effective feature gates set them (None: the defaults above); an earlier
        `--emulated-version` (1.35) has several of these beta gates off."""
        if gates is None:
            return cls()

        def on(name: str) -> bool:
            return bool(gates.get(name, True))

        return cls(admin_access=on("DRAAdminAccess"), prioritized_list=on("DRAPrioritizedList"),
                   partitionable_devices=on("DRAPartitionableDevices"), device_taints=on("DRADeviceTaints"),
                   device_binding_and_status=on("DRADeviceBindingConditions") and on("DRAResourceClaimDeviceStatus"),
                   consumable_capacity=on("DRAConsumableCapacity"),
                   fractional_capacity_range=bool(gates.get("DRAFractionalCapacityRange", False)),
                   runtime_error_detail=minor_at_least(gates, (1, 37)),
                   distinct_every_device=minor_at_least(gates, (1, 37)),
                   kube_137_allocator=minor_at_least(gates, (1, 37)),
                   list_type_attributes=bool(gates.get("DRAListTypeAttributes", False)),
                   optional_node_operations=bool(gates.get("DRAOptionalNodeOperations", False)),
                   compatibility_groups=bool(gates.get("DRADeviceCompatibilityGroups", False)),
                   derived_attributes=bool(gates.get("DRADerivedAttributes", False)))


def minor_at_least(gates: Mapping[str, bool] | None, minor: tuple[int, int]) -> bool:
    """Is the emulated minor (`--emulated-version`, else the pinned one) at least `minor`? Where kube's DRA
    code changed between minors, ksched follows the one it emulates."""
    from ...featuregates import emulated_minor

    return tuple(int(p) for p in emulated_minor(gates).split(".")) >= minor


def _same(a: list[Any], b: list[Any]) -> bool:
    """The same objects in the same order (the claims a plan or a memo entry was made for)."""
    if len(a) != len(b):
        return False
    if len(a) == 1:
        return a[0] is b[0]
    return all(x is y for x, y in zip(a, b, strict=True))


def name_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def claim_key(claim: dict[str, Any]) -> str:
    """klog.KObj: `namespace/name`, or the name alone for an object without a namespace."""
    m = claim.get("metadata") or {}
    return f"{m['namespace']}/{m.get('name') or ''}" if m.get("namespace") else str(m.get("name") or "")


# ----------------------------------------------------------------------------------------- node matching
_selector_cache: dict[int, tuple[Any, NodeSelector]] = {}


def _node_selector(raw: dict[str, Any]) -> NodeSelector:
    hit = _selector_cache.get(id(raw))
    if hit is not None and hit[0] is raw:
        return hit[1]
    try:
        sel = NodeSelector(raw, "nodeSelector")
    except InputError as exc:
        raise AllocationError(f"failed to parse node selector: {exc.detail}") from None
    if len(_selector_cache) > 20_000:
        _selector_cache.clear()
    _selector_cache[id(raw)] = (raw, sel)
    return sel


def node_matches(node: Node, node_name: str | None, all_nodes: bool, selector: dict[str, Any] | None) -> bool:
    """NodeMatches: nodeName equality, allNodes, or the node selector (matched as node affinity)."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return _node_selector(selector).matches(node)
    return False


# ----------------------------------------------------------------------------------------- pools
@dataclass
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    #: device slices whose devices may serve this node, sorted by slice name
    slices: list[dict[str, Any]] = field(default_factory=list)
    #: the pool's other device slices (only to count counters already consumed)
    other_slices: list[dict[str, Any]] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Decimal]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def _pool_of(s: dict[str, Any]) -> tuple[str, str, int, int]:
    sp = _spec(s)
    p = sp.get("pool") or {}
    return (str(sp.get("driver") or ""), str(p.get("name") or ""), int(p.get("generation") or 0),
            int(p.get("resourceSliceCount") or 0))


def _exprs(selectors: list[dict[str, Any]] | None) -> tuple[str, ...] | None:
    """Selectors as the tuple of their CEL expressions (None when one is not a CEL selector)."""
    out = []
    for sel in selectors or []:
        expr = ((sel or {}).get("cel") or {}).get("expression")
        if not isinstance(expr, str):
            return None
        out.append(expr)
    return tuple(out)


def _devices(s: dict[str, Any]) -> list[dict[str, Any]]:
    return _spec(s).get("devices") or []


def gather_pools(slices_for_node: list[dict[str, Any]], node: Node, features: Features,
                 all_slices: list[dict[str, Any]]) -> list[Pool]:
    """The pools a node can allocate from, as kube's GatherPools builds them."""
    by_pool: dict[tuple[str, str], list[dict[str, Any]]] = {}
    skip_groups = features.kube_137_allocator and not features.compatibility_groups
    for s in slices_for_node:
        sp = _spec(s)
        if not features.partitionable_devices and (sp.get("perDeviceNodeSelection") is not None
                                                   or sp.get("sharedCounters")):
            continue
        if skip_groups and uses_compatibility_groups(s):
            continue
        if sp.get("sharedCounters"):
            relevant = True
        elif sp.get("nodeName") or sp.get("allNodes") or sp.get("nodeSelector") is not None:
            try:
                relevant = node_matches(node, sp.get("nodeName"), bool(sp.get("allNodes")), sp.get("nodeSelector"))
            except AllocationError as exc:
                raise AllocationError(f"failed to perform node selection for slice {name_of(s)}: {exc}") from None
        elif sp.get("perDeviceNodeSelection"):
            relevant = False
            for d in _devices(s):
                if node_matches(node, d.get("nodeName"), bool(d.get("allNodes")), d.get("nodeSelector")):
                    relevant = True
                    break
        else:
            continue
        if not relevant:
            continue
        driver, pool, gen, _count = _pool_of(s)
        have = by_pool.get((driver, pool))
        if have is None:
            by_pool[(driver, pool)] = [s]
        elif gen > _pool_of(have[0])[2]:
            by_pool[(driver, pool)] = [s]
        elif gen == _pool_of(have[0])[2]:
            have.append(s)
    plain: list[Pool] = []
    with_conditions: list[Pool] = []
    for (driver, pool_name), slices in by_pool.items():
        _d, _p, gen, count = _pool_of(slices[0])
        all_for_pool: list[dict[str, Any]] | None = None
        if len(slices) != count:
            obsolete = False
            all_for_pool = []
            for s in all_slices:
                d2, p2, g2, _c2 = _pool_of(s)
                if d2 != driver or p2 != pool_name:
                    continue
                if g2 == gen:
                    all_for_pool.append(s)
                elif g2 > gen:
                    obsolete = True
                    break
            if obsolete:
                continue
            if skip_groups:  # an ignored slice does not count towards completeness either
                all_for_pool = [s for s in all_for_pool if not uses_compatibility_groups(s)]
            if len(all_for_pool) != count:
                plain.append(Pool(driver, pool_name, incomplete=True))
                continue
        p = _build_pool(driver, pool_name, slices, features, all_for_pool)
        (with_conditions if _has_binding_conditions(p) else plain).append(p)
    plain.sort(key=lambda p: (p.driver, p.name))
    with_conditions.sort(key=lambda p: (p.driver, p.name))
    return plain + with_conditions


def uses_compatibility_groups(s: dict[str, Any]) -> bool:
    """Whether a device of the slice declares compatibility groups (DRADeviceCompatibilityGroups, alpha). With the
    gate off nothing checks co-allocation against them, so kube-scheduler ignores such a slice, which leaves its
    pool incomplete and keeps the pool's other devices unallocated too, whichever are allocated already."""
    return any(use.get("compatibilityGroups") for d in _devices(s) for use in d.get("consumesCounters") or [])


def _has_binding_conditions(p: Pool) -> bool:
    return any(d.get("bindingConditions") is not None for s in p.slices for d in _devices(s))


def _counters(raw: dict[str, Any] | None) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name, c in (raw or {}).items():
        try:
            out[str(name)] = parse_quantity((c or {}).get("value", 0))
        except InputError:
            out[str(name)] = Decimal(0)
    return out


def _build_pool(driver: str, name: str, slices: list[dict[str, Any]], features: Features,
                all_for_pool: list[dict[str, Any]] | None) -> Pool:
    slices = sorted(slices, key=name_of)
    if features.partitionable_devices:
        counter_slices = [s for s in slices if _spec(s).get("sharedCounters")]
        device_slices = [s for s in slices if not _spec(s).get("sharedCounters")]
    else:
        counter_slices, device_slices = [], slices
    seen: set[str] = set()
    for s in device_slices:
        for d in _devices(s):
            n = str(d.get("name") or "")
            if n in seen:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {n}")
            seen.add(n)
    if not features.partitionable_devices:
        return Pool(driver, name, slices=device_slices)
    sets: dict[str, dict[str, Decimal]] = {}
    for s in counter_slices:
        for cs in _spec(s).get("sharedCounters") or []:
            cname = str(cs.get("name") or "")
            if cname in sets:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate counter set name {cname}")
            sets[cname] = _counters(cs.get("counters"))
    problem = _check_consumption(sets, slices)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    if all_for_pool is None or len(slices) == len(all_for_pool):
        return Pool(driver, name, slices=device_slices, counter_sets=sets)
    targeting = {name_of(s) for s in slices}
    others = [s for s in all_for_pool if name_of(s) not in targeting]
    problem = _check_consumption(sets, others)
    if problem:
        return Pool(driver, name, invalid=True, invalid_reason=problem)
    return Pool(driver, name, slices=device_slices, other_slices=others, counter_sets=sets)


def _check_consumption(sets: dict[str, dict[str, Decimal]], slices: list[dict[str, Any]]) -> str:
    for s in slices:
        for d in _devices(s):
            for use in d.get("consumesCounters") or []:
                cs = sets.get(str(use.get("counterSet") or ""))
                if cs is None:
                    return f"counter set {use.get('counterSet')} not found"
                for cname in use.get("counters") or {}:
                    if cname not in cs:
                        return f"counter {cname} not found in counter set {use.get('counterSet')}"
    return ""


# ----------------------------------------------------------------------------------------- compatibility groups
@dataclass(frozen=True, slots=True)
class _Groups:
    """What the devices placed on one counter set so far allow next (DRADeviceCompatibilityGroups): while every
    one of them declared no groups (`none`) only another device without groups; else a device sharing a group
    with `common`, the intersection of their groups. A counter set nobody draws on yet is absent (None): it
    takes any device. Immutable, so the value before a device was added is what backtracking restores."""

    none: bool
    common: frozenset[str] = frozenset()

    def admits(self, groups: frozenset[str]) -> bool:
        if not groups:
            return self.none
        return not self.none and not self.common.isdisjoint(groups)

    def add(self, groups: frozenset[str]) -> _Groups:
        """The state with one more device; a device without groups, or one joining devices without groups,
        changes nothing (allocated peers are folded in unchecked, so such mixes can be met there)."""
        if self.none or not groups:
            return self
        return _Groups(False, self.common & groups)


def _fold_groups(state: _Groups | None, groups: frozenset[str]) -> _Groups:
    """`state` with a device declaring `groups` added (the first device sets it)."""
    if state is None:
        return _Groups(True) if not groups else _Groups(False, groups)
    return state.add(groups)


def _groups_of(use: dict[str, Any]) -> frozenset[str]:
    return frozenset(str(g) for g in use.get("compatibilityGroups") or ())


# ----------------------------------------------------------------------------------------- requests
class _Request:
    """A request or a sub-request, read from the claim (API defaults applied: ExactCount, count 1)."""

    __slots__ = ("name", "parent", "class_name", "mode", "count", "admin", "has_admin", "selectors", "tolerations",
                 "capacity", "amounts", "raw", "derived_exprs", "derived")

    def __init__(self, raw: dict[str, Any], parent: str | None) -> None:
        self.raw = raw
        self.parent = parent
        self.name = str(raw.get("name") or "")
        body = raw if parent is not None else (raw.get("exactly") or {})
        self.class_name = str(body.get("deviceClassName") or "")
        self.mode = str(body.get("allocationMode") or "ExactCount")
        self.count = int(body.get("count") or 1) if self.mode == "ExactCount" else 0
        self.has_admin = parent is None and body.get("adminAccess") is not None
        self.admin = parent is None and bool(body.get("adminAccess"))
        self.selectors = body.get("selectors") or []
        self.tolerations = body.get("tolerations") or []
        self.capacity = body.get("capacity")
        #: `capacity.requests` parsed (DRAConsumableCapacity), None when the request names no amounts
        self.amounts = request_amounts(self.capacity)
        #: `derivedAttributes` by name (DRADerivedAttributes), None when it declares none
        self.derived_exprs = declared(body)
        #: how constraints evaluate them, set when the request is validated with the gate on
        self.derived: DerivedAttributes | None = None

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent is not None else self.name


@dataclass
class _RequestData:
    request: _Request
    device_class: dict[str, Any] | None
    num_devices: int = 0
    all_devices: list[tuple[DeviceID, dict[str, Any], dict[str, Any], Pool]] = field(default_factory=list)
    selected_sub: int = 0
    is_sub: bool = False


@dataclass
class _Result:
    request: _Request
    id: DeviceID
    device: dict[str, Any]
    slice: dict[str, Any]
    #: a device allowing multiple allocations (DRAConsumableCapacity): the share's id and what it consumes
    share_id: str | None = None
    consumed: Consumed | None = None


class _MatchAttribute(AttributeConstraint):
    """matchAttribute over scalar values (DRAListTypeAttributes off): every device has the first one's value."""

    __slots__ = ("value", "n")

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.n = 0  # devices recorded

    def add(self, req: RequestName, device: dict[str, Any], did: DeviceID) -> bool:
        if not self._applies(req):
            return True
        attr = typed_attribute(attribute_of(req, device, did, self.attribute))
        return attr is not None and self._accept(req, attr)

    def _accept(self, req: RequestName, attr: tuple[str, Any]) -> bool:
        if self.n == 0:
            self.value = attr
            self.n = 1
            return True
        if attr[0] not in ("int", "bool", "string", "version") or self.value != attr:
            return False
        self.n += 1
        return True

    def remove(self, req: RequestName) -> None:
        if self._applies(req):
            self.n -= 1


class _DistinctAttribute(_MatchAttribute):
    """distinctAttribute (DRAConsumableCapacity, beta): no two devices share the attribute's value, as kube 1.37's
    incubating allocator checks it: the value of every device picked so far is kept (in order, the last one
    goes first on backtracking) and a new value must differ from each of the same type."""

    __slots__ = ("values",)

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[tuple[str, Any]] = []

    def _accept(self, req: RequestName, attr: tuple[str, Any]) -> bool:
        if attr[0] not in ("int", "bool", "string", "version"):
            if self.values:
                return False
        elif attr in self.values:
            return False
        self.values.append(attr)
        self.n += 1
        return True

    def remove(self, req: RequestName) -> None:
        if self._applies(req):
            self.values.pop()
            self.n -= 1


class _DistinctAttribute136(_MatchAttribute):
    """distinctAttribute as kube 1.36's incubating allocator checks it: values are remembered per (base) request
    name, so a later device of the same request replaces the earlier one's value."""

    __slots__ = ("seen",)

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.seen: dict[str, tuple[str, Any]] = {}

    def _accept(self, req: RequestName, attr: tuple[str, Any]) -> bool:
        base = req.parent if req.parent is not None else req.name
        if self.n and (attr[0] not in ("int", "bool", "string", "version") or attr in self.seen.values()):
            return False
        self.seen[base] = attr
        self.n += 1
        return True

    def remove(self, req: RequestName) -> None:
        if self._applies(req):
            self.seen.pop(req.parent if req.parent is not None else req.name, None)
            self.n -= 1


def _has_policy(device: dict[str, Any]) -> bool:
    """Whether a capacity check could refuse the device for a request naming no amounts: only a request policy
    can (each capacity's value or default is consumed, and a value always fits itself)."""
    return any((c or {}).get("requestPolicy") for c in (device.get("capacity") or {}).values())


def typed_attribute(raw: Any) -> tuple[str, Any] | None:
    """An attribute as the scalar comparisons see it: (type, value), ("unknown", None) for a list or an
    attribute without a value, None for none."""
    if raw is None:
        return None
    for kind in ("int", "bool", "string", "version"):
        if isinstance(raw, dict) and kind in raw:
            return kind, raw[kind]
    return ("unknown", None)


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """resourceclaim.ToleratesTaint: effect and key must match when set; Exists ignores the value."""
    eff = toleration.get("effect") or ""
    if eff and eff != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def taint_prevents(device: dict[str, Any], req: _Request) -> bool:
    for taint in device.get("taints") or []:
        if (taint.get("effect") or "") in _BLOCKING_EFFECTS and not any(
                tolerates(t, taint) for t in req.tolerations):
            return True
    return False


# ----------------------------------------------------------------------------------------- allocator
#: every DeviceID seen, by itself: the allocated devices (claims.claim_devices) and the slices' devices
#: (SliceCaches.slice_devices) share one tuple per device, so a set operation between them finds each device by
#: identity instead of comparing three strings (the cost of checking a full node's devices, several times over)
_DEVICE_IDS: dict[DeviceID, DeviceID] = {}


def device_id(driver: str, pool: str, device: str) -> DeviceID:
    """The one tuple for this device (see _DEVICE_IDS); equal tuples stay interchangeable, so clearing the table
    when it grows large only costs speed."""
    did = (driver, pool, device)
    if len(_DEVICE_IDS) > 2_000_000:
        _DEVICE_IDS.clear()
    return _DEVICE_IDS.setdefault(did, did)


def free_of(allocated: Container[DeviceID], ids: frozenset[DeviceID]) -> frozenset[DeviceID]:
    """The IDs among `ids` that nobody holds; set operations where `allocated` allows them (claims.AllocatedView
    and plain sets), so a node's devices are checked without a loop in Python."""
    fn = getattr(allocated, "free_of", None)
    if fn is not None:
        return fn(ids)  # type: ignore[no-any-return]
    if isinstance(allocated, (set, frozenset, dict)):
        return ids.difference(allocated)
    return frozenset(did for did in ids if did not in allocated)


class NodeDevices:
    """A node's devices as the search reads them, worked out once while its pools last: those of its complete
    pools in search order (`flat`, and `records` with the flags `_greedy` reads), their IDs and positions, the
    memo's name for the node's shape, and per selector signature each position's verdict."""

    __slots__ = ("flat", "records", "ids", "pos", "shape", "verdicts")

    def __init__(self, flat: list[_Flat], records: list[_Record], shape: int | None) -> None:
        self.flat = flat
        self.records = records
        self.ids = frozenset(f[0] for f in flat)
        self.pos = {f[0]: i for i, f in enumerate(flat)}
        #: None: the memo is not used for this node (see `Allocator.node_devices`)
        self.shape = shape
        #: verdict key (SliceCaches.verdict_keys) -> per position: None unknown yet, 0 not eligible, 1 eligible
        #: and plain, 2 eligible but needs `_allocate_device`'s checks
        self.verdicts: dict[int, list[int | None]] = {}


class SliceCaches:
    """What depends only on the ResourceSlices (and the node object, the selector): the pools of each node and
    each selector's verdict on each device. The plugin keeps one across cycles and replaces it when a slice
    changes; entries are checked by object identity, so a new Node object or device dict is recomputed."""

    def __init__(self, features: Features | None = None) -> None:
        self.features = features
        self.pools: dict[str, tuple[Node, list[Pool]]] = {}
        self.matches: dict[tuple[str, int], tuple[dict[str, Any], bool]] = {}
        #: id(slice) -> (slice, [(device id, device)]): the IDs built once per slice, not per node per cycle
        self.devices: dict[int, tuple[dict[str, Any], list[tuple[DeviceID, dict[str, Any]]]]] = {}
        #: (id(device), selector signature) -> (device, verdict of every class and request selector): a
        #: device's eligibility for requests with the same selectors, for slices without per-device node selection
        self.eligible: dict[tuple[int, Hashable], tuple[dict[str, Any], bool]] = {}
        #: the slices by id (kept, so the ids stay theirs), by node name, and those not on one node: the last
        #: allocator's split, reused when the next one gets the same slice objects in the same order
        self.split: tuple[list[int], list[dict[str, Any]], dict[str, list[dict[str, Any]]],
                          list[dict[str, Any]]] | None = None
        #: node name -> (its pools list, its devices or None: see `Allocator.node_devices`)
        self.nodes: dict[str, tuple[list[Pool], NodeDevices | None]] = {}
        #: (selector signature, taint and capacity gates) -> a small int, the key of `NodeDevices.verdicts`
        self.verdict_keys: dict[Hashable, int] = {}
        #: id(slice) -> (slice, its devices for the greedy search, their IDs)
        self.records: dict[int, tuple[dict[str, Any], list[_Record], frozenset[DeviceID]]] = {}
        #: id(slice) -> (slice, its shape: driver and every device's content but its name, or None when the
        #: slice is not plainly node-local; see `Allocator.node_devices`)
        self.slice_shapes: dict[int, tuple[dict[str, Any], Hashable | None]] = {}
        #: device content (JSON) -> a small int, and node shape -> a small int, so keys hash cheaply
        self._device_fps: dict[str, int] = {}
        self.shape_ids: dict[Hashable, int] = {}

    def slice_devices(self, pool: Pool, s: dict[str, Any]) -> list[tuple[DeviceID, dict[str, Any]]]:
        hit = self.devices.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        out = [(device_id(pool.driver, pool.name, str(d.get("name") or "")), d) for d in _devices(s)]
        self.devices[id(s)] = (s, out)
        return out

    def slice_records(self, pool: Pool, s: dict[str, Any]) -> tuple[list[_Record], frozenset[DeviceID]]:
        """The slice's devices as the greedy search reads them (see `_Record`), and their IDs as a set."""
        hit = self.records.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1], hit[2]
        skips = bool(_spec(s).get("skipNodeOperations"))  # checked by _allocate_device under some gates
        recs = [(did, d, bool(skips or d.get("allowMultipleAllocations") or d.get("consumesCounters")),
                 bool(d.get("taints")), _has_policy(d)) for did, d in self.slice_devices(pool, s)]
        ids = frozenset(r[0] for r in recs)
        self.records[id(s)] = (s, recs, ids)
        return recs, ids

    def slice_shape(self, s: dict[str, Any]) -> Hashable | None:
        """What the search can see of a node-local slice (the driver and each device without its name, in
        order), or None when the slice can change the answer from node to node or from search to search:
        not bound to one node by `nodeName`, per-device node selection, shared counters, skipNodeOperations,
        devices consuming counters, or devices allowing multiple allocations (each share gets a fresh random
        ID)."""
        hit = self.slice_shapes.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        sp = _spec(s)
        shape: Hashable | None = None
        if (sp.get("nodeName") and not sp.get("perDeviceNodeSelection") and not sp.get("sharedCounters")
                and not sp.get("allNodes") and sp.get("nodeSelector") is None and not sp.get("skipNodeOperations")):
            fps: list[int] = []
            for d in _devices(s):
                if d.get("consumesCounters") or d.get("allowMultipleAllocations"):
                    break
                body = json.dumps({k: v for k, v in d.items() if k != "name"}, sort_keys=True, default=str)
                fps.append(self._device_fps.setdefault(body, len(self._device_fps)))
            else:
                shape = (str(sp.get("driver") or ""), tuple(fps))
        self.slice_shapes[id(s)] = (s, shape)
        return shape


class Allocator:
    """Built once per scheduling cycle (PreFilter) from the slices, classes and allocated devices; `allocate`
    is then called per node (Filter). Thread-safe: every call keeps its own search state."""

    def __init__(self, *, features: Features, allocated: Container[DeviceID],
                 class_lister: Callable[[str], dict[str, Any] | None], slices: list[dict[str, Any]],
                 cel_cache: CelCache, device_inputs: dict[int, DeviceInput] | None = None,
                 caches: SliceCaches | None = None,
                 allocated_capacity: Mapping[DeviceID, Mapping[str, Decimal]] | None = None,
                 shared_devices: Container[DeviceID] | None = None) -> None:
        self.features = features
        #: devices allocated exclusively; a share of a device allowing multiple allocations is not in it
        self.allocated = allocated
        #: DRAConsumableCapacity: what allocated shares consume of each device (kube's AggregatedCapacity) and
        #: the devices that have any share (kube's AllocatedSharedDeviceIDs)
        self.allocated_capacity: Mapping[DeviceID, Mapping[str, Decimal]] = allocated_capacity or {}
        self.shared_devices: Container[DeviceID] = shared_devices if shared_devices is not None else ()
        self.class_lister = class_lister
        self.cel_cache = cel_cache
        self.all_slices = slices
        #: pools per node and selector results per device, valid while the slices are (see SliceCaches)
        self.caches = caches if caches is not None else SliceCaches()
        split = self.caches.split
        # the same list as the last cycle's (DraManager keeps one per version), or the same slice objects
        if split is not None and (split[1] is slices or split[0] == list(map(id, slices))):
            self.on_node, self.shared = split[2], split[3]
        else:
            ids = list(map(id, slices))
            self.on_node = {}
            self.shared = []
            for s in slices:
                sp = _spec(s)
                node_name = sp.get("nodeName") or ""
                if not node_name or sp.get("sharedCounters"):
                    self.shared.append(s)
                else:
                    self.on_node.setdefault(node_name, []).append(s)
            self.caches.split = (ids, slices, self.on_node, self.shared)
        #: CEL inputs by id() of the device dict; the slices are immutable while the allocator lives
        self._inputs = device_inputs if device_inputs is not None else {}
        #: claims (by id) -> their checked requests and constraint specs, reused for every node of the cycle
        self.plans: dict[tuple[int, ...], Any] = {}
        #: (id(claim), request, sub-request) -> (claim, request, class) of ExactCount requests already checked
        self.validated: dict[tuple[int, int, int], tuple[dict[str, Any], _Request, dict[str, Any] | None]] = {}
        #: (claims by id, node shape, allocated positions) -> (claims, solution or None): the search's outcome on
        #: a node whose devices look the same, in the same order, with the same ones in use (see `node_devices`)
        self.memo: dict[tuple[Hashable, ...], tuple[list[dict[str, Any]], _Solution | None]] = {}
        #: id(request data) -> (it, its selector signature), for the request data a plan shares between nodes
        self.sigs: dict[int, tuple[_RequestData, tuple[Any, ...]]] = {}
        #: id(request data) -> (it, its key in `NodeDevices.verdicts` or None), see `verdict_key`
        self.vkeys: dict[int, tuple[_RequestData, int | None]] = {}
        #: (expression, id(device)) -> (device, its derived attribute value), see `derived_value`
        self._derived: dict[tuple[str, int], tuple[dict[str, Any], dict[str, Any]]] = {}

    def pools_for(self, node: Node) -> list[Pool]:
        hit = self.caches.pools.get(node.name)
        if hit is not None and hit[0] is node:
            return hit[1]
        pools = gather_pools(self.on_node.get(node.name, []) + self.shared, node, self.features, self.all_slices)
        self.caches.pools[node.name] = (node, pools)
        return pools

    def signature(self, rd: _RequestData) -> tuple[Any, ...]:
        """The class's and the request's selector expressions (None: one is not CEL) and the gate that decides
        whether devices with binding conditions are eligible: devices' eligibility is remembered under it."""
        hit = self.sigs.get(id(rd))
        if hit is not None and hit[0] is rd:
            return hit[1]
        sig = (_exprs(_spec(rd.device_class).get("selectors") if rd.device_class is not None else None),
               _exprs(rd.request.selectors), self.features.device_binding_and_status)
        self.sigs[id(rd)] = (rd, sig)
        return sig

    def node_devices(self, node: Node, pools: list[Pool]) -> NodeDevices | None:
        """The node's devices (see NodeDevices); None when a pool is invalid or shares counters, or a slice
        selects nodes per device (left to the search). Its `shape` names, when every pool is complete and plainly
        node-local, what the search can see of the node: two nodes of the same shape differ only in names
        (slices, pools, devices, the node), which the search never looks at except to order pools and slices,
        so it reaches the same verdict at the same positions, given the same positions in use."""
        caches = self.caches
        hit = caches.nodes.get(node.name)
        if hit is not None and hit[0] is pools:
            return hit[1]
        out: NodeDevices | None = None
        if not any(p.invalid or p.counter_sets or any(_spec(s).get("perDeviceNodeSelection") for s in p.slices)
                   for p in pools):
            flat: list[_Flat] = []
            records: list[_Record] = []
            shapes: list[Hashable] | None = []
            for p in pools:
                if p.incomplete:
                    shapes = None
                    continue
                per_slice: list[Hashable] | None = [] if shapes is not None and not p.other_slices else None
                for sl in p.slices:
                    recs, _ids = caches.slice_records(p, sl)
                    records.extend(recs)
                    flat.extend((r[0], r[1], sl) for r in recs)
                    if per_slice is not None:
                        sh = caches.slice_shape(sl)
                        per_slice = None if sh is None else [*per_slice, sh]
                if shapes is not None:
                    shapes = None if per_slice is None else [*shapes, (p.driver, tuple(per_slice))]
            shape = None if shapes is None else caches.shape_ids.setdefault(tuple(shapes), len(caches.shape_ids))
            out = NodeDevices(flat, records, shape)
        caches.nodes[node.name] = (pools, out)
        return out

    def in_use_at(self, nd: NodeDevices) -> Hashable:
        """Which positions of the node's devices are allocated or in flight, and any shares they hold."""
        flat = nd.flat
        free = free_of(self.allocated, nd.ids)
        used: tuple[int, ...] = () if len(free) == len(nd.ids) else tuple(
            i for i, f in enumerate(flat) if f[0] not in free)
        cap, shared = self.allocated_capacity, self.shared_devices
        if not cap and not shared:
            return used
        shares = tuple((i, f[0] in shared, tuple(sorted((cap.get(f[0]) or {}).items())))
                       for i, f in enumerate(flat) if f[0] in shared or f[0] in cap)
        return used, shares

    def selector_matches(self, expr: str, driver: str, device: dict[str, Any]) -> bool:
        """A compiled selector on a device, remembered while the slice lasts; raises CelError."""
        key = (expr, id(device))
        hit = self.caches.matches.get(key)
        if hit is not None and hit[0] is device:
            return hit[1]
        ok = self.cel_cache.get_or_compile(expr).matches(self.device_input(driver, device))
        self.caches.matches[key] = (device, ok)
        return ok

    def derived_value(self, expr: str, name: str, device: dict[str, Any], did: DeviceID) -> dict[str, Any]:
        """A derived attribute's expression on a device (DRADerivedAttributes), remembered per device object
        while the allocator lives; raises DerivedAttributeError with kube's text."""
        key = (expr, id(device))
        hit = self._derived.get(key)
        if hit is not None and hit[0] is device:
            return hit[1]
        compiled = self.cel_cache.get_or_compile_derived(expr)
        if compiled.error is not None:
            raise DerivedAttributeError(f"compile derived attribute {name} failed: {compiled.error}")
        try:
            value = compiled.derive(self.device_input(did[0], device))
        except CelError as exc:
            raise DerivedAttributeError(f"evaluate derived attribute {name} on device {'/'.join(did)} failed: "
                                        f"{exc}") from None
        self._derived[key] = (device, value)
        return value

    def device_input(self, driver: str, device: dict[str, Any]) -> DeviceInput:
        hit = self._inputs.get(id(device))
        lists = self.features.kube_137_allocator
        multi = not self.features.stable_allocator
        if hit is None or hit.raw is not device or hit.list_values is not lists or hit.multi_alloc is not multi:
            hit = self._inputs[id(device)] = DeviceInput(driver, device, list_values=lists, multi_alloc=multi)
        return hit

    def allocate(self, node: Node, claims: list[dict[str, Any]],
                 deadline: float | None = None) -> list[dict[str, Any]] | None:
        """One AllocationResult per claim, or None when the claims do not fit on the node. Raises
        NodeAllocationFailure (this node only) or AllocationError (the pod cannot be scheduled now)."""
        run = _Run(self, node, claims, deadline)
        return run.run()

    def search(self, node: Node, claims: list[dict[str, Any]], deadline: float | None = None
               ) -> _Run | _Picked | None:
        """`allocate` without building the results: the returned object's `build()` does, when needed."""
        if len(claims) == 1:  # one claim whose one plain request was checked on an earlier node: straight to it
            plan = self.plans.get((id(claims[0]),))
            if plan is not None and plan[3] is not None and plan[0][0] is claims[0]:
                pools = self.pools_for(node)
                rd = plan[3]
                picked = self._pick_plain(node, pools, rd) if not rd.request.admin else None
                if picked is False:
                    return None
                if isinstance(picked, tuple):
                    return _Picked(self, node, claims, (plan, picked[0], picked[1]))
                run = _Run(self, node, claims, deadline)
                run.pools = pools
                run._from_plan(plan)
                return run if run._solve() else None
        run = _Run(self, node, claims, deadline)
        return run if run.search() else None

    def plain_request(self, node: Node, claims: list[dict[str, Any]]) -> _RequestData | None:
        """The request `search` hands to `_pick_plain` for these claims on any node (one claim whose one request
        is a plain ExactCount one without admin access), its checks kept as `search` keeps them; None for other
        claims. Raises what checking the requests raises on any node (AllocationError)."""
        if len(claims) != 1:
            return None
        key = (id(claims[0]),)
        plan = self.plans.get(key)
        if plan is None or plan[0][0] is not claims[0]:
            run = _Run(self, node, claims, None)
            run._prepare()
            plan = run._remember_plan(key)
            if plan is None:
                return None
        rd = plan[3]
        return None if rd is None or rd.request.admin else rd

    def plain_verdict(self, rd: _RequestData, node: Node, claims: list[dict[str, Any]], did: DeviceID,
                      rec: _Record, sl: dict[str, Any]) -> int:
        """What `_pick_plain` makes of the device `rec` (of slice `sl`) for request `rd`: 0 not eligible, 1
        eligible and plain, 2 eligible but needing `_allocate_device`'s checks, -1 unknown (a selector failed on
        it: the search reports that). Eligibility is remembered as `_greedy` remembers it."""
        d = rec[1]
        sig = self.signature(rd)
        hit = self.caches.eligible.get((id(d), sig))
        if hit is not None and hit[0] is d:
            ok = hit[1]
        else:
            try:
                ok = _Run(self, node, claims, None)._selectable((0, 0, 0), rd, sl, d, did)
            except AllocationError:
                return -1
            self.caches.eligible[(id(d), sig)] = (d, ok)
        if not ok:
            return 0
        _did, _d, other_checks, tainted, policy = rec
        f = self.features
        if other_checks or (f.device_taints and tainted) or (f.consumable_capacity and policy):
            return 2
        return 1

    def verdict_key(self, rd: _RequestData) -> int | None:
        """The key of the request's per-device verdicts in `NodeDevices.verdicts`: its selector signature and the
        gates deciding what `_allocate_device` must check; None when a selector is not CEL."""
        hit = self.vkeys.get(id(rd))
        if hit is not None and hit[0] is rd:
            return hit[1]
        sig = self.signature(rd)
        vkey = None
        if sig[0] is not None and sig[1] is not None:
            keys = self.caches.verdict_keys
            vkey = keys.setdefault((sig, self.features.device_taints, self.features.consumable_capacity), len(keys))
        self.vkeys[id(rd)] = (rd, vkey)
        return vkey

    def _pick_plain(self, node: Node, pools: list[Pool], rd: _RequestData
                    ) -> tuple[_Solution, list[_Flat]] | bool | None:
        """What `_Run._greedy` finds for one plain request (no admin access), when it is plain to see: False
        when fewer devices than requested are free, else the first free devices whose eligibility is already
        remembered (see `_greedy`) and that need none of `_allocate_device`'s checks. None (the search decides)
        when a device on the way is not like that, or for the nodes `node_devices` leaves out."""
        nd = self.node_devices(node, pools)
        if nd is None:
            return None
        free = free_of(self.allocated, nd.ids)
        want = rd.num_devices
        if want > ALLOCATION_RESULTS_MAX_SIZE:
            return None
        if len(free) < want:
            return False
        vkey = self.verdict_key(rd)
        if vkey is None:
            return None
        taints, consumable = self.features.device_taints, self.features.consumable_capacity
        if consumable and rd.request.amounts is not None:
            return None
        # filled in as the eligibility cache learns each device's verdict
        vec = nd.verdicts.get(vkey)
        if vec is None:
            vec = nd.verdicts[vkey] = [None] * len(nd.flat)
        sig = self.signature(rd)
        eligible = self.caches.eligible
        records = nd.records
        picks: list[tuple[_Request, int]] = []
        for i in sorted(map(nd.pos.__getitem__, free)):
            v = vec[i]
            if v is None:
                _did, d, other_checks, tainted, policy = records[i]
                hit = eligible.get((id(d), sig))
                if hit is None or hit[0] is not d:
                    return None  # not seen by the search yet
                if not hit[1]:
                    v = 0
                elif other_checks or (taints and tainted) or (consumable and policy):
                    v = 2
                else:
                    v = 1
                vec[i] = v
            if v == 0:
                continue
            if v == 2:
                return None
            picks.append((rd.request, i))
            if len(picks) == want:
                return ((tuple(picks),), ()), nd.flat
        return False


#: a solution by device positions: per claim (request, position) of each device, and each chosen sub-request
_Solution = tuple[tuple[tuple[tuple["_Request", int], ...], ...], tuple[tuple[tuple[int, int, int], int], ...]]


class _Picked:
    """What `Allocator.search` returns for devices picked without a search run: `build()` makes the run (and
    the results) only for the node Reserve picks, not for every node Filter passes."""

    __slots__ = ("a", "node", "claims", "pending")

    def __init__(self, a: Allocator, node: Node, claims: list[dict[str, Any]],
                 pending: tuple[Any, _Solution, list[_Flat]]) -> None:
        self.a, self.node, self.claims, self.pending = a, node, claims, pending

    def build(self) -> list[dict[str, Any]]:
        run = _Run(self.a, self.node, self.claims, None)
        run.pending = self.pending
        return run.build()


class _Run:
    __slots__ = ("a", "features", "node", "claims", "deadline", "steps", "request_data", "constraints", "matches",
                 "allocating", "results", "consumed", "available", "pools", "allocating_capacity", "pending",
                 "groups", "group_baseline")

    def __init__(self, a: Allocator, node: Node, claims: list[dict[str, Any]], deadline: float | None) -> None:
        self.a = a
        self.features = a.features
        self.node = node
        self.claims = claims
        self.deadline = deadline
        self.steps = 0
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[AttributeConstraint]] = [[] for _ in claims]
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.consumed: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.available: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.pools: list[Pool] = []
        #: what the shares picked in this search consume of each device (kube's allocatingCapacity)
        self.allocating_capacity: dict[DeviceID, dict[str, Decimal]] = {}
        #: a remembered solution found on a node of the same shape (plan, solution, this node's devices)
        self.pending: tuple[Any, _Solution, list[_Flat]] | None = None
        #: DRADeviceCompatibilityGroups: per pool and counter set, what the devices placed by this search and the
        #: allocated ones allow (`_take_groups`), and what the allocated ones alone allow (`_group_baseline`)
        self.groups: dict[str, dict[str, _Groups]] = {}
        self.group_baseline: dict[str, dict[str, _Groups]] = {}

    # -------------------------------------------------------------- setup
    def run(self) -> list[dict[str, Any]] | None:
        return self.build() if self.search() else None

    def build(self) -> list[dict[str, Any]]:
        """One AllocationResult per claim from the solution `search` found."""
        if self.pending is not None:
            plan, sol, flat = self.pending
            self.pending = None
            self._from_plan(plan)
            self._replay(sol, flat)
        return [self._result(ci, claim) for ci, claim in enumerate(self.claims)]

    def search(self) -> bool:
        """Find a solution (kept in this object); False when the claims do not fit on the node."""
        self.pools = self.a.pools_for(self.node)
        plan_key = tuple(id(c) for c in self.claims)
        plan = self.a.plans.get(plan_key)
        memo_key = flat = None
        if plan is not None and _same(plan[0], self.claims):
            if plan[3] is None:  # more than one plain request: the search is worth remembering
                memo_key, flat = self._memo_key(plan_key)
                hit = self.a.memo.get(memo_key) if memo_key is not None else None
                if hit is not None and _same(hit[0], self.claims):
                    if hit[1] is None:
                        return False
                    assert flat is not None  # a memo key comes with the node's devices
                    self.pending = (plan, hit[1], flat)  # `build` replays it, on the one node picked
                    return True
            self._from_plan(plan)
        else:
            self._prepare()
            plan = self._remember_plan(plan_key)
            if plan is not None and plan[3] is None:
                memo_key, flat = self._memo_key(plan_key)
        ok = self._solve()
        if memo_key is not None and flat is not None:
            self.a.memo[memo_key] = (list(self.claims), self._solution(flat) if ok else None)
        return ok

    def _remember_plan(self, plan_key: tuple[int, ...]) -> Any:
        """After `_prepare`: keep its node-independent checks for the other nodes (not for `allocationMode: All`,
        whose devices depend on the node: None then)."""
        if any(rd.request.mode == "All" for rd in self.request_data.values()):
            return None
        reqs = {k: (rd.request, rd.device_class, rd.num_devices, rd.is_sub) for k, rd in self.request_data.items()}
        cons = [(ci, type(c), sorted(c.requests), c.attribute) for ci, cs in enumerate(self.constraints) for c in cs]
        only = self.request_data.get((0, 0, 0))
        shared = only if (len(self.claims) == 1 and len(reqs) == 1 and not cons and only is not None
                          and not only.is_sub and only.request.mode == "ExactCount") else None
        plan = self.a.plans[plan_key] = (list(self.claims), reqs, cons, shared)
        return plan

    def _from_plan(self, plan: Any) -> None:
        """The node-independent checks passed for these claims on an earlier node: reuse them."""
        if plan[3] is not None:  # one plain ExactCount request: its data is never changed by a search
            self.request_data[(0, 0, 0)] = plan[3]
            return
        for key, (req, cls, n, is_sub) in plan[1].items():
            self.request_data[key] = _RequestData(req, cls, n, is_sub=is_sub)
        for ci, kind, requests, attr in plan[2]:
            self.constraints[ci].append(kind(list(requests), attr))

    def _memo_key(self, plan_key: tuple[int, ...]) -> tuple[tuple[Hashable, ...] | None, list[_Flat] | None]:
        nd = self.a.node_devices(self.node, self.pools)
        if nd is None or nd.shape is None:
            return None, None
        return (plan_key, nd.shape, self.a.in_use_at(nd)), nd.flat

    def _solution(self, flat: list[_Flat]) -> _Solution:
        """The solution by positions in `flat`, to replay on a node of the same shape."""
        pos = {f[0]: i for i, f in enumerate(flat)}
        picks = tuple(tuple((r.request, pos[r.id]) for r in res) for res in self.results)
        subs = tuple((k, rd.selected_sub) for k, rd in self.request_data.items() if rd.is_sub and k[2] == 0)
        return picks, subs

    def _replay(self, sol: _Solution, flat: list[_Flat]) -> None:
        """A remembered solution on this node: the devices at the same positions."""
        picks, subs = sol
        for ci, res in enumerate(picks):
            out = self.results[ci]
            for req, i in res:
                did, d, sl = flat[i]
                out.append(_Result(req, did, d, sl))
        for k, sub in subs:
            self.request_data[k].selected_sub = sub

    def _prepare(self) -> None:
        """Check every request (classes, selectors present, limits) and build the constraints."""
        for ci, claim in enumerate(self.claims):
            min_devices = 0
            devices = (_spec(claim).get("devices") or {})
            for ri, raw in enumerate(devices.get("requests") or []):
                subs = raw.get("firstAvailable") or []
                if subs:
                    if not self.features.prioritized_list:
                        raise AllocationError(f"claim {claim_key(claim)}, request {raw.get('name')}: has subrequests, "
                                              f"but the DRAPrioritizedList feature is disabled")
                    self._check_sub_capacity(claim, subs)
                    least = None
                    for si, sub in enumerate(subs):
                        rd = self._validate((ci, ri, si), _Request(sub, str(raw.get("name") or "")))
                        rd.is_sub = True
                        self.request_data[(ci, ri, si)] = rd
                        least = rd.num_devices if least is None else min(least, rd.num_devices)
                    n = least or 0
                else:
                    hit = self.a.validated.get((id(claim), ri, 0))
                    if hit is not None and hit[0] is claim:
                        rd = _RequestData(hit[1], hit[2], hit[1].count)
                    else:
                        rd = self._validate((ci, ri, 0), _Request(raw, None))
                    self.request_data[(ci, ri, 0)] = rd
                    n = rd.num_devices
                if self.features.kube_137_allocator and n > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                    raise AllocationError(f"claim {claim_key(claim)}, request {raw.get('name')}: adding {n} devices "
                                          f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with "
                                          f"{min_devices} already accounted for")
                min_devices += n
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(f"claim {claim_key(claim)}: number of requested devices {min_devices} "
                                      f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
            for i, c in enumerate(devices.get("constraints") or []):
                lists = self.features.list_type_attributes
                if c.get("matchAttribute"):
                    match = MatchAttributeSets if lists else _MatchAttribute
                    self.constraints[ci].append(match(list(c.get("requests") or []), str(c["matchAttribute"])))
                elif c.get("distinctAttribute") and (self.features.consumable_capacity
                                                     or self.features.experimental_allocator):
                    kind: type[AttributeConstraint] = _DistinctAttribute136
                    if lists:
                        kind = DistinctAttributeSets
                    elif self.features.distinct_every_device:
                        kind = _DistinctAttribute
                    self.constraints[ci].append(kind(list(c.get("requests") or []), str(c["distinctAttribute"])))
                else:
                    raise AllocationError(f"claim {claim_key(claim)}, constraint #{i}: empty constraint (unsupported "
                                          f"constraint type?)")

    def _check_sub_capacity(self, claim: dict[str, Any], subs: list[dict[str, Any]]) -> None:
        """kube refuses capacity requests of any sub-request (DRAConsumableCapacity off) before it checks the
        first sub-request, so that error comes before any other of a later sub-request's."""
        if self.features.consumable_capacity:
            return
        for sub in subs:
            if sub.get("capacity") is not None:
                raise AllocationError(f"claim {claim_key(claim)}, subrequest {sub.get('name') or ''}: has capacity "
                                      f"requests, but the DRAConsumableCapacity feature is disabled")

    def _solve(self) -> bool:
        try:
            fast = self._single_request()
            done = self._greedy(fast) if fast is not None else self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _Stop:
            return False
        except _MaxSizeExceeded:
            done = False
        if not done:
            for p in self.pools:
                if p.invalid:
                    raise NodeAllocationFailure("invalid resource pools were encountered")
            return False
        return True

    def _single_request(self) -> _RequestData | None:
        """The common case (one claim, one ExactCount request, no constraints, admin access or shared counters):
        the depth-first search then takes the first eligible devices in order, so a flat loop gives the same
        answer without the recursion."""
        if len(self.claims) != 1 or len(self.request_data) != 1 or self.constraints[0]:
            return None
        rd = self.request_data.get((0, 0, 0))
        if rd is None or rd.is_sub or rd.request.mode != "ExactCount" or rd.request.admin:
            return None
        if any(p.counter_sets for p in self.pools):
            return None
        return rd

    def _greedy(self, rd: _RequestData) -> bool:
        """First eligible free devices in order. A device's eligibility (class and request selectors) is
        remembered across nodes and cycles per selector signature; a device with nothing that
        `_allocate_device` checks (multiple allocations, counters, taints) is taken without it. A slice's free
        devices are found with set operations first, so a full node costs no loop over its devices."""
        want, got = rd.num_devices, 0
        if want > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded
        key = (0, 0, 0)
        caches = self.a.caches
        eligible = caches.eligible
        allocated, allocating = self.a.allocated, self.allocating
        req = rd.request
        sig = self.a.signature(rd)
        selectors_known = sig[0] is not None and sig[1] is not None
        taints = self.features.device_taints
        consumable = self.features.consumable_capacity
        amounts = consumable and req.amounts is not None
        results = self.results[0]
        for p in self.pools:
            if p.incomplete or p.invalid:
                continue
            for s in p.slices:
                records, ids = caches.slice_records(p, s)
                free = free_of(allocated, ids)
                if not free:
                    continue
                per_device_nodes = bool(_spec(s).get("perDeviceNodeSelection"))
                # a device picked here is never met again, so `allocating` needs no look-up
                for did, d, other_checks, tainted, policy in records:
                    if did not in free:
                        continue
                    if per_device_nodes or not selectors_known:
                        ok = self._selectable(key, rd, s, d, did)
                    else:
                        hit = eligible.get((id(d), sig))
                        if hit is not None and hit[0] is d:
                            ok = hit[1]
                        else:
                            ok = self._selectable(key, rd, s, d, did)
                            eligible[(id(d), sig)] = (d, ok)
                    if not ok:
                        continue
                    if other_checks or (taints and tainted) or amounts or (consumable and policy):
                        if self._allocate_device(0, rd, did, d, s, p, must=False) is None:
                            continue
                    else:  # what _allocate_device does for such a device, without the undo closure
                        allocating.setdefault(did, set()).add(0)
                        results.append(_Result(req, did, d, s))
                    got += 1
                    if got == want:
                        return True
        return False

    def _validate(self, key: tuple[int, int, int], req: _Request) -> _RequestData:
        claim = self.claims[key[0]]
        if req.mode == "ExactCount":  # node-independent: checked once per allocator
            ckey = (id(claim), key[1], key[2])
            hit = self.a.validated.get(ckey)
            if hit is not None and hit[0] is claim:
                return _RequestData(hit[1], hit[2], hit[1].count)
            rd = self._validate_uncached(key, req)
            self.a.validated[ckey] = (claim, req, rd.device_class)
            return rd
        return self._validate_uncached(key, req)

    def _validate_uncached(self, key: tuple[int, int, int], req: _Request) -> _RequestData:
        claim = self.claims[key[0]]
        ck = claim_key(claim)
        if req.capacity is not None and not self.features.consumable_capacity:
            what = "subrequest" if req.parent is not None else "request"
            raise AllocationError(f"claim {ck}, {what} {req.name}: has capacity requests, but the "
                                  f"DRAConsumableCapacity feature is disabled")
        if req.derived_exprs is not None:
            if not self.features.derived_attributes:
                raise AllocationError(f"claim {ck}, request {req.name}: cannot handle request with derived "
                                      f"attributes, the feature is disabled")
            req.derived = DerivedAttributes(req.derived_exprs, self.a.derived_value)
        for i, sel in enumerate(req.selectors):
            if not (sel or {}).get("cel"):
                raise AllocationError(f"claim {ck}, request {req.name}, selector #{i}: CEL expression empty "
                                      f"(unsupported selector type?)")
        if not self.features.admin_access and req.has_admin:
            raise AllocationError(f"claim {ck}, request {req.name}: admin access is requested, but the feature is "
                                  f"disabled")
        if not req.class_name:
            raise AllocationError(f"claim {ck}, request {req.name}: missing device class name (unsupported request "
                                  f"type?)")
        cls = self.a.class_lister(req.class_name)
        if cls is None:
            raise AllocationError(f"claim {ck}, request {req.name}: could not retrieve device class {req.class_name}: "
                                  f'deviceclass.resource.k8s.io "{req.class_name}" not found')
        rd = _RequestData(req, cls)
        if req.mode == "ExactCount":
            rd.num_devices = req.count
        elif req.mode == "All":
            for p in self.pools:
                if p.incomplete:
                    raise AllocationError(f"claim {ck}, request {req.name}: asks for all devices, but resource pool "
                                          f"{p.id} is currently being updated")
                if p.invalid:
                    raise AllocationError(f"claim {ck}, request {req.name}: asks for all devices, but resource pool "
                                          f"{p.id} is currently invalid")
                for s in p.slices:
                    for d in _devices(s):
                        did = (p.driver, p.name, str(d.get("name") or ""))
                        if not self._selectable(key, rd, s, d, did):
                            continue
                        # static capacity only: what others consume is checked when the device is allocated
                        if self.features.consumable_capacity and not self._capacity_fits(ck, req, did, d, None,
                                                                                         static=True):
                            continue
                        rd.all_devices.append((did, d, s, p))
            rd.num_devices = len(rd.all_devices)
        else:
            raise AllocationError(f"claim {ck}, request {req.name}: unsupported count mode {req.mode}")
        return rd

    # -------------------------------------------------------------- search
    def _check_deadline(self) -> None:
        """kube checks its context on every step; reading the clock on the first and then every 64th is as
        good for a deadline in seconds, and a deadline already past still stops the search at once."""
        self.steps += 1
        if self.deadline is not None and self.steps & 63 == 1 and time.monotonic() > self.deadline:
            raise AllocationError("filter operation aborted: context deadline exceeded")

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        self._check_deadline()
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        requests = (_spec(claim).get("devices") or {}).get("requests") or []
        if ri >= len(requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _MaxSizeExceeded:
                return False
        rd = self.request_data[(ci, ri, si)]
        if not in_sub and rd.is_sub:
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.request_data:
                try:
                    ok = self._one(ci, ri, sub, di, True, (0, 0, 0))
                except _MaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.request_data[(ci, ri, 0)].selected_sub = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        req = rd.request
        if req.mode == "All" and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if len(self.results[ci]) + rd.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded
        if req.mode == "All":
            did, d, s, p = rd.all_devices[di]
            undo = self._allocate_device(ci, rd, did, d, s, p, must=True)
            if undo is None:
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0))
            except Exception:
                undo()
                raise
            if not done:
                undo()
            return done
        key = (ci, ri, si)
        for pi in range(start[0], len(self.pools)):
            p = self.pools[pi]
            if p.incomplete or p.invalid:
                continue
            s_start = start[1] if pi == start[0] else 0
            for sj in range(s_start, len(p.slices)):
                s = p.slices[sj]
                devs = _devices(s)
                d_start = start[2] if (pi == start[0] and sj == start[1]) else 0
                for dk in range(d_start, len(devs)):
                    d = devs[dk]
                    did = (p.driver, p.name, str(d.get("name") or ""))
                    if req.admin:
                        if ci in self.allocating.get(did, ()):
                            continue
                    elif self._in_use(did):
                        continue
                    if not self._selectable(key, rd, s, d, did):
                        continue
                    undo = self._allocate_device(ci, rd, did, d, s, p, must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._one(ci, ri, si, di + 1, in_sub, (pi, sj, dk + 1))
                    except Exception:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _in_use(self, did: DeviceID) -> bool:
        return did in self.a.allocated or bool(self.allocating.get(did))

    def _selectable(self, key: tuple[int, int, int], rd: _RequestData, s: dict[str, Any], d: dict[str, Any],
                    did: DeviceID) -> bool:
        if not self.features.device_binding_and_status and d.get("bindingConditions"):
            return False
        mk = (did, *key)
        hit = self.matches.get(mk)
        if hit is not None:
            return hit
        ok = True
        if rd.device_class is not None:
            sels = _spec(rd.device_class).get("selectors")
            if sels:
                ok = self._selectors_match(key[0], d, did, rd.device_class, sels)
        if ok and rd.request.selectors:
            ok = self._selectors_match(key[0], d, did, None, rd.request.selectors)
        if ok and _spec(s).get("perDeviceNodeSelection"):
            ok = node_matches(self.node, d.get("nodeName"), bool(d.get("allNodes")), d.get("nodeSelector"))
        self.matches[mk] = ok
        return ok

    def _selectors_match(self, ci: int, d: dict[str, Any], did: DeviceID, cls: dict[str, Any] | None,
                         selectors: list[dict[str, Any]]) -> bool:
        for i, sel in enumerate(selectors):
            expr = str(((sel or {}).get("cel") or {}).get("expression") or "")
            compiled = self.a.cel_cache.get_or_compile(expr)
            if compiled.error is not None:
                who = f"class {name_of(cls)}" if cls is not None else f"claim {claim_key(self.claims[ci])}"
                raise AllocationError(f"{who}: selector #{i}: CEL compile error: {compiled.error}")
            try:
                ok = self.a.selector_matches(expr, did[0], d)
            except CelError as exc:
                who = f"class {name_of(cls)}" if cls is not None else f"claim {claim_key(self.claims[ci])}"
                if not self.a.features.runtime_error_detail:
                    raise AllocationError(f"{who}: selector #{i}: CEL runtime error: {exc}") from None
                err = str(exc)
                if "no such key:" in err:
                    err += (". consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
                            "with has() for optional fields")
                raise AllocationError(f"{who}: selector #{i} on device {'/'.join(did)}: CEL runtime error: "
                                      f"{err}") from None
            if not ok:
                return False
        return True

    def _allocate_device(self, ci: int, rd: _RequestData, did: DeviceID, d: dict[str, Any], s: dict[str, Any],
                         p: Pool, must: bool) -> Callable[[], None] | None:
        req = rd.request
        multi = self.features.consumable_capacity and bool(d.get("allowMultipleAllocations"))
        if not multi and req.admin and ci in self.allocating.get(did, ()):
            return None
        if not req.admin and self._in_use(did):
            return None
        if self.features.experimental_allocator and _spec(s).get("skipNodeOperations") and (
                not self.features.optional_node_operations
                or OPTIONAL_NODE_OPERATIONS not in self.node.declared_features):
            return None
        uses = d.get("consumesCounters") or []
        if uses and not self.features.partitionable_devices:
            return None
        # a device allowing multiple allocations that already has a share: its counters are charged already
        if multi and self._capacity_in_use(did):
            uses = []
        ungroup: Callable[[], None] | None = None
        if uses and self.features.compatibility_groups:  # checked before any counter is taken, as kube does
            ungroup = self._take_groups(p, uses)
            if ungroup is None:
                return None
        if uses and not self._take_counters(p, uses):
            if ungroup is not None:
                ungroup()
            return None

        def give_back() -> None:
            if ungroup is not None:
                ungroup()
            if uses:
                self._give_counters(p, uses)

        if self.features.device_taints and taint_prevents(d, req):
            give_back()
            return None
        added: list[AttributeConstraint] = []
        for c in self.constraints[ci]:
            try:
                ok = c.add(req, d, did)
            except DerivedAttributeError as exc:  # kube stops the allocation with the evaluation's error
                raise AllocationError(str(exc)) from None
            if not ok:
                for a in added:
                    a.remove(req)
                give_back()
                if must:
                    raise AllocationError(f"claim {claim_key(self.claims[ci])}, request {req.name}: cannot add device "
                                          f"{did[0]}/{did[1]}/{did[2]} because a claim constraint would not be "
                                          f"satisfied")
                return None
            added.append(c)

        def release() -> None:
            for a in added:
                a.remove(req)
            give_back()

        share_id: str | None = None
        consumed: Consumed | None = None
        if self.features.consumable_capacity:
            ck = claim_key(self.claims[ci])
            try:
                ok = self._capacity_fits(ck, req, did, d, self.allocating_capacity.get(did))
                if ok and multi:
                    consumed = consumed_by(req.amounts, d.get("capacity") or {},
                                           self.features.fractional_capacity_range)
            except AllocationError:
                release()
                raise
            except CapacityError as exc:
                release()
                raise AllocationError(f"claim {ck}, request {req.name}: computing consumed capacity for device "
                                      f"{'/'.join(did)}: {exc}") from None
            if not ok:
                release()
                return None
            if multi:
                share_id = str(uuid.uuid4())
        existed = did in self.allocating_capacity
        if multi:
            add_into(self.allocating_capacity.setdefault(did, {}), {k: v[0] for k, v in (consumed or {}).items()})
        else:
            self.allocating.setdefault(did, set()).add(ci)
        self.results[ci].append(_Result(req, did, d, s, share_id, consumed or None))
        n = len(self.results[ci]) - 1

        def undo() -> None:
            del self.results[ci][n:]
            if multi:
                self._release_capacity(did, consumed or {}, existed)
            else:
                self.allocating[did].discard(ci)
            for c in self.constraints[ci]:
                c.remove(req)
            give_back()

        return undo

    # -------------------------------------------------------------- consumable capacity
    def _capacity_fits(self, ck: str, req: _Request, did: DeviceID, d: dict[str, Any],
                       allocating: Mapping[str, Decimal] | None, static: bool = False) -> bool:
        """CmpRequestOverCapacity against what allocated shares and `allocating` consume of the device (`static`:
        against the device's capacity alone, as the `allocationMode: All` pre-scan checks; kube's error then
        names the device by its name alone)."""
        allocated = None if static else self.a.allocated_capacity.get(did)
        try:
            return fits(req.amounts, d.get("capacity"), allocated, allocating, self.features.fractional_capacity_range)
        except CapacityError as exc:
            raise AllocationError(f"claim {ck}, request {req.name}: checking capacity for device "
                                  f"{did[2] if static else '/'.join(did)}: {exc}") from None

    def _capacity_in_use(self, did: DeviceID) -> bool:
        """deviceCapacityInUse: the device has an allocated or in-flight share."""
        return did in self.a.allocated_capacity or did in self.a.shared_devices or did in self.allocating_capacity

    def _release_capacity(self, did: DeviceID, consumed: Consumed, existed: bool) -> None:
        """ConsumedCapacityCollection.Remove: the entry goes once all its amounts are zero, but an entry that held
        an earlier share stays (it marks the device as shared)."""
        have = self.allocating_capacity.get(did)
        if have is not None:
            add_into(have, {k: v[0] for k, v in consumed.items()}, sign=-1)
            if all(v == 0 for v in have.values()):
                del self.allocating_capacity[did]
        if existed and did not in self.allocating_capacity:
            self.allocating_capacity[did] = {}

    # -------------------------------------------------------------- counters
    def _available(self, p: Pool) -> dict[str, dict[str, Decimal]]:
        av = self.available.get(p.id)
        if av is None:
            av = {name: dict(cs) for name, cs in p.counter_sets.items()}
            for use in self._allocated_uses(p):
                cs = av.get(str(use.get("counterSet") or ""), {})
                for cname, c in _counters(use.get("counters")).items():
                    if cname in cs:
                        cs[cname] -= c
            self.available[p.id] = av
        return av

    def _allocated_uses(self, p: Pool) -> Iterator[dict[str, Any]]:
        """The counter consumptions of the pool's devices other claims hold, in slice order."""
        for s in p.slices + p.other_slices:
            for d in _devices(s):
                cid = (p.driver, p.name, str(d.get("name") or ""))
                if cid in self.a.allocated or cid in self.a.shared_devices or cid in self.a.allocated_capacity:
                    yield from d.get("consumesCounters") or []

    def _take_counters(self, p: Pool, uses: list[dict[str, Any]]) -> bool:
        av = self._available(p)
        consumed = self.consumed.setdefault(p.id, {})
        for use in uses:
            cs = consumed.setdefault(str(use.get("counterSet") or ""), {})
            for cname, c in _counters(use.get("counters")).items():
                cs[cname] = cs.get(cname, Decimal(0)) + c
        for set_name, counters in av.items():
            used = consumed.get(set_name, {})
            for cname, have in counters.items():
                if have < used.get(cname, Decimal(0)):
                    self._give_counters(p, uses)
                    return False
        return True

    def _give_counters(self, p: Pool, uses: list[dict[str, Any]]) -> None:
        consumed = self.consumed.setdefault(p.id, {})
        for use in uses:
            cs = consumed.setdefault(str(use.get("counterSet") or ""), {})
            for cname, c in _counters(use.get("counters")).items():
                cs[cname] = cs.get(cname, Decimal(0)) - c

    # -------------------------------------------------------------- compatibility groups
    def _group_baseline(self, p: Pool) -> dict[str, _Groups]:
        """Per counter set of the pool, what its allocated devices allow (the same devices `_available` counts:
        their groups as the slices declare them now), folded in slice order."""
        base = self.group_baseline.get(p.id)
        if base is None:
            base = {}
            for use in self._allocated_uses(p):
                cs = str(use.get("counterSet") or "")
                base[cs] = _fold_groups(base.get(cs), _groups_of(use))
            self.group_baseline[p.id] = base
        return base

    def _take_groups(self, p: Pool, uses: list[dict[str, Any]]) -> Callable[[], None] | None:
        """Place a device on each counter set it draws on when every one admits it: the undo, else None (and
        nothing changed). A counter set first met in this search starts from the allocated devices'."""
        running = self.groups.setdefault(p.id, {})
        base = self._group_baseline(p)
        saved: list[tuple[str, _Groups | None]] = []

        def undo() -> None:
            for cs, prev in reversed(saved):
                if prev is None:
                    running.pop(cs, None)
                else:
                    running[cs] = prev

        for use in uses:
            cs = str(use.get("counterSet") or "")
            prev = running.get(cs)
            state = prev if prev is not None else base.get(cs)
            groups = _groups_of(use)
            if state is not None and not state.admits(groups):
                undo()
                return None
            saved.append((cs, prev))
            running[cs] = _fold_groups(state, groups)
        return undo

    # -------------------------------------------------------------- result
    def _result(self, ci: int, claim: dict[str, Any]) -> dict[str, Any]:
        results = []
        for r in self.results[ci]:
            out: dict[str, Any] = {"request": r.request.full_name, "driver": r.id[0], "pool": r.id[1],
                                   "device": r.id[2]}
            if r.request.admin:
                out["adminAccess"] = True
            if r.share_id is not None:
                out["shareID"] = r.share_id
            if r.consumed:
                out["consumedCapacity"] = {k: v[1] for k, v in r.consumed.items()}
            if r.request.tolerations:
                out["tolerations"] = r.request.tolerations
            skips = _spec(r.slice).get("skipNodeOperations") if self.features.experimental_allocator else None
            if skips:
                out["skipNodeOperations"] = list(skips)
            if self.features.device_binding_and_status:
                if r.device.get("bindingConditions"):
                    out["bindingConditions"] = list(r.device["bindingConditions"])
                if r.device.get("bindingFailureConditions"):
                    out["bindingFailureConditions"] = list(r.device["bindingFailureConditions"])
            results.append(out)
        config: list[dict[str, Any]] = []
        devices = _spec(claim).get("devices") or {}
        requests = devices.get("requests") or []
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri in range(len(requests)):
            rd = self.request_data[(ci, ri, 0)]
            if rd.is_sub:
                rd = self.request_data[(ci, ri, rd.selected_sub)]
            cls = rd.device_class
            if cls is None:
                continue
            cname = name_of(cls)
            if cname in class_ranges:
                lo, hi = class_ranges[cname]
                for i in range(lo, hi):
                    config[i]["requests"].append(rd.request.full_name)
                continue
            lo = len(config)
            for c in _spec(cls).get("config") or []:
                config.append({"source": "FromClass", "requests": [rd.request.full_name],
                               **{k: v for k, v in c.items() if k != "requests"}})
            class_ranges[cname] = (lo, len(config))
        for c in devices.get("config") or []:
            wanted = list(c.get("requests") or [])
            body = {k: v for k, v in c.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **body})
                continue
            once = self.features.kube_137_allocator  # 1.36 copied it once per matching request
            for ri, req in enumerate(requests):
                if req.get("name") in wanted:
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    if once:
                        break
                    continue
                rd = self.request_data[(ci, ri, 0)]
                if not rd.is_sub:
                    continue
                sub = (req.get("firstAvailable") or [])[rd.selected_sub]
                if f"{req.get('name')}/{sub.get('name')}" in wanted:
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    if once:
                        break
        if self.features.kube_137_allocator:
            config = [self._unscoped(ci, requests, c) for c in config]
        alloc: dict[str, Any] = {"devices": {"results": results}}
        if config:
            alloc["devices"]["config"] = config
        sel = self._node_selector(self.results[ci])
        if sel is not None:
            alloc["nodeSelector"] = sel
        return alloc

    def _unscoped(self, ci: int, requests: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, Any]:
        """A config naming every request of the claim (a request with sub-requests by itself or its chosen
        sub-request) without `requests`: empty means all, as kube 1.37 writes it."""
        named = c.get("requests")
        if not named:
            return c
        for ri, req in enumerate(requests):
            if req.get("name") in named:
                continue
            rd = self.request_data[(ci, ri, 0)]
            if rd.is_sub:
                sub = (req.get("firstAvailable") or [])[rd.selected_sub]
                if f"{req.get('name')}/{sub.get('name')}" in named:
                    continue
            return c
        return {k: v for k, v in c.items() if k != "requests"}

    def _node_selector(self, results: list[_Result]) -> dict[str, Any] | None:
        fields: list[dict[str, Any]] = []
        exprs: list[dict[str, Any]] = []
        for r in results:
            sp = _spec(r.slice)
            if sp.get("perDeviceNodeSelection"):
                node_name, sel = r.device.get("nodeName"), r.device.get("nodeSelector")
            else:
                node_name, sel = sp.get("nodeName"), sp.get("nodeSelector")
            if node_name or r.device.get("bindsToNode"):
                return {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [self.node.name]}]}]}
            if sel is not None:
                terms = sel.get("nodeSelectorTerms") or []
                if len(terms) > 1:
                    raise AllocationError(f"create NodeSelector for claim: unsupported ResourceSlice.NodeSelector with "
                                          f"{len(terms)} terms")
                if terms:
                    _add_reqs(terms[0].get("matchFields") or [], fields)
                    _add_reqs(terms[0].get("matchExpressions") or [], exprs)
        if not fields and not exprs:
            return None
        term: dict[str, Any] = {}
        if exprs:
            term["matchExpressions"] = exprs
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _add_reqs(src: list[dict[str, Any]], dst: list[dict[str, Any]]) -> None:
    for r in src:
        vals = set(r.get("values") or [])
        if not any(e.get("key") == r.get("key") and e.get("operator") == r.get("operator")
                   and set(e.get("values") or []) == vals for e in dst):
            dst.append(r)

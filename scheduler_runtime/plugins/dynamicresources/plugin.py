"""DynamicResources: pods get the devices their ResourceClaims ask for, as kube-scheduler v1.36 allocates them.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go.

PreEnqueue holds a pod back until each of its claims exists (a template's claim is created by
kube-controller-manager; the embedded cluster does it itself). PreFilter reads the claims, checks the device
classes and builds the structured allocator over every ResourceSlice and the devices already allocated (by any
claim, written by a PreBind that the informer has not shown yet, or in flight between Reserve and PreBind).
Filter allocates per node; Score prefers nodes where earlier `firstAvailable` alternatives fit; Reserve marks
the chosen allocation in flight so the next pod of the same wave cannot take those devices; PreBind writes the
finalizer, then `status.allocation` and `status.reservedFor` (the pod) on each claim. PostFilter, when no node
fits, deallocates one allocated claim that blocked the pod and that nobody else uses; for a pod without claims it
contributes kube's `no new claims to deallocate` to the FailedScheduling message.

Extended resources backed by a DeviceClass (DRAExtendedResource, see extended.py) become one more claim of the
pod, in memory until PreBind creates it (`<pod>-extended-resources-<suffix>`, owned by the pod) and writes
`pod.status.extendedResourceClaimStatus`; Unreserve deletes it again, PostFilter deletes one left by an earlier
cycle.

Consumable capacity (DRAConsumableCapacity, beta on): devices allowing multiple allocations are shared between
claims, each share written with its `shareID` and `consumedCapacity` (allocator.py, capacity.py); with the gate
off a share holds its device like any allocation, as kube's ListAllAllocatedDevices has it.

Requeueing follows kube's EventsToRegister and queueing hints at the emulated minor: 1.37 also registers
ResourceClaim deletions, 1.36 does not (events_to_register).

Every rejection is UnschedulableAndUnresolvable (preemption cannot help), as in kube. Not implemented (refused
where they would matter, see docs/dra.md): alpha gates.
"""

from __future__ import annotations

import operator
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...framework.cycle_state import CycleState
from ...framework.interface import SignFragment
from ...framework.nodelist import NodeList
from ...framework.plugin import Plugin
from ...framework.snapshot import Snapshot
from ...framework.status import Status
from ...framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    FilterBatch,
    NodeInfo,
    NodeScore,
    PostFilterResult,
    PreFilterResult,
)
from ...goduration import go_quote
from ...objects import NodeSelector, Pod
from ...podrequests import claim_resources, pod_requests
from ..tainttoleration import default_normalize
from .allocator import (
    OPTIONAL_NODE_OPERATIONS,
    AllocationError,
    Allocator,
    Features,
    NodeAllocationFailure,
    SliceCaches,
    minor_at_least,
)
from .args import DynamicResourcesArgs, decode_duration
from .batch import DeviceTable, table_for
from .cel import CelCache
from .claims import (
    CLAIMS,
    EV_CLAIM,
    EV_CLASS,
    EV_SLICE,
    EV_TAINT_RULE,
    FINALIZER,
    ClaimNotUsable,
    DraManager,
    allocation_of,
    claim_name,
    meta,
    pod_claim_refs,
    reserved_for_pod,
    status,
)
from .extended import (
    ASSUME_TIMEOUT,
    creatable,
    has_requests,
    in_memory_claim,
    is_dra_extended_name,
    is_in_memory,
    mapped_requests,
    node_claim,
    requests_and_mappings,
)
from .nodeallocatable import (
    allocation_is_mapped,
    claim_statuses,
    device_for_result,
    node_fits,
    pod_level_covers_claims,
    slices_for_node,
)
from .taintrules import apply_taint_rules

NAME = "DynamicResources"
_NODE_OF = operator.attrgetter("node")
#: resourceapi.FirstAvailableDeviceRequestMaxSize
FIRST_AVAILABLE_MAX = 8
#: seconds between checks while PreBind waits for binding conditions (kube polls every 5 s)
BINDING_POLL = 5.0
#: seconds between the tries of a claim write that conflicted (client-go's retry.DefaultRetry: 10 ms, jitter 0.1)
RETRY_PAUSE = 0.01
_jitter = random.Random()


class Clock:
    """Wall time (allocation timestamps, binding timeouts), monotonic time and sleeping, in one place so that a
    test can run PreBind's minutes-long wait for binding conditions on simulated time."""

    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)
    time = staticmethod(time.time)  # last: the name shadows the module in this class body


def _pause(clock: Clock, seconds: float, cancelled: threading.Event | None) -> bool:
    """Sleep on `clock`; True when `cancelled` was set meanwhile. On wall time the cancellation ends the sleep
    at once, as a cancelled context ends kube's poll; a simulated clock is only checked afterwards."""
    if cancelled is not None and clock.sleep is time.sleep:
        return cancelled.wait(seconds)
    clock.sleep(seconds)
    return cancelled is not None and cancelled.is_set()


@dataclass
class _State:
    claims: list[dict[str, Any]] = field(default_factory=list)
    available_on: list[NodeSelector | None] = field(default_factory=list)
    to_allocate: list[int] = field(default_factory=list)
    allocator: Allocator | None = None
    unavailable: set[int] = field(default_factory=set)
    #: node -> Filter's solution (its build() gives one AllocationResult per claim in to_allocate)
    allocations: dict[str, Any] = field(default_factory=dict)
    #: claim index -> the allocation Reserve picked
    picked: dict[int, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    has_sub_requests: bool = False
    #: the pod's own claims come first in `claims`; the claim for its extended resources (DRAExtendedResource),
    #: in memory or created by an earlier cycle, is at `ext_index` (-1: none)
    n_user: int = 0
    ext_index: int = -1
    ext_initial_uid: str = ""
    #: the pod's scalar requests and the class mapping of this cycle
    ext_requests: dict[str, int] = field(default_factory=dict)
    ext_mapping: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: node -> (the claim as that node needs it, container mappings), from Filter
    ext_nodes: dict[str, tuple[dict[str, Any] | None, list[dict[str, str]]]] = field(default_factory=dict)
    #: the node claims built so far, by the resources they request (nodes that need the same share one object),
    #: with their container mappings and the claims to allocate with them
    ext_variants: dict[tuple[str, ...], tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]] = field(
        default_factory=dict)

    #: the extended-resource claim, whether it has requests, whether it is allocated, and the pod's DRA-style
    #: extended resources in name order with whether a DeviceClass backs each (PreFilter: node-independent)
    ext_facts: tuple[dict[str, Any], bool, bool, list[tuple[str, bool]]] | None = None
    #: the allocated claims, the only ones Filter checks against the node (PreFilter): (index, claim, the nodes
    #: its allocation is available on, it skips node operations, ready for binding: True, False, or None when
    #: a binding condition failed)
    node_checks: list[tuple[int, dict[str, Any], NodeSelector | None, bool, bool | None]] = field(
        default_factory=list)
    #: the claims to allocate when no node-specific extended-resource claim takes the place of one (PreFilter)
    plain_todo: list[dict[str, Any]] = field(default_factory=list)
    #: the batch Filter's snapshot, the node of each row and the passing rows, whose allocations are worked out
    #: on demand
    batch_passed: tuple[Snapshot, list[Any], np.ndarray] | None = None
    #: DRANodeAllocatableResources: the allocated claims with a device mapping node resources that are reserved
    #: for another pod (index, name; PreFilter), the pod's claim reference names -> claim uids, and per node what
    #: the pod's claims take of it (Filter; PreBind writes it to the pod's status)
    na_shared: list[tuple[int, str]] = field(default_factory=list)
    na_claim_uids: dict[str, str] = field(default_factory=dict)
    na_statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def ext_claim(self) -> dict[str, Any] | None:
        return self.claims[self.ext_index] if self.ext_index >= 0 else None

    def clone(self) -> _State:
        return self  # shared by the clones of one cycle, as kube's stateData is


class DynamicResources(Plugin):
    name = NAME
    allow_parallel_pre_bind = True  # kube 1.37: its PreBindPreFlight allows parallel PreBind
    args_model = DynamicResourcesArgs
    #: nothing beyond system:kube-scheduler, which grants what this plugin reads and writes (see DRA_PERMISSIONS)
    rbac: ClassVar[list[dict[str, Any]]] = []

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        if (pod.raw.get("spec") or {}).get("resourceClaims"):
            return Status.unschedulable("pods with dra resource claims are not signable")
        return None

    def __init__(self, args: DynamicResourcesArgs | None = None, handle: Any = None) -> None:
        super().__init__(args if args is not None else DynamicResourcesArgs(), handle)
        self.features = Features.from_gates(getattr(handle, "feature_gates", None))
        self.taint_rules = self.args.device_taint_rules  # DRADeviceTaintRules (see taintrules.py)
        self.dra_extended = self.args.extended_resource  # DRAExtendedResource, read once per plugin
        ft = self.args.filter_timeout
        # DRASchedulerFilterTimeout: without it Filter's search runs unbounded, as in kube
        self.filter_timeout = decode_duration(ft) if ft is not None and self.args.filter_timeout_gate else 0.0
        bt = self.args.binding_timeout
        self.binding_timeout = decode_duration(bt) if bt is not None else 600.0
        #: DRADeviceBindingConditions and DRAResourceClaimDeviceStatus: without them kube neither checks an
        #: allocated claim's binding conditions in Filter nor waits for them in PreBind
        self.binding_conditions = self.features.device_binding_and_status
        self.cel_cache = CelCache(10)
        self._mgr: DraManager | None = None
        if handle is not None and getattr(handle, "cluster", None) is not None:
            self._mgr = DraManager.for_handle(handle)
        #: CEL inputs of slice devices, reused across cycles (keyed by the device dict's id, checked by identity)
        self._device_inputs: dict[int, Any] = {}
        #: pools per node and selector verdicts per device, rebuilt when a ResourceSlice changes
        self._caches = SliceCaches()
        self._caches_version = -1
        #: the batch Filter's devices of every node (batch.py), kept while the slices and nodes stay
        self._table: DeviceTable | None = None
        self.binding_poll = BINDING_POLL
        self.assume_timeout = ASSUME_TIMEOUT
        #: (old rule, new rule, hint) of the last DeviceTaintRule event the hint judged
        self._rule_memo: tuple[Any, Any, int] | None = None
        self.clock = Clock()
        #: kube 1.37 keeps an allocation in flight until PreBind succeeds (a failed one leaves it to Unreserve);
        #: 1.36 took it out of flight as soon as it had tried to write it
        self._in_flight_until_bound = minor_at_least(getattr(handle, "feature_gates", None), (1, 37))
        #: kube 1.37's Filter, whatever the gates: a device allocated with skipNodeOperations (written by an API
        #: server with DRAOptionalNodeOperations) is usable only on a node declaring that feature
        self._optional_node_ops = self._in_flight_until_bound
        gates = getattr(handle, "feature_gates", None) or {}
        #: DRANodeAllocatableResources (alpha in 1.37): devices may take node cpu, memory and hugepages
        self.node_allocatable = bool(gates.get("DRANodeAllocatableResources", False))
        #: PodLevelResources (validatePodLevelResourcesCoverDRA and the pod's footprint read it)
        self.pod_level_resources = bool(gates.get("PodLevelResources", True))

    @property
    def mgr(self) -> DraManager:
        if self._mgr is None:
            self._mgr = DraManager.for_handle(self.handle)
        return self._mgr

    # ------------------------------------------------------------------ PreEnqueue
    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod_claim_refs(pod):
            return None
        try:
            self.mgr.pod_claims(pod)
        except ClaimNotUsable as exc:
            return Status.unresolvable(str(exc))
        return None

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None,
                                                                                  Status | None]:
        s = _State()
        state.write(NAME, s)
        claims: list[dict[str, Any]] = []
        if pod_claim_refs(pod):
            try:
                claims = self.mgr.pod_claims(pod)
            except ClaimNotUsable as exc:
                return None, Status.unresolvable(str(exc))
        s.n_user = len(claims)
        ext = self._pre_filter_extended(pod, s)
        if ext is not None:
            s.ext_index = len(claims)
            s.ext_initial_uid = str(meta(ext).get("uid") or "")
            claims = [*claims, ext]
        if not claims:
            return None, Status.skip()
        s.available_on = [None] * len(claims)
        for i, claim in enumerate(claims):
            alloc = allocation_of(claim)
            m = meta(claim)
            ck = f"{m.get('namespace') or 'default'}/{m.get('name') or ''}"
            if alloc is not None:
                sel = alloc.get("nodeSelector")
                if sel is not None:
                    try:
                        s.available_on[i] = NodeSelector(sel, "status.allocation.nodeSelector")
                    except Exception as exc:  # noqa: BLE001 - kube: statusError
                        return None, Status.as_error(str(getattr(exc, "detail", exc)))
                continue
            s.to_allocate.append(i)
            if self.mgr.has_pending(str(m.get("uid") or "")):
                return None, Status.unresolvable(f"resource claim {ck} is in the process of being allocated")
            if i == s.ext_index:
                continue  # its requests depend on the node: Filter builds them
            for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                rname = str(req.get("name") or "")
                if req.get("exactly") is not None:
                    st = self._validate_class(str(req["exactly"].get("deviceClassName") or ""), rname)
                    if st is not None:
                        return None, st
                elif req.get("firstAvailable"):
                    for sub in req["firstAvailable"]:
                        st = self._validate_class(str(sub.get("deviceClassName") or ""),
                                                  f"{rname}/{sub.get('name') or ''}")
                        if st is not None:
                            return None, st
                else:
                    return None, Status.unresolvable(f"resource claim {ck}, request {rname}: unknown request type")
        if s.to_allocate:
            mgr = self.mgr
            slices = mgr.device_slices(self.taint_rules)
            if (self._caches_version != mgr.slices_version or len(self._caches.matches) > 500_000
                    or len(self._caches.eligible) > 500_000):
                self._caches, self._caches_version = SliceCaches(), mgr.slices_version
                self._device_inputs.clear()
            allocated = mgr.allocated()
            if not self.features.consumable_capacity:
                allocated = allocated.all_dedicated()
            s.allocator = Allocator(features=self.features, allocated=allocated,
                                    class_lister=lambda n: mgr.classes.get(n), slices=slices,
                                    cel_cache=self.cel_cache, device_inputs=self._device_inputs,
                                    caches=self._caches, allocated_capacity=allocated.capacity,
                                    shared_devices=allocated.shared)
        s.claims = claims
        if self.node_allocatable:
            self._pre_filter_node_allocatable(pod, s)
        self._node_independent_facts(s)
        # Score counts the alternatives chosen for every claim, allocated earlier or in this cycle
        s.has_sub_requests = any(req.get("firstAvailable") for c in claims
                                 for req in ((c.get("spec") or {}).get("devices") or {}).get("requests") or [])
        return None, None

    def _pre_filter_node_allocatable(self, pod: Pod, s: _State) -> None:
        """claimHasNodeAllocatableMappedDevice for the allocated claims, kept as the ones Filter refuses to share
        (reserved for someone other than this pod), and the pod's claim names -> uids."""
        slices: list[dict[str, Any]] | None = None
        for i, claim in enumerate(s.claims):
            alloc = allocation_of(claim)
            if alloc is None:
                continue
            if slices is None:
                slices = self.mgr.device_slices(self.taint_rules)
            rf = status(claim).get("reservedFor") or []
            if allocation_is_mapped(alloc, slices) and rf and not reserved_for_pod(claim, pod):
                s.na_shared.append((i, str(meta(claim).get("name") or "")))
        for ref in pod_claim_refs(pod):
            name, _ = claim_name(pod, ref)
            if name is None:
                continue
            claim = self.mgr.get_claim(pod.namespace, name)
            if claim is not None:
                s.na_claim_uids[str(ref.get("name") or "")] = str(meta(claim).get("uid") or "")

    def _shared_refusal(self, s: _State, node: Any) -> Status | None:
        """Filter's validateNodeAllocatableDRAClaimSharing, for the claims kube's loop reaches on this node (not
        those allocated for other nodes or skipping node operations it does not declare)."""
        if not s.na_shared:
            return None
        skipped = {i for i, _, sel, skips, _ in s.node_checks if _not_here(sel, skips, node)}
        for i, name in s.na_shared:
            if i not in skipped:
                return Status.unresolvable(f"node allocatable resource claim {name} has a mapped device and cannot "
                                           "be shared across pods")
        return None

    def _node_allocatable_check(self, s: _State, pod: Pod, node_info: NodeInfo, todo: list[dict[str, Any]],
                                allocations: Any) -> tuple[list[dict[str, Any]] | None, Status | None]:
        """calculateAndCheckNodeAllocatableResources: what the pod's claims (allocated, or as allocated here) take
        of the node, checked with the pod's own requests against the node's free resources."""
        node = node_info.node
        built = allocations.build() if allocations is not None else []
        by_uid = {str(meta(c).get("uid") or ""): a for c, a in zip(todo, built, strict=False)}
        node_slices = slices_for_node(self.mgr.device_slices(self.taint_rules), node)
        chosen: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for claim in s.claims:
            alloc = by_uid.get(str(meta(claim).get("uid") or "")) or allocation_of(claim)
            if not alloc:
                continue
            for r in (alloc.get("devices") or {}).get("results") or []:
                try:
                    device = device_for_result(node_slices, r, node)
                except LookupError:
                    continue  # kube logs it and looks at the next device
                if device.get("nodeAllocatableResources"):
                    chosen.append((claim, alloc))
                    break
        if not chosen:
            return None, None
        try:
            statuses = claim_statuses(pod.raw, chosen, s.na_claim_uids, node_slices, node)
        except ValueError as exc:
            return None, Status.as_error(str(exc))
        spec = pod.raw.get("spec") or {}
        if not self.pod_level_resources:
            spec = {k: v for k, v in spec.items() if k != "resources"}
        claims = claim_resources(statuses) or None
        demand = pod_requests(spec, claims=claims)
        st = pod_level_covers_claims(pod.raw, statuses, self.pod_level_resources)
        if st is not None:
            return None, st
        st = node_fits(demand, node_info.allocatable, node_info.requested)
        if st is not None:
            return None, st
        return statuses, None

    def _node_independent_facts(self, s: _State) -> None:
        """What Filter would otherwise work out again on every node: the claims to allocate, the checks an
        allocated claim needs per node, and the extended-resource claim's facts."""
        claims = s.claims
        s.plain_todo = [claims[i] for i in s.to_allocate]
        checks = []
        for i, claim in enumerate(claims):
            if allocation_of(claim) is None:
                continue  # nothing to check per node: no node selector, no devices skipping node operations
            ready: bool | None = True  # with DRADeviceBindingConditions off, kube checks no conditions
            if self.binding_conditions:
                try:
                    ready = _ready_for_binding(claim)
                except ValueError:
                    ready = None
            checks.append((i, claim, s.available_on[i], self._optional_node_ops and _skips_node_operations(claim),
                           ready))
        s.node_checks = checks
        ext = s.ext_claim()
        if ext is not None:
            names = [(name, name in s.ext_mapping) for name, want in sorted(s.ext_requests.items())
                     if want and is_dra_extended_name(name)]
            s.ext_facts = (ext, has_requests(ext), allocation_of(ext) is not None, names)

    def _pre_filter_extended(self, pod: Pod, s: _State) -> dict[str, Any] | None:
        """preFilterExtendedResources: when the pod requests an extended resource some DeviceClass backs, the
        claim an earlier cycle created for it, or a new one in memory (PreBind creates it)."""
        if getattr(self.handle, "cluster", None) is None or not any("/" in n for n in pod.requests) or \
                not self.dra_extended:
            return None
        mapping = self.mgr.resolver.mapping()
        if not mapping or not mapped_requests(pod, mapping):
            return None
        s.ext_requests = dict(pod.requests)
        s.ext_mapping = mapping
        found = self.mgr.extended_claim(pod)
        if found is not None:
            return self.mgr.get_claim(pod.namespace, str(meta(found).get("name") or "")) or found
        return in_memory_claim(pod)

    def _filter_extended(self, s: _State, pod: Pod, node_info: NodeInfo
                         ) -> tuple[tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]] | None,
                                    Status | None]:
        """filterExtendedResources: the pod's claim with the requests this node must satisfy through DRA (the
        extended resources it does not advertise), its container mappings and the claims to allocate with it;
        None when there is nothing to allocate for it here."""
        facts = s.ext_facts
        if facts is None:
            return None, None
        if facts[1]:
            # created by an earlier cycle: PostFilter deletes it and the pod starts anew
            return None, Status.unresolvable("cannot schedule extended resource claim")
        alloc = node_info.allocatable
        needed = []
        for name, backed in facts[3]:
            if backed and alloc.get(name, 0) == 0:
                needed.append(name)
            elif name not in alloc:
                return None, Status.unresolvable("cannot fit resource")
        if (s.n_user == 0 and not needed) or facts[2]:
            return None, None
        return self._ext_variant(s, pod, needed), None

    @staticmethod
    def _ext_variant(s: _State, pod: Pod, needed: list[str]
                     ) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
        """The claim for the extended resources `needed` through DRA, its container mappings and the claims to
        allocate with it: one object per set of names, shared by the nodes that need it."""
        key = tuple(needed)
        hit = s.ext_variants.get(key)
        if hit is None:
            with s.lock:
                hit = s.ext_variants.get(key)
                if hit is None:
                    requests, mappings = requests_and_mappings(pod, needed, s.ext_mapping)
                    claim = node_claim(s.claims[s.ext_index], requests)
                    todo = [claim if i == s.ext_index else s.claims[i] for i in s.to_allocate]
                    hit = s.ext_variants[key] = (claim, mappings, todo)
        return hit

    def _validate_class(self, class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return Status.as_error(f"request {request_name}: unsupported request type")
        if self.mgr.classes.get(class_name) is None:
            return Status.unresolvable(f"request {request_name}: device class {class_name} does not exist")
        return None

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(NAME)
        if s is None:
            return Status.as_error("not found")
        if not s.claims:
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found")
        todo = s.plain_todo
        variant = None
        if s.ext_index >= 0:
            variant, st = self._filter_extended(s, pod, node_info)
            if st is not None:
                return st
            if variant is not None:
                todo = variant[2]
            elif s.n_user == 0:
                return None  # only extended resources, all from device plugins on this node
        if self.node_allocatable:
            st = self._shared_refusal(s, node)
            if st is not None:
                return st
        unavailable = self._unavailable_on(s, node) if s.node_checks else None
        allocations = None
        if s.allocator is not None:
            deadline = time.monotonic() + self.filter_timeout if self.filter_timeout > 0 else None
            try:
                allocations = s.allocator.search(node, todo, deadline)
            except NodeAllocationFailure as exc:
                return Status.unresolvable(str(exc))
            except AllocationError as exc:
                if str(exc).startswith("filter operation aborted"):
                    # an Error, so the pod retries after backoff: the timeout may be transient (kube 1.36, 1.37)
                    return Status.as_error(f"node {node.name}: timed out trying to allocate devices")
                return Status.as_error(str(exc))
            if allocations is None:
                return Status.unresolvable("cannot allocate all claims")
        statuses = None
        if self.node_allocatable:
            statuses, st = self._node_allocatable_check(s, pod, node_info, todo, allocations)
            if st is not None:
                return st
        if unavailable:
            with s.lock:
                s.unavailable.update(unavailable)
            return Status.unresolvable("resourceclaim not available on the node")
        if allocations is not None or statuses:
            with s.lock:
                if allocations is not None:
                    s.allocations[node.name] = allocations
                    s.ext_nodes[node.name] = (variant[0], variant[1]) if variant is not None else (None, [])
                if statuses:
                    s.na_statuses[node.name] = statuses
        return None

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        """Filter on every node at once where no search of the node is needed (see batch.py); the others are
        `pending`, so the framework asks `filter` for each, in kube's walk order, as it would without this."""
        n = len(snapshot)
        s: _State | None = state.get(NAME)
        got = None
        # with DRANodeAllocatableResources a node's verdict also depends on its free resources: `filter` decides
        if s is not None and s.claims and not self.node_allocatable:
            got = self._batch(s, pod, snapshot) if not s.node_checks else self._allocated_batch(s, snapshot)
        if got is None:
            return FilterBatch(np.zeros(n, dtype=bool), Status.as_error("not decided"), pending=np.ones(n, dtype=bool))
        return got

    def _allocated_batch(self, s: _State, snapshot: Snapshot) -> FilterBatch | None:
        """`filter`'s verdicts when every claim is allocated already and only their node selectors matter (no
        extended resources, no devices skipping node operations, no binding conditions pending or unreadable):
        a node passes where every selector matches it. A term naming its nodes (`metadata.name In`) is checked
        on those nodes only, the others cannot match it. A rejected node's claims become `unavailable` (what
        PostFilter may deallocate) when the framework asks for that node's Status, i.e. on the nodes where
        `filter` would have run and rejected. None (per node, then) in the other cases."""
        if s.allocator is not None or s.ext_index >= 0 or s.plain_todo:
            return None
        if any(skips or ready is not True for _, _, _, skips, ready in s.node_checks):
            return None
        infos = snapshot.node_infos
        n = len(infos)
        nodes = list(map(_NODE_OF, infos))
        if any(node is None for node in nodes):
            return None
        ok = np.ones(n, dtype=bool)
        misses: list[tuple[int, np.ndarray]] = []  # (claim index, the rows its selector rejects)
        for i, _claim, sel, _skips, _ready in s.node_checks:
            if sel is None:
                continue
            match = np.zeros(n, dtype=bool)
            for term in sel.terms:
                names = term.name_values
                if names is None:
                    match |= np.fromiter(map(term.matches, nodes), dtype=bool, count=n)
                    continue
                for name in names:
                    ni = snapshot.get(name)
                    if ni is not None and 0 <= ni.row < n and infos[ni.row] is ni and term.matches(nodes[ni.row]):
                        match[ni.row] = True
            if not match.all():
                misses.append((i, ~match))
            ok &= match
        if not misses:
            return FilterBatch(ok, Status.unresolvable("resourceclaim not available on the node"))
        rejected = Status.unresolvable("resourceclaim not available on the node")

        def status_at(row: int) -> Status:
            # asked for the rows whose verdict is this plugin's, those `filter` would have been called on
            with s.lock:
                s.unavailable.update(i for i, miss in misses if miss[row])
            return rejected

        def keys() -> np.ndarray:
            # rows missing the same claims add the same ones to `unavailable`: one status_at call for them all
            k = np.zeros(n, dtype=np.int64)
            for bit, (_, miss) in enumerate(misses):
                k |= miss.astype(np.int64) << bit
            return k
        return FilterBatch(ok, status_at, keys if len(misses) < 63 else None)

    def _batch(self, s: _State, pod: Pod, snapshot: Snapshot) -> FilterBatch | None:
        """The verdicts `filter` gives, for the nodes where the batch can tell (None: it cannot tell any)."""
        n = len(snapshot)
        groups = self._batch_groups(s, pod, snapshot)
        if groups is None:
            return None
        if isinstance(groups, Status):
            return FilterBatch(np.zeros(n, dtype=bool), groups)
        ok = np.zeros(n, dtype=bool)
        fail = np.zeros(n, dtype=bool)
        a = s.allocator
        nodes = list(map(_NODE_OF, snapshot.node_infos))
        table: DeviceTable | None = None
        free: tuple[np.ndarray, np.ndarray] | None = None
        for rows, todo in groups:
            if todo is None or a is None:  # nothing to allocate on these nodes
                ok |= rows
                continue
            try:
                rd = a.plain_request(nodes[int(np.argmax(rows))], todo)
            except AllocationError:
                continue  # every node reports it: left to them, the first one walked ends the cycle
            if rd is None:
                continue
            if table is None:
                table = self._table = table_for(a, nodes, self._table)
                if not table.usable or (free := table.free(a.allocated)) is None:
                    return None
            got = table.decide(a, rd, todo, free) if free is not None else None
            if got is not None:
                ok |= got[0] & rows
                fail |= got[1] & rows
        pending = ~(ok | fail)
        s.batch_passed = (snapshot, nodes, ok)
        return FilterBatch(ok, Status.unresolvable("cannot allocate all claims"),
                           pending=pending if pending.any() else None)

    def _batch_groups(self, s: _State, pod: Pod, snapshot: Snapshot
                      ) -> list[tuple[np.ndarray, list[dict[str, Any]] | None]] | Status | None:
        """The nodes by the claims `filter` would allocate on them (None: none, the node passes), as
        `_filter_extended` decides from each node's allocatable; a Status when it rejects every node alike, None
        when the table cannot tell (a DRA-style extended resource no DeviceClass backs)."""
        n = len(snapshot)
        every = np.ones(n, dtype=bool)
        plain = None if s.ext_index >= 0 and s.n_user == 0 else s.plain_todo
        facts = s.ext_facts
        if s.ext_index < 0 or facts is None:
            return [(every, plain)]
        if facts[1]:
            return Status.unresolvable("cannot schedule extended resource claim")
        names = facts[3]
        if not all(backed for _, backed in names) or len(names) > 60:
            return None
        if facts[2]:
            return [(every, plain)]
        table = snapshot.table
        bits = np.zeros(n, dtype=np.int64)
        for j, (name, _) in enumerate(names):
            col = table.columns.get(name)
            if col is None:
                bits |= 1 << j
            else:
                bits |= (table.alloc[:n, col] == 0).astype(np.int64) << j
        groups: list[tuple[np.ndarray, list[dict[str, Any]] | None]] = []
        keys = [int(bits[0])] if n and bits.min() == bits.max() else np.unique(bits).tolist()
        for key in keys:
            needed = [names[j][0] for j in range(len(names)) if key >> j & 1]
            todo = None if s.n_user == 0 and not needed else self._ext_variant(s, pod, needed)[2]
            groups.append((bits == key, todo))
        return groups

    def _materialize(self, state: CycleState, pod: Pod, s: _State, node_name: str) -> None:
        """The allocation of a node the batch Filter passed, worked out as `filter` would have on it."""
        passed = s.batch_passed
        if passed is None:
            return
        snapshot, nodes, ok = passed
        ni = snapshot.get(node_name)
        if ni is not None and 0 <= ni.row < len(ok) and ok[ni.row] and nodes[ni.row] is ni.node:
            self.filter(state, pod, ni)

    def _unavailable_on(self, s: _State, node: Any) -> list[int]:
        """The allocated claims the pod cannot use on this node: allocated for other nodes, skipping node
        operations the node does not declare, or with binding conditions failed or timed out."""
        out = []
        now: float | None = None
        for i, claim, sel, skips, ready in s.node_checks:
            if _not_here(sel, skips, node) or ready is None:
                out.append(i)
            elif not ready:
                if now is None:
                    now = self.clock.time()
                if self._binding_timed_out(claim, now):
                    out.append(i)
        return out

    @staticmethod
    def _binding_timed_out_at(claim: dict[str, Any], timeout: float, now: float) -> bool:
        alloc = allocation_of(claim) or {}
        ts = alloc.get("allocationTimestamp")
        if not ts:
            return False
        if not any(r.get("bindingConditions") for r in (alloc.get("devices") or {}).get("results") or []):
            return False
        return _parse_time(ts) + timeout < now

    def _binding_timed_out(self, claim: dict[str, Any], now: float) -> bool:
        """kube's isClaimTimeout (never, with the binding-conditions gates off)."""
        return self.binding_conditions and self._binding_timed_out_at(claim, self.binding_timeout, now)

    # ------------------------------------------------------------------ PostFilter
    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        s: _State | None = state.get(NAME)
        if s is None:
            return None, Status.as_error("not found")
        if not s.claims:
            return None, self._post_filter_miss("no new claims to deallocate")
        ext = s.ext_claim()
        for i in list(s.unavailable):
            claim = s.claims[i]
            if i == s.ext_index:
                if not is_in_memory(ext):
                    break  # deleted below
                continue
            rf = status(claim).get("reservedFor") or []
            if not rf or (len(rf) == 1 and rf[0].get("uid") == pod.uid):
                m = meta(claim)
                try:
                    self.handle.cluster.patch_object(
                        CLAIMS, m.get("name", ""), m.get("namespace") or "default",
                        {"metadata": {"resourceVersion": m.get("resourceVersion")},
                         "status": {"reservedFor": None, "allocation": None, "devices": None}},
                        subresource="status")
                except Exception as exc:  # noqa: BLE001 - kube: statusError
                    return None, Status.as_error(str(exc))
                return None, Status.unschedulable("deallocation of ResourceClaim completed")
        if ext is not None and not is_in_memory(ext):
            # created by an earlier cycle (its pod was not bound): delete it so the next attempt starts anew
            try:
                self._delete_claim(ext)
            except Exception as exc:  # noqa: BLE001 - kube: statusError
                return None, Status.as_error(str(exc))
            return None, Status.unschedulable("deletion of ResourceClaim completed")
        return None, self._post_filter_miss("still not schedulable")

    def _post_filter_miss(self, reason: str) -> Status:
        """Unschedulable with kube 1.36's reason; kube 1.37 gives none (so the FailedScheduling message has no
        DynamicResources part before `preemption:`). The minor is the emulated one (`--emulated-version`)."""
        from ...featuregates import emulated_minor

        if tuple(int(p) for p in emulated_minor(getattr(self.handle, "feature_gates", None)).split(".")) >= (1, 37):
            return Status.unschedulable()
        return Status.unschedulable(reason)

    def _refetched(self, name: str, ns: str, context: str, error: type[Exception]) -> dict[str, Any]:
        """After a write conflict, client-go's retry.DefaultRetry pause (10 ms, up to 10% more), then the claim as
        the API server holds it: kube GETs it, since the informer's copy may not have caught up with the write
        that won, and retrying on that copy only conflicts again. A failed read raises `error`, `context` first."""
        from ...cluster.base import PatchError

        self.clock.sleep(RETRY_PAUSE * (1 + 0.1 * _jitter.random()))
        try:
            fresh: dict[str, Any] = self.handle.cluster.get_object(CLAIMS, name, ns)
        except PatchError as exc:
            why = f'resourceclaims.resource.k8s.io "{name}" not found' if exc.status == 404 else str(exc)
            raise error(f"{context}: {why}") from None
        return fresh

    def _current(self, name: str, ns: str) -> dict[str, Any] | None:
        """The claim as the API server holds it, None when it cannot be read (gone, or the read failed)."""
        from ...cluster.base import PatchError

        try:
            fresh: dict[str, Any] = self.handle.cluster.get_object(CLAIMS, name, ns)
        except PatchError:
            return None
        return fresh

    def _delete_claim(self, claim: dict[str, Any]) -> None:
        """deleteClaim: remove the delete-protection finalizer (retrying on conflict), then delete (a claim
        already gone is an error in 1.36; 1.37 ignores it)."""
        from ...cluster.base import PatchError

        m = meta(claim)
        ns, name = m.get("namespace") or "default", str(m.get("name") or "")
        cluster = self.handle.cluster
        for attempt in range(5):
            if attempt:
                claim = self._refetched(name, ns, f"get resourceclaim {ns}/{name}", ValueError)
                m = meta(claim)
            fins = list(m.get("finalizers") or [])
            if FINALIZER not in fins:
                break
            fins.remove(FINALIZER)
            try:
                cluster.patch_object(CLAIMS, name, ns, {"metadata": {"resourceVersion": m.get("resourceVersion"),
                                                                     "finalizers": fins or None}})
                break
            except PatchError as exc:
                if exc.status != 409:
                    raise ValueError(f"update resourceclaim {ns}/{name}: {exc}") from None
        else:
            raise ValueError(f"update resourceclaim {ns}/{name}: Operation cannot be fulfilled on "
                             f'resourceclaims.resource.k8s.io "{name}": the object has been modified; please apply '
                             f"your changes to the latest version and try again")
        cluster.delete_object(CLAIMS, name, ns)

    # ------------------------------------------------------------------ Score
    def _score_for(self, s: _State, node_name: str) -> int:
        """kube's computeScore: FirstAvailableDeviceRequestMaxSize - index for each chosen alternative of every
        claim of the pod, the allocation of a claim allocated earlier (one shared with other pods) included;
        nothing on a node without an allocation from this cycle's Filter."""
        solution = s.allocations.get(node_name)
        if solution is None:
            return 0
        allocations = solution.build()
        position = {ci: pos for pos, ci in enumerate(s.to_allocate)}
        score = 0
        for ci, claim in enumerate(s.claims):
            alloc = allocation_of(claim)
            if alloc is None:
                pos = position.get(ci)
                if pos is None or pos >= len(allocations):
                    continue
                alloc = allocations[pos]
            picked = {r.get("request") for r in ((alloc.get("devices") or {}).get("results") or [])
                      if "/" in str(r.get("request") or "")}
            for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                for k, sub in enumerate(req.get("firstAvailable") or []):
                    if f"{req.get('name')}/{sub.get('name')}" in picked:
                        score += FIRST_AVAILABLE_MAX - k
        return score

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        s: _State | None = state.get(NAME)
        if s is None or not s.claims or not s.has_sub_requests:
            return 0
        return self._score_for(s, node_info.name)

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        s: _State | None = state.get(NAME)
        if s is None or not s.claims or not s.has_sub_requests:
            return np.zeros(len(rows), dtype=np.int64)
        infos = snapshot.node_infos
        return np.fromiter((self._score_for(s, infos[r].name) for r in rows.tolist()), dtype=np.int64,
                           count=len(rows))

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> None:
        arr = np.array([x.score for x in scores], dtype=np.int64)
        for x, v in zip(scores, default_normalize(arr, reverse=False).tolist(), strict=True):
            x.score = v

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=False)

    # ------------------------------------------------------------------ Reserve / Unreserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(NAME)
        if s is None:
            return Status.as_error("not found")
        if not s.claims or not s.to_allocate:
            return None
        if s.allocator is None:
            return None
        if node_name not in s.allocations:
            self._materialize(state, pod, s, node_name)
        solution = s.allocations.get(node_name)
        allocations = solution.build() if solution is not None else []
        if not allocations:
            if not any(i != s.ext_index for i in s.to_allocate):
                return None  # only extended resources, all from device plugins on this node
            return Status.as_error("claim allocation not found for node")
        if len(allocations) != len(s.to_allocate):
            return Status.as_error(f"internal error, have {len(allocations)} allocations, {len(s.to_allocate)} "
                                   f"claims to allocate, want {len(s.to_allocate)} claims")
        for pos, ci in enumerate(s.to_allocate):
            alloc = allocations[pos]
            s.picked[ci] = alloc
            claim = s.claims[ci]
            if ci == s.ext_index:
                claim = s.ext_nodes.get(node_name, (None, []))[0] or claim
            m = dict(meta(claim))
            fins = list(m.get("finalizers") or [])
            if FINALIZER not in fins:
                fins.append(FINALIZER)
            m["finalizers"] = fins
            pending = {**claim, "metadata": m, "status": {**status(claim), "allocation": alloc}}
            self.mgr.signal_pending(str(m.get("uid") or ""), pending)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s: _State | None = state.get(NAME)
        if s is None or not s.claims:
            return
        for claim in s.claims[:s.n_user]:
            m = meta(claim)
            self.mgr.remove_pending(str(m.get("uid") or ""))
            if allocation_of(claim) is not None and reserved_for_pod(claim, pod):
                self._remove_reservation(claim, pod)
        self._unreserve_extended(s)
        if self.node_allocatable and s.na_statuses.get(node_name):
            self._clear_node_allocatable_status(pod)

    def _unreserve_extended(self, s: _State) -> None:
        ext = s.ext_claim()
        if ext is None:
            return
        self.mgr.remove_pending(s.ext_initial_uid)
        if is_in_memory(ext):
            return
        # created in the API (by PreBind, or by an earlier cycle): delete it so nothing is left behind
        try:
            self._delete_claim(ext)
        except Exception as exc:  # noqa: BLE001 - kube only logs it
            self.handle.logger.error("delete resourceclaim %s/%s: %s", meta(ext).get("namespace"),
                                     meta(ext).get("name"), exc)

    def _remove_reservation(self, claim: dict[str, Any], pod: Pod) -> None:
        """Take the pod out of `status.reservedFor` (kube: a strategic-merge `$patch: delete` by uid); a merge
        patch replaces the list, so it is built from the API server's latest claim and retried on conflict."""
        from ...cluster.base import PatchError

        m = meta(claim)
        ns, name = m.get("namespace") or "default", str(m.get("name") or "")
        for _ in range(3):
            rf = [r for r in status(claim).get("reservedFor") or [] if r.get("uid") != pod.uid]
            try:
                self.handle.cluster.patch_object(
                    CLAIMS, name, ns, {"metadata": {"resourceVersion": meta(claim).get("resourceVersion")},
                                       "status": {"reservedFor": rf or None}}, subresource="status")
                return
            except PatchError as exc:
                fresh = self._current(name, ns) if exc.status == 409 else None
                if fresh is None or meta(fresh).get("uid") != m.get("uid") or not reserved_for_pod(fresh, pod):
                    if exc.status != 409:
                        self.handle.logger.error("unreserve %s/%s: %s", ns, name, exc)
                    return
                claim = fresh
            except Exception as exc:  # noqa: BLE001 - kube only logs it; the next attempt retries
                self.handle.logger.error("unreserve %s/%s: %s", ns, name, exc)
                return

    # ------------------------------------------------------------------ PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """kube's PreBindPreFlight: PreBind has work whenever the pod has claims (its own or the one for its
        extended resources)."""
        s: _State | None = state.get(NAME)
        if s is None:
            return Status.as_error("not found")
        return None if s.claims else Status.skip()

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(NAME)
        if s is None:
            return Status.as_error("not found")
        if not s.claims:
            return None
        written: list[str] = []  # uids of the allocations in flight that this PreBind wrote
        for i, claim in enumerate(s.claims):
            if reserved_for_pod(claim, pod):
                continue
            uid = str(meta(claim).get("uid") or "")  # the extended resources' claim: its in-memory uid
            try:
                s.claims[i] = self._bind_claim(s, i, pod, node_name)
            except _BindError as exc:
                return Status.as_error(str(exc))
            if i in s.picked:
                written.append(uid)
        statuses = s.na_statuses.get(node_name) if self.node_allocatable else None
        if statuses:
            st = self._patch_node_allocatable_status(pod, statuses)
            if st is not None:
                return st
        st = self._wait_for_binding_conditions(s, pod, node_name, state.pre_bind_cancelled)
        if st is None and self._in_flight_until_bound:
            for uid in written:  # kube 1.37: only a successful PreBind ends them; on failure Unreserve does
                self.mgr.remove_pending(uid)
        return st

    def _patch_node_allocatable_status(self, pod: Pod, statuses: list[dict[str, Any]]) -> Status | None:
        """patchNodeAllocatableResourceClaimStatus: what the pod's claims take of its node, in its status (kube
        also checks that the assumed pod carries the same; here the cache's assumed copy is built from them)."""
        body = {"status": {"nodeAllocatableResourceClaimStatuses": [dict(x) for x in statuses]}}
        try:
            self.handle.cluster.patch_object("pods", pod.name, pod.namespace, body, subresource="status")
        except Exception as exc:  # noqa: BLE001 - kube: the error ends PreBind
            return Status.as_error(f"updating pod {pod.namespace}/{pod.name} NodeAllocatableResourceClaimStatuses: "
                                   f"{exc}")
        return None

    def _clear_node_allocatable_status(self, pod: Pod) -> None:
        """clearNodeAllocatableResourceClaimStatus: an explicit empty list, with the pod's uid as precondition;
        a failure is only logged."""
        body = {"metadata": {"uid": pod.uid}, "status": {"nodeAllocatableResourceClaimStatuses": []}}
        try:
            self.handle.cluster.patch_object("pods", pod.name, pod.namespace, body, subresource="status")
        except Exception as exc:  # noqa: BLE001 - kube only logs it
            self.handle.logger.error("Failed to clear NodeAllocatableResourceClaimStatuses on Unreserve: pod %s: %s",
                                     pod.key, exc)

    def _wait_for_binding_conditions(self, s: _State, pod: Pod, node_name: str,
                                     cancelled: threading.Event | None = None) -> Status | None:
        """When a device has binding conditions, wait until they all hold, one fails, time runs out, or a PreBind
        plugin running beside this one failed (`cancelled`: the wait ends as a cancelled context does). With the
        binding-conditions gates off kube's PreBind ends before this, whatever the allocation says."""
        if not self.binding_conditions or not any(r.get("bindingConditions") for c in s.claims
                   for r in ((allocation_of(c) or {}).get("devices") or {}).get("results") or []):
            return None
        self.handle.record_event(pod, "Normal", "BindingConditionsPending", "Scheduling",
                                 f"waiting for binding conditions for device on node {node_name}")
        clock = self.clock
        start = clock.monotonic()
        deadline = start + self.binding_timeout
        label, error = BC_SUCCESS, ""
        check_at = start
        while True:  # kube's wait.PollUntilContextTimeout: now, then every poll interval before the deadline
            if cancelled is not None and cancelled.is_set():
                label, error = BC_ERROR, "context canceled"
                break
            try:
                if self._pod_ready_for_binding(s):
                    break
            except _BindingOutcome as exc:
                label, error = exc.label, str(exc)
                break
            check_at += self.binding_poll
            if check_at >= deadline:  # no check at the deadline itself: the context ends the wait
                if _pause(clock, max(0.0, deadline - clock.monotonic()), cancelled):
                    label, error = BC_ERROR, "context canceled"
                    break
                label, error = BC_TIMEOUT, "device binding timeout: context deadline exceeded"
                break
            _pause(clock, max(0.0, check_at - clock.monotonic()), cancelled)
        self._observe_binding_conditions(s, label, clock.monotonic() - start)
        return Status.as_error(error) if error else None

    def _observe_binding_conditions(self, s: _State, label: str, seconds: float) -> None:
        """kube's scheduler_dra_bindingconditions_wait_duration_seconds (one observation per allocated device
        of every claim) and scheduler_dra_bindingconditions_allocations_total (one per device with binding
        conditions), labelled with the wait's outcome."""
        fw = getattr(self.handle, "framework", None)
        metrics = getattr(fw, "metrics", None)
        if metrics is None or not hasattr(metrics, "dra_binding_conditions"):
            return
        profile = str(getattr(fw, "profile_name", "") or "")
        for claim in s.claims:
            alloc = allocation_of(claim)
            if alloc is None:
                continue
            for r in (alloc.get("devices") or {}).get("results") or []:
                metrics.dra_binding_conditions_wait.labels(profile, str(r.get("driver") or ""), label).observe(seconds)
                if r.get("bindingConditions"):
                    metrics.dra_binding_conditions.labels(profile, str(r.get("driver") or ""), label).inc()

    def _pod_ready_for_binding(self, s: _State) -> bool:
        """isPodReadyForBinding: re-read every claim; a failure condition or a claim past its binding timeout
        ends the wait (_BindingOutcome with kube's error text and metric label)."""
        now = self.clock.time()
        for i, claim in enumerate(s.claims):
            m = meta(claim)
            cur = self.mgr.get_claim(m.get("namespace") or "default", m.get("name", ""))
            if cur is None:
                raise _BindingOutcome(BC_ERROR, f'resourceclaim.resource.k8s.io "{m.get("name")}" not found')
            s.claims[i] = cur
            if not _ready_for_binding(cur):
                if self._binding_timed_out(cur, now):
                    raise _BindingOutcome(BC_TIMEOUT, f"device binding timeout: claim={m.get('name')}")
                return False
        return True

    def _bind_claim(self, s: _State, index: int, pod: Pod, node_name: str) -> dict[str, Any]:
        claim = s.claims[index]
        alloc = s.picked.get(index)
        is_ext = index == s.ext_index
        if is_ext and alloc is None and not has_requests(claim):
            return claim  # extended resources all from device plugins on this node
        m = meta(claim)
        uid = str(m.get("uid") or "")
        cluster = self.handle.cluster
        from ...cluster.base import PatchError

        if is_ext and is_in_memory(claim):
            try:
                claim = self._create_extended_claim(s, pod, node_name)
            except _BindError:
                if not self._in_flight_until_bound:
                    self.mgr.remove_pending(uid)
                raise
            s.claims[index] = claim  # Unreserve deletes it if binding fails from here on
            m = meta(claim)
        ns, name = m.get("namespace") or "default", str(m.get("name") or "")
        ck = f"{ns}/{name}"
        try:
            for attempt in range(5):
                if attempt:
                    claim = self._refetched(name, ns, f"get updated claim {ck} after conflict", _BindError)
                    m = meta(claim)
                if m.get("deletionTimestamp"):
                    raise _BindError(f"claim {ck} got deleted in the meantime")
                try:
                    if alloc is not None:
                        if allocation_of(claim) is not None:
                            raise _BindError(f"claim {ck} got allocated elsewhere in the meantime")
                        fins = list(m.get("finalizers") or [])
                        if FINALIZER not in fins:
                            try:
                                claim = cluster.patch_object(CLAIMS, name, ns, {"metadata": {
                                    "resourceVersion": m.get("resourceVersion"), "finalizers": [*fins, FINALIZER]}})
                            except PatchError as exc:
                                if exc.status == 409:
                                    raise
                                raise _BindError(f"add finalizer to claim {ck}: {exc}") from None
                            m = meta(claim)
                    st = dict(status(claim))
                    if alloc is not None:
                        st["allocation"] = dict(alloc)
                    rf = list(st.get("reservedFor") or [])
                    rf.append({"resource": "pods", "name": pod.name, "uid": pod.uid})
                    st["reservedFor"] = rf
                    if self.features.device_binding_and_status:
                        if not st.get("allocation"):  # deallocated since PreFilter read it
                            raise _BindError(f"claim {ck} got deallocated elsewhere in the meantime")
                        if not st["allocation"].get("allocationTimestamp"):
                            st["allocation"] = {**st["allocation"], "allocationTimestamp": _rfc3339(self.clock.time())}
                    patch: dict[str, Any] = {"metadata": {"resourceVersion": m.get("resourceVersion")},
                                             "status": {"reservedFor": rf}}
                    if alloc is not None or "allocationTimestamp" in (st.get("allocation") or {}):
                        patch["status"]["allocation"] = st["allocation"]
                    try:
                        updated = cluster.patch_object(CLAIMS, name, ns, patch, subresource="status")
                    except PatchError as exc:
                        if exc.status == 409:
                            raise
                        what = "add allocation and reservation to" if alloc is not None else "add reservation to"
                        raise _BindError(f"{what} claim {ck}: {exc}") from None
                    if is_ext:
                        self._wait_for_informer(updated)
                    self.mgr.assume(updated)
                    assumed = getattr(self.handle, "claim_assumed", None)
                    if assumed is not None and not is_ext:
                        assumed(updated)  # kube assumes it: an update event for the queue (the extended one: no)
                    if is_ext:
                        self._patch_pod_extended_status(s, pod, updated, node_name)
                    return updated
                except PatchError:
                    continue  # conflict: read the claim again and retry, as retry.RetryOnConflict does
            raise _BindError(f"add allocation and reservation to claim {ck}: Operation cannot be fulfilled on "
                             f'resourceclaims.resource.k8s.io "{name}": the object has been modified; please apply '
                             f"your changes to the latest version and try again")
        finally:
            if alloc is not None and not self._in_flight_until_bound:
                self.mgr.remove_pending(uid)  # kube 1.36: written or not, the allocation leaves flight here

    def _create_extended_claim(self, s: _State, pod: Pod, node_name: str) -> dict[str, Any]:
        """createExtendedResourceClaimInAPI: the claim Filter built for the node, created with a generated
        name; counted in dynamic_resource_allocation_resourceclaim_creates_total."""
        node_claim = s.ext_nodes.get(node_name, (None, []))[0]
        if node_claim is None:
            raise _BindError(f"extended resource claim not found for node {node_name}")
        body = creatable(node_claim)
        try:
            created = self.handle.cluster.create_object(CLAIMS, pod.namespace, body)
        except Exception as exc:  # noqa: BLE001 - kube: the error ends PreBind
            self._count_create("failure")
            raise _BindError(f"create claim for extended resources {pod.namespace}/: {exc}") from None
        self._count_create("success")
        return created

    def _count_create(self, result: str) -> None:
        metrics = getattr(getattr(self.handle, "framework", None), "metrics", None)
        counter = getattr(metrics, "resourceclaim_creates", None)
        if counter is not None:  # the scheduler's claims: a Pod's, never admin access
            counter.labels(result, "false", "", "Pod").inc()

    def _wait_for_informer(self, claim: dict[str, Any]) -> None:
        """waitForExtendedClaimInAssumeCache: the claim was just created, so its devices count as allocated for
        the next pods only once the informer has it; wait for that (bounded; kube logs and goes on)."""
        m = meta(claim)
        ns, name = m.get("namespace") or "default", str(m.get("name") or "")
        deadline = time.monotonic() + self.assume_timeout
        delay = 0.001
        while self.mgr.claims.get(name, ns) is None and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _patch_pod_extended_status(self, s: _State, pod: Pod, claim: dict[str, Any], node_name: str) -> None:
        """patchPodExtendedResourceClaimStatus: `pod.status.extendedResourceClaimStatus` names the claim and maps
        each container's extended resource to its device request."""
        mappings = s.ext_nodes.get(node_name, (None, []))[1]
        if not mappings:
            raise _BindError(f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                             f"ExtendedResourceClaimStatus")
        body = {"status": {"extendedResourceClaimStatus": {
            "requestMappings": [dict(x) for x in mappings], "resourceClaimName": meta(claim).get("name")}}}
        try:
            self.handle.cluster.patch_object("pods", pod.name, pod.namespace, body, subresource="status")
        except Exception as exc:  # noqa: BLE001 - kube: the error ends PreBind
            raise _BindError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc}") from None

    # ------------------------------------------------------------------ events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        """kube's EventsToRegister at the emulated minor. 1.37 also registers ResourceClaim deletions (an
        allocated claim deleted without the deallocation being seen frees its devices); 1.36 does not. The pod's
        own update is 1.37's TargetPod event and 1.36's Pod event, both ksched's Pod (the hint tells the pods
        apart). kube registers no DeviceTaintRule event: with DRADeviceTaintRules its ResourceSlice tracker
        turns a rule change into ResourceSlice updates; ksched watches the rules instead and its hint queues on
        exactly the changes that would have produced one."""
        claim_actions = ActionType.Add | ActionType.Update
        if minor_at_least(getattr(self.handle, "feature_gates", None), (1, 37)):
            claim_actions |= ActionType.Delete
        events = [
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel
                                              | ActionType.UpdateNodeAllocatable)),
            ClusterEventWithHint(ClusterEvent(EV_CLAIM, claim_actions), self._after_claim_change),
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodGeneratedResourceClaim),
                                 self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(EV_CLASS, ActionType.Add | ActionType.Update)),
            ClusterEventWithHint(ClusterEvent(EV_SLICE, ActionType.Add | ActionType.Update)),
        ]
        if self.taint_rules:
            events.append(ClusterEventWithHint(
                ClusterEvent(EV_TAINT_RULE, ActionType.Add | ActionType.Update | ActionType.Delete),
                self._after_taint_rule_change))
        return events

    def _after_claim_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterClaimChange: QueueSkip only when the change cannot help this pod. A deletion
        (registered from 1.37) helps only when the claim still held devices: the deallocation is normally an
        update of its own, already seen."""
        if new is None:
            if not isinstance(old, dict):
                return QUEUE  # kube: an unexpected object is an error, which requeues
            return QUEUE if _allocated(old) else QUEUE_SKIP
        if not isinstance(new, dict) or (old is not None and not isinstance(old, dict)):
            return QUEUE  # kube: an unexpected object is an error, which requeues
        try:
            claims = self.mgr.pod_claims(pod)
        except ClaimNotUsable:
            return QUEUE_SKIP
        if old is not None and _allocated(old) and not _allocated(new):
            return QUEUE  # deallocated: its devices are free for any pod
        uid = meta(new).get("uid")
        if not any(meta(c).get("uid") == uid for c in claims):
            return QUEUE_SKIP
        if old is None:
            return QUEUE
        if status(old) == status(new):
            return QUEUE_SKIP  # e.g. a finalizer added
        return QUEUE

    def _after_pod_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterPodChange (1.36) / isSchedulableAfterTargetPodUpdate (1.37): the pod's claims were
        created. ksched's Pod events include other pods' updates, which 1.37's TargetPod event excludes and 1.36's
        hint skips, hence the UID check in both."""
        other = new if isinstance(new, Pod) else (Pod.from_dict(new) if isinstance(new, dict) else None)
        if other is None:
            return QUEUE  # kube: an unexpected object is an error, which requeues
        if other.uid != pod.uid:
            return QUEUE_SKIP
        try:
            self.mgr.pod_claims(other)
        except ClaimNotUsable:
            return QUEUE_SKIP
        return QUEUE

    def _after_taint_rule_change(self, pod: Pod, old: Any, new: Any) -> int:
        """Queue when kube's slice tracker would have sent a ResourceSlice update for this rule change (which
        requeues without a hint): some device of a current slice gets, loses or sees a different taint from
        the rule. The answer depends on the event alone, so it is kept for the next pod asking."""
        memo = self._rule_memo
        if memo is not None and memo[0] is old and memo[1] is new:
            return memo[2]
        got = QUEUE if _rule_changes_taints(self.mgr.slices.list(), old, new) else QUEUE_SKIP
        self._rule_memo = (old, new, got)
        return got


def _allocated(claim: dict[str, Any]) -> bool:
    """`status.allocation != nil`, as kube's hints test it (an empty allocation still counts)."""
    return status(claim).get("allocation") is not None


def _taint_key(t: Any) -> tuple[Any, ...]:
    """The fields kube's tracker compares taints by (taintsEqual)."""
    t = t if isinstance(t, dict) else {}
    return t.get("key"), t.get("value"), t.get("effect"), t.get("timeAdded")


def _rule_changes_taints(slices: list[dict[str, Any]], old: Any, new: Any) -> bool:
    """Does replacing rule `old` by `new` (either None: added or deleted) change any device's taints?"""
    before = [old] if isinstance(old, dict) else []
    after = [new] if isinstance(new, dict) else []
    for s in slices:
        a, b = apply_taint_rules(s, before), apply_taint_rules(s, after)
        if a is b:
            continue  # neither version selects a device here
        for da, db in zip((a.get("spec") or {}).get("devices") or [], (b.get("spec") or {}).get("devices") or [],
                          strict=True):
            if [_taint_key(t) for t in da.get("taints") or []] != [_taint_key(t) for t in db.get("taints") or []]:
                return True
    return False


class _BindError(Exception):
    pass


#: the `status` label values of kube's DRA binding-conditions metrics
BC_SUCCESS, BC_FAILED, BC_TIMEOUT, BC_ERROR = "success", "failure", "timeout", "error"


class _BindingOutcome(ValueError):
    """Ends PreBind's wait for binding conditions: kube's error text and the metrics' status label."""

    def __init__(self, label: str, message: str) -> None:
        super().__init__(message)
        self.label = label


def _not_here(sel: NodeSelector | None, skips: bool, node: Any) -> bool:
    """Whether an allocated claim is unusable on the node whatever its binding state: allocated for other nodes,
    or skipping node operations the node does not declare."""
    return (sel is not None and not sel.matches(node)) or (
        skips and OPTIONAL_NODE_OPERATIONS not in node.declared_features)


def _skips_node_operations(claim: dict[str, Any]) -> bool:
    """allocationResultRequiresDRAOptionalNodeOperations: some allocated device skips node operations."""
    alloc = allocation_of(claim) or {}
    return any(r.get("skipNodeOperations") for r in (alloc.get("devices") or {}).get("results") or [])


def _ready_for_binding(claim: dict[str, Any]) -> bool:
    """isClaimReadyForBinding: every binding condition of every allocated device is True; a True failure
    condition raises _BindingOutcome (a ValueError with kube's error text)."""
    alloc = allocation_of(claim)
    if alloc is None:
        return False
    devices = status(claim).get("devices") or []
    for r in (alloc.get("devices") or {}).get("results") or []:
        conds = r.get("bindingConditions") or []
        if not conds:
            continue
        dev = next((d for d in devices if d.get("device") == r.get("device") and d.get("driver") == r.get("driver")
                    and d.get("pool") == r.get("pool")), None)
        if dev is None:
            return False
        have = {c.get("type"): c for c in dev.get("conditions") or []}
        for f in r.get("bindingFailureConditions") or []:
            c = have.get(f)
            if c is not None and c.get("status") == "True":
                raise _BindingOutcome(BC_FAILED, f'device binding failed: claim={meta(claim).get("name")}, '
                                      f'reason={c.get("reason") or ""}, message={go_quote(c.get("message") or "")}')
        for want in conds:
            c = have.get(want)
            if c is None or c.get("status") != "True":
                return False
    return True


def _rfc3339(seconds: float) -> str:
    """A metav1.Time as the API server writes it: UTC, whole seconds."""
    import datetime as _dt

    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(ts: str) -> float:
    import datetime as _dt

    try:
        return _dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def node_allocatable_statuses(state: CycleState, node_name: str) -> list[dict[str, Any]] | None:
    """ExtractPodNodeAllocatableResourceClaimStatus: what Filter found the pod's claims take of `node_name` (the
    scheduler's assume copies it into the pod it accounts), None without it."""
    s = state.get(NAME)
    if not isinstance(s, _State):
        return None
    return s.na_statuses.get(node_name)

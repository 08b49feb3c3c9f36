"""Extended resources backed by DRA (DRAExtendedResource, beta and on in kube-scheduler 1.36): a container's
request for `example.com/gpu: 2` is satisfied by devices of the DeviceClass whose `spec.extendedResourceName` is
`example.com/gpu` (or whose implicit name `deviceclass.resource.kubernetes.io/<class>` is requested) on a node
that does not advertise the resource in its allocatable.

Upstream: kube-scheduler v1.36.3, pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go,
noderesources/fit.go (shouldDelegateResourceToDRA) and k8s.io/dynamic-resource-allocation v0.36.3
deviceclass/extendedresourcecache.

This module holds what the DynamicResources and NodeResourcesFit plugins share: which class backs a resource
name, the in-memory claim of a pod (`<extended-resources>`, created for real in PreBind), the device requests
and the container mappings built for a node.
"""

from __future__ import annotations

import copy
import threading
import uuid
from decimal import Decimal
from typing import Any

from ...objects import Node, Pod
from ...quantity import parse_quantity
from .allocator import node_matches
from .cel import CelCache, CelError, DeviceInput

#: resourceapi.ResourceDeviceClassPrefix: every class backs the resource named by this prefix and its name
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
#: resourceapi.ExtendedResourceClaimAnnotation, "true" on the claim the scheduler creates for a pod
ANN_EXTENDED = "resource.kubernetes.io/extended-resource-claim"
#: the name of the claim while it exists only in memory (intentionally not a valid object name)
IN_MEMORY_NAME = "<extended-resources>"
#: seconds PreBind waits for the created claim to reach the informer (AssumeExtendedResourceTimeoutDefaultSeconds)
ASSUME_TIMEOUT = 120.0
_INT64_MAX = 2**63 - 1


def meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def is_extended_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a qualified name with a domain that is not kubernetes.io's."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_dra_extended_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName."""
    return is_extended_name(name) or name.startswith(IMPLICIT_PREFIX)


def class_mapping(classes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Resource name -> DeviceClass: each class under its implicit name, and under its `extendedResourceName`;
    when several classes name the same resource the newest one wins, ties going to the first name in order
    (the ExtendedResourceCache's rule)."""
    out: dict[str, dict[str, Any]] = {}
    explicit: dict[str, dict[str, Any]] = {}
    for cls in classes:
        m = meta(cls)
        name = str(m.get("name") or "")
        out[IMPLICIT_PREFIX + name] = cls
        ext = (cls.get("spec") or {}).get("extendedResourceName")
        if not ext:
            continue
        have = explicit.get(str(ext))
        if have is None or _newer(cls, have):
            explicit[str(ext)] = cls
    out.update(explicit)
    return out


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ta, tb = str(meta(a).get("creationTimestamp") or ""), str(meta(b).get("creationTimestamp") or "")
    if ta != tb:
        return ta > tb  # RFC 3339 UTC timestamps order as text
    return str(meta(a).get("name") or "") < str(meta(b).get("name") or "")


class ClassResolver:
    """DeviceClassResolver over a class store: the mapping is rebuilt from the store after a class changed
    (kube's ExtendedResourceCache follows the informer's events the same way)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._version = 0
        self._built = -1
        self._map: dict[str, dict[str, Any]] = {}
        store.add_handler(self._changed)

    def _changed(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        with self._lock:
            self._version += 1

    def mapping(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._built == self._version:
                return self._map
            version = self._version
        built = class_mapping(self._store.list())
        with self._lock:
            self._map, self._built = built, version
            return built

    def get_device_class(self, resource: str) -> dict[str, Any] | None:
        return self.mapping().get(resource)


def mapped_requests(pod: Pod, mapping: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The pod's non-zero requests of extended resources some class backs (empty: nothing for DRA to do)."""
    return {n: v for n, v in pod.requests.items() if v and is_dra_extended_name(n) and n in mapping}


def find_extended_claim(pod: Pod, claims: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The claim an earlier cycle created for the pod: annotated, and controlled by the pod."""
    for c in claims:
        m = meta(c)
        if (m.get("annotations") or {}).get(ANN_EXTENDED) != "true":
            continue
        for ref in m.get("ownerReferences") or []:
            if ref.get("name") == pod.name and ref.get("controller") and ref.get("uid") == pod.uid:
                return c
    return None


def in_memory_claim(pod: Pod) -> dict[str, Any]:
    """The claim the pod's extended resources are allocated for, before PreBind creates it (a temporary uid so
    its allocation can be in flight like any other's)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {
            "name": IN_MEMORY_NAME, "generateName": f"{pod.name}-extended-resources-", "namespace": pod.namespace,
            "uid": str(uuid.uuid4()),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                 "controller": True}],
            "annotations": {ANN_EXTENDED: "true"},
        },
        "spec": {},
    }


def is_in_memory(claim: dict[str, Any] | None) -> bool:
    return claim is not None and meta(claim).get("name") == IN_MEMORY_NAME


def has_requests(claim: dict[str, Any]) -> bool:
    """Spec.Devices.Requests != nil (a claim created by an earlier cycle always has them)."""
    return ((claim.get("spec") or {}).get("devices") or {}).get("requests") is not None


#: `_as_int64` of the quantity strings seen (a pod's request is parsed in every cycle of the pod)
_INT64_OF: dict[str, int | None] = {}


def _as_int64(value: Any) -> int | None:
    """resource.Quantity.AsInt64: the value when it is a whole number that fits, else None."""
    if isinstance(value, str):
        if value in _INT64_OF:
            return _INT64_OF[value]
        if len(_INT64_OF) > 4096:
            _INT64_OF.clear()
        got = _INT64_OF[value] = _parse_int64(value)
        return got
    return _parse_int64(value)


def _parse_int64(value: Any) -> int | None:
    try:
        d = parse_quantity(value)
    except Exception:  # noqa: BLE001 - the API server validated it; an odd value is just not countable
        return None
    if d != d.to_integral_value() or abs(d) > Decimal(_INT64_MAX):
        return None
    return int(d)


def _container_request(index: int, container: dict[str, Any], resource: str, class_name: str,
                       reusable: list[dict[str, Any] | None]) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings: the container's device request for `resource` (None when the requests
    it may reuse cover it) and its mappings."""
    reqs = ((container.get("resources") or {}).get("requests")) or {}
    if resource not in reqs:
        return None, []
    want = _as_int64(reqs[resource])
    if not want:
        return None, []
    cname = str(container.get("name") or "")
    mappings: list[dict[str, str]] = []
    total = 0
    for r in reusable:
        if r is None:
            continue
        total += int(r["exactly"]["count"])
        mappings.append({"containerName": cname, "resourceName": resource, "requestName": r["name"]})
        if total >= want:
            return None, mappings
    ridx = sorted(str(k) for k in reqs).index(resource)
    name = f"container-{index}-request-{ridx}"
    request = {"name": name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                         "count": want - total}}
    mappings.append({"containerName": cname, "resourceName": resource, "requestName": name})
    return request, mappings


def requests_and_mappings(pod: Pod, resources: list[str], mapping: dict[str, dict[str, Any]]
                          ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """createRequestsAndMappings: one device request per container and resource (init containers that run
    before the others reuse their requests, and share the largest of theirs), sorted by name, and the
    container -> request mappings for `pod.status.extendedResourceClaimStatus`."""
    spec = pod.raw.get("spec") or {}
    inits = list(spec.get("initContainers") or [])
    containers = inits + list(spec.get("containers") or [])
    long_lived = [i for i, c in enumerate(containers)
                  if i >= len(inits) or (c.get("restartPolicy") == "Always")]
    short_lived = [i for i in range(len(inits)) if containers[i].get("restartPolicy") != "Always"]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = mapping.get(resource)
        if cls is None:
            continue
        cname = str(meta(cls).get("name") or "")
        long_req: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            r, ms = _container_request(i, containers[i], resource, cname, [])
            long_req[i] = r
            long_maps.extend(ms)
        biggest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            r, ms = _container_request(i, containers[i], resource, cname, long_req[i:])
            if r is not None:
                short_names.add(r["name"])
                if biggest is None or biggest["exactly"]["count"] < r["exactly"]["count"]:
                    biggest = r
            short_maps.extend(ms)
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest["name"])
            for ms in short_maps:
                if ms["requestName"] in short_names:
                    ms["requestName"] = biggest["name"]
        if biggest is not None:
            requests.append(biggest)
        requests.extend(r for r in long_req if r is not None)
        mappings.extend(long_maps)
        mappings.extend(short_maps)
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


def node_claim(claim: dict[str, Any], requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod's claim as one node needs it: a shallow copy with these requests. Nothing mutates claims in
    place (Reserve and PreBind build new objects, `creatable` deep-copies), and `requests` is built fresh per
    variant, so copying either deeply only cost time every cycle."""
    return {**claim, "spec": {**(claim.get("spec") or {}), "devices": {"requests": requests} if requests else {}}}


def creatable(claim: dict[str, Any]) -> dict[str, Any]:
    """The object PreBind sends to create the claim: no name (the server generates it from generateName), no
    uid, no status."""
    out = copy.deepcopy(claim)
    m = out["metadata"]
    for k in ("name", "uid", "resourceVersion", "creationTimestamp"):
        m.pop(k, None)
    out.pop("status", None)
    devices = (out.get("spec") or {}).get("devices")
    if devices is not None and not devices.get("requests"):
        devices.pop("requests", None)
    return out


def after_device_class_change(pod: Pod, old: Any, new: Any) -> bool:
    """NodeResourcesFit's isSchedulableAfterDeviceClassEvent: the class now names a resource the pod requests
    (explicitly, or by its implicit name when it is added)."""
    if not isinstance(new, dict):
        return True
    ext_new = (new.get("spec") or {}).get("extendedResourceName") or ""
    if isinstance(old, dict):
        if ((old.get("spec") or {}).get("extendedResourceName") or "") == ext_new:
            return False
    elif IMPLICIT_PREFIX + str(meta(new).get("name") or "") in pod.requests:
        return True
    return bool(ext_new) and ext_new in pod.requests


def dra_totals(resolver: ClassResolver, slices: list[dict[str, Any]], allocated: Any, node: Node, resource: str,
               cel_cache: CelCache, device_inputs: dict[int, DeviceInput],
               verdicts: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any], bool | None]] | None = None,
               slice_sets: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any],
                                                                 frozenset[tuple[str, str, str]] | None, bool]]
               | None = None) -> tuple[int, int]:
    """calculateDRAResourceTotals, for NodeResourcesFit and BalancedAllocation scoring a resource some class
    backs on a node that does not advertise it: the node's devices of that class, and how many are allocated
    (0, 0 when a selector fails; kube logs it). `slices` may be only those that can reach the node (the sums
    and the failure do not depend on their order); `verdicts` remembers each device's verdict (None: a selector
    failed) per selector list, across nodes and calls, and `slice_sets` each slice's matching device IDs."""
    cls = resolver.get_device_class(resource)
    if cls is None:
        return 0, 0
    ids = dra_matching(slices, node, class_selectors(cls), cel_cache, device_inputs, verdicts, slice_sets)
    if ids is None:
        return 0, 0
    return len(ids), sum(1 for did in ids if did in allocated)


def class_selectors(cls: dict[str, Any]) -> tuple[str, ...]:
    """The CEL expressions of a class's selectors, in order."""
    return tuple(str((s.get("cel") or {}).get("expression") or "")
                 for s in (cls.get("spec") or {}).get("selectors") or [] if s.get("cel"))


def dra_matching(slices: list[dict[str, Any]], node: Node, selectors: tuple[str, ...], cel_cache: CelCache,
                 device_inputs: dict[int, DeviceInput],
                 verdicts: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any], bool | None]] | None = None,
                 slice_sets: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any],
                                                                   frozenset[tuple[str, str, str]] | None, bool]]
                 | None = None) -> list[tuple[str, str, str]] | None:
    """The IDs of the node's devices that `selectors` accept, one per device (`dra_totals` counts them and those
    allocated); None when a selector fails on one of them."""
    if verdicts is None:
        verdicts = {}
    out: list[tuple[str, str, str]] = []
    for s in slices:
        sp = s.get("spec") or {}
        if sp.get("perDeviceNodeSelection"):
            devices = [d for d in sp.get("devices") or []
                       if d.get("allNodes") or (d.get("nodeName") and d.get("nodeName") == node.name)
                       or (d.get("nodeSelector") is not None
                           and node_matches(node, d.get("nodeName"), False, d.get("nodeSelector")))]
        else:
            name, every = sp.get("nodeName") or "", bool(sp.get("allNodes"))
            if not every and name != node.name and sp.get("nodeSelector") is not None:
                if not node_matches(node, name, every, sp.get("nodeSelector")):
                    continue
            elif not every and name and name != node.name:
                continue
            devices = sp.get("devices") or []
        driver = str(sp.get("driver") or "")
        pool = str((sp.get("pool") or {}).get("name") or "")
        if slice_sets is not None and not sp.get("perDeviceNodeSelection"):
            # the slice's matching devices, worked out once per slice and selector list (None: a selector failed
            # on one of them)
            hit = slice_sets.get((id(s), selectors))
            if hit is None or hit[0] is not s:
                ids: list[tuple[str, str, str]] = []
                failed = False
                for d in devices:
                    ok = _device_ok(d, driver, selectors, cel_cache, device_inputs, verdicts)
                    if ok is None:
                        failed = True
                        break
                    if ok:
                        ids.append((driver, pool, str(d.get("name") or "")))
                # a slice repeating a device name is counted device by device below
                matching = frozenset(ids) if not failed and len(set(ids)) == len(ids) else None
                hit = slice_sets[(id(s), selectors)] = (s, matching, failed)
            if hit[2]:
                return None
            if hit[1] is not None:
                out.extend(hit[1])
                continue
        for d in devices:
            ok = _device_ok(d, driver, selectors, cel_cache, device_inputs, verdicts)
            if ok is None:
                return None
            if ok:
                out.append((driver, pool, str(d.get("name") or "")))
    return out


def _device_ok(d: dict[str, Any], driver: str, selectors: tuple[str, ...], cel_cache: CelCache,
               device_inputs: dict[int, DeviceInput],
               verdicts: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any], bool | None]]) -> bool | None:
    """Whether every selector accepts the device (in order, the first false one ends it); None when one fails."""
    if not selectors:
        return True
    hit = verdicts.get((id(d), selectors))
    if hit is not None and hit[0] is d:
        return hit[1]
    di = device_inputs.get(id(d))
    if di is None or di.raw is not d:
        di = device_inputs[id(d)] = DeviceInput(driver, d, multi_alloc=False)  # kube's scoring leaves it out
    ok: bool | None
    try:
        ok = all(cel_cache.get_or_compile(e).matches(di) for e in selectors)
    except CelError:
        ok = None
    verdicts[(id(d), selectors)] = (d, ok)
    return ok


class DraScorer:
    """The DRA side of NodeResourcesFit's and BalancedAllocation's scoring (getDRAPreScoredParams and
    calculateDRAExtendedResourceAllocatableRequest): for a scored resource some class backs, the capacity and
    allocated count of each node from its devices. One per plugin instance (its own CEL cache, as kube's)."""

    def __init__(self) -> None:
        self.cel_cache = CelCache(10)
        self._inputs: dict[int, DeviceInput] = {}
        #: (id(device), selectors) -> (device, verdict, None when a selector failed): see dra_totals
        self._verdicts: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any], bool | None]] = {}
        #: (id(slice), selectors) -> (slice, IDs of its matching devices or None, a selector failed): see dra_totals
        self._slice_sets: dict[tuple[int, tuple[str, ...]], tuple[dict[str, Any],
                                                               frozenset[tuple[str, str, str]] | None, bool]] = {}
        #: the last slice list by id (kept, so the ids stay theirs), its slices by nodeName, and the others
        self._index: tuple[list[int], list[dict[str, Any]], dict[str, list[dict[str, Any]]],
                           list[dict[str, Any]]] | None = None
        #: each node's matching devices and how many are held, followed from call to call (see HeldCounts)
        self._counts: HeldCounts | None = None

    def _by_node(self, slices: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
        """Slices that can reach only the node they name, by that name, and every other slice (checked per node):
        so each node looks at its own slices, not at the whole cluster's."""
        if self._index is not None and self._index[1] is slices:  # the manager keeps one list per version
            return self._index[2], self._index[3]
        ids = list(map(id, slices))
        if self._index is not None and self._index[0] == ids:
            return self._index[2], self._index[3]
        by_node: dict[str, list[dict[str, Any]]] = {}
        other: list[dict[str, Any]] = []
        for s in slices:
            sp = s.get("spec") or {}
            name = sp.get("nodeName") or ""
            if name and not sp.get("allNodes") and not sp.get("perDeviceNodeSelection"):
                by_node.setdefault(name, []).append(s)
            else:
                other.append(s)
        self._index = (ids, slices, by_node, other)
        return by_node, other

    def totals(self, mgr: Any, resource: str, nodes: list[Node]) -> tuple[list[int], list[int]] | None:
        """(capacity, allocated) per node from the DRA manager's slices and allocated devices, or None when no
        class backs `resource`."""
        cls = mgr.resolver.get_device_class(resource) if is_dra_extended_name(resource) else None
        if cls is None:
            return None
        slices = mgr.device_slices()
        allocated = mgr.allocated()
        if len(self._inputs) > 200_000 or len(self._verdicts) > 200_000 or len(self._slice_sets) > 50_000:
            self._inputs.clear()
            self._verdicts.clear()
            self._slice_sets.clear()
        by_node, other = self._by_node(slices)
        selectors = class_selectors(cls)
        counts = self._counts_for(slices, selectors, allocated)
        caps, used = [], []
        for node in nodes:
            own = by_node.get(node.name)
            if counts is None:
                c, u = dra_totals(mgr.resolver, own + other if own else other, allocated, node, resource,
                                  self.cel_cache, self._inputs, self._verdicts, self._slice_sets)
            else:
                c, u = counts.totals(node, lambda n, own=own: dra_matching(
                    own + other if own else other, n, selectors, self.cel_cache, self._inputs, self._verdicts,
                    self._slice_sets))
            caps.append(c)
            used.append(u)
        return caps, used

    def _counts_for(self, slices: list[dict[str, Any]], selectors: tuple[str, ...], allocated: Any
                    ) -> HeldCounts | None:
        """The kept per-node counts for this slice list (the manager keeps one per version) and selector list,
        brought up to `allocated`; None when `allocated` is not the manager's view (no change log to follow)."""
        if getattr(allocated, "log", None) is None:
            return None
        kept = self._counts
        if kept is None or kept.slices is not slices or kept.selectors != selectors or kept.too_large():
            kept = self._counts = HeldCounts(slices, selectors)
        kept.follow(allocated)
        return kept


class HeldCounts:
    """Per node, its matching devices (`dra_matching`, worked out when the node is first scored, again when its
    Node object changes) and how many the allocated claims hold, kept up to date from the DRA manager's change
    log: a scoring cycle then costs a look-up per node, not a pass over its devices."""

    def __init__(self, slices: list[dict[str, Any]], selectors: tuple[str, ...]) -> None:
        self.slices = slices
        self.selectors = selectors
        #: node name -> (the Node, its key, its device count, or None: a selector failed)
        self.nodes: dict[str, tuple[Node, int, int | None]] = {}
        #: device -> the keys of the nodes counting it, once per time they do
        self.index: dict[tuple[str, str, str], list[int]] = {}
        #: per key: how many of its devices the store's allocated claims hold
        self.held: list[int] = []
        self.positions = 0
        self._counts: Any = None
        self._log: list[Any] | None = None
        self._seen = 0
        #: the devices `held` counts (those of `_counts` that some node counts)
        self._held_ids: set[tuple[str, str, str]] = set()
        #: this call's devices of assumed or in-flight claims not in `_counts`, and how many each key has
        self._extra_ids: set[tuple[str, str, str]] = set()
        self._extra: dict[int, int] = {}

    def too_large(self) -> bool:
        return self.positions > 1_000_000

    def follow(self, allocated: Any) -> None:
        """Bring the held counts to `allocated` (the manager's view: its counts, extra devices, change log)."""
        counts = allocated.counts
        log, seen = allocated.log
        held, held_ids = self.held, self._held_ids
        if log is not self._log or seen < self._seen:
            held[:] = [0] * len(held)
            held_ids.clear()
            for did, keys in self.index.items():
                if did in counts:
                    held_ids.add(did)
                    for k in keys:
                        held[k] += 1
        else:
            index = self.index
            for did in log[self._seen:seen]:
                keys = index.get(did)
                now = did in counts
                if not keys or now == (did in held_ids):
                    continue
                if now:
                    held_ids.add(did)
                else:
                    held_ids.discard(did)
                step = 1 if now else -1
                for k in keys:
                    held[k] += step
        self._counts, self._log, self._seen = counts, log, seen
        extra: dict[int, int] = {}
        self._extra_ids = {did for did in allocated.extra if did not in counts}
        for did in self._extra_ids:
            for k in self.index.get(did, ()):
                extra[k] = extra.get(k, 0) + 1
        self._extra = extra

    def totals(self, node: Node, matching: Any) -> tuple[int, int]:
        """(devices, allocated ones) of the node; `matching(node)` gives its devices when not known yet."""
        hit = self.nodes.get(node.name)
        if hit is None or hit[0] is not node:
            ids = matching(node)
            key = len(self.held)
            self.held.append(0)
            if ids is not None:
                counts = self._counts
                for did in ids:
                    self.index.setdefault(did, []).append(key)
                    if did in counts:
                        self._held_ids.add(did)
                        self.held[key] += 1
                self.positions += len(ids)
                extra = sum(1 for did in ids if did in self._extra_ids)
                if extra:
                    self._extra[key] = extra
            hit = self.nodes[node.name] = (node, key, None if ids is None else len(ids))
        _node, key, total = hit
        if total is None:
            return 0, 0
        return total, self.held[key] + self._extra.get(key, 0)

"""The DRA objects the scheduler watches, and what every profile must see the same way: claims overlaid with
the versions PreBind just wrote (the assume cache), allocations in flight between Reserve and PreBind, and the
devices those and every allocated claim hold (kube's SharedDRAManager, one per scheduler).

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from decimal import Decimal
from typing import Any

from ...objects import Pod
from .allocator import device_id
from .capacity import quantity
from .extended import ANN_EXTENDED, ClassResolver, find_extended_claim

CLAIMS = "resourceclaims.resource.k8s.io"
CLASSES = "deviceclasses.resource.k8s.io"
SLICES = "resourceslices.resource.k8s.io"
TEMPLATES = "resourceclaimtemplates.resource.k8s.io"

#: ClusterEvent resources as the scheduler names these kinds (group/Kind)
EV_CLAIM = "resource.k8s.io/ResourceClaim"
EV_CLASS = "resource.k8s.io/DeviceClass"
EV_SLICE = "resource.k8s.io/ResourceSlice"
EV_TAINT_RULE = "resource.k8s.io/DeviceTaintRule"

FINALIZER = "resource.kubernetes.io/delete-protection"
#: annotation kube-controller-manager puts on claims generated from a template
ANN_POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"

DeviceID = tuple[str, str, str]


class ClaimNotUsable(Exception):
    """A pod's claim cannot be used now; the message is kube-scheduler's."""


def meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def status(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("status") or {}


def allocation_of(claim: dict[str, Any]) -> dict[str, Any] | None:
    return status(claim).get("allocation") or None


def claim_devices(claim: dict[str, Any] | None) -> tuple[DeviceID, ...]:
    """Devices an allocated claim holds exclusively (admin access does not hold a device, nor does a share of a
    device allowing multiple allocations: see `claim_shares`)."""
    alloc = allocation_of(claim or {})
    if not alloc:
        return ()
    out = []
    for r in ((alloc.get("devices") or {}).get("results") or []):
        if r.get("adminAccess") or r.get("shareID") is not None:
            continue
        out.append(device_id(str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or "")))
    return tuple(out)


def claim_shares(claim: dict[str, Any] | None) -> tuple[tuple[DeviceID, dict[str, Decimal]], ...]:
    """The shares an allocated claim holds (results with a `shareID`, DRAConsumableCapacity): each device with
    what the share consumes of its capacity (`consumedCapacity`)."""
    alloc = allocation_of(claim or {})
    if not alloc:
        return ()
    out = []
    for r in ((alloc.get("devices") or {}).get("results") or []):
        if r.get("shareID") is None:
            continue
        did = (str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or ""))
        out.append((did, {str(k): quantity(v)[0] for k, v in (r.get("consumedCapacity") or {}).items()}))
    return tuple(out)


def pod_claim_refs(pod: Pod) -> list[dict[str, Any]]:
    return [r for r in ((pod.raw.get("spec") or {}).get("resourceClaims") or []) if isinstance(r, dict)]


def claim_name(pod: Pod, ref: dict[str, Any]) -> tuple[str | None, bool]:
    """resourceclaim.Name: (claim name or None when intentionally not created, must check the owner)."""
    if ref.get("resourceClaimName") is not None:
        return str(ref["resourceClaimName"]), False
    if ref.get("resourceClaimTemplateName") is not None:
        for st in ((pod.raw.get("status") or {}).get("resourceClaimStatuses") or []):
            if st.get("name") == ref.get("name"):
                name = st.get("resourceClaimName")
                return (str(name) if name is not None else None), True
        raise ClaimNotUsable(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
    raise ClaimNotUsable(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.get("name") or ""}": none of '
                         f"the supported fields are set")


def controlled_by(obj: dict[str, Any], pod: Pod) -> bool:
    return any(r.get("controller") and r.get("uid") == pod.uid for r in meta(obj).get("ownerReferences") or [])


def reserved_for_pod(claim: dict[str, Any], pod: Pod) -> bool:
    return any(r.get("uid") == pod.uid for r in status(claim).get("reservedFor") or [])


class DraManager:
    """Claim, class and slice stores of one cluster, shared by every profile (see `for_handle`)."""

    def __init__(self, handle: Any) -> None:
        self.claims = handle.informer(CLAIMS)
        self.classes = handle.informer(CLASSES)
        self.slices = handle.informer(SLICES)
        #: which DeviceClass backs an extended resource name (DRAExtendedResource)
        self.resolver = ClassResolver(self.classes)
        self._lock = threading.Lock()
        #: claim key -> (the version PreBind wrote, its resourceVersion), until the store has caught up with it
        self._assumed: dict[str, tuple[dict[str, Any], str]] = {}
        #: claim uid -> the claim with the allocation Reserve picked, until PreBind wrote it (or Unreserve)
        self._in_flight: dict[str, dict[str, Any]] = {}
        self._held: dict[str, tuple[DeviceID, ...]] = {}
        #: claim key -> the shares it holds (DRAConsumableCapacity), summed per device in `allocated()`
        self._shares: dict[str, tuple[tuple[DeviceID, dict[str, Decimal]], ...]] = {}
        self._count: Counter[DeviceID] = Counter()
        #: `_count` as `allocated()` hands it out (read-only), copied again only after a change
        self._count_copy: dict[DeviceID, int] | None = None
        #: the devices that came into or left `_count`, in order (replaced by a new list when long), so a reader
        #: that saw the first n of them follows the rest instead of reading every device again
        self._count_log: list[DeviceID] = []
        #: pod uid -> keys of the claims annotated as its extended-resource claim and controlled by it, so a
        #: pod's PreFilter finds the claim an earlier cycle created without listing the namespace's claims
        self._extended: dict[str, set[str]] = {}
        #: bumped on every ResourceSlice (or DeviceTaintRule) change: what was derived from the slices must be rebuilt
        self.slices_version = 0
        self.slices.add_handler(self._on_slice)
        #: DeviceTaintRules (DRADeviceTaintRules): watched once a plugin asks for them (`device_slices`)
        self.taint_rules: Any = None
        self._tainted: tuple[int, list[dict[str, Any]]] | None = None
        self._plain: tuple[int, list[dict[str, Any]]] | None = None
        self._handle = handle
        self.claims.add_handler(self._on_claim)
        for c in self.claims.list():
            self._track(c, None)

    def _on_slice(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.slices_version += 1

    def device_slices(self, taint_rules: bool = False) -> list[dict[str, Any]]:
        """The ResourceSlices as the allocator sees them; with `taint_rules` (DRADeviceTaintRules) the taints of
        the DeviceTaintRules applied (kube's slice tracker), which are watched from the first such call on
        (and waited for then, as kube syncs its informers before scheduling)."""
        if not taint_rules:  # one list per version, so the allocator sees the same list object (see Allocator)
            version = self.slices_version
            hit = self._plain
            if hit is not None and hit[0] == version:
                return hit[1]
            plain = self.slices.list()
            self._plain = (version, plain)
            return plain
        from .taintrules import TAINT_RULES, apply_taint_rules

        if self.taint_rules is None:
            with self._lock:
                if self.taint_rules is None:
                    rules_store = self._handle.informer(TAINT_RULES)
                    rules_store.add_handler(self._on_slice)
                    self.slices_version += 1
                    self.taint_rules = rules_store
            wait = getattr(self.taint_rules, "wait_for_sync", None)
            if callable(wait) and not getattr(self.taint_rules, "synced", True):
                wait(10.0)
        version = self.slices_version
        hit = self._tainted
        if hit is not None and hit[0] == version:
            return hit[1]
        rules = self.taint_rules.list()
        slices = self.slices.list()
        out = [apply_taint_rules(s, rules) for s in slices] if rules else slices
        self._tainted = (version, out)
        return out

    # -------------------------------------------------------------- sharing
    _by_cluster: weakref.WeakKeyDictionary[Any, DraManager] = weakref.WeakKeyDictionary()
    _by_cluster_lock = threading.Lock()

    @classmethod
    def for_handle(cls, handle: Any) -> DraManager:
        cluster = getattr(handle, "cluster", None)
        if cluster is None:
            raise RuntimeError("the DynamicResources plugin needs a framework handle with a cluster")
        with cls._by_cluster_lock:
            mgr = cls._by_cluster.get(cluster)
            if mgr is None:
                mgr = cls._by_cluster[cluster] = cls(handle)
            return mgr

    # -------------------------------------------------------------- allocated devices
    @staticmethod
    def _key(claim: dict[str, Any]) -> str:
        m = meta(claim)
        return f"{m.get('namespace') or 'default'}/{m.get('name') or ''}"

    @staticmethod
    def _extended_owner(claim: dict[str, Any] | None) -> str | None:
        """The uid of the pod controlling an extended-resource claim (the annotation set), else None."""
        m = meta(claim)
        if claim is None or (m.get("annotations") or {}).get(ANN_EXTENDED) != "true":
            return None
        return next((str(r.get("uid")) for r in m.get("ownerReferences") or [] if r.get("controller")), None)

    def extended_claim(self, pod: Pod) -> dict[str, Any] | None:
        """findExtendedResourceClaim: the claim in the pod's namespace annotated as its extended-resource claim
        and controlled by it (kube lists the namespace; the index gives the same answer)."""
        with self._lock:
            keys = sorted(self._extended.get(pod.uid, ()))
        candidates = [c for ns, name in (k.split("/", 1) for k in keys) if (c := self.claims.get(name, ns))]
        if len(candidates) > 1:  # never the scheduler's doing: keep the store's order, as kube's list
            candidates = self.claims.list(pod.namespace)
        return find_extended_claim(pod, [c for c in candidates if meta(c).get("namespace") == pod.namespace])

    def _track(self, new: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
        key = self._key(new or old or {})
        devices = claim_devices(new) if new is not None else ()
        shares = claim_shares(new) if new is not None else ()
        was, now = self._extended_owner(old), self._extended_owner(new)
        with self._lock:
            if was is not None and was != now:
                keys = self._extended.get(was)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._extended[was]
            if now is not None:
                self._extended.setdefault(now, set()).add(key)
            if shares:
                self._shares[key] = shares
            else:
                self._shares.pop(key, None)
            before = self._held.pop(key, ())
            if before == devices:
                if devices:
                    self._held[key] = devices
                return
            count, log = self._count, self._count_log
            self._count_copy = None
            if len(log) > 100_000:
                log = self._count_log = []
            for d in before:
                count[d] -= 1
                if count[d] <= 0:
                    del count[d]
                    log.append(d)
            if devices:
                self._held[key] = devices
                for d in devices:
                    n = count.get(d, 0)
                    if not n:
                        log.append(d)
                    count[d] = n + 1

    def _on_claim(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self._track(None if action == "DELETED" else new, old)

    def allocated(self) -> AllocatedView:
        """Devices in use: allocated in the store, assumed after PreBind, or in flight."""
        extra: set[DeviceID] = set()
        #: claim key -> its shares: the store's version, replaced by the assumed one, replaced by the one in flight
        shares: dict[str, tuple[tuple[DeviceID, dict[str, Decimal]], ...]] = {}
        with self._lock:
            assumed = list(self._assumed.items())
        for key, (obj, written_rv) in assumed:
            ns, name = key.split("/", 1)
            real = self.claims.get(name, ns)
            if real is None or _caught_up(real, written_rv):
                with self._lock:
                    if self._assumed.get(key, (None, ""))[0] is obj:
                        del self._assumed[key]
                continue
            extra.update(claim_devices(obj))
            shares[key] = claim_shares(obj)
        with self._lock:
            for c in self._in_flight.values():
                extra.update(claim_devices(c))
                shares[self._key(c)] = claim_shares(c)
            counts = self._count_copy
            if counts is None:
                counts = self._count_copy = dict(self._count)
            log = (self._count_log, len(self._count_log))
            for key, held in self._shares.items():
                shares.setdefault(key, held)
        return AllocatedView(counts, extra, [share for held in shares.values() for share in held], log)

    # -------------------------------------------------------------- claims
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        real = self.claims.get(name, namespace)
        key = f"{namespace}/{name}"
        with self._lock:
            hit = self._assumed.get(key)
            if hit is None:
                return real
            if real is None or _caught_up(real, hit[1]):
                del self._assumed[key]
                return real
            return hit[0]

    def assume(self, written: dict[str, Any]) -> None:
        """Remember what PreBind wrote (the API server's answer) until the store has that version or a newer
        one: an older event (the finalizer update before it) must not make its devices look free."""
        with self._lock:
            self._assumed[self._key(written)] = (written, str(meta(written).get("resourceVersion") or ""))

    def signal_pending(self, uid: str, claim: dict[str, Any]) -> None:
        with self._lock:
            self._in_flight[uid] = claim

    def remove_pending(self, uid: str) -> bool:
        with self._lock:
            return self._in_flight.pop(uid, None) is not None

    def has_pending(self, uid: str) -> bool:
        with self._lock:
            return uid in self._in_flight

    def pod_claims(self, pod: Pod) -> list[dict[str, Any]]:
        """The pod's claims in spec order (foreachPodResourceClaim); raises ClaimNotUsable."""
        out = []
        for ref in pod_claim_refs(pod):
            name, check_owner = claim_name(pod, ref)
            if name is None:
                continue
            claim = self.get_claim(pod.namespace, name)
            if claim is None:
                raise ClaimNotUsable(f'resourceclaim.resource.k8s.io "{name}" not found')
            if meta(claim).get("deletionTimestamp"):
                raise ClaimNotUsable(f'resourceclaim "{name}" is being deleted')
            if check_owner and not controlled_by(claim, pod):
                raise ClaimNotUsable(f"ResourceClaim {pod.namespace}/{name} was not created for Pod "
                                     f"{pod.namespace}/{pod.name} (Pod is not owner)")
            out.append(claim)
        return out


def _caught_up(real: dict[str, Any], written_rv: str) -> bool:
    have = str(meta(real).get("resourceVersion") or "")
    if have.isdigit() and written_rv.isdigit():
        return int(have) >= int(written_rv)
    return have == written_rv


class AllocatedView:
    """`device in view`: the allocated set, without copying the whole count table."""

    __slots__ = ("_counts", "_extra", "capacity", "shared", "log")

    def __init__(self, counts: dict[DeviceID, int], extra: set[DeviceID],
                 shares: list[tuple[DeviceID, dict[str, Decimal]]] | None = None,
                 log: tuple[list[DeviceID], int] | None = None) -> None:
        self._counts = counts
        self._extra = extra
        #: DRAConsumableCapacity: devices with an allocated, assumed or in-flight share, and the capacity that
        #: those shares with a `consumedCapacity` consume (kube's AllocatedSharedDeviceIDs and AggregatedCapacity)
        self.shared: set[DeviceID] = set()
        self.capacity: dict[DeviceID, dict[str, Decimal]] = {}
        #: (the manager's change log, its length when `_counts` was copied), for readers that follow the changes
        #: (batch.DeviceTable, extended.HeldCounts)
        self.log = log
        for did, consumed in shares or ():
            self.shared.add(did)
            if consumed:
                total = self.capacity.setdefault(did, {})
                for name, value in consumed.items():
                    total[name] = total.get(name, Decimal(0)) + value

    def __contains__(self, did: object) -> bool:
        return did in self._counts or did in self._extra

    def all_dedicated(self) -> AllocatedView:
        """The view kube-scheduler has with DRAConsumableCapacity off: a share holds its device like any
        allocation (ListAllAllocatedDevices)."""
        return AllocatedView(self._counts, self._extra | self.shared, log=self.log)

    @property
    def counts(self) -> dict[DeviceID, int]:
        """The allocated devices of the claims in the store (read-only; `extra` holds the rest)."""
        return self._counts

    @property
    def extra(self) -> set[DeviceID]:
        """The devices of claims assumed after PreBind or in flight (and, from `all_dedicated`, shared ones)."""
        return self._extra

    def free_of(self, ids: frozenset[DeviceID]) -> frozenset[DeviceID]:
        """The IDs among `ids` that nobody holds, with set operations (no loop in Python over a node's devices)."""
        free = ids.difference(self._counts)
        return free.difference(self._extra) if self._extra else free

    def __len__(self) -> int:
        return len(set(self._counts) | self._extra)

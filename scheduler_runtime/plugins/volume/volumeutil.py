"""Shared helpers of the volume plugins: the pod's claims, watched PVC/PV/StorageClass/CSINode stores,
kube's not-found wording and PersistentVolume node affinity.

Upstream: kube-scheduler v1.36, the lookups of pkg/scheduler/framework/plugins/volumebinding/binder.go and
nodevolumelimits/csi.go; PV node affinity as k8s.io/component-helpers/storage/volume/helpers.go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from ...objects import Node, NodeSelector, Pod
from ...quantity import resource_amount

# the storage API conventions, re-exported: the volume plugins import them from here
from ...storageapi import ANN_BIND_COMPLETED as ANN_BIND_COMPLETED
from ...storageapi import ANN_BOUND_BY_CONTROLLER as ANN_BOUND_BY_CONTROLLER
from ...storageapi import ANN_SELECTED_NODE as ANN_SELECTED_NODE
from ...storageapi import NO_PROVISIONER as NO_PROVISIONER
from ...storageapi import WAIT_FOR_FIRST_CONSUMER as WAIT_FOR_FIRST_CONSUMER
from ...storageapi import class_of as class_of
from ...storageapi import meta, spec

PVCS = "persistentvolumeclaims"
PVS = "persistentvolumes"
CLASSES = "storageclasses.storage.k8s.io"
CSINODES = "csinodes.storage.k8s.io"
CSIDRIVERS = "csidrivers.storage.k8s.io"
CAPACITIES = "csistoragecapacities.storage.k8s.io"

#: ClusterEvent resources as the scheduler names the watched kinds (see scheduler._event_resource)
EV_PVC = "PersistentVolumeClaim"
EV_PV = "PersistentVolume"
EV_CLASS = "storage.k8s.io/StorageClass"
EV_CSINODE = "storage.k8s.io/CSINode"
EV_CSIDRIVER = "storage.k8s.io/CSIDriver"
EV_CAPACITY = "storage.k8s.io/CSIStorageCapacity"



def pod_volumes(pod: Pod) -> list[dict[str, Any]]:
    """`spec.volumes` of the pod (mappings only); an empty list costs one dict lookup."""
    vols = (pod.raw.get("spec") or {}).get("volumes")
    if not vols:
        return []
    return [v for v in vols if isinstance(v, dict)]


def claim_of(pod: Pod, vol: dict[str, Any]) -> tuple[str | None, bool]:
    """(claim name, is a generic ephemeral volume) of a volume, or (None, False) when it uses no claim.
    A generic ephemeral volume's claim is named `<pod name>-<volume name>`, as the ephemeral controller names it."""
    pvc = vol.get("persistentVolumeClaim")
    if isinstance(pvc, dict):
        return str(pvc.get("claimName") or ""), False
    if vol.get("ephemeral") is not None:
        return f"{pod.name}-{vol.get('name', '')}", True
    return None, False


def pod_claim_names(pod: Pod) -> Iterator[tuple[str, bool]]:
    for v in pod_volumes(pod):
        name, eph = claim_of(pod, v)
        if name is not None:
            yield name, eph


def not_found(resource: str, name: str) -> str:
    """apimachinery's NotFound text: `persistentvolumeclaim "x" not found`."""
    return f'{resource} "{name}" not found'


def owned_by(pvc: dict[str, Any], pod: Pod) -> bool:
    """Is the claim controlled by the pod (a generic ephemeral volume's claim)? metav1.IsControlledBy: the
    controller reference's UID is the pod's (its kind is not compared)."""
    ref = next((r for r in meta(pvc).get("ownerReferences") or [] if r.get("controller")), None)
    return ref is not None and ref.get("uid") == pod.uid


def storage_bytes(amounts: dict[str, Any] | None) -> int:
    q = (amounts or {}).get("storage")
    if q is None:
        return 0
    return resource_amount("storage", q)


def pv_node_selector(pv: dict[str, Any]) -> NodeSelector | None:
    """The PV's `spec.nodeAffinity.required`, parsed (None: no constraint)."""
    req = (spec(pv).get("nodeAffinity") or {}).get("required")
    if req is None:
        return None
    return NodeSelector(req, "spec.nodeAffinity.required")


_NOTHING = NodeSelector({"nodeSelectorTerms": []}, "")
_sel_cache: dict[tuple[str, str], tuple[Any, NodeSelector]] = {}
_sel_lock = threading.Lock()


def pv_matches_node(pv: dict[str, Any], node: Node) -> bool:
    """CheckNodeAffinity: a PV without required node affinity fits every node; parsed selectors are
    cached by (name, resourceVersion) for the very affinity object parsed (another cluster in the same
    process, e.g. a test or a second simulation, may hold a different PV under the same name and version)."""
    required = (spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    m = meta(pv)
    key = (str(m.get("name") or ""), str(m.get("resourceVersion") or ""))
    hit = _sel_cache.get(key)
    if hit is not None and hit[0] is required:
        return hit[1].matches(node)
    try:
        sel = pv_node_selector(pv) or _NOTHING
    except Exception:  # a malformed selector matches nothing, as kube's conversion error does
        sel = _NOTHING
    with _sel_lock:
        if len(_sel_cache) > 50_000:
            _sel_cache.clear()
        _sel_cache[key] = (required, sel)
    return sel.matches(node)


def hostname_nodes(pv: dict[str, Any]) -> set[str]:
    """Node names a local PV is pinned to (`kubernetes.io/hostname In [...]` terms), empty when not pinned."""
    req = (spec(pv).get("nodeAffinity") or {}).get("required") or {}
    out: set[str] = set()
    for term in req.get("nodeSelectorTerms") or []:
        names: set[str] | None = None
        for e in (term or {}).get("matchExpressions") or []:
            if e.get("key") == "kubernetes.io/hostname" and e.get("operator") == "In":
                vals = {str(v) for v in e.get("values") or []}
                names = vals if names is None else names & vals
        out |= names or set()
    return out


class VolumeStores:
    """The watched stores the volume plugins read, taken from the framework handle.

    Created eagerly when the handle has a cluster (so a real API server's reflectors start with the
    scheduler), lazily otherwise."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._stores: dict[str, Any] = {}
        self._lock = threading.Lock()

    def warm(self, *resources: str) -> None:
        if self._handle is not None and getattr(self._handle, "cluster", None) is not None:
            for r in resources:
                self.store(r)

    def store(self, resource: str) -> Any:
        s = self._stores.get(resource)
        if s is None:
            with self._lock:
                s = self._stores.get(resource)
                if s is None:
                    if self._handle is None:
                        raise RuntimeError("the volume plugins need a framework handle with a cluster")
                    s = self._stores[resource] = self._handle.informer(resource)
        return s

    def synced_store(self, resource: str, timeout: float = 10.0) -> Any:
        """`store(resource)` once it has listed (waited for on first use, as kube's informers are synced
        before scheduling starts): a store started lazily is otherwise read empty by the first cycle."""
        s = self.store(resource)
        wait = getattr(s, "wait_for_sync", None)
        if callable(wait) and not getattr(s, "synced", True):
            wait(timeout)
        return s

    def pvc(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store(PVCS).get(name, namespace)

    def pv(self, name: str) -> dict[str, Any] | None:
        return self.store(PVS).get(name)

    def storage_class(self, name: str) -> dict[str, Any] | None:
        return self.store(CLASSES).get(name)

    def csinode(self, name: str) -> dict[str, Any] | None:
        return self.store(CSINODES).get(name)

    def pvs(self) -> list[dict[str, Any]]:
        return self.store(PVS).list()


def queue_if_pod_claims(pod: Pod, obj: Any) -> bool:
    """Does a PVC event concern one of the pod's claims (same namespace, same name)?"""
    m = meta(obj if isinstance(obj, dict) else None)
    if (m.get("namespace") or "default") != pod.namespace:
        return False
    name = m.get("name")
    return any(n == name for n, _ in pod_claim_names(pod))

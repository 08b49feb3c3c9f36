"""NodeVolumeLimits (kube's CSILimits): a node's CSINode allocatable count per CSI driver bounds the number of
unique volumes (driver/volumeHandle) the pods on it and its VolumeAttachments attach.

Upstream: kube-scheduler v1.36.3, pkg/scheduler/framework/plugins/nodevolumelimits/csi.go (and csi-translation-lib
for in-tree volumes, see csimigration.py).

Volumes are counted through their claims (persistentVolumeClaim and generic ephemeral volumes): claim -> bound
PV -> `spec.csi.driver` / `spec.csi.volumeHandle`; an unbound claim counts once for its StorageClass's
provisioner. In-tree volumes (inline, or PVs / provisioners of AWS EBS, GCE PD, Azure Disk, Cinder, Portworx)
count against the CSI driver they migrated to on every node that has a CSINode, as kube does. VolumeAttachments
of the node to CSI PVs count too, once per volume. As in kube 1.36, limits come from the CSINode only (a node's
`attachable-volumes-csi-*` allocatable is no longer read).

VolumeLimitScaling (kube-scheduler v1.37.2 csi.go; alpha and off in 1.36, beta and on in 1.37): with the gate
on, a CSIDriver with `spec.preventPodSchedulingIfMissing: true` keeps a pod using its volumes off nodes whose
CSINode does not list the driver ("<driver> CSI driver is not installed on the node", Unschedulable); a driver
without a CSIDriver object, or without that field, is assumed present.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from ...framework import signers
from ...framework.cycle_state import CycleState
from ...framework.interface import SignFragment
from ...framework.nodelist import NodeList
from ...framework.plugin import Plugin
from ...framework.status import Status
from ...framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo
from ...objects import Pod
from ..gates import features_of
from .csimigration import TranslationError, inline_handle, migration_on, plugin_by_name, plugin_of, pv_handle
from .volumeutil import (
    CLASSES,
    CSIDRIVERS,
    CSINODES,
    EV_CSINODE,
    EV_PVC,
    PVCS,
    PVS,
    VolumeStores,
    claim_of,
    class_of,
    meta,
    not_found,
    owned_by,
    pod_volumes,
    queue_if_pod_claims,
    spec,
)

REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"
_STATE = "PreFilterNodeVolumeLimits"
VOLUME_ATTACHMENTS = "volumeattachments.storage.k8s.io"
EV_VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


@dataclass(frozen=True)
class _Volumes:
    """The pod's attachable volumes (driver/handle -> driver), or the error of looking them up."""

    new: dict[str, str]
    error: _LookupError | None


@dataclass(frozen=True)
class _State:
    """The pod's volumes as counted on a node with a CSINode (in-tree volumes migrated) and on one without."""

    with_csinode: _Volumes
    without_csinode: _Volumes

    def clone(self) -> _State:
        return self  # read-only


class _AttachmentIndex:
    """VolumeAttachments by spec.nodeName, kept current by the store's handler (kube's vaIndexer)."""

    def __init__(self, store: Any) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[str, dict[str, Any]]] = {}
        self._node_of: dict[str, str] = {}
        store.add_handler(self._on_event)
        for va in store.list():
            self._put(va)

    def _on_event(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if action == "DELETED" or new is None:
            self._drop(str(meta(old).get("name") or ""))
        else:
            self._put(new)

    def _put(self, va: dict[str, Any]) -> None:
        name, node = str(meta(va).get("name") or ""), str(spec(va).get("nodeName") or "")
        with self._lock:
            self._drop_locked(name)
            self._by_node.setdefault(node, {})[name] = va
            self._node_of[name] = node

    def _drop(self, name: str) -> None:
        with self._lock:
            self._drop_locked(name)

    def _drop_locked(self, name: str) -> None:
        node = self._node_of.pop(name, None)
        if node is not None:
            vas = self._by_node.get(node)
            if vas is not None:
                vas.pop(name, None)
                if not vas:
                    del self._by_node[node]

    def on(self, node: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._by_node.get(node, {}).values())


class NodeVolumeLimits(Plugin):
    name = "NodeVolumeLimits"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.stores = VolumeStores(handle)
        self.stores.warm(PVCS, PVS, CLASSES, CSINODES, VOLUME_ATTACHMENTS)
        #: unbound claims get a handle unique to this scheduler, as kube's random prefix does
        self._prefix = secrets.token_hex(16)
        self._attachments: _AttachmentIndex | None = None
        self._attachments_lock = threading.Lock()
        #: the VolumeLimitScaling gate (the config loader hands the plugin the effective gates)
        self.limit_scaling = features_of(args).enabled("VolumeLimitScaling")

    def _vas(self, node: str) -> list[dict[str, Any]]:
        if self._attachments is None:
            with self._attachments_lock:
                if self._attachments is None:
                    self._attachments = _AttachmentIndex(self.stores.store(VOLUME_ATTACHMENTS))
        return self._attachments.on(node)

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        for v in pod_volumes(pod):
            if isinstance(v.get("persistentVolumeClaim"), dict) or v.get("ephemeral") is not None \
                    or plugin_of(v) is not None:
                break
        else:
            return self.skipped
        # the pod's own volumes depend on the node only through whether it has a CSINode (in-tree migration):
        # look them up once for each case; a failed lookup is reported by Filter, as kube's per-node lookup does
        state.write(_STATE, self._pod_state(pod))
        return None

    def _pod_state(self, pod: Pod) -> _State:
        def volumes(has_csinode: bool) -> _Volumes:
            new: dict[str, str] = {}
            try:
                self._attachable(pod, has_csinode, True, new)
            except _LookupError as exc:
                return _Volumes({}, exc)
            return _Volumes(new, None)
        return _State(volumes(True), volumes(False))

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod_volumes(pod):
            return None
        s: _State | None = state.get(_STATE)
        if s is None:  # PreFilter disabled in the profile: kube's Filter looks the volumes up itself
            s = self._pod_state(pod)
        csinode = self.stores.csinode(node_info.name)
        vols = s.with_csinode if csinode is not None else s.without_csinode
        if vols.error is not None:
            exc = vols.error
            return Status.unresolvable(str(exc)) if exc.not_found else Status.as_error(str(exc))
        if not vols.new:
            return None
        if self.limit_scaling:
            for driver in sorted(set(vols.new.values())):
                if not self._driver_installed(driver, csinode):
                    return Status.unschedulable(f"{driver} CSI driver is not installed on the node")
        limits = _csinode_counts(csinode)
        if not limits:
            return None
        new = dict(vols.new)
        attached: dict[str, str] = {}
        for other in node_info.pods:
            try:
                self._attachable(other, True, False, attached)
            except _LookupError as exc:
                return Status.as_error(str(exc))
        attached_count: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)  # a volume shared with a pod on the node is attached once
            attached_count[driver] = attached_count.get(driver, 0) + 1
        for unique, driver in self._attached_by_node(node_info.name).items():
            if unique not in attached:
                attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, n in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + n > limit:
                return Status.unschedulable(REASON_MAX_VOLUME_COUNT)
        return None

    def _driver_installed(self, driver: str, csinode: dict[str, Any] | None) -> bool:
        """checkCSIDriverOnNode: only a CSIDriver that opts in (preventPodSchedulingIfMissing) is required to
        be listed by the node's CSINode; a node without a CSINode then has no driver."""
        obj = self.stores.synced_store(CSIDRIVERS).get(driver)
        if obj is None or not spec(obj).get("preventPodSchedulingIfMissing"):
            return True
        if csinode is None:
            return False
        return any((d or {}).get("name") == driver for d in spec(csinode).get("drivers") or [])

    def _attached_by_node(self, node: str) -> dict[str, str]:
        """getNodeVolumeAttachmentInfo: the node's VolumeAttachments of CSI PVs, as driver/handle -> driver."""
        out: dict[str, str] = {}
        for va in self._vas(node):
            sp = spec(va)
            attacher = str(sp.get("attacher") or "")
            pv_name = (sp.get("source") or {}).get("persistentVolumeName")
            if not attacher or pv_name is None or sp.get("nodeName") != node:
                continue
            pv = self.stores.pv(str(pv_name))
            csi = spec(pv).get("csi") if pv is not None else None
            if not isinstance(csi, dict):
                continue
            out[f"{attacher}/{csi.get('volumeHandle') or ''}"] = attacher
        return out

    def _attachable(self, pod: Pod, has_csinode: bool, new_pod: bool, result: dict[str, str]) -> None:
        for v in pod_volumes(pod):
            name, ephemeral = claim_of(pod, v)
            if name is None:
                self._inline(pod, v, has_csinode, result)
                continue
            if not name:
                raise _LookupError("PersistentVolumeClaim had no name")
            pvc = self.stores.pvc(pod.namespace, name)
            if pvc is None:
                if new_pod:
                    raise _LookupError(f"looking up PVC {pod.namespace}/{name}: "
                                       f"{not_found('persistentvolumeclaim', name)}", not_found=True)
                continue
            if ephemeral and not owned_by(pvc, pod):
                raise _LookupError(f"PVC {pod.namespace}/{name} was not created for pod {pod.namespace}/{pod.name} "
                                   f"(pod is not owner)")
            driver, handle = self._driver_info(pvc, has_csinode)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver

    @staticmethod
    def _inline(pod: Pod, vol: dict[str, Any], has_csinode: bool, result: dict[str, str]) -> None:
        """checkAttachableInlineVolume: an in-tree inline volume counts as its CSI driver's where migrated."""
        plugin = plugin_of(vol)
        if plugin is None or not migration_on(has_csinode, plugin.plugin):
            return
        try:
            handle = inline_handle(plugin, vol, pod.namespace)
        except TranslationError as exc:
            raise _LookupError(f"converting volume({vol.get('name') or ''}) from inline to csi: {exc}") from None
        result[f"{plugin.driver}/{handle}"] = plugin.driver

    def _driver_info(self, pvc: dict[str, Any], has_csinode: bool) -> tuple[str, str]:
        pv_name = spec(pvc).get("volumeName") or ""
        pv = self.stores.pv(pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(pvc, has_csinode)
        csi = spec(pv).get("csi")
        if isinstance(csi, dict):
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        plugin = plugin_of(spec(pv))
        if plugin is None or not migration_on(has_csinode, plugin.plugin):
            return "", ""
        try:
            return plugin.driver, pv_handle(plugin, pv)
        except TranslationError:
            return "", ""  # kube logs the failed translation and does not count the volume

    def _driver_info_from_class(self, pvc: dict[str, Any], has_csinode: bool) -> tuple[str, str]:
        cls_name = class_of(pvc)
        sc = self.stores.storage_class(cls_name) if cls_name else None
        if sc is None:
            return "", ""
        m = meta(pvc)
        handle = f"{self._prefix}-{m.get('namespace')}/{m.get('name')}"
        provisioner = str(sc.get("provisioner") or "")
        plugin = plugin_by_name(provisioner)
        if plugin is None:
            return provisioner, handle
        if not migration_on(has_csinode, plugin.plugin):
            return "", ""
        return plugin.driver, handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EV_CSINODE, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(EV_CSINODE, ActionType.Update), _after_csinode_updated),
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EV_PVC, ActionType.Add),
                                 lambda pod, old, new: QUEUE if queue_if_pod_claims(pod, new) else QUEUE_SKIP),
            ClusterEventWithHint(ClusterEvent(EV_VOLUME_ATTACHMENT, ActionType.Delete), _after_attachment_deleted),
        ]


def _csinode_counts(csinode: dict[str, Any] | None) -> dict[str, int]:
    """getVolumeLimits: the drivers of the CSINode that publish an allocatable count."""
    out: dict[str, int] = {}
    for d in spec(csinode).get("drivers") or []:
        count = ((d or {}).get("allocatable") or {}).get("count")
        if d.get("name") and count is not None:
            out[str(d["name"])] = int(count)
    return out


def _csinode_limits(obj: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in spec(obj if isinstance(obj, dict) else None).get("drivers") or []:
        if isinstance(d, dict) and d.get("name"):
            out[str(d["name"])] = int(((d.get("allocatable") or {}).get("count")) or 0)
    return out


def _after_csinode_updated(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSINodeUpdated: a driver's attach limit was raised (a new driver counts from 0)."""
    before = _csinode_limits(old)
    return QUEUE if any(n > before.get(d, 0) for d, n in _csinode_limits(new).items()) else QUEUE_SKIP


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodDeleted: a deleted pod bound or nominated to a node, with a claim or an in-tree
    volume that migrates to CSI."""
    if not isinstance(old, Pod) or (not old.node_name and not old.nominated_node_name):
        return QUEUE_SKIP
    for v in pod_volumes(old):
        if isinstance(v.get("persistentVolumeClaim"), dict) or v.get("ephemeral") is not None \
                or plugin_of(v) is not None:
            return QUEUE
    return QUEUE_SKIP


def _after_attachment_deleted(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterVolumeAttachmentDeleted: the pod has a claim, or an in-tree inline volume whose CSI
    driver is the deleted attachment's attacher (a volume that does not translate requeues, as kube's error)."""
    attacher = spec(old if isinstance(old, dict) else None).get("attacher")
    for v in pod_volumes(pod):
        if isinstance(v.get("persistentVolumeClaim"), dict):
            return QUEUE
        plugin = plugin_of(v)
        if plugin is None:
            continue
        try:
            inline_handle(plugin, v, pod.namespace)
        except TranslationError:
            return QUEUE
        if plugin.driver == attacher:
            return QUEUE
    return QUEUE_SKIP

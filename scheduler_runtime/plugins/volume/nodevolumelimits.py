"""NodeVolumeLimits (kube's CSILimits): a node's CSINode allocatable count per CSI driver bounds the number of
unique volumes (driver/volumeHandle) the pods on it attach.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/nodevolumelimits/csi.go.

Volumes are counted through their claims (persistentVolumeClaim and generic ephemeral volumes): claim -> bound
PV -> `spec.csi.driver` / `spec.csi.volumeHandle`; an unbound claim counts once for its StorageClass's
provisioner. Not done (documented differences): in-tree volumes (inline or PVs of GCE PD, AWS EBS, Azure Disk,
Cinder, vSphere) are not translated to their CSI drivers, so they are not counted even on nodes whose CSINode
lists the plugin as migrated.

VolumeLimitScaling (kube-scheduler v1.37.2 csi.go; alpha and off in 1.36, beta and on in 1.37): with the gate
on, a CSIDriver with `spec.preventPodSchedulingIfMissing: true` keeps a pod using its volumes off nodes whose
CSINode does not list the driver ("<driver> CSI driver is not installed on the node", Unschedulable); a driver
without a CSIDriver object, or without that field, is assumed present.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from ...framework.cycle_state import CycleState
from ...framework.nodelist import NodeList
from ...framework.plugin import Plugin
from ...framework.status import Status
from ...framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo
from ...objects import Pod
from ..gates import features_of
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
LIMIT_PREFIX = "attachable-volumes-csi-"
_STATE = "PreFilterNodeVolumeLimits"


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


@dataclass(frozen=True)
class _State:
    """The pod's attachable volumes (unique handle -> limit key), or the error of looking them up."""

    new: dict[str, str]
    error: _LookupError | None

    def clone(self) -> _State:
        return self  # read-only


def limit_key(driver: str) -> str:
    return LIMIT_PREFIX + driver


class NodeVolumeLimits(Plugin):
    name = "NodeVolumeLimits"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.stores = VolumeStores(handle)
        self.stores.warm(PVCS, PVS, CLASSES, CSINODES)
        #: unbound claims get a handle unique to this scheduler, as kube's random prefix does
        self._prefix = secrets.token_hex(16)
        #: the VolumeLimitScaling gate (the config loader hands the plugin the effective gates)
        self.limit_scaling = features_of(args).enabled("VolumeLimitScaling")

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        for v in pod_volumes(pod):
            if isinstance(v.get("persistentVolumeClaim"), dict) or v.get("ephemeral") is not None:
                break
        else:
            return Status.skip()
        # the pod's own volumes do not depend on the node: look them up once; a failed lookup is reported by
        # Filter on every node, as kube's per-node lookup does
        state.write(_STATE, self._pod_state(pod))
        return None

    def _pod_state(self, pod: Pod) -> _State:
        new: dict[str, str] = {}
        try:
            self._attachable(pod, True, new)
        except _LookupError as exc:
            return _State({}, exc)
        return _State(new, None)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:  # PreFilter disabled in the profile: kube's Filter looks the volumes up itself
            s = self._pod_state(pod)
        if s.error is not None:
            exc = s.error
            return Status.unresolvable(str(exc)) if exc.not_found else Status.as_error(str(exc))
        if not s.new:
            return None
        if self.limit_scaling:
            for driver in sorted({key[len(LIMIT_PREFIX):] for key in s.new.values()}):
                if not self._driver_installed(driver, node_info.name):
                    return Status.unschedulable(f"{driver} CSI driver is not installed on the node")
        new = dict(s.new)
        limits = self._limits(node_info)
        if not limits:
            return None
        attached: dict[str, str] = {}
        for other in node_info.pods:
            try:
                self._attachable(other, False, attached)
            except _LookupError as exc:
                return Status.as_error(str(exc))
        attached_count: dict[str, int] = {}
        for unique, key in attached.items():
            new.pop(unique, None)  # a volume shared with a pod on the node is attached once
            attached_count[key] = attached_count.get(key, 0) + 1
        new_count: dict[str, int] = {}
        for key in new.values():
            new_count[key] = new_count.get(key, 0) + 1
        for key, n in new_count.items():
            limit = limits.get(key)
            if limit is not None and attached_count.get(key, 0) + n > limit:
                return Status.unschedulable(REASON_MAX_VOLUME_COUNT)
        return None

    def _driver_installed(self, driver: str, node_name: str) -> bool:
        """checkCSIDriverOnNode: only a CSIDriver that opts in (preventPodSchedulingIfMissing) is required to
        be listed by the node's CSINode; a node without a CSINode then has no driver."""
        obj = self.stores.synced_store(CSIDRIVERS).get(driver)
        if obj is None or not spec(obj).get("preventPodSchedulingIfMissing"):
            return True
        csinode = self.stores.csinode(node_name)
        if csinode is None:
            return False
        return any((d or {}).get("name") == driver for d in spec(csinode).get("drivers") or [])

    def _limits(self, node_info: NodeInfo) -> dict[str, int]:
        out = {k: int(v) for k, v in node_info.allocatable.items() if k.startswith(LIMIT_PREFIX)}
        csinode = self.stores.csinode(node_info.name)
        for d in spec(csinode).get("drivers") or []:
            count = ((d or {}).get("allocatable") or {}).get("count")
            if d.get("name") and count is not None:
                out[limit_key(str(d["name"]))] = int(count)
        return out

    def _attachable(self, pod: Pod, new_pod: bool, result: dict[str, str]) -> None:
        for v in pod_volumes(pod):
            name, ephemeral = claim_of(pod, v)
            if name is None:
                continue  # inline volume: in-tree migration is not translated (see the module doc)
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
            driver, handle = self._driver_info(pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = limit_key(driver)

    def _driver_info(self, pvc: dict[str, Any]) -> tuple[str, str]:
        pv_name = spec(pvc).get("volumeName") or ""
        pv = self.stores.pv(pv_name) if pv_name else None
        if pv is None:
            cls_name = class_of(pvc)
            sc = self.stores.storage_class(cls_name) if cls_name else None
            if sc is None:
                return "", ""
            m = meta(pvc)
            return str(sc.get("provisioner") or ""), f"{self._prefix}-{m.get('namespace')}/{m.get('name')}"
        csi = spec(pv).get("csi") or {}
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EV_CSINODE, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(EV_CSINODE, ActionType.Update), _after_csinode_updated),
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EV_PVC, ActionType.Add),
                                 lambda pod, old, new: QUEUE if queue_if_pod_claims(pod, new) else QUEUE_SKIP),
        ]



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
    """isSchedulableAfterPodDeleted: a deleted pod with claims that was bound or nominated to a node."""
    if not isinstance(old, Pod) or (not old.node_name and not old.nominated_node_name):
        return QUEUE_SKIP
    for v in pod_volumes(old):
        if isinstance(v.get("persistentVolumeClaim"), dict) or v.get("ephemeral") is not None:
            return QUEUE
    return QUEUE_SKIP

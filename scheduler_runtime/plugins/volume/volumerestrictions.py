"""VolumeRestrictions: in-tree disk conflicts (GCE PD, AWS EBS, RBD, iSCSI) on a node, and claims with the
ReadWriteOncePod access mode already used by a scheduled pod.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go.
"""

from __future__ import annotations

from typing import Any

from ...framework import signers
from ...framework.cycle_state import CycleState
from ...framework.interface import SignFragment
from ...framework.nodelist import NodeList
from ...framework.plugin import Plugin
from ...framework.status import Status
from ...framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo
from ...objects import Pod
from .volumeutil import EV_PVC, PVCS, VolumeStores, not_found, pod_volumes, queue_if_pod_claims, spec

REASON_DISK_CONFLICT = "node(s) had no available disk"
#: volume_restrictions.go's ErrReasonReadWriteOncePodConflict (v1.36.3)
REASON_RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                        "already in-use by another pod")
_STATE = "PreFilterVolumeRestrictions"
_DISK_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


class _State:
    """The pod's ReadWriteOncePod claim names and how many scheduled pods use them."""

    __slots__ = ("rwop", "conflicts")

    def __init__(self, rwop: frozenset[str], conflicts: int) -> None:
        self.rwop = rwop
        self.conflicts = conflicts

    def refs(self, pod: Pod, namespace: str) -> int:
        if pod.namespace != namespace:
            return 0
        n = 0
        for v in pod_volumes(pod):
            c = v.get("persistentVolumeClaim")
            if isinstance(c, dict) and c.get("claimName") in self.rwop:
                n += 1
        return n

    def clone(self) -> _State:
        return _State(self.rwop, self.conflicts)


def _disk_volumes(pod: Pod) -> list[dict[str, Any]]:
    return [v for v in pod_volumes(pod) if any(v.get(k) is not None for k in _DISK_KINDS)]


def _ro(src: dict[str, Any]) -> bool:
    return bool(src.get("readOnly"))


def volume_conflict(vol: dict[str, Any], other: Pod) -> bool:
    """Does `vol` (of the incoming pod) conflict with a volume of `other`?"""
    gce, ebs, iscsi, rbd = (vol.get(k) for k in ("gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd"))
    for ev in pod_volumes(other):
        if gce is not None and (e := ev.get("gcePersistentDisk")) is not None:
            if gce.get("pdName") == e.get("pdName") and not (_ro(gce) and _ro(e)):
                return True
        if ebs is not None and (e := ev.get("awsElasticBlockStore")) is not None:
            if ebs.get("volumeID") == e.get("volumeID"):
                return True
        if iscsi is not None and (e := ev.get("iscsi")) is not None:
            if iscsi.get("iqn") == e.get("iqn") and not (_ro(iscsi) and _ro(e)):
                return True
        if rbd is not None and (e := ev.get("rbd")) is not None:
            if set(rbd.get("monitors") or ()) & set(e.get("monitors") or ()) \
                    and (rbd.get("pool") or "rbd") == (e.get("pool") or "rbd") \
                    and rbd.get("image") == e.get("image") and not (_ro(rbd) and _ro(e)):
                return True
    return False


class VolumeRestrictions(Plugin):
    name = "VolumeRestrictions"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.stores = VolumeStores(handle)
        self.stores.warm(PVCS)

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        vols = pod_volumes(pod)
        if not vols:
            return self.skipped
        needs_disk_check = any(v.get(k) is not None for v in vols for k in _DISK_KINDS)
        rwop: set[str] = set()
        for v in vols:
            c = v.get("persistentVolumeClaim")
            if not isinstance(c, dict):
                continue
            name = str(c.get("claimName") or "")
            pvc = self.stores.pvc(pod.namespace, name)
            if pvc is None:
                return Status.unresolvable(not_found("persistentvolumeclaim", name))
            if "ReadWriteOncePod" in (spec(pvc).get("accessModes") or ()):
                rwop.add(name)
        conflicts = 0
        if rwop:
            st = _State(frozenset(rwop), 0)
            used: set[str] = set()
            for ni in self.handle.snapshot.node_infos:
                for p in ni.pods:
                    if p.namespace == pod.namespace and p.uid != pod.uid:
                        for v in pod_volumes(p):
                            c = v.get("persistentVolumeClaim")
                            if isinstance(c, dict) and c.get("claimName") in st.rwop:
                                used.add(c["claimName"])
            conflicts = len(used)  # at most one pod can use a ReadWriteOncePod claim
        if not needs_disk_check and conflicts == 0:
            return self.skipped
        state.write(_STATE, _State(frozenset(rwop), conflicts))
        return None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'cannot read "{_STATE}" from cycleState')
        s.conflicts += s.refs(pod_to_add, pod.namespace)
        return None

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'cannot read "{_STATE}" from cycleState')
        s.conflicts -= s.refs(pod_to_remove, pod.namespace)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        for v in _disk_volumes(pod):
            for other in node_info.pods:
                if volume_conflict(v, other):
                    return Status.unschedulable(REASON_DISK_CONFLICT)
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'cannot read "{_STATE}" from cycleState')
        if s.conflicts > 0:
            return Status.unschedulable(REASON_RWOP_CONFLICT)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add)),  # kube 1.36 with queueing hints
            ClusterEventWithHint(ClusterEvent(EV_PVC, ActionType.Add),
                                 lambda pod, old, new: QUEUE if queue_if_pod_claims(pod, new) else QUEUE_SKIP),
        ]


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> int:
    """Queue when the deleted pod held one of the pod's disks or shared one of its claims."""
    if not isinstance(old, Pod) or old.namespace != pod.namespace:
        return QUEUE_SKIP
    if any(volume_conflict(v, old) for v in _disk_volumes(pod)):
        return QUEUE
    mine = {c.get("claimName") for v in pod_volumes(pod) if isinstance(c := v.get("persistentVolumeClaim"), dict)}
    theirs = {c.get("claimName") for v in pod_volumes(old) if isinstance(c := v.get("persistentVolumeClaim"), dict)}
    return QUEUE if mine & theirs else QUEUE_SKIP

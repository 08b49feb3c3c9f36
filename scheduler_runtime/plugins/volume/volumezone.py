"""VolumeZone: the zone/region labels of the PVs bound to the pod's claims must match the node's.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/volumezone/volume_zone.go.
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
from .volumeutil import (
    CLASSES,
    EV_CLASS,
    EV_PV,
    EV_PVC,
    PVCS,
    PVS,
    WAIT_FOR_FIRST_CONSUMER,
    VolumeStores,
    class_of,
    meta,
    not_found,
    pod_volumes,
    queue_if_pod_claims,
    spec,
)

REASON_CONFLICT = "node(s) had no available volume zone"
_STATE = "PreFilterVolumeZone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
#: in kube's order: the deprecated beta keys first
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}


def label_zones(value: str) -> frozenset[str] | None:
    """A multi-zone label value `a__b` -> {a, b}; None when a part is empty (kube ignores such labels)."""
    parts = [p.strip() for p in value.split("__")]
    if any(not p for p in parts):
        return None
    return frozenset(parts)


class VolumeZone(Plugin):
    name = "VolumeZone"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.stores = VolumeStores(handle)
        self.stores.warm(PVCS, PVS, CLASSES)

    def _topologies(self, pod: Pod) -> tuple[list[tuple[str, str, frozenset[str]]], Status | None]:
        out: list[tuple[str, str, frozenset[str]]] = []
        for v in pod_volumes(pod):
            c = v.get("persistentVolumeClaim")
            if not isinstance(c, dict):
                continue
            name = str(c.get("claimName") or "")
            if not name:
                return out, Status.unresolvable("PersistentVolumeClaim had no name")
            pvc = self.stores.pvc(pod.namespace, name)
            if pvc is None:
                return out, Status.unresolvable(not_found("persistentvolumeclaim", name))
            pv_name = spec(pvc).get("volumeName") or ""
            if not pv_name:
                cls_name = class_of(pvc)
                if not cls_name:
                    return out, Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = self.stores.storage_class(cls_name)
                if sc is None:
                    return out, Status.unresolvable(not_found("storageclass.storage.k8s.io", cls_name))
                mode = sc.get("volumeBindingMode")
                if mode is None:
                    return out, Status.unresolvable(f'VolumeBindingMode not set for StorageClass "{cls_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # unbound, bound later to a PV on the chosen node: nothing to check
                return out, Status.unresolvable("PersistentVolume had no name")
            pv = self.stores.pv(pv_name)
            if pv is None:
                return out, Status.unresolvable(not_found("persistentvolume", pv_name))
            labels = meta(pv).get("labels") or {}
            for key in TOPOLOGY_LABELS:
                if key in labels:
                    zones = label_zones(str(labels[key]))
                    if zones is not None:
                        out.append((pv_name, key, zones))
        return out, None

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        topo, st = self._topologies(pod)
        if st is not None:
            return st
        if not topo:
            return self.skipped
        state.write(_STATE, topo)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        topo = state.get(_STATE)
        if topo is None:  # PreFilter disabled in the profile (after a Skip the framework skips Filter)
            topo, st = self._topologies(pod)  # kube's VolumeZone falls back the same way
            if st is not None:
                return st
        node = node_info.node
        if node is None:
            return Status.as_error("node not found")
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return None  # a node without zone labels (single-zone cluster) fits
        for _pv, key, zones in topo:
            v = labels.get(key)
            if v is None:
                v = labels.get(_GA.get(key, key))
            if v is None or v not in zones:
                return Status.unresolvable(REASON_CONFLICT)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EV_CLASS, ActionType.Add), _after_class_added),
            # kube 1.36 with queueing hints: no UpdateNodeTaint
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(EV_PVC, ActionType.Add | ActionType.Update),
                                 lambda pod, old, new: QUEUE if queue_if_pod_claims(pod, new) else QUEUE_SKIP),
            ClusterEventWithHint(ClusterEvent(EV_PV, ActionType.Add | ActionType.Update), _after_pv_change),
        ]


def _after_class_added(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterStorageClassAdded: only a WaitForFirstConsumer class can make the pod schedulable."""
    if not isinstance(new, dict):
        return QUEUE
    return QUEUE if new.get("volumeBindingMode") == "WaitForFirstConsumer" else QUEUE_SKIP


def _pv_topologies(pv: Any) -> list[tuple[str, frozenset[str]]]:
    labels = ((pv or {}).get("metadata") or {}).get("labels") or {}
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels and (zones := label_zones(str(labels[key]))) is not None:
            out.append((key, zones))
    return out


def _after_pv_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeChange: a new PV, or a PV whose zone/region labels changed."""
    if not isinstance(new, dict):
        return QUEUE
    if old is None:
        return QUEUE
    return QUEUE if _pv_topologies(old) != _pv_topologies(new) else QUEUE_SKIP

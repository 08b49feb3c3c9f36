"""VolumeBinding: the pod's PersistentVolumeClaims must be bound, or bindable on the node, and are bound
before the pod.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/volumebinding/ (volume_binding.go, binder.go).

PreFilter: pods without claims skip the plugin; a missing, lost or deleted claim, or an unbound claim of an
Immediate class, makes the pod unschedulable (UnschedulableAndUnresolvable); claims bound to local PVs pinned
by hostname narrow the nodes. Filter: bound PVs' node affinity; unbound WaitForFirstConsumer claims take the
smallest matching Available PV (class, access modes, capacity, volume mode, selector, node affinity) or are
provisioned (a class with a provisioner other than kubernetes.io/no-provisioner whose allowedTopologies fit
the node). Reserve assumes the chosen PV bindings and selected nodes in memory so the next pod does not get
the same PV; Unreserve reverts them. PreBind writes them (PV spec.claimRef, PVC annotation
volume.kubernetes.io/selected-node) and waits up to bindTimeoutSeconds until the claims are bound.

Provisioning for a CSI driver that opts into storage capacity tracking (CSIDriver spec.storageCapacity)
needs a CSIStorageCapacity of the class, large enough and accessible from the node, or the node gets "did
not have enough free storage" (hasEnoughCapacity); those two kinds are watched from the first claim that
needs provisioning.

StorageCapacityScoring (kube-scheduler v1.37.2 volume_binding.go and scorer.go; alpha and off in 1.36, beta
and on in 1.37): with the gate on, `shape` defaults to [{0, 10}, {100, 0}] and is validated like
RequestedToCapacityRatio's; Score maps each storage class's utilization (requested / capacity, per node) through
the shape and averages over the classes: the statically bound PVs' capacities when the pod binds any, else the
capacity of the CSIStorageCapacity that admitted each provisioned claim. With the gate off `shape` is refused
and the plugin does not score (PreScore skips), as in 1.36.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import PrivateAttr, ValidationInfo, model_validator

from ...cluster.base import PatchError
from ...fielderrors import FieldErrorList, invalid
from ...framework import signers
from ...framework.cycle_state import CycleState
from ...framework.interface import SignFragment
from ...framework.nodelist import NodeList
from ...framework.plugin import Plugin, PluginArgs
from ...framework.snapshot import Snapshot
from ...framework.status import MAX_SCORE, Status
from ...framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    NodeInfo,
    PreFilterResult,
)
from ...objects import LabelSelector, Node, Pod
from ...quantity import parse_quantity
from ...storageapi import annotations
from .. import gates
from ..noderesources import MAX_CUSTOM_PRIORITY_SCORE, UtilizationShapePoint, _shape_errors
from .csimigration import ANN_MIGRATED_PLUGINS
from .volumeutil import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    CAPACITIES,
    CLASSES,
    CSIDRIVERS,
    CSINODES,
    EV_CAPACITY,
    EV_CLASS,
    EV_CSIDRIVER,
    EV_CSINODE,
    EV_PV,
    EV_PVC,
    NO_PROVISIONER,
    PVCS,
    PVS,
    WAIT_FOR_FIRST_CONSUMER,
    VolumeStores,
    class_of,
    meta,
    not_found,
    owned_by,
    pod_claim_names,
    pod_volumes,
    pv_matches_node,
    queue_if_pod_claims,
    spec,
    storage_bytes,
)

REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"  # binder.go, v1.36.3
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_STATE = "VolumeBinding"


GATE = "StorageCapacityScoring"
MAX_UTILIZATION = 100
#: the shape kube defaults to with StorageCapacityScoring on: empty storage scores best
DEFAULT_SHAPE = ((0, MAX_CUSTOM_PRIORITY_SCORE), (MAX_UTILIZATION, 0))


class VolumeBindingArgs(PluginArgs):
    """`bindTimeoutSeconds`: how long PreBind waits for the claims to be bound (default 600); `shape`: the
    utilization -> score function of StorageCapacityScoring (only with that gate on)."""

    bind_timeout_seconds: int = 600
    shape: list[UtilizationShapePoint] | None = None
    #: the StorageCapacityScoring gate these args were defaulted and validated with
    _scoring: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _kube_rules(self, info: ValidationInfo) -> VolumeBindingArgs:
        """kube-scheduler's SetDefaults_VolumeBindingArgs and ValidateVolumeBindingArgs, by the gate."""
        scoring = gates.from_context(GATE, info.context)
        if scoring and not self.shape:
            object.__setattr__(self, "shape", [UtilizationShapePoint(utilization=u, score=sc)
                                               for u, sc in DEFAULT_SHAPE])
        errs = FieldErrorList()
        if self.bind_timeout_seconds < 0:
            errs.add(("bindTimeoutSeconds",), invalid(self.bind_timeout_seconds,
                                                      "invalid BindTimeoutSeconds, should not be a negative value"))
        if scoring:
            _shape_errors(self.shape or [], ("shape",), errs)
        elif self.shape is not None:
            errs.add(("shape",), invalid([p.model_dump() for p in self.shape],
                                         f"unexpected field `shape`, remove it or turn on the feature gate {GATE}"))
        errs.raise_if_any()
        self._scoring = scoring
        return self

    @property
    def storage_capacity_scoring(self) -> bool:
        return self._scoring


def broken_linear(shape: list[tuple[int, int]], p: int) -> int:
    """kube's BuildBrokenLinearFunction: the shape's points joined by straight lines (Go integer division)."""
    for i, (u, sc) in enumerate(shape):
        if p <= u:
            if i == 0:
                return sc
            pu, ps = shape[i - 1]
            num, den = (sc - ps) * (p - pu), u - pu
            q = abs(num) // abs(den)
            return ps + (q if (num >= 0) == (den > 0) else -q)
    return shape[-1][1]


def capacity_score(shape: list[tuple[int, int]], classes: dict[str, list[int]]) -> int:
    """buildScorerFunction: each class's utilization through the shape, averaged (math.Round) over classes."""
    if not classes:
        return 0
    total = 0
    for requested, capacity in classes.values():
        util = MAX_UTILIZATION if capacity == 0 or requested > capacity else requested * MAX_UTILIZATION // capacity
        total += broken_linear(shape, util)
    q = total / len(classes)
    return int(math.floor(abs(q) + 0.5) * (1 if q >= 0 else -1))


@dataclass
class _PodVolumes:
    static: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (pv, pvc)
    provisions: list[dict[str, Any]] = field(default_factory=list)  # pvcs
    #: per provisioned claim (same order), the CSIStorageCapacity that admitted it on the node, if any
    capacities: list[dict[str, Any] | None] = field(default_factory=list)


@dataclass
class _Claim:
    """An unbound WaitForFirstConsumer claim to match to an existing PV, with the PVs that could take it
    whatever the node (in the store's order, each with whether it is pre-bound to the claim)."""

    pvc: dict[str, Any]
    requested: int
    candidates: list[tuple[dict[str, Any], int, bool]]  # (pv, capacity bytes, pre-bound to the claim)


@dataclass
class _State:
    bound: list[dict[str, Any]] = field(default_factory=list)
    delayed: list[dict[str, Any]] = field(default_factory=list)
    #: delayed claims with a selected node: (claim, node name), in the pod's order
    selected: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: the other delayed claims, smallest request first
    to_match: list[_Claim] = field(default_factory=list)
    #: a malformed claim or PV met while listing the candidates: raised by Filter when it matches claims,
    #: where the per-node matching used to raise it
    match_error: Exception | None = None
    by_node: dict[str, _PodVolumes] = field(default_factory=dict)
    all_bound: bool = True

    def clone(self) -> _State:
        return self  # shared by the clones of one cycle, as kube's stateData is


class AssumeCache:
    """PVs and PVCs as the watched stores hold them, overlaid with the versions Reserve assumed. An assumed
    version is dropped as soon as the store holds a different resourceVersion than the one it was based on."""

    def __init__(self, stores: VolumeStores) -> None:
        self.stores = stores
        self._lock = threading.Lock()
        self._pvs: dict[str, tuple[dict[str, Any], str]] = {}
        self._pvcs: dict[str, tuple[dict[str, Any], str]] = {}

    @staticmethod
    def _rv(obj: dict[str, Any] | None) -> str:
        return str(meta(obj).get("resourceVersion") or "")

    def _overlay(self, table: dict[str, tuple[dict[str, Any], str]], key: str,
                 real: dict[str, Any] | None) -> dict[str, Any] | None:
        hit = table.get(key)
        if hit is None:
            return real
        if real is None or self._rv(real) != hit[1]:
            with self._lock:
                table.pop(key, None)
            return real
        return hit[0]

    def pv(self, name: str) -> dict[str, Any] | None:
        return self._overlay(self._pvs, name, self.stores.pv(name))

    def pvc(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._overlay(self._pvcs, f"{namespace}/{name}", self.stores.pvc(namespace, name))

    def pvs(self) -> list[dict[str, Any]]:
        out = self.stores.pvs()
        if not self._pvs:
            return out
        return [self._overlay(self._pvs, meta(p).get("name", ""), p) or p for p in out]

    def assume_pv(self, new: dict[str, Any]) -> None:
        name = meta(new).get("name", "")
        with self._lock:
            base = self._pvs[name][1] if name in self._pvs else self._rv(self.stores.pv(name))
            self._pvs[name] = (new, base)

    def assume_pvc(self, new: dict[str, Any]) -> None:
        m = meta(new)
        key = f"{m.get('namespace') or 'default'}/{m.get('name')}"
        with self._lock:
            base = self._pvcs[key][1] if key in self._pvcs else self._rv(
                self.stores.pvc(m.get("namespace") or "default", m.get("name", "")))
            self._pvcs[key] = (new, base)

    def restore_pv(self, name: str) -> None:
        with self._lock:
            self._pvs.pop(name, None)

    def restore_pvc(self, namespace: str, name: str) -> None:
        with self._lock:
            self._pvcs.pop(f"{namespace}/{name}", None)


def fully_bound(pvc: dict[str, Any]) -> bool:
    return bool(spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in annotations(pvc)


def bound_to_claim(pv: dict[str, Any], pvc: dict[str, Any]) -> bool:
    ref = spec(pv).get("claimRef") or {}
    m = meta(pvc)
    if not ref or ref.get("name") != m.get("name") or (ref.get("namespace") or "") != (m.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == m.get("uid")


def _modes_ok(pvc: dict[str, Any], pv: dict[str, Any]) -> bool:
    have = set(spec(pv).get("accessModes") or ())
    return all(m in have for m in spec(pvc).get("accessModes") or ())


def claim_candidates(pvc: dict[str, Any], pvs: list[dict[str, Any]]) -> _Claim:
    """The node-independent part of FindMatchingVolume: the PVs of the claim's class that fit it (capacity,
    volume mode, volume attributes class, not being deleted; pre-bound to it, or Available with the
    claim's access modes and selector)."""
    cs = spec(pvc)
    requested = storage_bytes((cs.get("resources") or {}).get("requests"))
    cls = class_of(pvc)
    sel_raw = cs.get("selector")
    selector = LabelSelector.parse(sel_raw) if sel_raw is not None else None
    mode = cs.get("volumeMode") or "Filesystem"
    vac = cs.get("volumeAttributesClassName") or ""
    out: list[tuple[dict[str, Any], int, bool]] = []
    for pv in pvs:
        ps = spec(pv)
        if (ps.get("volumeAttributesClassName") or "") != vac:
            continue
        qty = storage_bytes(ps.get("capacity"))
        if qty < requested or (ps.get("volumeMode") or "Filesystem") != mode or meta(pv).get("deletionTimestamp"):
            continue
        if bound_to_claim(pv, pvc):
            out.append((pv, qty, True))
            continue
        phase = (pv.get("status") or {}).get("phase") or "Available"  # the embedded cluster may omit it
        if phase != "Available" or ps.get("claimRef"):
            continue
        if selector is not None and not selector.matches(meta(pv).get("labels") or {}):
            continue
        if class_of(pv) != cls or not _modes_ok(pvc, pv):
            continue
        out.append((pv, qty, False))
    return _Claim(pvc, requested, out)


def find_matching_volume(claim: _Claim, node: Node, excluded: set[str]) -> dict[str, Any] | None:
    """The PV pre-bound to the claim, else the smallest Available one that fits it on the node."""
    best: dict[str, Any] | None = None
    best_qty = 0
    for pv, qty, prebound in claim.candidates:
        if meta(pv).get("name") in excluded:
            continue
        affinity_ok = pv_matches_node(pv, node)
        if prebound:
            return pv if affinity_ok else None
        if affinity_ok and (best is None or qty < best_qty):
            best, best_qty = pv, qty
    return best


def topology_fits(terms: list[dict[str, Any]] | None, labels: dict[str, str]) -> bool:
    """MatchTopologySelectorTerms: no terms fit every node; else one term whose expressions all match."""
    if not terms:
        return True
    for t in terms:
        exprs = (t or {}).get("matchLabelExpressions") or []
        if all(labels.get(e.get("key")) in set(e.get("values") or ()) for e in exprs):
            return True
    return False


class VolumeBinding(Plugin):
    name = "VolumeBinding"
    allow_parallel_pre_bind = True  # kube 1.37: its PreBindPreFlight allows parallel PreBind
    args_model = VolumeBindingArgs

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, args: VolumeBindingArgs | None = None, handle: Any = None) -> None:
        super().__init__(args if args is not None else VolumeBindingArgs(), handle)
        self.stores = VolumeStores(handle)
        self.stores.warm(PVCS, PVS, CLASSES, CSINODES)
        self.cache = AssumeCache(self.stores)
        #: StorageCapacityScoring as the args were validated with (read once: pydantic private attributes are slow)
        self.scoring = self.args.storage_capacity_scoring
        #: the shape with scores scaled to node scores (kube multiplies by MaxNodeScore / MaxCustomPriorityScore)
        self._shape = [(p.utilization, p.score * (MAX_SCORE // MAX_CUSTOM_PRIORITY_SCORE))
                       for p in self.args.shape or []]
        #: seconds between checks while PreBind waits for the claims to be bound
        self.poll_interval = 0.5

    # ------------------------------------------------------------------ PreFilter
    def _is_delay_binding(self, pvc: dict[str, Any]) -> bool:
        name = class_of(pvc)
        if not name:
            return False
        sc = self.stores.storage_class(name)
        if sc is None:
            return False
        mode = sc.get("volumeBindingMode")
        if mode is None:
            raise ValueError(f'VolumeBindingMode not set for StorageClass "{name}"')
        return mode == WAIT_FOR_FIRST_CONSUMER

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None,
                                                                                  Status | None]:
        if not pod_volumes(pod):
            state.write(_STATE, _State())
            return None, self.skipped
        claims = list(pod_claim_names(pod))
        if not claims:
            state.write(_STATE, _State())
            return None, self.skipped
        s = _State(all_bound=False)
        immediate = False
        for name, ephemeral in claims:
            pvc = self.cache.pvc(pod.namespace, name)
            if pvc is None:
                msg = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                       if ephemeral else not_found("persistentvolumeclaim", name))
                return None, Status.unresolvable(msg)
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" bound to non-existent '
                                                 f'persistentvolume "{spec(pvc).get("volumeName") or ""}"')
            if meta(pvc).get("deletionTimestamp"):
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if ephemeral and not owned_by(pvc, pod):
                return None, Status.unresolvable(f"PVC {pod.namespace}/{name} was not created for pod "
                                                 f"{pod.namespace}/{pod.name} (pod is not owner)")
            if fully_bound(pvc):
                s.bound.append(pvc)
                continue
            try:
                delay = self._is_delay_binding(pvc)
            except ValueError as exc:
                return None, Status.as_error(str(exc))
            if delay and not spec(pvc).get("volumeName"):
                s.delayed.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status.unresolvable(REASON_UNBOUND_IMMEDIATE)
        # v1.36.3's PreFilter narrows no nodes (no PreFilterResult from bound PVs' hostname affinity): each
        # node is rejected by Filter with "didn't match PersistentVolume's node affinity", as kube counts it
        if s.delayed:
            classes = {class_of(p) for p in s.delayed}
            pvs_by_class: dict[str, list[dict[str, Any]]] = {}
            for pv in self.cache.pvs():
                c = class_of(pv)
                if c in classes:
                    pvs_by_class.setdefault(c, []).append(pv)
            for pvc in s.delayed:
                selected = annotations(pvc).get(ANN_SELECTED_NODE)
                if selected is not None:
                    s.selected.append((pvc, selected))
                elif s.match_error is None:
                    try:
                        s.to_match.append(claim_candidates(pvc, pvs_by_class.get(class_of(pvc), [])))
                    except Exception as exc:  # noqa: BLE001 - re-raised by Filter
                        s.match_error = exc
            s.to_match.sort(key=lambda c: c.requested)
        state.write(_STATE, s)
        return None, None

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        node = node_info.node
        if node is None:
            return Status.as_error("node not found")
        try:
            volumes, reasons = self._find_pod_volumes(s, node)
        except ValueError as exc:
            return Status.as_error(str(exc))
        if reasons:
            return Status.unresolvable(*reasons)
        s.by_node[node.name] = volumes
        return None

    def _find_pod_volumes(self, s: _State, node: Node) -> tuple[_PodVolumes, list[str]]:
        out = _PodVolumes()
        bound_ok, pvs_found, unbound_ok, enough_space = True, True, True, True
        for pvc in s.bound:
            pv = self.cache.pv(spec(pvc).get("volumeName") or "")
            if pv is None:
                pvs_found = False
                break
            if not pv_matches_node(pv, node):
                bound_ok = False
                break
        if s.delayed:  # matched whatever the bound claims said: kube's FindPodVolumes reports both reasons
            unbound_ok = all(selected == node.name for _pvc, selected in s.selected)
            if unbound_ok:
                if s.match_error is not None:
                    raise s.match_error
                to_provision = [pvc for pvc, _selected in s.selected]
                chosen: set[str] = set()
                for claim in s.to_match:
                    pv = find_matching_volume(claim, node, chosen)
                    if pv is None:
                        to_provision.append(claim.pvc)
                        continue
                    chosen.add(meta(pv).get("name", ""))
                    out.static.append((pv, claim.pvc))
                if to_provision:
                    unbound_ok, enough_space, capacities = self._can_provision(to_provision, node)
                    if unbound_ok and enough_space:
                        out.provisions = to_provision
                        out.capacities = capacities
        reasons = []
        if not bound_ok:
            reasons.append(REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(REASON_BIND_CONFLICT)
        if not enough_space:
            reasons.append(REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(REASON_PV_NOT_EXIST)
        return out, reasons

    def _can_provision(self, claims: list[dict[str, Any]], node: Node) -> tuple[bool, bool,
                                                                               list[dict[str, Any] | None]]:
        """checkVolumeProvisions: (provisioning possible, enough storage, the CSIStorageCapacity that admits
        each claim on the node or None when its driver does not track capacity) for every claim."""
        capacities: list[dict[str, Any] | None] = []
        for pvc in claims:
            cls = class_of(pvc)
            if not cls:
                raise ValueError(f'no class for claim "{meta(pvc).get("name")}"')
            sc = self.stores.storage_class(cls)
            if sc is None:
                raise ValueError(f'failed to find storage class "{cls}"')
            provisioner = sc.get("provisioner") or ""
            if not provisioner or provisioner == NO_PROVISIONER:
                return False, True, []
            if not topology_fits(sc.get("allowedTopologies"), node.labels):
                return False, True, []
            enough, capacity = self._has_capacity(provisioner, pvc, cls, node)
            if not enough:
                return True, False, []
            capacities.append(capacity)
        return True, True, capacities

    def _has_capacity(self, provisioner: str, pvc: dict[str, Any], cls: str,
                      node: Node) -> tuple[bool, dict[str, Any] | None]:
        """hasEnoughCapacity: only for a CSI driver that opts into capacity tracking; then a CSIStorageCapacity
        of the class whose maximumVolumeSize (else capacity) holds the request and whose nodeTopology selects
        the node (returned with the verdict: Score reads its capacity)."""
        requests = (spec(pvc).get("resources") or {}).get("requests") or {}
        if "storage" not in requests:
            return True, None
        driver = self.stores.synced_store(CSIDRIVERS).get(provisioner)
        if driver is None or not spec(driver).get("storageCapacity"):
            return True, None
        size = storage_bytes(requests)
        for cap in self.stores.synced_store(CAPACITIES).list():
            if cap.get("storageClassName") != cls:
                continue
            limit = cap.get("maximumVolumeSize") if cap.get("maximumVolumeSize") is not None else cap.get("capacity")
            if limit is None or storage_bytes({"storage": limit}) < size:
                continue
            topo = cap.get("nodeTopology")
            if topo is None:
                continue
            try:
                if LabelSelector.parse_or_raise(topo).matches(node.labels):
                    return True, cap
            except ValueError:  # kube logs the conversion error and treats the capacity as unavailable
                continue
        return False, None

    # ------------------------------------------------------------------ PreScore / Score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        """Without StorageCapacityScoring kube builds no scorer and PreScore skips; with it, it scores."""
        if not self.scoring:
            return self.skipped
        if state.get(_STATE) is None:
            return Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        return None

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        """Score on many nodes: zeros at once for a pod with no claims to bind (most pods), else per node."""
        out = np.zeros(len(rows), dtype=np.int64)
        s: _State | None = state.get(_STATE)
        if not self.scoring or s is None or not s.by_node:
            return out
        infos = snapshot.node_infos
        for i, r in enumerate(rows.tolist()):
            volumes = s.by_node.get(infos[r].name)
            if volumes is not None:
                out[i] = self._score_volumes(volumes)
        return out

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        if not self.scoring:
            return 0, None
        s: _State | None = state.get(_STATE)
        if s is None:
            return 0, Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        volumes = s.by_node.get(node_info.name)
        if volumes is None:
            return 0, None
        return self._score_volumes(volumes), None

    def _score_volumes(self, volumes: _PodVolumes) -> int:
        classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
        if volumes.static:
            for pv, pvc in volumes.static:
                r = classes.setdefault(str(spec(pv).get("storageClassName") or ""), [0, 0])  # spec only, as kube
                r[0] += storage_bytes((spec(pvc).get("resources") or {}).get("requests"))
                r[1] += storage_bytes(spec(pv).get("capacity"))
        else:
            for pvc, cap in zip(volumes.provisions, volumes.capacities, strict=False):
                if cap is None:
                    continue
                r = classes.setdefault(str(spec(pvc).get("storageClassName") or ""), [0, 0])
                # the class's capacity on the node is the capacity object's, however many claims use it
                r[1] = storage_bytes({"storage": cap.get("capacity")}) if cap.get("capacity") is not None else 0
                r[0] += storage_bytes((spec(pvc).get("resources") or {}).get("requests"))
        return capacity_score(self._shape, classes)

    # ------------------------------------------------------------------ Reserve / Unreserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        volumes = s.by_node.get(node_name)
        if volumes is None or (not volumes.static and not volumes.provisions):
            s.all_bound = True
            return None
        s.all_bound = False
        assumed_static = []
        for pv, pvc in volumes.static:
            new = pv
            if not bound_to_claim(pv, pvc) or ANN_BOUND_BY_CONTROLLER not in annotations(pv):
                new = _bind_volume_to_claim(pv, pvc)
                self.cache.assume_pv(new)
            assumed_static.append((new, pvc))
        assumed_claims = []
        for pvc in volumes.provisions:
            new = {**pvc, "metadata": {**meta(pvc), "annotations": {**annotations(pvc), ANN_SELECTED_NODE: node_name}}}
            self.cache.assume_pvc(new)
            assumed_claims.append(new)
        s.by_node[node_name] = _PodVolumes(assumed_static, assumed_claims, volumes.capacities)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s: _State | None = state.get(_STATE)
        volumes = s.by_node.get(node_name) if s is not None else None
        if volumes is None:
            return
        for pv, _pvc in volumes.static:
            self.cache.restore_pv(meta(pv).get("name", ""))
        for pvc in volumes.provisions:
            self.cache.restore_pvc(meta(pvc).get("namespace") or "default", meta(pvc).get("name", ""))

    # ------------------------------------------------------------------ PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """kube's PreBindPreFlight: PreBind has work only when some claim is still to be bound."""
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        if s.all_bound:
            return self.skipped
        if node_name not in s.by_node:
            return Status.as_error(f'no pod volume found for node "{node_name}"')
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s: _State | None = state.get(_STATE)
        if s is None:
            return Status.as_error(f'reading "{_STATE}" from cycleState: not found')
        if s.all_bound:
            return None
        volumes = s.by_node.get(node_name)
        if volumes is None:
            return Status.as_error(f'no pod volumes found for node "{node_name}"')
        cluster = self.handle.cluster
        #: resourceVersions the API server gave the objects written here: the watch cache may still hold
        #: older ones, which checkBindings waits out instead of reading them
        written: dict[str, str] = {}
        try:
            for pv, _pvc in volumes.static:
                m = meta(pv)
                new = cluster.patch_object(PVS, m["name"], None, {
                    "metadata": {"resourceVersion": m.get("resourceVersion"),
                                 "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}},
                    "spec": {"claimRef": spec(pv)["claimRef"]}})
                written[f"pv/{m['name']}"] = str(meta(new).get("resourceVersion") or "")
            for pvc in volumes.provisions:
                m = meta(pvc)
                new = cluster.patch_object(PVCS, m["name"], m.get("namespace") or "default", {
                    "metadata": {"resourceVersion": m.get("resourceVersion"),
                                 "annotations": {ANN_SELECTED_NODE: node_name}}})
                written[f"pvc/{m.get('namespace') or 'default'}/{m['name']}"] = str(
                    meta(new).get("resourceVersion") or "")
        except PatchError as exc:
            return Status.as_error(f"binding volumes: {exc}")
        ni = self.handle.snapshot.get(node_name)
        node = ni.node if ni is not None else None
        deadline = time.monotonic() + self.args.bind_timeout_seconds
        cancelled = state.pre_bind_cancelled  # another PreBind running beside this one failed
        while True:
            try:
                if self._bindings_done(volumes, node_name, node, written):
                    return None
            except ValueError as exc:
                return Status.as_error(f"binding volumes: {exc}")
            if time.monotonic() >= deadline:
                return Status.as_error("binding volumes: context deadline exceeded")
            pause = min(self.poll_interval, max(0.0, deadline - time.monotonic()))
            if cancelled is None:
                time.sleep(pause)
            elif cancelled.wait(pause):
                return Status.as_error("binding volumes: context canceled")

    def _bindings_done(self, volumes: _PodVolumes, node_name: str, node: Node | None,
                       written: dict[str, str] | None = None) -> bool:
        written = written or {}
        for pv, pvc in volumes.static:
            name = meta(pv).get("name", "")
            cur = self.stores.pv(name)
            if cur is None:
                raise ValueError(f'failed to get pv "{name}" from cache')
            if _older(cur, written.get(f"pv/{name}")):
                return False
            ref = spec(cur).get("claimRef") or {}
            if not ref.get("name"):
                raise ValueError(f'ClaimRef got reset for pv "{name}"')
            m = meta(pvc)
            claim = self.stores.pvc(m.get("namespace") or "default", m.get("name", ""))
            if claim is None:
                raise ValueError(f'failed to get pvc "{m.get("namespace")}/{m.get("name")}" from cache')
            if not fully_bound(claim):
                return False
        for pvc in volumes.provisions:
            m = meta(pvc)
            claim = self.stores.pvc(m.get("namespace") or "default", m.get("name", ""))
            if claim is None:
                raise ValueError(f'failed to get pvc "{m.get("namespace")}/{m.get("name")}" from cache')
            if _older(claim, written.get(f"pvc/{m.get('namespace') or 'default'}/{m.get('name')}")):
                return False
            selected = annotations(claim).get(ANN_SELECTED_NODE)
            if selected is None:
                raise ValueError(f'selectedNode annotation reset for PVC "{m.get("name")}"')
            if selected != node_name:
                raise ValueError(f'selectedNode annotation value "{selected}" not set to scheduled node '
                                 f'"{node_name}"')
            if not fully_bound(claim):
                return False
            pv_name = spec(claim).get("volumeName") or ""
            pv = self.stores.pv(pv_name)
            if pv is None:
                return False
            if node is not None and not pv_matches_node(pv, node):
                raise ValueError(f'pv "{pv_name}" node affinity doesn\'t match node "{node_name}"')
        return True

    # ------------------------------------------------------------------ events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        """kube-scheduler 1.36 with queueing hints: no UpdateNodeTaint, CSIDriver updates only."""
        au = ActionType.Add | ActionType.Update
        return [
            ClusterEventWithHint(ClusterEvent(EV_CLASS, au), _after_class_change),
            ClusterEventWithHint(ClusterEvent(EV_PVC, au),
                                 lambda pod, old, new: QUEUE if queue_if_pod_claims(pod, new) else QUEUE_SKIP),
            ClusterEventWithHint(ClusterEvent(EV_PV, au)),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(EV_CSINODE, au), _after_csinode_change),
            ClusterEventWithHint(ClusterEvent(EV_CSIDRIVER, ActionType.Update), _after_csidriver_change),
            ClusterEventWithHint(ClusterEvent(EV_CAPACITY, au), _after_capacity_change),
        ]


# ------------------------------------------------------------------------------------------ queueing hints
def _after_class_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterStorageClassChange: any new class; an update only when allowedTopologies changed."""
    if old is None:
        return QUEUE
    return QUEUE if (old.get("allowedTopologies") or []) != (new.get("allowedTopologies") or []) else QUEUE_SKIP


def _after_csinode_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSINodeChange: any new CSINode; an update when its migrated-plugins annotation changed."""
    if old is None:
        return QUEUE
    return QUEUE if annotations(old).get(ANN_MIGRATED_PLUGINS) != annotations(new).get(ANN_MIGRATED_PLUGINS) \
        else QUEUE_SKIP


def _after_csidriver_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSIDriverChange: a driver of one of the pod's inline CSI volumes stopped tracking
    storage capacity."""
    name = meta(new).get("name")
    for v in pod_volumes(pod):
        csi = v.get("csi")
        if isinstance(csi, dict) and csi.get("driver") == name and spec(old).get("storageCapacity") is True \
                and spec(new).get("storageCapacity") is not True:
            return QUEUE
    return QUEUE_SKIP


def _volume_limit(capacity: dict[str, Any]) -> int | None:
    """The largest volume a CSIStorageCapacity allows (maximumVolumeSize, else capacity), as Quantity.Value()."""
    q = capacity.get("maximumVolumeSize")
    if q is None:
        q = capacity.get("capacity")
    return None if q is None else math.ceil(parse_quantity(q))


def _after_capacity_change(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSIStorageCapacityChange: any new capacity; an update that raised the volume limit."""
    if old is None:
        return QUEUE
    before, after = _volume_limit(old), _volume_limit(new)
    return QUEUE if after is not None and (before is None or after > before) else QUEUE_SKIP


def _older(cached: dict[str, Any], written_rv: str | None) -> bool:
    """The cached object predates the version PreBind wrote (kube's CompareResourceVersion > 0)."""
    try:
        return written_rv is not None and int(meta(cached).get("resourceVersion") or 0) < int(written_rv)
    except ValueError:
        return False


def _bind_volume_to_claim(pv: dict[str, Any], pvc: dict[str, Any]) -> dict[str, Any]:
    m = meta(pvc)
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": m.get("namespace") or "default",
           "name": m.get("name"), "uid": m.get("uid"), "resourceVersion": m.get("resourceVersion")}
    ref = {k: v for k, v in ref.items() if v}
    return {**pv, "metadata": {**meta(pv), "annotations": {**annotations(pv), ANN_BOUND_BY_CONTROLLER: "yes"}},
            "spec": {**spec(pv), "claimRef": ref}}


"""NodeResourcesFit and NodeResourcesBalancedAllocation, as numpy expressions over the node table.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/noderesources/ (fit.go, balanced_allocation.go,
resource_allocation.go, least_allocated.go, most_allocated.go, requested_to_capacity_ratio.go).

Formulas follow kube-scheduler: integer arithmetic that truncates like Go, non-zero requests (100m CPU,
200 MiB) for cpu/memory in Fit scoring, real requests in BalancedAllocation, math.Round half away from
zero in RequestedToCapacityRatio.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ..fielderrors import (
    FieldErrorList,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import Handle, SignFragment
from ..framework.node_table import PODS, NodeTable, RowValues
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin, PluginArgs
from ..framework.snapshot import Snapshot
from ..framework.status import Code, Status
from ..framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo
from ..labelsel import label_key_errors
from ..objects import Node, Pod
from . import gates
from .dynamicresources.claims import DraManager
from .dynamicresources.extended import DraScorer, after_device_class_change, is_dra_extended_name

MAX_CUSTOM_PRIORITY_SCORE = 10
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


class ResourceSpec(PluginArgs):
    name: str = ""
    weight: int = 0


class UtilizationShapePoint(PluginArgs):
    utilization: int = 0
    score: int = 0


class RequestedToCapacityRatioParam(PluginArgs):
    shape: list[UtilizationShapePoint] = Field(default_factory=list)


SCORING_TYPES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _default_weights(v: list[ResourceSpec]) -> list[ResourceSpec]:
    """SetDefaults: no resources means cpu and memory; a weight left at 0 means 1."""
    if not v:
        return _default_resources()
    for r in v:
        if r.weight == 0:
            r.weight = 1
    return v


class ScoringStrategy(PluginArgs):
    # kube-scheduler defaults the type only when scoringStrategy itself is absent (see NodeResourcesFitArgs)
    type: str = Field("", json_schema_extra={"enum": list(SCORING_TYPES)})
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @field_validator("resources")
    @classmethod
    def _weights(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        return _default_weights(v)


def _default_strategy() -> ScoringStrategy:
    return ScoringStrategy(type="LeastAllocated")


def _shape_errors(shape: list[UtilizationShapePoint], path: tuple[str | int, ...], errs: FieldErrorList) -> None:
    """kube-scheduler's validateFunctionShape."""
    if not shape:
        errs.add(path, required("at least one point must be specified"))
        return
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.add((*path, i, "utilization"),
                     invalid(shape[i].utilization, "values must be sorted in increasing order"))
            break
    for i, p in enumerate(shape):
        if not 0 <= p.utilization <= 100:
            errs.add((*path, i, "utilization"), invalid(p.utilization, "not in valid range [0, 100]"))
        if not 0 <= p.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.add((*path, i, "score"), invalid(p.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))


class _ExtendedResourceGatedArgs(PluginArgs):
    """Args that remember the DRAExtendedResource gate they were validated with
    (kube hands the plugin its feature.Features)."""

    _extended_resource: bool = PrivateAttr(default=True)

    @property
    def extended_resource(self) -> bool:
        return self._extended_resource

    @model_validator(mode="after")
    def _gates(self, info: ValidationInfo) -> _ExtendedResourceGatedArgs:
        self._extended_resource = gates.from_context("DRAExtendedResource", info.context)
        return self


class NodeResourcesFitArgs(_ExtendedResourceGatedArgs):
    ignored_resources: list[str] = Field(default_factory=list)
    ignored_resource_groups: list[str] = Field(default_factory=list)
    scoring_strategy: ScoringStrategy = Field(default_factory=_default_strategy)

    @field_validator("scoring_strategy", mode="before")
    @classmethod
    def _null_strategy(cls, v: object) -> object:
        return _default_strategy() if v is None else v

    @model_validator(mode="after")
    def _kube_rules(self) -> NodeResourcesFitArgs:
        """kube-scheduler's ValidateNodeResourcesFitArgs, every problem at once."""
        errs = FieldErrorList()
        for i, res in enumerate(self.ignored_resources):
            for msg in label_key_errors(res):
                errs.add(("ignoredResources", i), invalid(res, msg))
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                errs.add(("ignoredResourceGroups", i), invalid(group, "resource group name can't contain '/'"))
            for msg in label_key_errors(group):
                errs.add(("ignoredResourceGroups", i), invalid(group, msg))
        s = self.scoring_strategy
        sp = ("scoringStrategy",)
        if s.type not in SCORING_TYPES:
            errs.add((*sp, "type"), not_supported(s.type, sorted(SCORING_TYPES)))
        for i, r in enumerate(s.resources):
            if not 0 < r.weight <= 100:
                errs.add((*sp, "resources", i, "weight"),
                         invalid(r.weight, f"resource weight of {r.name} not in valid range (0, 100]"))
        if s.type == "RequestedToCapacityRatio":
            if s.requested_to_capacity_ratio is None:
                errs.add((*sp, "requestedToCapacityRatio"),
                         required("must be specified when type is RequestedToCapacityRatio"))
            else:
                _shape_errors(s.requested_to_capacity_ratio.shape, (*sp, "requestedToCapacityRatio", "shape"), errs)
        elif s.requested_to_capacity_ratio is not None:
            errs.add((*sp, "requestedToCapacityRatio"),
                     forbidden("must be nil when type is not RequestedToCapacityRatio"))
        errs.raise_if_any()
        return self


class NodeResourcesBalancedAllocationArgs(_ExtendedResourceGatedArgs):
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)

    @field_validator("resources")
    @classmethod
    def _weights(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        return _default_weights(v)

    @model_validator(mode="after")
    def _kube_rules(self) -> NodeResourcesBalancedAllocationArgs:
        """kube-scheduler's ValidateNodeResourcesBalancedAllocationArgs."""
        errs = FieldErrorList()
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                errs.add(("resources", i, "name"), duplicate(r.name))
            seen.add(r.name)
            if r.weight != 1:
                errs.add(("resources", i, "weight"), invalid(r.weight, "must be 1"))
        errs.raise_if_any()
        return self


def go_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero, like Go (numpy's // floors)."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.sign(a) * np.sign(b)) < 0, -q, q)


def is_extended(name: str) -> bool:
    return name not in BASE_RESOURCES and name != "pods" and not name.startswith("hugepages-") and "/" in name


# ------------------------------------------------------------------------------------------ Fit


class _FitState:
    """PreFilter's computed request: resource columns and amounts (batch filter), and the same as
    (name, amount) pairs in message order for the per-node filter the preemption dry run calls per victim."""

    __slots__ = ("cols", "amounts", "names", "empty", "pairs", "dra")

    def __init__(self, cols: np.ndarray, amounts: np.ndarray, names: list[str], empty: bool,
                 dra: frozenset[str] = frozenset()) -> None:
        self.cols, self.amounts, self.names, self.empty = cols, amounts, names, empty
        self.pairs = list(zip(names, amounts.tolist(), strict=True))
        #: requested resources a DeviceClass backs: DRA provides them on nodes that do not advertise them
        self.dra = dra

    def clone(self) -> _FitState:
        return self


_FIT_KEY = "PreFilterNodeResourcesFit"


class NodeResourcesFit(Plugin):
    name = "NodeResourcesFit"
    args_model = NodeResourcesFitArgs

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: the pod's requests, containers, init containers and overhead (kube's
        SignPod); a pod requesting an extended resource a DeviceClass backs is not signed."""
        return _sign_resources(self._dra_handle(), pod)

    def __init__(self, args: NodeResourcesFitArgs | None = None, handle: Handle | None = None) -> None:
        super().__init__(args or NodeResourcesFitArgs(), handle)
        a: NodeResourcesFitArgs = self.args
        #: DRAExtendedResource, read once: a pydantic private attribute costs microseconds per read
        self.dra_extended = a.extended_resource
        self.ignored = set(a.ignored_resources)
        self.ignored_groups = set(a.ignored_resource_groups)
        s = a.scoring_strategy
        self.strategy = s.type
        self.resources = [(r.name, r.weight) for r in s.resources]
        #: only cpu and memory are scored (the default): the non-zero request columns, see _score_cpu_memory
        self._cpu_memory_only = bool(self.resources) and all(n in ("cpu", "memory") for n, _ in self.resources)
        self.shape: list[tuple[int, int]] = []
        self.dra_scorer = DraScorer()
        #: PreFilter's _FitState by request shape, for the table it was made for: a workload's pods share a few
        #: shapes; only shapes without extended resources, whose DRA backing can change, are kept
        self._fit_by_shape: dict[tuple[tuple[str, int], ...], tuple[NodeTable, _FitState]] = {}
        if s.type == "RequestedToCapacityRatio" and s.requested_to_capacity_ratio is not None:
            scale = 100 // MAX_CUSTOM_PRIORITY_SCORE
            self.shape = [(p.utilization, p.score * scale) for p in s.requested_to_capacity_ratio.shape]

    def _dra_handle(self) -> Handle | None:
        """The handle DRA-backed extended resources are looked up through, None with DRAExtendedResource off."""
        return self.handle if self.dra_extended else None

    # ---------------------------------------------------------------- filter
    def _skip_resource(self, name: str) -> bool:
        if not is_extended(name):
            return False
        return name in self.ignored or name.split("/", 1)[0] in self.ignored_groups

    def _state(self, state: CycleState, pod: Pod, table: NodeTable) -> _FitState:
        st = state.get(_FIT_KEY)
        if st is None:
            shape = tuple(pod.requests.items())
            kept = self._fit_by_shape.get(shape)
            if kept is not None and kept[0] is table:  # a table's columns only ever grow: the indices hold
                st = kept[1]
            else:
                st = self._new_state(pod, table)
                if not any("/" in n for n in st.names):
                    if len(self._fit_by_shape) >= 256:
                        self._fit_by_shape.clear()
                    self._fit_by_shape[shape] = (table, st)
            state.write(_FIT_KEY, st)
        return st

    def _new_state(self, pod: Pod, table: NodeTable) -> _FitState:
        names = [n for n, v in pod.requests.items() if v > 0 and n != "pods" and not self._skip_resource(n)]
        order = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}
        names.sort(key=lambda n: (order.get(n, 3), n))
        cols = np.array([table.column(n) for n in names], dtype=np.int64)
        amounts = np.array([pod.requests[n] for n in names], dtype=np.int64)
        return _FitState(cols, amounts, names, not any(v > 0 for v in pod.requests.values()),
                         self._dra_backed(pod, names))

    def _dra_backed(self, pod: Pod, names: list[str]) -> frozenset[str]:
        """shouldDelegateResourceToDRA's class lookup (DRAExtendedResource): the names some DeviceClass backs,
        through the cluster's DRA manager (none without a cluster, as with a nil draManager)."""
        if self.handle is None or getattr(self.handle, "cluster", None) is None or not any("/" in n for n in names) \
                or not self.dra_extended:
            return frozenset()
        mapping = DraManager.for_handle(self.handle).resolver.mapping()
        return frozenset(n for n in names if n in mapping and is_dra_extended_name(n)) if mapping else frozenset()

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> None:
        self._state(state, pod, nodes.snapshot.table)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        reasons: list[str] = []
        unresolvable = False
        alloc = node_info.allocatable
        allowed = alloc.get("pods", 0)
        if len(node_info.pods) + 1 > allowed:
            reasons.append("Too many pods")
        fs: _FitState | None = state.get(_FIT_KEY)
        if fs is None:
            names = [n for n, v in pod.requests.items() if v > 0 and n != "pods" and not self._skip_resource(n)]
            order = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}
            pairs = [(n, pod.requests[n]) for n in sorted(names, key=lambda n: (order.get(n, 3), n))]
            dra = self._dra_backed(pod, names)
        else:
            pairs, dra = fs.pairs, fs.dra
        if pairs:
            requested = node_info.requested
            for n, want in pairs:
                have = alloc.get(n, 0)
                if n in dra and have <= 0:
                    continue  # DynamicResources allocates it from the node's devices
                if want > have - requested.get(n, 0):
                    reasons.append(f"Insufficient {n}")
                    if want > have:
                        unresolvable = True
        if not reasons:
            return None
        return Status(Code.UnschedulableAndUnresolvable if unresolvable else Code.Unschedulable, *reasons)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        table = snapshot.table
        st = self._state(state, pod, table)
        alloc = table.allocatable
        req = table.requested
        pods_ok = req[:, PODS] < alloc[:, PODS]  # one more pod fits: requested + 1 <= allocatable
        # one 1-D check per requested resource: column slices of the table, no 2-D gather of its columns
        res_ok: list[np.ndarray] = []
        ok = pods_ok
        if not st.empty:
            for n, c, want in zip(st.names, st.cols.tolist(), st.amounts.tolist(), strict=True):
                have = alloc[:, c]
                col_ok = have - req[:, c] >= want
                if n in st.dra:  # delegated to DynamicResources where the node does not advertise it
                    col_ok |= have <= 0
                res_ok.append(col_ok)
                ok = ok & col_ok

        shared: dict[tuple[bool, tuple[str, ...]], Status] = {}

        def status(row: int) -> Status:
            reasons = [] if pods_ok[row] else ["Too many pods"]
            unresolvable = False
            for j, n in enumerate(st.names[:len(res_ok)]):
                if not res_ok[j][row]:
                    reasons.append(f"Insufficient {n}")
                    if st.amounts[j] > alloc[row, st.cols[j]]:
                        unresolvable = True
            # nodes failing for the same reasons share one Status (read-only once recorded)
            key = (unresolvable, tuple(reasons))
            got = shared.get(key)
            if got is None:
                got = shared[key] = Status(Code.UnschedulableAndUnresolvable if unresolvable else Code.Unschedulable,
                                           *reasons)
            return got

        # a row's Status depends only on which checks fail and whether a request exceeds allocatable outright
        def keys() -> np.ndarray:  # bit 0 pods, bits 1.. the failing resources, bit 62 unresolvable
            out = (~pods_ok).astype(np.int64)
            if res_ok:
                # only failing rows are asked about: a few of thousands, so the bits are built for those alone
                bad = np.flatnonzero(~ok)
                res_bad = ~np.stack([c[bad] for c in res_ok], axis=1)
                over = ((st.amounts > alloc[bad[:, None], st.cols]) & res_bad).any(axis=1)
                out[bad] |= ((res_bad.astype(np.int64) << np.arange(1, len(st.names) + 1, dtype=np.int64)).sum(axis=1)
                             | over.astype(np.int64) << 62)
            return out

        return FilterBatch(ok, status, keys if len(st.names) < 62 else None)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """kube-scheduler 1.36 with queueing hints (SchedulerQueueingHints and InPlacePodVerticalScaling are
        locked on): pod deletions and scale-downs, node additions and allocatable changes; with DRAExtendedResource
        (on in 1.36) DeviceClass additions and updates."""
        events = [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete | ActionType.UpdatePodScaleDown),
                                       _after_pod_event),
                  ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeAllocatable),
                                       self._after_node_change)]
        if self.dra_extended:  # DRAExtendedResource: a class may now back a resource the pod requests
            events.append(ClusterEventWithHint(ClusterEvent("resource.k8s.io/DeviceClass",
                                                            ActionType.Add | ActionType.Update),
                                               _after_device_class_change))
        return events

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterNodeChange with the DRA manager: a resource some class backs is left to
        DynamicResources on a node that does not advertise it."""
        names = [n for n, v in pod.requests.items() if v > 0 and n != "pods"]
        return _after_node_change(pod, old, new, self._dra_backed(pod, names))

    # ---------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> None:
        return None

    def _alloc_req(self, pod: Pod, table: NodeTable, rows: np.ndarray, snapshot: Snapshot | None = None
                   ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """(allocatable, requested-with-pod, weight) per scored resource, over `rows`."""
        out = []
        for name, weight in self.resources:
            if name in ("cpu", "memory"):
                j = 0 if name == "cpu" else 1
                col = table.columns[name]
                alloc = table.alloc[rows, col]
                req = table.nz[rows, j] + pod.scoring_requests[name]
            else:
                want = pod.requests.get(name, 0)
                col = table.columns.get(name)
                dra = (dra_columns(self._dra_handle(), self.dra_scorer, name, snapshot, rows, col)
                       if want and snapshot is not None else None)
                if dra is not None:
                    out.append((dra[0], dra[1] + want, weight))
                    continue
                if col is None or (is_extended(name) and want == 0):
                    z = np.zeros(len(rows), dtype=np.int64)
                    out.append((z, z, weight))
                    continue
                alloc = table.alloc[rows, col]
                req = table.req[rows, col] + want
            out.append((alloc, req, weight))
        return out

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        if self._cpu_memory_only and self.strategy != "RequestedToCapacityRatio":
            table = snapshot.table
            got = _kept_or_scored(self, snapshot, tuple(pod.scoring_requests[n] for n, _ in self.resources),
                                  lambda r: self._score_cpu_memory(pod, table, r), rows)
            if got is not None:
                return got
        parts = self._alloc_req(pod, snapshot.table, rows, snapshot)
        if self.strategy != "RequestedToCapacityRatio" and all((a > 0).all() for a, _, _ in parts):
            return self._score_all_allocatable(parts, len(rows))
        total = np.zeros(len(rows), dtype=np.int64)
        wsum = np.zeros(len(rows), dtype=np.int64)
        for alloc, req, w in parts:
            has = alloc > 0
            safe = np.where(has, alloc, 1)
            if self.strategy == "LeastAllocated":
                s = np.where(req > alloc, 0, (alloc - req) * 100 // safe)
                total += np.where(has, s * w, 0)
                wsum += np.where(has, w, 0)
            elif self.strategy == "MostAllocated":
                s = np.minimum(req, alloc) * 100 // safe
                total += np.where(has, s * w, 0)
                wsum += np.where(has, w, 0)
            else:
                util = np.where(req > alloc, 100, req * 100 // safe)
                s = self._broken_linear(util)
                use = has & (s > 0)
                total += np.where(use, s * w, 0)
                wsum += np.where(use, w, 0)
        if self.strategy == "RequestedToCapacityRatio":
            q = total / np.where(wsum > 0, wsum, 1)
            rounded = np.floor(np.abs(q) + 0.5) * np.sign(q)  # math.Round: half away from zero
            return np.where(wsum > 0, rounded, 0).astype(np.int64)
        return np.where(wsum > 0, total // np.where(wsum > 0, wsum, 1), 0)

    def _score_cpu_memory(self, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray | None:
        """`_alloc_req` then `_score_all_allocatable` when only cpu and memory are scored, in fewer array
        operations (a shortfall clipped to zero instead of masked afterwards: the same integers). None when some
        scored node has none of a resource: the general path then handles those rows."""
        least = self.strategy == "LeastAllocated"
        total: np.ndarray | None = None
        wsum = 0
        for name, w in self.resources:
            alloc = table.alloc[rows, table.columns[name]]
            if not (alloc > 0).all():
                return None
            req = table.nz[rows, 0 if name == "cpu" else 1] + pod.scoring_requests[name]
            s = (np.maximum(alloc - req, 0) if least else np.minimum(req, alloc)) * 100 // alloc
            if w != 1:
                s *= w
            total = s if total is None else total + s
            wsum += w
        if total is None or wsum <= 0:
            return np.zeros(len(rows), dtype=np.int64)
        return total // wsum

    def _score_all_allocatable(self, parts: list[tuple[np.ndarray, np.ndarray, int]], n: int) -> np.ndarray:
        """Least/MostAllocated when every scored node has every scored resource (the usual case): the same
        integer arithmetic as the general path, without its per-row masks, since each is all true there."""
        total = np.zeros(n, dtype=np.int64)
        wsum = 0
        least = self.strategy == "LeastAllocated"
        for alloc, req, w in parts:
            if least:
                s = (alloc - req) * 100 // alloc
                s[req > alloc] = 0
            else:
                s = np.minimum(req, alloc) * 100 // alloc
            total += s if w == 1 else s * w
            wsum += w
        if wsum <= 0:
            return np.zeros(n, dtype=np.int64)
        return total // wsum

    def _broken_linear(self, p: np.ndarray) -> np.ndarray:
        shape = self.shape
        out = np.full(p.shape, shape[-1][1], dtype=np.int64)
        done = np.zeros(p.shape, dtype=bool)
        for i, (u, s) in enumerate(shape):
            hit = (~done) & (p <= u)
            if i == 0:
                out = np.where(hit, s, out)
            else:
                pu, ps = shape[i - 1]
                val = ps + go_div((s - ps) * (p - pu), u - pu)
                out = np.where(hit, val, out)
            done |= hit
        return out

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        snap = self.handle.snapshot if self.handle is not None else None
        if snap is not None and node_info.row >= 0 and snap.node_infos[node_info.row] is node_info:
            return int(self.score_batch(state, pod, snap, np.array([node_info.row]))[0])
        # a NodeInfo outside the snapshot (e.g. a test or preemption clone): compute from its dicts
        s = Snapshot()
        clone = NodeInfo(node_info.node)
        s.add_node(clone)
        for p in node_info.pods:
            s.add_pod(clone, p)
        return int(self.score_batch(state, pod, s, np.array([0]))[0])


def _is_live(handle: Handle | None, snapshot: Snapshot) -> bool:
    """`snapshot` is the scheduler's own (not a one-node copy of a per-node call): per-row scores kept across
    cycles are for its table alone."""
    return handle is not None and getattr(handle, "snapshot", None) is snapshot


def _kept_or_scored(plugin: Any, snapshot: Snapshot, key: tuple[int, ...],
                    score: Callable[[np.ndarray], np.ndarray | None], rows: np.ndarray) -> np.ndarray | None:
    """`score(rows)`, read from every node's score for these requests kept across cycles when `snapshot` is the
    scheduler's own; None where the fast path does not apply."""
    if _is_live(plugin.handle, snapshot):
        every = RowValues.get(plugin.__dict__.setdefault("_row_scores", {}), key, snapshot.table, score)
        if every is not None:
            picked: np.ndarray = every[rows]
            return picked
    return score(rows)


def dra_columns(handle: Handle | None, scorer: DraScorer, name: str, snapshot: Snapshot, rows: np.ndarray,
                col: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """DRAExtendedResource scoring: where a node does not advertise `name` and a class backs it, its capacity
    and allocated count come from its devices (calculateResourceAllocatableRequest); elsewhere the node's
    allocatable and requested. None when no class backs it (or there is no cluster)."""
    if handle is None or getattr(handle, "cluster", None) is None or not is_dra_extended_name(name):
        return None
    table = snapshot.table
    alloc = table.alloc[rows, col] if col is not None else np.zeros(len(rows), dtype=np.int64)
    req = table.req[rows, col] if col is not None else np.zeros(len(rows), dtype=np.int64)
    zero = np.flatnonzero(alloc == 0)
    got = scorer.totals(DraManager.for_handle(handle), name,
                        [snapshot.node_infos[int(r)].node for r in rows[zero]]) if len(zero) else ([], [])
    if got is None:
        return None
    alloc, req = alloc.copy(), req.copy()
    alloc[zero] = np.asarray(got[0], dtype=np.int64)
    req[zero] = np.asarray(got[1], dtype=np.int64)
    return alloc, req


def _sign_resources(handle: Handle | None, pod: Pod) -> list[SignFragment] | Status:
    """Both resource plugins' SignPod: the pod's resources; with DRAExtendedResource (`handle` set) a pod
    requesting a resource some DeviceClass backs is not signed, as it may be allocated from devices, which a
    signature does not capture."""
    if handle is not None and getattr(handle, "cluster", None) is not None and any("/" in n for n in pod.requests):
        mapping = DraManager.for_handle(handle).resolver.mapping()
        if any(v and n in mapping and is_dra_extended_name(n) for n, v in pod.requests.items()):
            return Status.unschedulable("signature disabled when dra extended resources are used in the cluster")
    return [SignFragment(signers.RESOURCES, signers.resources(pod))]


def _after_device_class_change(pod: Pod, old: object, new: object) -> int:
    """isSchedulableAfterDeviceClassEvent."""
    return QUEUE if after_device_class_change(pod, old, new) else QUEUE_SKIP


# ------------------------------------------------------------------------------------------ Balanced


def _balanced(fracs: list[np.ndarray]) -> np.ndarray:
    n = len(fracs)
    if n == 0:
        return np.full(0, 100, dtype=np.int64)
    if n == 2:
        std = np.abs((fracs[0] - fracs[1]) / 2)
    elif n > 2:
        mean = sum(fracs) / n
        std = np.sqrt(sum((f - mean) ** 2 for f in fracs) / n)
    else:
        std = np.zeros_like(fracs[0])
    return ((1 - std) * 100).astype(np.int64)  # truncation, like int64() in Go


class NodeResourcesBalancedAllocation(Plugin):
    name = "NodeResourcesBalancedAllocation"
    args_model = NodeResourcesBalancedAllocationArgs

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: the pod's requests, containers, init containers and overhead (kube's
        SignPod); a pod requesting an extended resource a DeviceClass backs is not signed."""
        return _sign_resources(self._dra_handle(), pod)

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None = None, handle: Handle | None = None) -> None:
        super().__init__(args or NodeResourcesBalancedAllocationArgs(), handle)
        self.dra_extended = self.args.extended_resource  # read once (see NodeResourcesFit)
        self.resources = [r.name for r in self.args.resources]
        #: every scored resource is a node table base column (cpu, memory, ephemeral-storage): see _fractions
        self._base_only = bool(self.resources) and all(n in BASE_RESOURCES for n in self.resources)
        self.dra_scorer = DraScorer()

    def _dra_handle(self) -> Handle | None:
        """The handle DRA-backed extended resources are looked up through, None with DRAExtendedResource off."""
        return self.handle if self.dra_extended else None

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        if not any(pod.requests.get(r, 0) > 0 for r in self.resources):
            return self.skipped
        return None

    def _score_base(self, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray | None:
        """`score_batch` over `rows` through `_fractions`, None where that cannot."""
        fr = self._fractions(pod, table, rows)
        return None if fr is None else 50 + (50 + _balanced(fr[0]) - _balanced(fr[1])) // 2

    def _fractions(self, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[list[np.ndarray],
                                                                                list[np.ndarray]] | None:
        """The requested fractions with and without the pod per scored resource, when every one is a base
        column (no DRA, no extended-resource rules) and every scored node has some of each: the general path
        without its per-row masks (the same float arithmetic). None otherwise."""
        with_pod: list[np.ndarray] = []
        without: list[np.ndarray] = []
        for name in self.resources:
            col = table.columns[name]
            alloc = table.alloc[rows, col].astype(np.float64)
            if not (alloc > 0).all():
                return None
            before = table.req[rows, col].astype(np.float64)
            with_pod.append(np.minimum((before + pod.requests.get(name, 0)) / alloc, 1.0))
            without.append(np.minimum(before / alloc, 1.0))
        return with_pod, without

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        table = snapshot.table
        n = len(rows)
        if self._base_only:
            got = _kept_or_scored(self, snapshot, tuple(pod.requests.get(r, 0) for r in self.resources),
                                  lambda r: self._score_base(pod, table, r), rows)
            if got is not None:
                return got
        with_pod: list[np.ndarray] = []
        without: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        for name in self.resources:
            want = pod.requests.get(name, 0)
            col = table.columns.get(name)
            dra = dra_columns(self._dra_handle(), self.dra_scorer, name, snapshot, rows, col) if want else None
            if dra is None and (col is None or (is_extended(name) and want == 0)):
                continue
            if dra is not None:
                alloc, before = dra[0].astype(np.float64), dra[1].astype(np.float64)
            else:
                alloc = table.alloc[rows, col].astype(np.float64)
                before = table.req[rows, col].astype(np.float64)
            has = alloc > 0
            safe = np.where(has, alloc, 1.0)
            with_pod.append(np.minimum((before + want) / safe, 1.0))
            without.append(np.minimum(before / safe, 1.0))
            masks.append(has)
        if not with_pod:
            return np.full(n, 75, dtype=np.int64)  # no change in balance: 50 + (50 + s - s) / 2
        if all(m.all() for m in masks):
            a = _balanced(with_pod)
            b = _balanced(without)
        else:  # nodes lacking some resource: per-row fraction lists differ, compute row by row
            a = np.empty(n, dtype=np.int64)
            b = np.empty(n, dtype=np.int64)
            for i in range(n):
                wp = [f[i:i + 1] for f, m in zip(with_pod, masks, strict=True) if m[i]]
                wo = [f[i:i + 1] for f, m in zip(without, masks, strict=True) if m[i]]
                a[i] = _balanced(wp)[0] if wp else 100
                b[i] = _balanced(wo)[0] if wo else 100
        return 50 + (50 + a - b) // 2

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        if self.handle is not None and getattr(self.handle, "cluster", None) is not None and any(
                pod.requests.get(n, 0) and is_dra_extended_name(n) for n in self.resources):
            s = Snapshot()  # resources DRA may provide: the batch form reads the node's devices
            clone = NodeInfo(node_info.node)
            s.add_node(clone)
            for p in node_info.pods:
                s.add_pod(clone, p)
            return int(self.score_batch(state, pod, s, np.array([0]))[0])
        fr_with, fr_without = [], []
        for name in self.resources:
            want = pod.requests.get(name, 0)
            if is_extended(name) and want == 0:
                continue
            alloc = node_info.allocatable.get(name, 0)
            if alloc == 0:
                continue
            before = node_info.requested.get(name, 0)
            fr_with.append(np.array([min((before + want) / alloc, 1.0)]))
            fr_without.append(np.array([min(before / alloc, 1.0)]))
        if not fr_with:
            return 75
        a = int(_balanced(fr_with)[0])
        b = int(_balanced(fr_without)[0])
        return 50 + (50 + a - b) // 2


def round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


# ------------------------------------------------------------------------------------------ Fit's queueing hints
def _after_pod_event(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodEvent: an assigned or nominated pod deleted; the pod itself scaled down, or an
    assigned pod scaling down a resource this pod requests."""
    if not isinstance(old, Pod) or not isinstance(new, Pod | None):
        return QUEUE  # kube: unexpected objects are an error, which requeues
    if new is None:
        return QUEUE if old.node_name or old.nominated_node_name else QUEUE_SKIP
    if new.uid == pod.uid:
        return QUEUE
    if not new.node_name:
        return QUEUE_SKIP
    for name, want in pod.requests.items():
        if want and name != "pods" and old.requests.get(name, 0) > new.requests.get(name, 0):
            return QUEUE
    return QUEUE_SKIP


def _after_node_change(pod: Pod, old: Any, new: Any, dra: frozenset[str] = frozenset()) -> int:
    """isSchedulableAfterNodeChange: the pod fits the (empty) node now, and the node is new or one of the
    pod's requested resources (or its pod count) grew; `dra`: requested resources a DeviceClass backs, which
    a node that does not advertise them leaves to DynamicResources (and then counts as grown)."""
    if not isinstance(new, Node) or not isinstance(old, Node | None):
        return QUEUE
    if not _fits_empty(pod, new, dra):
        return QUEUE_SKIP
    if old is None:
        return QUEUE
    if new.allocatable.get("pods", 0) > old.allocatable.get("pods", 0):
        return QUEUE
    return QUEUE if any(want > 0 and name != "pods" and (
        new.allocatable.get(name, 0) > old.allocatable.get(name, 0)
        or (name in dra and new.allocatable.get(name, 0) <= 0)) for name, want in pod.requests.items()) \
        else QUEUE_SKIP


def _fits_empty(pod: Pod, node: Node, dra: frozenset[str] = frozenset()) -> bool:
    """kube's isFit: the pod alone on the node (no ignored resources), room for one pod included."""
    alloc = node.allocatable
    if alloc.get("pods", 0) < 1:
        return False
    return all(want <= alloc.get(name, 0) or (name in dra and alloc.get(name, 0) <= 0)
               for name, want in pod.requests.items() if want > 0 and name != "pods")

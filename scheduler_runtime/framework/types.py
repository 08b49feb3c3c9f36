"""Data types shared by the framework and plugins: NodeInfo, QueuedPodInfo, results, cluster events."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntFlag
from typing import TYPE_CHECKING, Any

import numpy as np

from ..objects import HostPort, Node, Pod
from .status import Status

if TYPE_CHECKING:
    from .node_table import NodeTable

PodInfo = Pod
"""The parsed Pod record is the PodInfo: affinity terms, requests and ports are pre-computed on it."""


class PodList(Sequence[Pod]):
    """Pods in insertion order, keyed by UID: append and remove are O(1) however many pods a node holds
    (a DaemonSet-like workload puts tens of thousands on one node). Reads like a list."""

    __slots__ = ("_by_uid",)

    def __init__(self, pods: Iterable[Pod] = ()) -> None:
        self._by_uid: dict[str, Pod] = {p.uid: p for p in pods}

    def append(self, pod: Pod) -> None:
        self._by_uid[pod.uid] = pod

    def pop_uid(self, uid: str) -> Pod | None:
        return self._by_uid.pop(uid, None)

    def get_uid(self, uid: str) -> Pod | None:
        return self._by_uid.get(uid)

    def copy(self) -> PodList:
        out = PodList()
        out._by_uid = dict(self._by_uid)
        return out

    def __len__(self) -> int:
        return len(self._by_uid)

    def __bool__(self) -> bool:
        return bool(self._by_uid)

    def __iter__(self) -> Iterator[Pod]:
        return iter(self._by_uid.values())

    def __contains__(self, pod: object) -> bool:
        uid = getattr(pod, "uid", None)
        return uid is not None and self._by_uid.get(uid) is pod

    def __getitem__(self, i: Any) -> Any:
        return list(self._by_uid.values())[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PodList | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    # defining __eq__ leaves __hash__ None: mutable, so unhashable like list

    def __repr__(self) -> str:
        return f"PodList({list(self._by_uid.values())!r})"


class NodeInfo:
    """A node with the pods on it and their summed requests; mirrored into the numpy node table."""

    __slots__ = ("node", "name", "row", "pods", "pods_with_affinity", "pods_with_required_anti_affinity",
                 "used_ports", "port_pods", "requested", "non_zero_requested", "generation", "table", "derived")

    def __init__(self, node: Node | None, name: str = "") -> None:
        self.node = node
        self.name = node.name if node is not None else name
        self.row = -1
        self.pods = PodList()
        self.pods_with_affinity = PodList()
        self.pods_with_required_anti_affinity = PodList()
        self.used_ports: dict[tuple[str, int], set[str]] = {}
        #: pods here with a host port: `used_ports` can be empty while some remain (two pods sharing a
        #: port, one removed), so clone asks this instead
        self.port_pods = 0
        self.requested: dict[str, int] = {}
        self.non_zero_requested: dict[str, int] = {}
        self.generation = 0
        self.table: NodeTable | None = None
        #: (generation, node, values) kept by `filter_readers.node_memo`: values worked out from this node's
        #: pods and Node, valid while neither changes
        self.derived: tuple[int, Node | None, dict[Any, Any]] | None = None

    @property
    def allocatable(self) -> dict[str, int]:
        return self.node.allocatable if self.node is not None else {}

    def add_pod(self, pod: Pod) -> None:
        self.pods.append(pod)
        if pod.affinity_required or pod.affinity_preferred or pod.anti_affinity_required \
                or pod.anti_affinity_preferred:
            self.pods_with_affinity.append(pod)
        if pod.anti_affinity_required:
            self.pods_with_required_anti_affinity.append(pod)
        self._account(pod, 1)

    def clone(self) -> NodeInfo:
        """A copy outside the snapshot (no table row) equal to a NodeInfo that had every pod added again;
        sums are copied rather than re-added (host ports are rebuilt from the pods)."""
        c = NodeInfo(self.node, self.name)
        c.pods = self.pods.copy()
        c.pods_with_affinity = self.pods_with_affinity.copy()
        c.pods_with_required_anti_affinity = self.pods_with_required_anti_affinity.copy()
        c.requested = {k: v for k, v in self.requested.items() if v}
        c.non_zero_requested = dict(self.non_zero_requested) if self.pods else {}
        if self.port_pods:  # no pod here has a host port: nothing to rebuild
            c.port_pods = self.port_pods
            for p in self.pods:
                for hp in p.host_ports:
                    c._port(hp, 1)
        c.generation = len(c.pods)
        return c

    def remove_pod(self, pod: Pod) -> bool:
        """Remove by UID; returns False when the pod was not on this node."""
        p = self.pods.pop_uid(pod.uid)
        if p is None:
            return False
        self.pods_with_affinity.pop_uid(pod.uid)
        self.pods_with_required_anti_affinity.pop_uid(pod.uid)
        self._account(p, -1)
        return True

    def replace_pod(self, old: Pod, new: Pod) -> bool:
        """Put `new` where `old` (same UID, equal in every field `_account` and the affinity lists read) was,
        leaving the sums alone: the end state of `remove_pod(old)` then `add_pod(new)`, without the work.
        False (nothing changed) when `old` is not the pod stored here."""
        if self.pods.get_uid(old.uid) is not old:
            return False
        uid = old.uid
        self.pods.pop_uid(uid)
        self.pods.append(new)  # moved last, as remove then add would
        if self.pods_with_affinity.pop_uid(uid) is not None:
            self.pods_with_affinity.append(new)
        if self.pods_with_required_anti_affinity.pop_uid(uid) is not None:
            self.pods_with_required_anti_affinity.append(new)
        for hp in new.host_ports:  # remove then add would leave each of the pod's ports taken
            self._port(hp, 1)
        self.generation += 2
        return True

    def _account(self, pod: Pod, sign: int) -> None:
        req = self.requested
        for k, v in pod.requests.items():
            req[k] = req.get(k, 0) + sign * v
        nz, pnz = self.non_zero_requested, pod.non_zero_requests
        nz["cpu"] = nz.get("cpu", 0) + sign * pnz["cpu"]
        nz["memory"] = nz.get("memory", 0) + sign * pnz["memory"]
        if pod.host_ports:
            self.port_pods += sign
            for hp in pod.host_ports:
                self._port(hp, sign)
        self.generation += 1
        if self.table is not None and self.row >= 0:
            self.table.account_pod(self.row, pod, sign)

    def _port(self, hp: HostPort, sign: int) -> None:
        key = (hp.protocol, hp.port)
        ips = self.used_ports.setdefault(key, set())
        if sign > 0:
            ips.add(hp.ip)
        else:
            ips.discard(hp.ip)
            if not ips:
                del self.used_ports[key]
        if self.table is not None and self.row >= 0:
            self.table.note_ports(self.row, hp.protocol, hp.port, ips, hp.ip)

    def port_conflicts(self, ports: Iterable[HostPort]) -> bool:
        """0.0.0.0 conflicts with every IP on the same protocol/port, as NodePorts does."""
        for hp in ports:
            ips = self.used_ports.get((hp.protocol, hp.port))
            if not ips:
                continue
            if hp.ip == "0.0.0.0" or "0.0.0.0" in ips or hp.ip in ips:
                return True
        return False

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue with its attempt bookkeeping."""

    pod: Pod
    timestamp: float = 0.0
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_count: int = 0
    consecutive_errors_count: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    gating_plugin: str = ""
    seq: int = 0
    #: moved out of the unschedulable pods by the 5-minute leftover flush since its last attempt
    flushed_from_unschedulable: bool = False
    #: opportunistic batching: the signature of `signed` (the pod as it was when signed; None: not batchable)
    signature: str | None = None
    signed: Pod | None = None


@dataclass(slots=True)
class PreFilterResult:
    """A subset of nodes a PreFilter plugin allows; `None` node_names means all nodes."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return PreFilterResult(None if self.node_names is None else set(self.node_names))
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()))
        assert self.node_names is not None
        return PreFilterResult(self.node_names & (other.node_names or set()))


NOMINATING_NOOP = 0
NOMINATING_OVERRIDE = 1


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""
    mode: int = NOMINATING_OVERRIDE


@dataclass(slots=True)
class NodeScore:
    name: str
    score: int


class ActionType(IntFlag):
    Add = 1
    Delete = 2
    UpdateNodeAllocatable = 4
    UpdateNodeLabel = 8
    UpdateNodeTaint = 16
    UpdateNodeCondition = 32
    UpdateNodeAnnotation = 64
    UpdateNodeDeclaredFeature = 128
    UpdatePodLabel = 256
    UpdatePodScaleDown = 512
    UpdatePodToleration = 1024
    UpdatePodSchedulingGatesEliminated = 2048
    UpdatePodGeneratedResourceClaim = 4096
    Update = 8188  # all Update* bits
    All = 8191


WILDCARD = "*"
_UPDATE, _ALL = int(ActionType.Update), int(ActionType.All)
_and = int.__and__


@dataclass(slots=True, frozen=True)
class ClusterEvent:
    """A kind of change in the cluster: resource ("Pod", "Node", "scheduling.x-k8s.io/PodGroup", "*")."""

    resource: str
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """Does `other` (what happened) fall under this registration? A generic Update (a change of no
        particular kind) only falls under registrations of every kind of update, as kube's
        MatchClusterEvents requires (its `incoming.ActionType <= registered.ActionType`)."""
        mine = self.action
        if self.resource == WILDCARD:
            if mine == _ALL:
                return True
        elif self.resource != other.resource:
            return False
        theirs = other.action
        if theirs == _UPDATE and _and(mine, _UPDATE) != _UPDATE:
            return False
        return _and(mine, theirs) != 0  # int's own `&`: IntFlag's builds a new member per call

    def __str__(self) -> str:
        return self.label or f"{self.resource}{self.action.name or int(self.action)}"


QUEUE = 1
QUEUE_SKIP = 0

QueueingHintFn = Callable[[Pod, Any, Any], int]


@dataclass(slots=True, frozen=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.All, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.All, "ForceActivate")


_ALL_OK: dict[int, np.ndarray] = {}


def all_ok(n: int) -> np.ndarray:
    """A read-only all-true verdict array of `n` rows, shared: a batch filter that passes every node returns
    it, and the framework, seeing that array, skips combining it with the other plugins' verdicts."""
    got = _ALL_OK.get(n)
    if got is None:
        if len(_ALL_OK) > 64:  # node counts seen over a long run; keep only a few
            _ALL_OK.clear()
        got = _ALL_OK[n] = np.ones(n, dtype=bool)
        got.flags.writeable = False
    return got


class FilterBatch:
    """Verdicts of a batch filter for every row of the node table.

    `status` is the Status of every failing row, or a function of the row giving it (only called for
    rows the framework reports on, so building messages stays off the hot path).
    `keys`, when given, is an integer per row (or a function returning them, called only when some row
    failed) such that rows with equal keys get the same (shared) Status: the framework then asks once per
    distinct key instead of once per failing row.
    `pending`, for a plugin that also has a per-node `filter`: rows (False in `ok`) the batch left undecided,
    whose verdict is that method's, asked in kube's walk order only for the nodes the walk reaches (so an
    Error, a timeout or a side effect happens exactly where the per-node path would have it).
    """

    __slots__ = ("ok", "status", "keys", "pending")

    def __init__(self, ok: np.ndarray, status: Status | Callable[[int], Status],
                 keys: np.ndarray | Callable[[], np.ndarray] | None = None,
                 pending: np.ndarray | None = None) -> None:
        self.ok = ok
        self.status = status
        self.keys = keys
        self.pending = pending

    @property
    def all_pass(self) -> bool:
        """`ok` is the shared `all_ok` array: every row passes."""
        return _ALL_OK.get(len(self.ok)) is self.ok

    def row_keys(self) -> np.ndarray | None:
        k = self.keys
        if callable(k):
            k = self.keys = k()
        return k

    def status_at(self, row: int) -> Status:
        s = self.status
        return s(row) if callable(s) else s

"""The plugin contract as typing Protocols: what the framework gives plugins and how it calls them.

This is ksched's pkg/scheduler/framework/interface.go. Users import it through `scheduler_runtime.api`.
Each extension point is one Protocol whose method has the exact positional parameters the framework
passes (positional-only here: a plugin may name its parameters as it likes, the count and kind matter).
`ExtensionPoint` lists them for the signature check run when a plugin class is loaded.

This module imports only value types (objects, status, cycle state, node views, snapshot), never the
runtime, the handle implementation or the plugin base class, so nothing imports in a circle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ..objects import Node, Pod

if TYPE_CHECKING:
    import numpy as np

    from .cycle_state import CycleState
    from .nodelist import NodeList
    from .snapshot import Snapshot
    from .status import Status
    from .types import ClusterEventWithHint, FilterBatch, NodeScore, PostFilterResult, PreFilterResult, QueuedPodInfo


# ---------------------------------------------------------------------------------------------- views
class NodeInfoView(Protocol):
    """Read-only view of a node and the pods on it (the framework's NodeInfo satisfies it).

    Plugins read it; only the framework adds or removes pods (through PreFilter's add_pod/remove_pod
    it hands plugins a private copy)."""

    @property
    def node(self) -> Node | None: ...
    @property
    def name(self) -> str: ...
    @property
    def row(self) -> int: ...
    @property
    def pods(self) -> Sequence[Pod]: ...
    @property
    def pods_with_affinity(self) -> Sequence[Pod]: ...
    @property
    def pods_with_required_anti_affinity(self) -> Sequence[Pod]: ...
    @property
    def requested(self) -> Mapping[str, int]: ...
    @property
    def non_zero_requested(self) -> Mapping[str, int]: ...
    @property
    def allocatable(self) -> Mapping[str, int]: ...
    @property
    def generation(self) -> int: ...


class WaitingPodView(Protocol):
    """A pod parked at Permit, as plugins see it."""

    @property
    def pod(self) -> Pod: ...
    def get_pending_plugins(self) -> list[str]: ...
    def allow(self, plugin: str) -> None: ...
    def reject(self, plugin: str, msg: str) -> bool: ...


class Handle(Protocol):
    """What the framework gives each plugin (the second constructor argument)."""

    snapshot: Snapshot
    profile: str
    #: cluster backend (memory or kube): list/get objects
    cluster: Any
    parallelism: int
    logger: logging.Logger
    #: moves pods to activeQ (e.g. a gang's siblings)
    activate: Callable[[Iterable[Pod]], None]
    #: emits an event about an object: (object, type, reason, action, note)
    record_event: Callable[[Pod, str, str, str, str], None]
    nominated_pods_for_node: Callable[[str], list[Pod]]
    nominated_node_names: Callable[[], set[str]]
    delete_pod: Callable[[Pod], None]

    def get_waiting_pod(self, uid: str) -> WaitingPodView | None: ...
    def iterate_waiting_pods(self) -> Sequence[WaitingPodView]: ...
    def reject_waiting_pod(self, uid: str) -> bool: ...
    def informer(self, resource: str) -> Any:
        """A watched store of any resource (CRDs too): `.list()`, `.get(name, namespace)`, `.add_handler()`."""
        ...


# ------------------------------------------------------------------------------- extension points
# Return types: `None` means Success, as a nil *Status does in Go.

@runtime_checkable
class PreEnqueuePlugin(Protocol):
    def pre_enqueue(self, pod: Pod, /) -> Status | None: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo, /) -> bool: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList, /
                   ) -> tuple[PreFilterResult | None, Status | None] | PreFilterResult | Status | None: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Optional on a PreFilter plugin: keeps its cycle state right when preemption adds or removes pods."""

    def add_pod(self, state: CycleState, pod: Pod, to_add: Pod, node_info: NodeInfoView, /) -> Status | None: ...
    def remove_pod(self, state: CycleState, pod: Pod, to_remove: Pod, node_info: NodeInfoView, /
                   ) -> Status | None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfoView, /) -> Status | None: ...


@runtime_checkable
class FilterBatchPlugin(Protocol):
    """The batch form of Filter: one verdict per row of the snapshot's node table."""

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, /) -> FilterBatch: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(self, state: CycleState, pod: Pod, statuses: dict[str, Status], /
                    ) -> tuple[PostFilterResult | None, Status | None] | Status | None: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList, /) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfoView, /) -> int | tuple[int, Status | None]: ...


@runtime_checkable
class ScoreBatchPlugin(Protocol):
    """The batch form of Score: raw scores of the given table rows."""

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray, /) -> np.ndarray: ...


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """ScoreExtensions: rewrites `scores` in place."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore], /) -> Status | None: ...


@runtime_checkable
class NormalizeScoreBatchPlugin(Protocol):
    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray, /
                              ) -> np.ndarray: ...


@runtime_checkable
class ReservePlugin(Protocol):
    def reserve(self, state: CycleState, pod: Pod, node_name: str, /) -> Status | None: ...
    def unreserve(self, state: CycleState, pod: Pod, node_name: str, /) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    """A Wait status comes with a timeout in seconds: return `(Status.wait(), 10.0)`."""

    def permit(self, state: CycleState, pod: Pod, node_name: str, /
               ) -> tuple[Status | None, float] | Status | None: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str, /) -> Status | None: ...


@runtime_checkable
class PreBindPreFlightPlugin(Protocol):
    """Whether this PreBind plugin's PreBind will do anything for the pod on that node (kube's
    PreBindPreFlight, gate NominatedNodeNameForExpectation, on since 1.35): None (Success) it will,
    `Status.skip()` it will not, and its PreBind is then not called; an Error fails the binding. When some
    PreBind plugin will work, or the pod waits on Permit, the scheduler first writes the pod's
    status.nominatedNodeName, so the cluster autoscaler and other components see where the pod is going while
    PreBind runs. A PreBind plugin without this method is taken to work for every pod."""

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str, /) -> Status | None: ...


@runtime_checkable
class BindPlugin(Protocol):
    def bind(self, state: CycleState, pod: Pod, node_name: str, /) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str, /) -> None: ...


class SignFragment(NamedTuple):
    """One part of a pod's scheduling signature (kube's SignFragment): `key` names what the value is taken
    from (the names in `signers`, shared by plugins that look at the same thing: the framework keeps one
    fragment per key), `value` is JSON-serialisable and canonical (order-free lists sorted). A tuple: it is
    built for every pod, so it must be cheap."""

    key: str
    value: Any


@runtime_checkable
class SignPlugin(Protocol):
    """Signs a pod for opportunistic batching (kube-scheduler 1.36, KEP-5598): pods whose fragments from
    every PreFilter/Filter/PreScore/Score plugin are equal get the same results on the same nodes, so the
    next one may take the previous one's next-best node without a full Filter and Score. Return the
    fragments (None: none), or a non-success Status to refuse (the pod is then not batched; an Error is
    also logged), or `(fragments, status)`. A profile with any such plugin lacking `sign_pod` batches
    nothing, as kube-scheduler does for out-of-tree plugins that do not implement SignPlugin."""

    def sign_pod(self, pod: Pod, /) -> Sequence[SignFragment] | Status | None | tuple[
            Sequence[SignFragment] | None, Status | None]: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    """The cluster events that may make a pod this plugin rejected schedulable, each with an optional
    queueing hint; a plugin without this method has its pods retried on every event."""

    def events_to_register(self) -> list[ClusterEventWithHint]: ...


@dataclass(frozen=True, slots=True)
class MethodContract:
    """One method the framework calls: its extension point, the Protocol and the parameters it passes."""

    method: str
    point: str
    protocol: type
    params: tuple[str, ...]

    def call(self) -> str:
        return f"{self.method}({', '.join(self.params)})"

    def expectation(self, cls_name: str) -> str:
        """How the framework calls it, for the one-line error."""
        if self.method == "__init__":
            return f"the framework constructs plugins as {cls_name}({', '.join(self.params)})"
        return f"the {self.point} extension point calls {self.call()}"


#: every method the framework calls on a plugin, by name
METHOD_CONTRACTS: dict[str, MethodContract] = {c.method: c for c in (
    MethodContract("__init__", "", object, ("args", "handle")),
    MethodContract("pre_enqueue", "PreEnqueue", PreEnqueuePlugin, ("pod",)),
    MethodContract("less", "QueueSort", QueueSortPlugin, ("a", "b")),
    MethodContract("pre_filter", "PreFilter", PreFilterPlugin, ("state", "pod", "nodes")),
    MethodContract("add_pod", "PreFilter", PreFilterExtensions, ("state", "pod", "to_add", "node_info")),
    MethodContract("remove_pod", "PreFilter", PreFilterExtensions, ("state", "pod", "to_remove", "node_info")),
    MethodContract("filter", "Filter", FilterPlugin, ("state", "pod", "node_info")),
    MethodContract("filter_batch", "Filter", FilterBatchPlugin, ("state", "pod", "snapshot")),
    MethodContract("post_filter", "PostFilter", PostFilterPlugin, ("state", "pod", "statuses")),
    MethodContract("pre_score", "PreScore", PreScorePlugin, ("state", "pod", "nodes")),
    MethodContract("score", "Score", ScorePlugin, ("state", "pod", "node_info")),
    MethodContract("score_batch", "Score", ScoreBatchPlugin, ("state", "pod", "snapshot", "rows")),
    MethodContract("normalize_score", "Score", NormalizeScorePlugin, ("state", "pod", "scores")),
    MethodContract("normalize_score_batch", "Score", NormalizeScoreBatchPlugin, ("state", "pod", "rows", "scores")),
    MethodContract("reserve", "Reserve", ReservePlugin, ("state", "pod", "node_name")),
    MethodContract("unreserve", "Reserve", ReservePlugin, ("state", "pod", "node_name")),
    MethodContract("permit", "Permit", PermitPlugin, ("state", "pod", "node_name")),
    MethodContract("pre_bind", "PreBind", PreBindPlugin, ("state", "pod", "node_name")),
    MethodContract("pre_bind_pre_flight", "PreBindPreFlight", PreBindPreFlightPlugin, ("state", "pod", "node_name")),
    MethodContract("bind", "Bind", BindPlugin, ("state", "pod", "node_name")),
    MethodContract("post_bind", "PostBind", PostBindPlugin, ("state", "pod", "node_name")),
    MethodContract("events_to_register", "EnqueueExtensions", EnqueueExtensions, ()),
    MethodContract("sign_pod", "Sign", SignPlugin, ("pod",)),
)}

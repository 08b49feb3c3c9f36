"""The public plugin API: the one module a plugin imports.

Everything a plugin may rely on is named here; the rest of `scheduler_runtime` is internal and may move.
It mirrors kube-scheduler's pkg/scheduler/framework/interface.go: results (`Status`, `Code`), the per-pod
`CycleState`, read-only views of nodes and pods, the `Handle` the framework passes to a plugin, and one
`typing.Protocol` per extension point with the exact parameters the framework passes. A plugin
subclasses `Plugin` and implements the methods of the points it takes part in; when its class is loaded
(and by `ksched config validate --plugin-dir` and `ksched build`) each such method is checked against
its Protocol, so a wrong signature is reported with file and line before any pod is scheduled.

This module only re-exports: it imports the framework's value types and contract, never the scheduler,
the queue, the cache or a cluster backend.
"""

from __future__ import annotations

from .errors import InputError
from .framework import signers
from .framework.cycle_state import CycleState
from .framework.interface import (
    BindPlugin,
    EnqueueExtensions,
    FilterBatchPlugin,
    FilterPlugin,
    Handle,
    NormalizeScoreBatchPlugin,
    NormalizeScorePlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreBindPreFlightPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreBatchPlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    WaitingPodView,
)
from .framework.interface import NodeInfoView as NodeInfo
from .framework.nodelist import NodeList
from .framework.plugin import Plugin, PluginArgs
from .framework.snapshot import Snapshot
from .framework.status import MAX_SCORE, MIN_SCORE, Code, Status
from .framework.types import (
    NOMINATING_NOOP,
    NOMINATING_OVERRIDE,
    QUEUE,
    QUEUE_SKIP,
    WILDCARD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    FilterBatch,
    NodeScore,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
    QueueingHintFn,
)
from .objects import Node, Pod, Taint, Toleration
from .quantity import format_amount, resource_amount

PodInfo = Pod
"""The parsed, immutable Pod record is the PodInfo: requests, affinity terms and ports are pre-computed."""

__all__ = [
    # results
    "Code", "Status", "MAX_SCORE", "MIN_SCORE", "NodeScore", "PreFilterResult", "PostFilterResult",
    "NOMINATING_NOOP", "NOMINATING_OVERRIDE", "FilterBatch",
    # state and views
    "CycleState", "NodeInfo", "NodeList", "Node", "Pod", "PodInfo", "QueuedPodInfo", "Snapshot", "Taint",
    "Toleration", "WaitingPodView",
    # plugin base and services
    "Plugin", "PluginArgs", "Handle", "InputError", "format_amount", "resource_amount",
    # cluster events (EnqueueExtensions)
    "ActionType", "ClusterEvent", "ClusterEventWithHint", "QueueingHintFn", "QUEUE", "QUEUE_SKIP", "WILDCARD",
    # extension points
    "PreEnqueuePlugin", "QueueSortPlugin", "PreFilterPlugin", "PreFilterExtensions", "FilterPlugin",
    "FilterBatchPlugin", "PostFilterPlugin", "PreScorePlugin", "ScorePlugin", "ScoreBatchPlugin",
    "NormalizeScorePlugin", "NormalizeScoreBatchPlugin", "ReservePlugin", "PermitPlugin", "PreBindPlugin",
    "PreBindPreFlightPlugin", "BindPlugin", "PostBindPlugin", "EnqueueExtensions",
    # opportunistic batching: a plugin's part of the pod signature (`signers` holds kube's keys and signers)
    "SignPlugin", "SignFragment", "signers",
]

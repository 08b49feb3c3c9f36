"""NodeDeclaredFeatures: a pod that needs a node-level feature only goes to nodes that declare it.

Upstream: kube-scheduler v1.36.3, pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures.go,
with the registry and inference of k8s.io/component-helpers v0.36.3 nodedeclaredfeatures (see `.features`).
The plugin is in kube-scheduler's default profile while the NodeDeclaredFeatures gate (beta, on in 1.36) is on.
With the gate off kube leaves it out of the default profile, and an explicitly enabled instance does nothing
(PreFilter skips, Filter passes, no events): the config loader passes `FeatureGate(enabled=False)` as its args.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...framework import signers
from ...framework.cycle_state import CycleState
from ...framework.interface import SignFragment
from ...framework.nodelist import NodeList
from ...framework.plugin import FilterBatch, Plugin
from ...framework.snapshot import Snapshot
from ...framework.status import Status
from ...framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    NodeInfo,
    PreFilterResult,
)
from ...objects import Node, Pod
from .features import known_features, required_features

NAME = "NodeDeclaredFeatures"
REASON = "node(s) didn't match Pod's required features"
STATE_KEY = "PreFilter" + NAME


@dataclass(frozen=True, slots=True)
class FeatureGate:
    """What the plugin is told of the NodeDeclaredFeatures gate (kube passes its feature.Features)."""

    enabled: bool = True


def pod_requirements(pod: Pod) -> frozenset[str]:
    """The registered features `pod` requires of its node, inferred from its spec."""
    return required_features(pod.raw.get("spec"))


def node_satisfies(required: frozenset[str], node: Node | None) -> bool:
    return node is not None and required <= known_features(node.declared_features)


class NodeDeclaredFeatures(Plugin):
    name = NAME

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.FEATURES, sorted(pod_requirements(pod)))]

    def __init__(self, args: FeatureGate | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.enabled = args.enabled if isinstance(args, FeatureGate) else True

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> tuple[PreFilterResult | None,
                                                                               Status | None]:
        if not self.enabled:
            return None, self.skipped
        required = pod_requirements(pod)
        if not required:
            return None, self.skipped
        state.write(STATE_KEY, required)
        return None, None

    def _required(self, state: CycleState) -> frozenset[str] | Status:
        try:
            return state.read(STATE_KEY)  # type: ignore[no-any-return]
        except KeyError:
            return Status.as_error(f'error reading "{STATE_KEY}" from cycle-state: not found')

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not self.enabled:
            return None
        required = self._required(state)
        if isinstance(required, Status):
            return required
        return None if node_satisfies(required, node_info.node) else Status.unresolvable(REASON)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        infos = snapshot.node_infos
        if not self.enabled:
            return FilterBatch(np.ones(len(infos), dtype=bool), Status.unresolvable(REASON))
        required = self._required(state)
        if isinstance(required, Status):
            return FilterBatch(np.zeros(len(infos), dtype=bool), required)
        ok = np.fromiter((node_satisfies(required, ni.node) for ni in infos), dtype=bool, count=len(infos))
        return FilterBatch(ok, Status.unresolvable(REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if not self.enabled:
            return []
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeDeclaredFeature),
                                     self._after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", ActionType.Update), self._after_pod_update)]

    @staticmethod
    def _after_node_change(pod: Pod, old: Any, new: Any) -> int:
        """Requeue on a new node, or on a node whose declared list changed."""
        if isinstance(old, Node) and isinstance(new, Node) and old.declared_features == new.declared_features:
            return QUEUE_SKIP
        return QUEUE

    @staticmethod
    def _after_pod_update(pod: Pod, old: Any, new: Any) -> int:
        """Requeue the pod itself when an update changed the features it requires."""
        if not isinstance(new, Pod) or new.uid != pod.uid:
            return QUEUE_SKIP if isinstance(new, Pod) else QUEUE
        if isinstance(old, Pod) and pod_requirements(old) == pod_requirements(new):
            return QUEUE_SKIP
        return QUEUE

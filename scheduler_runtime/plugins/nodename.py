"""NodeName: a pod with spec.nodeName set only fits that node.

Upstream: kube-scheduler v1.37.2, pkg/scheduler/framework/plugins/nodename/node_name.go. Since 1.37 (ungated) its
PreFilter narrows a pod that names its node to that node, so the other nodes are no preemption targets.
"""

from __future__ import annotations

import numpy as np

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin
from ..framework.snapshot import Snapshot
from ..framework.status import Status
from ..framework.types import ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo, PreFilterResult, all_ok
from ..objects import Pod

REASON = "node(s) didn't match the requested node name"


def _wanted(pod: Pod) -> str:
    return (pod.raw.get("spec") or {}).get("nodeName") or ""


class NodeName(Plugin):
    name = "NodeName"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.NODE_NAME, _wanted(pod))]

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: NodeList) -> tuple[PreFilterResult | None, Status | None]:
        want = _wanted(pod)
        return (PreFilterResult({want}) if want else None), None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        want = _wanted(pod)
        if not want or want == node_info.name:
            return None
        return Status.unresolvable(REASON)

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        want = _wanted(pod)
        n = len(snapshot)
        if not want:
            return FilterBatch(all_ok(n), Status.unresolvable(REASON))
        ok = np.zeros(n, dtype=bool)
        ni = snapshot.get(want)
        if ni is not None:
            ok[ni.row] = True
        return FilterBatch(ok, Status.unresolvable(REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))]

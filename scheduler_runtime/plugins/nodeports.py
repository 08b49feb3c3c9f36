"""NodePorts: a pod's host ports must be free on the node.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/nodeports/node_ports.go.
"""

from __future__ import annotations

from ..framework.cycle_state import CycleState
from ..framework.nodelist import NodeList
from ..framework.plugin import Plugin
from ..framework.status import Status
from ..framework.types import ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo
from ..objects import Pod

REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(Plugin):
    name = "NodePorts"

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        if not pod.host_ports:
            return Status.skip()
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.port_conflicts(pod.host_ports):
            return Status.unschedulable(REASON)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete)),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))]

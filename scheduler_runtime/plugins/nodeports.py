"""NodePorts: a pod's host ports must be free on the node.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/nodeports/node_ports.go.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.nodelist import NodeList
from ..framework.plugin import FilterBatch, Plugin
from ..framework.snapshot import Snapshot
from ..framework.status import Status
from ..framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint, NodeInfo, all_ok
from ..objects import Pod

REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(Plugin):
    name = "NodePorts"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.HOST_PORTS, signers.host_ports(pod))]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        if not pod.host_ports:
            return self.skipped
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.port_conflicts(pod.host_ports):
            return Status.unschedulable(REASON)
        return None

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        """`filter` for every row, from the table's rows per used port: a pod asks about its own few ports,
        not every node (a DaemonSet or a hostPort Deployment otherwise walks the nodes one by one)."""
        n = len(snapshot)
        index = snapshot.table.port_rows
        taken: set[int] = set()
        for hp in pod.host_ports:  # 0.0.0.0 conflicts with every IP on the same protocol/port, as `filter`
            if hp.ip == "0.0.0.0":
                taken.update(index.get((hp.protocol, hp.port, ""), ()))
            else:
                taken.update(index.get((hp.protocol, hp.port, hp.ip), ()))
                taken.update(index.get((hp.protocol, hp.port, "0.0.0.0"), ()))
        if not taken:
            return FilterBatch(all_ok(n), Status.unschedulable(REASON))
        ok = np.ones(n, dtype=bool)
        ok[np.fromiter(taken, dtype=np.int64, count=len(taken))] = False
        return FilterBatch(ok, Status.unschedulable(REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), _after_pod_deleted),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))]


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodDeleted: a bound (or nominated) pod whose host ports conflict with the pod's."""
    if not isinstance(old, Pod):
        return QUEUE  # kube: an unexpected object is an error, which requeues
    if (not old.node_name and not old.nominated_node_name) or not old.host_ports:
        return QUEUE_SKIP
    used: dict[tuple[str, int], set[str]] = {}
    for hp in old.host_ports:
        used.setdefault((hp.protocol, hp.port), set()).add(hp.ip)
    for hp in pod.host_ports:  # fitsPorts: 0.0.0.0 conflicts with every IP on the same protocol and port
        ips = used.get((hp.protocol, hp.port))
        if ips and (hp.ip == "0.0.0.0" or "0.0.0.0" in ips or hp.ip in ips):
            return QUEUE
    return QUEUE_SKIP

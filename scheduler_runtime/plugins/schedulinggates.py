"""SchedulingGates: keep pods with spec.schedulingGates out of the active queue.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go.
"""

from __future__ import annotations

from ..framework.plugin import Plugin
from ..framework.status import Status
from ..framework.types import ActionType, ClusterEvent, ClusterEventWithHint
from ..objects import Pod


class SchedulingGates(Plugin):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodSchedulingGatesEliminated))]

"""SchedulingGates: keep pods with spec.schedulingGates out of the active queue.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go.
"""

from __future__ import annotations

from typing import Any

from ..framework.plugin import Plugin
from ..framework.status import Status
from ..framework.types import QUEUE, QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint
from ..objects import Pod


class SchedulingGates(Plugin):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodSchedulingGatesEliminated),
                                     _after_gates_eliminated)]


def _after_gates_eliminated(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterUpdatePodSchedulingGatesEliminated: only the pod's own update concerns it."""
    if not isinstance(new, Pod):
        return QUEUE
    return QUEUE if new.uid == pod.uid else QUEUE_SKIP

"""DefaultBinder: bind through the cluster backend (pods/{name}/binding on a real API server).

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/defaultbinder/default_binder.go.
"""

from __future__ import annotations

from ..framework.cycle_state import CycleState
from ..framework.plugin import Plugin
from ..framework.status import Status
from ..objects import Pod
from ..results import BIND_ANNOTATIONS, BIND_ANNOTATIONS_CARRIED


class DefaultBinder(Plugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if self.handle is None or self.handle.cluster is None:
            return Status.as_error("no cluster backend to bind with")
        ann = state.get(BIND_ANNOTATIONS)
        try:
            if ann:
                self.handle.cluster.bind(pod, node_name, annotations=ann)
            else:
                self.handle.cluster.bind(pod, node_name)
        except Exception as exc:
            return Status.as_error(exc)
        if ann:
            state.write(BIND_ANNOTATIONS_CARRIED, True)
        return None

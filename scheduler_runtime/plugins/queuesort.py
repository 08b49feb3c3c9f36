"""PrioritySort: higher priority first, then the earlier queue timestamp.

Upstream: kube-scheduler v1.36, pkg/scheduler/framework/plugins/queuesort/priority_sort.go.
"""

from __future__ import annotations

from ..framework.plugin import Plugin
from ..framework.types import QueuedPodInfo


class PrioritySort(Plugin):
    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

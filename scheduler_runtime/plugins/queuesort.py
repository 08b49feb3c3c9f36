"""PrioritySort: higher priority first, then the earlier queue timestamp."""

from __future__ import annotations

from ..framework.plugin import Plugin
from ..framework.types import QueuedPodInfo


class PrioritySort(Plugin):
    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

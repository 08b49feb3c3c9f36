"""A failed attempt's status write and the scheduling loop: kube-scheduler (SchedulerAsyncAPICalls off, its
default) patches the status in its scheduling goroutine, so the next pod is tried only after the API server
answered; ksched asks its backend to send the queued write before the loop goes on, and leaves it queued with
the gate on (kube's API dispatcher sends it asynchronously)."""

from __future__ import annotations

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from tests.unit.test_dra_plugin import NS, node, pod


class _Recording(MemoryCluster):
    """Records, for each `send_pod_writes`, the pod and the status writes asked for it before."""

    def __init__(self) -> None:
        super().__init__()
        self.status_writes: list[str] = []
        self.sent: list[tuple[str, list[str]]] = []

    def patch_pod_status(self, pod: Pod, condition: dict | None, nominated_node_name: str | None = None) -> None:
        self.status_writes.append(pod.key)
        super().patch_pod_status(pod, condition, nominated_node_name)

    def send_pod_writes(self, pod: Pod) -> None:
        self.sent.append((pod.key, list(self.status_writes)))


@pytest.mark.parametrize("async_api_calls", [False, True])
def test_the_loop_sends_a_failures_status_before_the_next_pod(async_api_calls: bool) -> None:
    m = _Recording()
    n = node("n1")
    n["spec"] = {"unschedulable": True}  # every pod fails
    m.create(n, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1,
                  feature_gates={"SchedulerAsyncAPICalls": async_api_calls})
    s.start()
    m.create(pod("a"))
    m.create(pod("b"))
    s.run(until_idle=True)
    if async_api_calls:
        assert m.sent == []
        return
    # each failure's status queued, then sent, before the other pod's attempt
    assert m.sent == [(f"{NS}/a", [f"{NS}/a"]), (f"{NS}/b", [f"{NS}/a", f"{NS}/b"])] or \
        m.sent == [(f"{NS}/b", [f"{NS}/b"]), (f"{NS}/a", [f"{NS}/b", f"{NS}/a"])]

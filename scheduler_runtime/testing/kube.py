"""Helpers for tests against a real kube-apiserver (ksched's integration tests use them too)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.1) -> Any:
    """Poll until `cond()` is truthy and return it; an AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def create_node(client: Any, name: str, *, cpu: str = "8", memory: str = "32Gi", pods: str = "110",
                labels: dict[str, str] | None = None) -> None:
    """A Ready node on an API server without a kubelet. The NodeRestriction/TaintNodesByCondition admission
    adds a not-ready taint that no node controller lifts on a test control plane, so it is removed here."""
    client.call("POST", "/api/v1/nodes", body={
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                   "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
    client.call("PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": None}},
                content_type="application/merge-patch+json")

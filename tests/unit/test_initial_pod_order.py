"""The order in which the pods pending at startup reach the queue: kube-scheduler's informers (client-go's
WatchListClient) hand their initial objects over in map order, not by name."""

from __future__ import annotations

from typing import Any

from scheduler_runtime.cluster.kube.backend import initial_pod_order


def test_pods_pending_at_startup_are_handed_over_by_uid_not_by_name():
    def raw(name: str, uid: str, node_name: str = "") -> dict[str, Any]:
        return {"metadata": {"name": name, "uid": uid}, "spec": {"nodeName": node_name} if node_name else {}}

    listed = [raw("m-0", "c"), raw("m-1", "a"), raw("m-2", "x", "n1"), raw("m-3", "b"), raw("m-4", "d", "n2")]
    got = [p["metadata"]["name"] for p in initial_pod_order(listed)]
    assert got == ["m-2", "m-4", "m-1", "m-3", "m-0"]
    bound_only = [raw("a", "2", "n"), raw("b", "1", "n")]
    assert initial_pod_order(bound_only) is bound_only

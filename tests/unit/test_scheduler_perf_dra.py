"""bench/scheduler_perf.py's DRA workloads: the objects both modes create (claims allocated as upstream's
allocResourceClaims leaves them, the e2e mode's API calls), the steady-state measurement in memory and the
e2e steady-state loop against a fake API server. The benchmark itself is not run here."""

from __future__ import annotations

import dataclasses
import gc
import queue
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import e2e_common  # noqa: E402
import scheduler_perf as sp  # noqa: E402


@pytest.fixture(autouse=True)
def _gc_settings() -> Iterator[None]:
    """run_memory tunes and freezes the collector as the bench process does: undone for the other tests."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def _short(name: str, duration: float = 0.3) -> sp.Workload:
    """The workload with its steady-state window cut to `duration` seconds."""
    w = sp.BY_NAME[name]
    return dataclasses.replace(w, ops=[dataclasses.replace(o, duration=duration) if o.kind == "measure" else o
                                       for o in w.ops])


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return claim["status"]["allocation"]["devices"]["results"]


def test_alloc_op_spreads_init_claims_over_nodes_without_sharing_a_device() -> None:
    w = sp.BY_NAME["SchedulingWithResourceClaimTemplate/half_500nodes"]
    params = {"nodesWithDRA": 4, "initClaims": 20, "measurePods": 2}
    claims = sp._claim_objects(w, params, sp._node_objects(w, params, "slices"))
    assert len(claims) == 20 and all(c["metadata"]["namespace"] == "init" for c in claims)
    nodes = [c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
             for c in claims]
    assert {n: nodes.count(n) for n in nodes} == {f"node-{i}": 5 for i in range(4)}  # half of each node's 10
    assert not sp._double_allocated(claims)
    r = _results(claims[0])[0]
    assert r == {"request": "req-0", "driver": sp.DRA_DRIVER, "pool": "resourceslice-0", "device": "basic-device-0"}


def test_claims_outside_an_alloc_namespace_stay_unallocated_and_shared_claims_cover_every_pod() -> None:
    w = sp.BY_NAME["SchedulingWithResourceClaim"]
    params = sp.scaled(w, 0.0052)  # 13 pods: three claims, the last one shared by three pods
    assert params["initPods"] == 13 and params["initClaims"] == 3
    claims = sp._claim_objects(w, params, sp._node_objects(w, params, "slices"))
    assert [c["metadata"]["name"] for c in claims if c["metadata"]["namespace"] == "init"] == \
        ["test-claim-0", "test-claim-1", "test-claim-2"]
    assert not any("status" in c for c in claims)


def test_slices_have_upstream_basic_devices() -> None:
    s = sp.basic_slice_tpl(10, 2)(7)
    assert s["spec"]["nodeName"] == "node-7" and len(s["spec"]["devices"]) == 10
    d3 = s["spec"]["devices"][3]
    assert d3["attributes"]["resource.kubernetes.io/pciRoot"] == {"string": "pci0000:01"}
    assert d3["attributes"]["driverVersion"] == {"version": "1.2.3"}
    assert d3["capacity"]["memory"] == {"value": "24480Mi"}


def test_steady_state_in_memory_replaces_bound_pods_and_respects_init_allocations() -> None:
    w = _short("SchedulingWithResourceClaimTemplate/full_500nodes")
    r = sp.run_memory(w, {"nodesWithDRA": 3, "initClaims": 28, "measurePods": 2})
    assert r["steady"] and r["bound"] > 2 and not r["double_allocated"]
    none_free = sp.run_memory(w, {"nodesWithDRA": 3, "initClaims": 30, "measurePods": 2})
    assert none_free["bound"] == 0


def test_match_attribute_variant_puts_two_pods_per_node() -> None:
    w = sp.BY_NAME["SchedulingWithResourceClaimTemplate/match_empty_500nodes"]
    w = dataclasses.replace(w, ops=[dataclasses.replace(o, duration=0.0) if o.kind == "measure" else o
                                    for o in w.ops])  # burst: keep the pods to look at them
    r = sp.run_memory(w, {"nodesWithDRA": 2, "initClaims": 0, "measurePods": 5})
    assert r["bound"] == 4 and r["pods"] == 5 and not r["double_allocated"]


class _Stream:
    def __init__(self, events: queue.SimpleQueue[bytes]) -> None:
        self.events = events
        self.closed = False

    def stream(self, _size: int) -> Any:
        while not self.closed:
            try:
                yield self.events.get(timeout=0.05)
            except queue.Empty:
                continue

    def close(self) -> None:
        self.closed = True


class _FakeAPI:
    """Binds every pod it is given at once, as a scheduler that keeps up would, and records the calls."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.calls: list[tuple[str, str, Any]] = []

    def bind(self, name: str) -> None:
        obj = {"metadata": {"name": name, "resourceVersion": "2"}, "spec": {"nodeName": "node-0"}}
        self.events.put(orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n")

    def call(self, method: str, path: str, body: Any = None, query: Any = None, **_: Any) -> Any:
        self.calls.append((method, path, body))
        if method == "GET":
            return {"metadata": {"resourceVersion": "1"}, "items": []}
        if method == "POST" and path.endswith("/pods"):
            self.bind(body["metadata"]["name"])
        return {}

    def open_stream(self, *_: Any, **__: Any) -> _Stream:
        return _Stream(self.events)


def test_e2e_steady_state_replaces_each_bound_pod_and_counts_the_window(tmp_path: Path) -> None:
    api = _FakeAPI()
    for i in range(3):
        api.bind(f"m-{i}")
    created = iter(range(3, 10**6))

    def on_bind(name: str) -> None:
        api.call("DELETE", f"/api/v1/namespaces/test/pods/{name}")
        api.call("POST", "/api/v1/namespaces/test/pods", body={"metadata": {"name": f"m-{next(created)}"}})

    r = e2e_common.measure_scheduler(api, tmp_path / "s.log", "fake", ["sleep", "30"], "test", 3, prefix="m-",
                                     timeout=30, on_bind=on_bind, duration=0.5)
    assert "error" not in r, r
    deletes = [p for m, p, _ in api.calls if m == "DELETE"]
    assert len(deletes) > 3 and r["pods_per_second"] > 3 / 0.5


def test_e2e_populate_posts_claims_then_their_allocation_through_the_status_subresource() -> None:
    api = _FakeAPI()
    w = sp.BY_NAME["SchedulingWithResourceClaimTemplate/half_500nodes"]
    params = {"nodesWithDRA": 2, "initClaims": 4, "measurePods": 2}
    sp._populate(api, w, params, {})
    posts = [(p, b) for m, p, b in api.calls if m == "POST"]
    claim_posts = [b for p, b in posts if p == "/apis/resource.k8s.io/v1/namespaces/init/resourceclaims"]
    assert len(claim_posts) == 4 and not any("status" in b for b in claim_posts)
    patches = [(p, b) for m, p, b in api.calls if m == "PATCH" and "resourceclaims" in p]
    assert sorted(p for p, _ in patches) == [
        f"/apis/resource.k8s.io/v1/namespaces/init/resourceclaims/test-claim-{i}/status" for i in range(4)]
    assert all(b["status"]["allocation"]["devices"]["results"] for _, b in patches)
    assert any(p == "/apis/resource.k8s.io/v1/deviceclasses" for p, _ in posts)
    assert any(p == "/apis/resource.k8s.io/v1/namespaces/test/resourceclaimtemplates" for p, _ in posts)
    assert not sp._uses_templates(sp.BY_NAME["SchedulingWithResourceClaim"]) and sp._uses_templates(w)


def test_e2e_populate_carries_the_in_memory_allocations_of_named_claims() -> None:
    w = sp.BY_NAME["SchedulingWithResourceClaim"]
    params = {"nodesWithDRA": 2, "initPods": 5, "initClaims": 1, "measurePods": 5, "measureClaims": 1}
    placements: dict[str, str] = {}
    allocations: dict[str, dict[str, Any]] = {}
    sp.run_memory(w, params, placements=placements, allocations=allocations)
    assert list(allocations) == ["init/test-claim-0"] and len(set(placements.values())) == 1
    api = _FakeAPI()
    sp._populate(api, w, params, placements, allocations)
    patches = [p for m, p, _ in api.calls if m == "PATCH" and "resourceclaims" in p]
    assert patches == ["/apis/resource.k8s.io/v1/namespaces/init/resourceclaims/test-claim-0/status"]
    pods = [b for m, p, b in api.calls if m == "POST" and p == "/api/v1/namespaces/init/pods"]
    assert len(pods) == 5 and {b["spec"]["nodeName"] for b in pods} == set(placements.values())

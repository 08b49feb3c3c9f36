"""The allocator's node-equivalence memo (Allocator.memo): on nodes whose slices look the same, with the same
device positions in use, a remembered search must give exactly what a fresh search gives on that node (its own
devices, in the same order), and nodes that differ in any way the search can see must not share an answer."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler_runtime.objects import Node
from scheduler_runtime.plugins.dynamicresources.allocator import AllocationError, Allocator, Features, SliceCaches
from scheduler_runtime.plugins.dynamicresources.cel import CelCache

DRIVER = "gpu.example.com"
CLASSES = {"gpu": {"metadata": {"name": "gpu"},
                   "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                            "config": [{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]}}}


def _device(name: str, model: str, root: int, mem: str, taint: bool) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": model}, "root": {"int": root}},
                         "capacity": {"memory": {"value": mem}}}
    if taint:
        d["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    return d


def _shapes(rng: random.Random) -> list[list[list[tuple[str, int, str, bool]]]]:
    """A few node shapes: per pool, per device (model, root, memory, tainted)."""
    out = []
    for _ in range(3):
        pools = []
        for _p in range(rng.randint(1, 2)):
            pools.append([(rng.choice(["a", "b"]), rng.randint(0, 1), rng.choice(["8Gi", "16Gi"]), rng.random() < 0.1)
                          for _d in range(rng.randint(2, 6))])
        out.append(pools)
    return out


def _cluster(rng: random.Random, nodes: int) -> tuple[list[Node], list[dict[str, Any]], set[tuple[str, str, str]]]:
    shapes = _shapes(rng)
    node_objs, slices, allocated = [], [], set()
    for n in range(nodes):
        name = f"node-{n}"
        node_objs.append(Node.from_dict({"metadata": {"name": name}}))
        shape = shapes[n % len(shapes)]
        for pi, devs in enumerate(shape):
            pool = f"{name}-pool-{pi}"
            names = [f"dev-{n}-{k}" for k in range(len(devs))]
            slices.append({"metadata": {"name": f"{pool}-slice"},
                           "spec": {"driver": DRIVER, "nodeName": name,
                                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                                    "devices": [_device(nm, *d) for nm, d in zip(names, devs, strict=True)]}})
            # two allocation patterns per shape, so some nodes of a shape agree on what is in use and some not
            for k, nm in enumerate(names):
                if (k + (n // len(shapes)) % 2) % 3 == 0:
                    allocated.add((DRIVER, pool, nm))
    return node_objs, slices, allocated


def _request(rng: random.Random, name: str) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": "gpu", "count": rng.randint(1, 2)}
    if rng.random() < 0.5:
        body["selectors"] = [{"cel": {"expression": rng.choice([
            f'device.attributes["{DRIVER}"].model == "a"',
            f'device.capacity["{DRIVER}"].memory.compareTo(quantity("10Gi")) >= 0',
            f'device.attributes["{DRIVER}"].root == 1'])}}]
    if rng.random() < 0.2:
        body["tolerations"] = [{"key": "k", "operator": "Exists"}]
    if rng.random() < 0.25:
        return {"name": name, "firstAvailable": [{"name": "big", **body, "count": 3}, {"name": "small", **body}]}
    return {"name": name, "exactly": body}


def _claims(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for ci in range(rng.randint(1, 2)):
        reqs = [_request(rng, f"r{k}") for k in range(rng.randint(1, 3))]
        devices: dict[str, Any] = {"requests": reqs}
        if rng.random() < 0.5:
            devices["constraints"] = [{"matchAttribute": f"{DRIVER}/root"}]
        out.append({"metadata": {"name": f"c{ci}", "namespace": "ns", "uid": f"u{ci}"}, "spec": {"devices": devices}})
    return out


def _allocator(slices: list[dict[str, Any]], allocated: set[tuple[str, str, str]]) -> Allocator:
    return Allocator(features=Features(), allocated=allocated, class_lister=CLASSES.get, slices=slices,
                     cel_cache=CelCache())


def _outcome(alloc: Allocator, node: Node, claims: list[dict[str, Any]]) -> Any:
    """What Filter then Reserve get (search, then build on the node picked)."""
    try:
        run = alloc.search(node, claims)
    except AllocationError as exc:
        return f"error: {exc}"
    return run.build() if run is not None else None


@pytest.mark.parametrize("seed", range(40))
def test_memo_matches_a_fresh_search(seed: int) -> None:
    rng = random.Random(seed)
    nodes, slices, allocated = _cluster(rng, 12)
    claims = _claims(rng)
    shared = _allocator(slices, allocated)
    for node in nodes:
        fresh = _allocator(slices, allocated)
        try:
            want = fresh.allocate(node, claims)
        except AllocationError as exc:
            want = f"error: {exc}"
        assert _outcome(shared, node, claims) == want, node.name
    # the nodes came in three shapes and two patterns of devices in use: at most six searches were remembered
    # (none for one plain request, which takes the greedy path)
    assert len(shared.memo) <= 6
    USED.append(bool(shared.memo))


USED: list[bool] = []


def test_memo_was_exercised() -> None:
    """Most random cases above went through the memo (this runs after them, in file order)."""
    if len(USED) < 40:
        pytest.skip("the random cases did not all run")
    assert sum(USED) >= 25, USED


def test_memo_keys_on_devices_in_use() -> None:
    """Two nodes of one shape, the first device in use on one of them: each gets its own devices."""
    nodes, slices, _ = _cluster(random.Random(1), 6)
    claim = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu"}}, {"name": "b", "exactly": {"deviceClassName": "gpu"}}]}}}
    first = slices[0]["spec"]
    allocated = {(DRIVER, first["pool"]["name"], first["devices"][0]["name"])}
    shared = _allocator(slices, allocated)
    got = [_outcome(shared, n, [claim]) for n in nodes]
    fresh = [_allocator(slices, allocated).allocate(n, [claim]) for n in nodes]
    assert got == fresh
    assert got[0] is not None and got[0][0]["devices"]["results"][0]["device"] != first["devices"][0]["name"]
    assert shared.memo  # the memo was used here, whatever order or selection the other cases ran in


def test_memo_skips_network_attached_slices() -> None:
    """A slice not bound to one node by name (here allNodes) leaves every node it reaches out of the memo."""
    nodes, slices, allocated = _cluster(random.Random(2), 4)
    claim = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu"}}, {"name": "b", "exactly": {"deviceClassName": "gpu"}}]}}}
    control = _allocator(slices, allocated)
    for n in nodes:
        _outcome(control, n, [claim])
    assert control.memo  # without the network-attached slice these nodes do share searches
    slices.append({"metadata": {"name": "net"}, "spec": {
        "driver": DRIVER, "allNodes": True, "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
        "devices": [_device("n0", "a", 0, "8Gi", False)]}})
    shared = _allocator(slices, allocated)
    for n in nodes:
        assert _outcome(shared, n, [claim]) == _allocator(slices, allocated).allocate(n, [claim])
    assert not shared.memo


@pytest.mark.parametrize("admin", [False, True])
def test_single_request_on_full_nodes(admin: bool) -> None:
    """One plain request on a later node of the cycle (the plan is known): a node whose devices are all in use is
    turned down without a search, as the search would; admin access still gets a device there."""
    nodes, slices, _ = _cluster(random.Random(3), 6)
    allocated = {(DRIVER, s["spec"]["pool"]["name"], d["name"]) for s in slices[: len(slices) // 2]
                 for d in s["spec"]["devices"]}
    body: dict[str, Any] = {"deviceClassName": "gpu", "tolerations": [{"key": "k", "operator": "Exists"}]}
    if admin:
        body["adminAccess"] = True
    claim = {"metadata": {"name": "c", "namespace": "ns"},
             "spec": {"devices": {"requests": [{"name": "a", "exactly": body}]}}}
    shared = _allocator(slices, allocated)
    got = [_outcome(shared, n, [claim]) for n in nodes]
    assert got == [_allocator(slices, allocated).allocate(n, [claim]) for n in nodes]
    assert (got[0] is None) is not admin


@pytest.mark.parametrize("seed", range(30))
def test_plain_request_shortcut_matches_the_search(seed: int) -> None:
    """One plain request, cycle after cycle with the slice caches kept (so devices' eligibility is remembered and
    the allocator picks without a search where it can): the same devices as a fresh search on each node."""
    rng = random.Random(seed)
    nodes, slices, _ = _cluster(rng, 9)
    caches = SliceCaches()
    all_ids = [(DRIVER, s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]]
    for _cycle in range(3):
        claim = {"metadata": {"name": "c", "namespace": "ns"},
                 "spec": {"devices": {"requests": [_request(rng, "r")]}}}
        if "firstAvailable" in claim["spec"]["devices"]["requests"][0]:
            continue
        allocated = {did for did in all_ids if rng.random() < 0.6}
        shared = Allocator(features=Features(), allocated=allocated, class_lister=CLASSES.get, slices=slices,
                           cel_cache=CelCache(), caches=caches)
        for node in nodes:
            assert _outcome(shared, node, [claim]) == _allocator(slices, allocated).allocate(node, [claim])


class _Resolver:
    def __init__(self, cls: dict[str, Any]) -> None:
        self.cls = cls

    def get_device_class(self, resource: str) -> dict[str, Any] | None:
        return self.cls


@pytest.mark.parametrize("seed", range(10))
def test_scoring_totals_with_kept_slice_sets(seed: int) -> None:
    """dra_totals with each slice's matching devices kept across nodes and calls (DraScorer) gives what it gives
    device by device, a selector failing on some device (0, 0) and allNodes slices included."""
    from scheduler_runtime.plugins.dynamicresources.extended import dra_totals

    rng = random.Random(seed)
    nodes, slices, _ = _cluster(rng, 6)
    slices.append({"metadata": {"name": "net"}, "spec": {
        "driver": DRIVER, "allNodes": True, "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
        "devices": [_device("n0", "a", 0, "8Gi", False), _device("n1", "b", 1, "16Gi", False)]}})
    if rng.random() < 0.4:  # a device whose attribute makes the selector fail at run time
        slices[0]["spec"]["devices"][0]["attributes"]["model"] = {"int": 3}
    expr = f'device.attributes["{DRIVER}"].model.startsWith("a") || device.attributes["{DRIVER}"].root == 1'
    resolver = _Resolver({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    all_ids = [(DRIVER, s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]]
    verdicts: dict[Any, Any] = {}
    sets: dict[Any, Any] = {}
    inputs: dict[Any, Any] = {}
    for _call in range(3):
        allocated = {did for did in all_ids if rng.random() < 0.5}
        for node in nodes:
            want = dra_totals(resolver, slices, allocated, node, "r", CelCache(), {})  # type: ignore[arg-type]
            got = dra_totals(resolver, slices, allocated, node, "r", CelCache(), inputs,  # type: ignore[arg-type]
                             verdicts, sets)
            assert got == want, node.name


def test_scoring_reads_allow_multiple_allocations_as_false() -> None:
    """NodeResourcesFit's scoring builds its CEL device without `allowMultipleAllocations` (kube's
    resource_allocation.go), so a class selecting on it counts no device there, while the allocator reads it."""
    from scheduler_runtime.plugins.dynamicresources.extended import dra_totals

    node = Node.from_dict({"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4"}}})
    slices = [{"metadata": {"name": "s"}, "spec": {
        "driver": DRIVER, "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "d0", "allowMultipleAllocations": True}, {"name": "d1"}]}}]
    for expr, want in (("device.allowMultipleAllocations", (0, 0)), ("!device.allowMultipleAllocations", (2, 0))):
        resolver = _Resolver({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": expr}}]}})
        assert dra_totals(resolver, slices, set(), node, "r", CelCache(), {}) == want  # type: ignore[arg-type]

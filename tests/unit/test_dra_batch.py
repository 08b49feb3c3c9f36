"""DynamicResources' batch Filter (dynamicresources/batch.py) against its per-node Filter: on every case of kube's
plugin table and on nodes of varied shapes, each node the batch decides gets the per-node verdict (code and
message) and the others are left pending; Reserve picks the same devices on a node only the batch passed; the
scheduler places pods and allocates devices as the per-node path does; and the framework asks a batch's pending
rows per node, in its walk order, only as far as the walk goes."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler_runtime.api import CycleState, Plugin, Status
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.outcomes import num_feasible_nodes_to_find
from scheduler_runtime.framework.runtime import CycleError, Diagnosis, Framework
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import FilterBatch, NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.dynamicresources import DynamicResources
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from tests.unit.test_dra_plugin import NS, claim, device_class, node, pod, rslice, template
from tests.unit.test_dra_tables import PLUGIN_RUN, _plugin_case_id, _PluginRun


def _snapshot(nodes: list[Node]) -> Snapshot:
    snap = Snapshot()
    for n in nodes:
        snap.add_node(NodeInfo(n))
    return snap


def _compare(pl: DynamicResources, state: CycleState, p: Pod, snap: Snapshot) -> tuple[int, int]:
    """Batch and per-node verdicts of every node agree where the batch decides; (decided, pending) rows."""
    fb = pl.filter_batch(state, p, snap)
    pending = fb.pending if fb.pending is not None else np.zeros(len(snap), dtype=bool)
    decided = 0
    for ni in snap.node_infos:
        if pending[ni.row]:
            assert not fb.ok[ni.row]
            continue
        decided += 1
        per_node = pl.filter(state, p, ni)
        if fb.ok[ni.row]:
            assert per_node is None, (ni.name, per_node)
        else:
            got = fb.status_at(ni.row)
            assert per_node is not None and (got.code, got.message) == (per_node.code, per_node.message), ni.name
    return decided, int(pending.sum())


@pytest.mark.parametrize("case", PLUGIN_RUN, ids=[_plugin_case_id(c) for c in PLUGIN_RUN])
def test_batch_agrees_with_per_node_filter_on_kube_cases(case: dict[str, Any]) -> None:
    run = _PluginRun(case)
    pl, p = run.pl, run.pod
    st = pl.pre_enqueue(p)
    if st is not None and st.code != Code.Success:
        return
    state = CycleState()
    _res, st = pl.pre_filter(state, p, None)  # type: ignore[arg-type]
    if st is not None and st.code != Code.Success:
        return
    _compare(pl, state, p, _snapshot(run.nodes))


def _varied() -> tuple[MemoryCluster, list[Node]]:
    """n0 without devices, n1 with a free t4, n2 whose t4 a claim holds, n3 with a100s only, n4 with two free t4s
    and a pool whose second slice is missing, n5 whose pool is invalid (one device name twice)."""
    m = MemoryCluster()
    held = claim("held", model="t4")
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-0"}]}}}
    bad = rslice("n5", ["t4", "t4"])
    bad["spec"]["devices"][1]["name"] = "gpu-0"
    objs = [device_class(), rslice("n1", ["t4"]), rslice("n2", ["t4"]), rslice("n3", ["a100", "a100"]),
            rslice("n4", ["t4", "t4"]), rslice("n4", ["t4"], pool="extra", count=2, name="n4-extra"), bad, held,
            claim("want", model="t4"), pod("p", claim_name="want")]
    names = [f"n{i}" for i in range(6)]
    for o in [node(n) for n in names] + objs:
        m.create(o, emit=False)
    return m, [Node.from_dict(node(n)) for n in names]


def test_batch_decides_what_it_can_and_leaves_the_rest() -> None:
    m, nodes = _varied()
    pl = DynamicResources(None, Handle(Snapshot(), cluster=m))
    p = Pod.from_dict(m.get_pod(NS, "p"))
    state = CycleState()
    _res, st = pl.pre_filter(state, p, None)  # type: ignore[arg-type]
    assert st is None
    snap = _snapshot(nodes)
    assert _compare(pl, state, p, snap) == (5, 1)  # n5's invalid pool is the search's to report
    fb = pl.filter_batch(state, p, snap)
    assert fb.ok.tolist() == [False, True, False, False, True, False]


def test_reserve_builds_the_allocation_of_a_node_only_the_batch_passed() -> None:
    m, nodes = _varied()
    picked = []
    for batch in (False, True):
        pl = DynamicResources(None, Handle(Snapshot(), cluster=m))
        p = Pod.from_dict(m.get_pod(NS, "p"))
        state = CycleState()
        pl.pre_filter(state, p, None)  # type: ignore[arg-type]
        snap = _snapshot(nodes)
        if batch:
            assert pl.filter_batch(state, p, snap).ok[4]
        else:
            assert pl.filter(state, p, snap.node_infos[4]) is None
        assert pl.reserve(state, p, "n4") is None
        picked.append(state.get("DynamicResources").picked)
        pl.unreserve(state, p, "n4")
    assert picked[0] == picked[1] and picked[0]


def _schedule(batch: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], dict[str, Any]]:
    """Placements and claim allocations of a wave of template and extended-resource pods, some nodes
    advertising the extended resource themselves."""
    if not batch:
        monkeypatch.setattr(DynamicResources, "filter_batch", None)
    m = MemoryCluster()
    ext_class = {**device_class("ext"), "spec": {**device_class("ext")["spec"], "extendedResourceName": "x.io/gpu"}}
    objs: list[dict[str, Any]] = [device_class(), ext_class, template("t4", model="t4")]
    for i in range(12):
        n = node(f"n{i}")
        if i % 4 == 3:  # a device plugin's resource of the same name: DRA leaves it to NodeResourcesFit
            n["status"]["allocatable"]["x.io/gpu"] = "1"
        objs += [n, rslice(f"n{i}", ["t4", "a100", "t4"][: 1 + i % 3])]
    for o in objs:
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    for i in range(30):
        raw = pod(f"p{i}", tmpl="t4") if i % 2 else pod(f"p{i}")
        if not i % 2:
            raw["spec"]["containers"][0]["resources"] = {"requests": {"x.io/gpu": "1"}, "limits": {"x.io/gpu": "1"}}
        m.create(raw)
    s.run(until_idle=True)
    monkeypatch.undo()
    placed = {r["metadata"]["name"]: r["spec"].get("nodeName") or "" for r in m.list("pods")}
    allocs = {(c["metadata"].get("ownerReferences") or [{}])[0].get("name"):
              {k: v for k, v in ((c.get("status") or {}).get("allocation") or {}).items() if k != "allocationTimestamp"}
              for c in m.list("resourceclaims")}
    return placed, allocs


def test_scheduler_decides_the_same_with_and_without_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    per_node = _schedule(False, monkeypatch)
    batch = _schedule(True, monkeypatch)
    assert batch == per_node
    assert sum(1 for v in per_node[0].values() if v) >= 10 and sum(1 for v in per_node[0].values() if not v) >= 5


class _Pending(Plugin):
    """Leaves every row pending; its per-node Filter records the nodes asked and fails one with an Error."""

    name = "Pending"

    def __init__(self, error_on: str = "") -> None:
        super().__init__()
        self.asked: list[str] = []
        self.error_on = error_on

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        n = len(snapshot)
        return FilterBatch(np.zeros(n, dtype=bool), Status.as_error("never"), pending=np.ones(n, dtype=bool))

    def filter(self, state: CycleState, pod: Pod, node_info: Any) -> Status | None:
        self.asked.append(node_info.name)
        return Status.as_error("boom") if node_info.name == self.error_on else None


def _nodes(n: int) -> Snapshot:
    return _snapshot([Node.from_dict({"metadata": {"name": f"n{i:03d}"}, "status": {"allocatable": {"cpu": "4"}}})
                      for i in range(n)])


def test_pending_rows_are_asked_per_node_as_far_as_the_walk_goes() -> None:
    plugin = _Pending()
    snap = _nodes(300)
    f = Framework("default-scheduler", Handle(snap), {"filter": [(plugin, 1)], "score": [(plugin, 1)]},
                  rng=random.Random(0))
    pod_ = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": [{}]}})
    feasible = f.find_nodes_that_pass_filters(CycleState(), pod_, snap, None, Diagnosis())
    # numFeasibleNodesToFind for 300 nodes: 48% of them; no node past the last one found is asked
    assert len(feasible) == len(plugin.asked) == num_feasible_nodes_to_find(None, 300) == 144
    assert plugin.asked == [snap.node_infos[r].name for r in feasible.tolist()]


def test_an_error_on_a_pending_row_ends_the_cycle_there() -> None:
    plugin = _Pending(error_on="n002")
    snap = _nodes(10)
    f = Framework("default-scheduler", Handle(snap), {"filter": [(plugin, 1)], "score": [(plugin, 1)]},
                  rng=random.Random(0))
    pod_ = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": [{}]}})
    with pytest.raises(CycleError, match="boom"):
        f.find_nodes_that_pass_filters(CycleState(), pod_, snap, None, Diagnosis())
    assert plugin.asked == ["n000", "n001", "n002"]


def _allocated_claim(name: str, devices: list[tuple[str, str]]) -> dict[str, Any]:
    got = claim(name)
    got["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": pool, "device": dev} for pool, dev in devices]}}}
    return got


@pytest.mark.parametrize("seed", range(4))
def test_scoring_counts_follow_the_allocated_devices(seed: int) -> None:
    """DraScorer's per-node counts, kept from call to call and moved along the manager's change log, equal
    dra_totals worked out afresh: claims allocated, deallocated and allocated again between calls, allocations
    in flight, a node object replaced, a slice for every node and one whose selector fails on a device."""
    from scheduler_runtime.plugins.dynamicresources.cel import CelCache
    from scheduler_runtime.plugins.dynamicresources.claims import DraManager
    from scheduler_runtime.plugins.dynamicresources.extended import DraScorer, dra_totals

    rng = random.Random(seed)
    m = MemoryCluster()
    cls = device_class("ext", 'device.attributes["gpu.example.com"].model.startsWith("t")')
    cls["spec"]["extendedResourceName"] = "x.io/gpu"
    shared = rslice("n0", ["t4", "t4"], pool="net", name="net")
    shared["spec"].pop("nodeName")
    shared["spec"]["allNodes"] = True
    broken = rslice("n3", ["t4", "a100"])
    broken["spec"]["devices"][1]["attributes"]["model"] = {"int": 3}
    objs = [cls, shared, broken] + [rslice(f"n{i}", ["t4", "a100", "t4"][: 1 + i % 3]) for i in (0, 1, 2, 4)]
    for o in objs + [node(f"n{i}") for i in range(5)]:
        m.create(o, emit=False)
    mgr = DraManager.for_handle(Handle(Snapshot(), cluster=m))
    scorer = DraScorer()
    nodes = [Node.from_dict(node(f"n{i}")) for i in range(5)]
    devices = [(f"n{i}", f"gpu-{k}") for i in range(5) for k in range(3)] + [("net", "gpu-0"), ("net", "gpu-1")]
    live: list[str] = []
    for step in range(12):
        for name in list(live):
            if rng.random() < 0.4:
                m.delete("resourceclaims", name, NS)
                live.remove(name)
        for k in range(rng.randrange(3)):
            name = f"c{step}-{k}"
            m.create(_allocated_claim(name, rng.sample(devices, rng.randrange(1, 3))))
            live.append(name)
        if rng.random() < 0.5:
            mgr.signal_pending(f"uid-{step}", _allocated_claim(f"f{step}", [rng.choice(devices)]))
        if step == 6:
            nodes[2] = Node.from_dict(node("n2"))
        want = ([], [])
        for n in nodes:
            c, u = dra_totals(mgr.resolver, mgr.device_slices(), mgr.allocated(), n, "x.io/gpu", CelCache(), {})
            want[0].append(c)
            want[1].append(u)
        assert scorer.totals(mgr, "x.io/gpu", nodes) == want, step


def _allocated(name: str, node_selector: dict[str, Any] | None, reserved: bool = False) -> dict[str, Any]:
    c = claim(name)
    alloc: dict[str, Any] = {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}}
    if node_selector is not None:
        alloc["nodeSelector"] = node_selector
    c["status"] = {"allocation": alloc}
    if reserved:
        c["status"]["reservedFor"] = [{"resource": "pods", "name": "other", "uid": "other-uid"}]
    return c


_ON_N1 = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
_ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                                 {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3", "x"]}]}]}


@pytest.mark.parametrize("selectors", [[_ON_N1], [_ZONE_A], [None], [_ON_N1, _ZONE_A], [_ZONE_A, None]])
def test_the_batch_decides_every_node_for_allocated_claims(selectors: list[dict[str, Any] | None]) -> None:
    """A pod whose claims are all allocated (a shared claim's later pods): the batch gives every node the
    verdict `filter` gives, leaving none to the per-node walk, and marks a claim unavailable only on the nodes
    whose Status the framework asks for."""
    m = MemoryCluster()
    names = [f"c{i}" for i in range(len(selectors))]
    p = pod("p")
    p["spec"]["resourceClaims"] = [{"name": n, "resourceClaimName": n} for n in names]
    for o in [device_class(), p] + [_allocated(n, sel) for n, sel in zip(names, selectors, strict=True)]:
        m.create(o, emit=False)
    nodes = []
    for i in range(5):
        raw = node(f"n{i}")
        raw["metadata"]["labels"]["zone"] = "a" if i in (1, 2) else "b"
        nodes.append(Node.from_dict(raw))
    pl = DynamicResources(None, Handle(Snapshot(), cluster=m))
    pp = Pod.from_dict(m.get_pod(NS, "p"))
    state = CycleState()
    _res, st = pl.pre_filter(state, pp, None)  # type: ignore[arg-type]
    assert st is None
    snap = _snapshot(nodes)
    fb = pl.filter_batch(state, pp, snap)
    assert fb.pending is None
    assert state.get("DynamicResources").unavailable == set()  # nothing asked yet
    per_node_state = CycleState()
    pl.pre_filter(per_node_state, pp, None)  # type: ignore[arg-type]
    for ni in snap.node_infos:
        want = pl.filter(per_node_state, pp, ni)
        assert bool(fb.ok[ni.row]) == (want is None), ni.name
        if want is not None:
            got = fb.status_at(ni.row)
            assert (got.code, got.message) == (want.code, want.message)
    assert state.get("DynamicResources").unavailable == per_node_state.get("DynamicResources").unavailable
    keys = fb.row_keys()  # the framework asks once per key: rejected rows sharing one mark the same claims
    if keys is None:  # every selector matches every node: one uniform Status, nothing to mark
        assert not callable(fb.status)
        return
    marked: dict[int, set[int]] = {}
    for ni in snap.node_infos:
        if fb.ok[ni.row]:
            continue
        one = CycleState()
        pl.pre_filter(one, pp, None)  # type: ignore[arg-type]
        pl.filter_batch(one, pp, snap).status_at(ni.row)
        got_marks = set(one.get("DynamicResources").unavailable)
        assert marked.setdefault(int(keys[ni.row]), got_marks) == got_marks, ni.name


def test_a_claim_on_nodes_other_plugins_reject_is_not_deallocated() -> None:
    """kube's PostFilter deallocates only claims its Filter found unavailable on some node it reached: when an
    earlier plugin rejects every other node (a nodeSelector) and the claim's node is cordoned, DynamicResources
    never rejects a node, and the unreserved claim stays allocated."""
    m = MemoryCluster()
    n1 = node("n1")
    n1["spec"] = {"unschedulable": True}
    p = pod("p", claim_name="c")
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    for o in (n1, node("n2"), node("n3"), device_class(), rslice("n1", ["t4"]), _allocated("c", _ON_N1)):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    m.create(p)
    s.run(until_idle=True)
    got = m.informer("resourceclaims").get("c", NS)
    assert (got.get("status") or {}).get("allocation"), got
    assert not (m.get_pod(NS, "p") or {})["spec"].get("nodeName")

"""DRAListTypeAttributes (alpha): ksched against the real kube-scheduler v1.37.2, both with the gate on, and both
with it off, on an API server that stores list-typed attributes (its own DRAListTypeAttributes on) and a slice's
`skipNodeOperations` (DRAOptionalNodeOperations on).

On that one API server each scheduler gets, per case, its own two nodes, DeviceClass and driver with identical
slices, then the same pods in the same order; placements, allocated devices and FailedScheduling messages must
match. The cases: matchAttribute over lists (common element, none, partly common, backtracking, mixed scalar and
list, versions, a node that fits only with the gate), distinctAttribute over lists, selectors over lists
(`includes`, `exists`), and a slice with skipNodeOperations (refused by kube's experimental allocator, which the
gate selects). A third run has DRAOptionalNodeOperations on instead: such a device goes only to a node declaring
that feature. Two more have DRADeviceCompatibilityGroups on and off (the API server stores `compatibilityGroups`
with its own gate on): partitions drawing on one counter set are allocated together only when their groups
intersect, with the devices other claims hold too; with the gate off a pool declaring groups is not used.
Two more cover DRADerivedAttributes (the API server stores `derivedAttributes` with its gate on):
with the schedulers' gate on, a matchAttribute / distinctAttribute over a derived attribute (a NUMA index parsed
from string attributes of two names), a mismatch, and a derived attribute failing on a device; with it off, a
claim declaring derived attributes (kube refuses it).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.controlplane import ControlPlane
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.testing.kube import (
    create_dra_nodes_and_class,
    create_resource_slice,
    ksched_runner,
    kube_scheduler,
    scheduler_config,
    wait_decision,
)
from tests.controlplanes import started_control_plane

pytestmark = pytest.mark.integration
KSCHED = Path(sys.executable).parent / "ksched"
RES = "/apis/resource.k8s.io/v1"
GATE = "DRAListTypeAttributes=true"
DERIVED_GATE = "DRADerivedAttributes=true"


@pytest.fixture(scope="module")
def list_plane() -> Iterator[ControlPlane]:
    """A control plane of its own whose kube-apiserver stores the alpha fields the cases need."""
    gates = f"{GATE},DRAOptionalNodeOperations=true,DRADeviceCompatibilityGroups=true,{DERIVED_GATE}"
    with started_control_plane(apiserver_args=(f"--feature-gates={gates}",)) as cp:
        yield cp


def _dev(name: str, **attrs: Any) -> dict[str, Any]:
    """A device; each attribute given as a list becomes a list-typed one (`ints`, `strings`, `versions` by the
    first element; `v:` marks versions), a scalar becomes `int` / `string`."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, list):
            if v and isinstance(v[0], int):
                out[k] = {"ints": v}
            elif v and v[0].startswith("v:"):
                out[k] = {"versions": [x[2:] for x in v]}
            else:
                out[k] = {"strings": v}
        else:
            out[k] = {"int": v} if isinstance(v, int) else {"string": v}
    return {"name": name, "attributes": out}


#: case -> (devices of node 0, devices of node 1, pods: (count, constraint kind, attribute, request selector))
CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[int, str, str, str]]]] = {
    "match-common": ([_dev("gpu-0", numa=[0, 1]), _dev("gpu-1", numa=[1, 2]), _dev("gpu-2", numa=[5])], [],
                     [(2, "matchAttribute", "numa", "")]),
    "match-disjoint": ([_dev("gpu-0", numa=[0]), _dev("gpu-1", numa=[4, 5, 6, 7])], [],
                       [(2, "matchAttribute", "numa", "")]),
    "match-partly-common": ([_dev("gpu-0", numa=[0, 1]), _dev("gpu-1", numa=[1, 2]), _dev("gpu-2", numa=[2, 0])],
                            [], [(3, "matchAttribute", "numa", "")]),
    "match-backtrack": ([_dev("gpu-0", numa=[0, 1]), _dev("gpu-1", numa=[0]), _dev("gpu-2", numa=[1]),
                         _dev("gpu-3", numa=[1])], [], [(3, "matchAttribute", "numa", "")]),
    "match-mixed": ([_dev("gpu-0", numa=3), _dev("gpu-1", numa=[3, 4]), _dev("gpu-2", numa=4)], [],
                    [(2, "matchAttribute", "numa", ""), (1, "", "", "")]),
    "match-versions": ([_dev("gpu-0", fw=["v:1.0.0", "v:2.0.0"]), _dev("gpu-1", fw=["v:2.0.0", "v:2.1.0"])], [],
                       [(2, "matchAttribute", "fw", "")]),
    "match-other-node": ([_dev("gpu-0", numa=[0]), _dev("gpu-1", numa=[1])],
                         [_dev("gpu-0", numa=[0, 1]), _dev("gpu-1", numa=[1, 2])],
                         [(2, "matchAttribute", "numa", "")]),
    "distinct": ([_dev("gpu-0", numa=[0, 1]), _dev("gpu-1", numa=[1, 2]), _dev("gpu-2", numa=[2, 3]),
                  _dev("gpu-3", numa=1)], [], [(2, "distinctAttribute", "numa", "")]),
    "selectors": ([_dev("gpu-0", models=["a100"]), _dev("gpu-1", models=["h100", "h100-sxm"]),
                   _dev("gpu-2", models="h100")], [],
                  [(1, "", "", 'device.attributes["D"].models.exists(m, m == "a100")'),
                   (2, "", "", 'device.attributes["D"].models.includes("h100")'),
                   (1, "", "", 'device.attributes["D"].models.includes("a100")')]),
}
#: what kube-scheduler decides per case and pod (node index and devices, or None: pending), gate on / off, so
#: each case is known to show what it is meant to
EXPECTED = {
    "match-common": ([(0, ["gpu-0", "gpu-1"])], [None]),
    "match-disjoint": ([None], [None]),
    "match-partly-common": ([None], [None]),
    "match-backtrack": ([(0, ["gpu-0", "gpu-2", "gpu-3"])], [None]),
    "match-mixed": ([(0, ["gpu-0", "gpu-1"]), (0, ["gpu-2"])], [None, (0, ["gpu-0"])]),
    "match-versions": ([(0, ["gpu-0", "gpu-1"])], [None]),
    "match-other-node": ([(1, ["gpu-0", "gpu-1"])], [None]),
    "distinct": ([(0, ["gpu-0", "gpu-2"])], [(0, ["gpu-0", "gpu-3"])]),
    "selectors": ([(0, ["gpu-0"]), (0, ["gpu-1", "gpu-2"]), None], [(0, ["gpu-0"]), (0, ["gpu-1", "gpu-2"]), None]),
    "skip-node-operations": ([None], [(0, ["gpu-0"])]),
}
#: DRAOptionalNodeOperations on (the list gate off): both nodes publish a device of a slice with
#: skipNodeOperations; in `skip-declared` node 1 declares the feature, so its device is taken
EXPECTED_NODE_OPS = {"skip-node-operations": [None], "skip-declared": [(1, ["gpu-0"])]}
#: DRADeviceCompatibilityGroups: case -> (each partition's groups on node 0, on node 1, each pod's device count);
#: a node's partitions draw 1 of the 4 units of one counter set, published in a second slice of the pool
GROUP_CASES: dict[str, tuple[list[list[str]], list[list[str]], list[int]]] = {
    "groups-compatible": ([["mig"], ["mig", "vgpu"]], [], [2]),
    "groups-incompatible": ([["mig"], ["vgpu"]], [], [2]),
    "groups-none": ([[], []], [], [2]),
    "groups-none-and-some": ([[], ["mig"]], [], [2]),
    "groups-allocated-peer": ([["mig"], ["vgpu"], ["mig"]], [], [1, 1, 1]),
    "groups-other-node": ([["mig"], ["vgpu"]], [["vgpu"], ["vgpu"]], [2]),
}
#: what kube-scheduler decides per case and pod, DRADeviceCompatibilityGroups on / off
EXPECTED_GROUPS = {
    "groups-compatible": ([(0, ["gpu-0", "gpu-1"])], [None]),
    "groups-incompatible": ([None], [None]),
    "groups-none": ([(0, ["gpu-0", "gpu-1"])], [(0, ["gpu-0", "gpu-1"])]),
    "groups-none-and-some": ([None], [None]),
    "groups-allocated-peer": ([(0, ["gpu-0"]), (0, ["gpu-2"]), None], [None, None, None]),
    "groups-other-node": ([(1, ["gpu-0", "gpu-1"])], [None]),
}


def _group_slices(c: KubeClient, driver: str, nodes: list[str], groups: tuple[list[list[str]], ...]) -> None:
    """Per node with partitions: their slice and the counter set's, one pool of two slices."""
    for node, parts in zip(nodes, groups, strict=True):
        if not parts:
            continue
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        uses = [{"counterSet": "gpu-mem", "counters": {"memory": {"value": "1"}},
                 **({"compatibilityGroups": g} if g else {})} for g in parts]
        devices = [{"name": f"gpu-{i}", "consumesCounters": [use]} for i, use in enumerate(uses)]
        for name, body in ((f"{node}-slice", {"devices": devices}), (f"{node}-counters", {"sharedCounters": [
                {"name": "gpu-mem", "counters": {"memory": {"value": "4"}}}]})):
            stored = c.call("POST", f"{RES}/resourceslices", body={
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": driver, "nodeName": node, "pool": pool, **body}})
            got = [[u.get("compatibilityGroups") or [] for u in d["consumesCounters"]]
                   for d in stored["spec"].get("devices") or []]
            assert got == [[g] for g in parts] or "sharedCounters" in body, "the API server dropped the groups"
#: DRADerivedAttributes: case -> (node 0's devices (name, attribute, value), the claim's requests (name, attribute
#: the derived index is parsed from, count) and constraint kind); one pod each
DERIVED_CASES: dict[str, tuple[list[tuple[str, str, str]], list[tuple[str, str, int]], str]] = {
    "derived-match": ([("gpu-0", "numa", "numa-0"), ("gpu-1", "numa", "numa-1"), ("nic-0", "numaNode", "numa-1")],
                      [("a", "numa", 1), ("b", "numaNode", 1)], "matchAttribute"),
    "derived-mismatch": ([("gpu-0", "numa", "numa-0"), ("nic-0", "numaNode", "numa-1")],
                         [("a", "numa", 1), ("b", "numaNode", 1)], "matchAttribute"),
    "derived-distinct": ([("gpu-0", "numa", "numa-0"), ("gpu-1", "numa", "numa-0"), ("gpu-2", "numa", "numa-1")],
                         [("a", "numa", 2)], "distinctAttribute"),
    # no selector: nic-0 comes first and has no `numa`, so evaluating the derived attribute fails on it
    "derived-error": ([("nic-0", "numaNode", "numa-1"), ("gpu-0", "numa", "numa-0")], [("a", "", 1)],
                      "matchAttribute"),
}
#: what kube-scheduler decides per case (a string: pending with that in the message), scheduler gate on / off
EXPECTED_DERIVED = {"derived-match": [(0, ["gpu-1", "nic-0"])], "derived-mismatch": [None],
                    "derived-distinct": [(0, ["gpu-0", "gpu-2"])],
                    "derived-error": ["evaluate derived attribute numa.example.com/index on device G.example.com/"
                                      "dralist-G-0/nic-0 failed: no such key: numa"]}
EXPECTED_DERIVED_OFF = {"derived-match": ["request a: cannot handle request with derived attributes, the feature "
                                          "is disabled"]}
DERIVED_NAME = "numa.example.com/index"


def _expected(gate: str) -> dict[str, list[Any]]:
    """What kube-scheduler decides per case and pod in the run `gate`."""
    if gate == "node-ops":
        return dict(EXPECTED_NODE_OPS)
    if gate == "derived":
        return dict(EXPECTED_DERIVED)
    if gate == "derived-off":
        return dict(EXPECTED_DERIVED_OFF)
    if gate.startswith("groups"):
        return {case: want[0 if gate == "groups" else 1] for case, want in EXPECTED_GROUPS.items()}
    return {case: want[0 if gate == "on" else 1] for case, want in EXPECTED.items()}


def _setup(c: KubeClient, ns: str, group: str, who: str, case: str) -> dict[str, Any]:
    """The case's nodes, class, slices and claims for one scheduler."""
    driver, cls, nodes = create_dra_nodes_and_class(c, "dralist", who, f"{group}-{case}")
    if case == "skip-node-operations":
        node0, node1, pods = [{"name": "gpu-0"}], [], [(1, "", "", "")]
    elif case == "skip-declared":
        node0, node1, pods = [{"name": "gpu-0"}], [{"name": "gpu-0"}], [(1, "", "", "")]
        c.call("PATCH", f"/api/v1/nodes/{nodes[1]}/status", body={"status": {
            "declaredFeatures": ["DRAOptionalNodeOperations"]}}, content_type="application/merge-patch+json")
    elif case in GROUP_CASES:
        node0, node1, pods = [], [], [(n, "", "", "") for n in GROUP_CASES[case][2]]
        _group_slices(c, driver, nodes, GROUP_CASES[case][:2])
    else:
        node0, node1, pods = CASES[case]
    for node, devices in zip(nodes, (node0, node1), strict=True):
        if not devices:
            continue
        spec: dict[str, Any] = {"driver": driver, "nodeName": node, "devices": devices,
                                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}
        if case.startswith("skip-"):
            spec["skipNodeOperations"] = ["*"]
        stored = c.call("POST", f"{RES}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": spec})
        assert stored["spec"]["devices"] == devices, "the API server dropped the alpha fields"
        assert stored["spec"].get("skipNodeOperations") == spec.get("skipNodeOperations")
    for i, (count, kind, attr, selector) in enumerate(pods):
        body: dict[str, Any] = {"deviceClassName": cls, "count": count}
        if selector:
            body["selectors"] = [{"cel": {"expression": selector.replace('"D"', f'"{driver}"')}}]
        devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": body}]}
        if kind:
            devices["constraints"] = [{kind: f"{driver}/{attr}"}]
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{who}-{case}-{i}"}, "spec": {"devices": devices}})
    return {"nodes": nodes, "group": f"{who}-{group}-{case}", "pods": len(pods)}


def _setup_derived(c: KubeClient, ns: str, group: str, who: str, case: str) -> dict[str, Any]:
    """A DRADerivedAttributes case for one scheduler: node 0's slice and the claim (the derived attribute
    `numa.example.com/index` of each request is the number after the dash of its attribute)."""
    driver, cls, nodes = create_dra_nodes_and_class(c, "dralist", who, f"{group}-{case}")
    devices, requests, kind = DERIVED_CASES[case]
    create_resource_slice(c, driver, nodes[0], [{"name": n, "attributes": {a: {"string": v}}}
                                                for n, a, v in devices])
    reqs = []
    for name, attr, count in requests:
        body: dict[str, Any] = {"deviceClassName": cls, "count": count, "derivedAttributes": [{
            "name": DERIVED_NAME, "expression": f'int(device.attributes["{driver}"].{attr or "numa"}.split("-")[1])'}]}
        if attr:
            body["selectors"] = [{"cel": {"expression": f'"{attr}" in device.attributes["{driver}"]'}}]
        reqs.append({"name": name, "exactly": body})
    devices_spec = {"requests": reqs, "constraints": [{"requests": [r[0] for r in requests], kind: DERIVED_NAME}]}
    stored = c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{case}-0"},
        "spec": {"devices": devices_spec}})
    assert stored["spec"]["devices"]["requests"][0]["exactly"].get("derivedAttributes"), "derivedAttributes dropped"
    return {"nodes": nodes, "group": f"{who}-{group}-{case}", "pods": 1}


@pytest.mark.parametrize("gate", ["on", "off", "node-ops", "groups", "groups-off", "derived", "derived-off"])
def test_list_attributes_match_kube_scheduler(gate: str, list_plane: ControlPlane, tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(list_plane.kubeconfig_path)))
    ns, group = f"t-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:5]
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    expected = _expected(gate)
    cases = sorted(expected)
    setup = _setup_derived if gate.startswith("derived") else _setup
    ctx = {who: {case: setup(c, ns, group, who, case) for case in cases} for who in ("kube", "ours")}
    names = {"kube": f"dralist-kube-{group}", "ours": f"dralist-ours-{group}"}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(names["kube"], list_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(names["ours"]))
    flags = {"on": [GATE], "off": [], "node-ops": ["DRAOptionalNodeOperations=true"],
             "groups": ["DRADeviceCompatibilityGroups=true"], "groups-off": [], "derived": [DERIVED_GATE],
             "derived-off": []}[gate]
    got: dict[str, dict[str, list[Any]]] = {"kube": {}, "ours": {}}
    with kube_scheduler(list_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log",
                        args=tuple(f"--feature-gates={f}" for f in flags)), \
            ksched_runner(ours_cfg, list_plane.kubeconfig_path, feature_gates=parse_feature_gates(flags)):
        for case in cases:
            for i in range(ctx["kube"][case]["pods"]):
                for who in ("kube", "ours"):
                    name, here = f"{who}-{case}-{i}", ctx[who][case]
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                        "spec": {"schedulerName": names[who], "nodeSelector": {"dra-group": here["group"]},
                                 "containers": [{"name": "c", "image": "pause"}],
                                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
                    d = wait_decision(c, ns, name, need_message=True)
                    claim = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{name}")
                    alloc = (claim.get("status") or {}).get("allocation")
                    devices = None if alloc is None else [r["device"] for r in alloc["devices"]["results"]]
                    if d[0] == "bound":
                        got[who].setdefault(case, []).append((here["nodes"].index(d[1]), devices))
                    else:
                        msg = d[1].replace(here["group"], "G").replace(name, "CLAIM")
                        got[who].setdefault(case, []).append(("pending", msg, devices))
    print(f"\nkube-scheduler: {got['kube']}\nksched:         {got['ours']}")
    assert got["ours"] == got["kube"]
    for case in cases:
        for d, w in zip(got["kube"][case], expected[case], strict=True):
            if isinstance(w, str):
                assert d[0] == "pending" and w in d[1] and d[2] is None, (case, d)
            elif w is None:
                assert d[0] == "pending" and "cannot allocate all claims" in d[1] and d[2] is None, (case, d)
            else:
                assert d == w, (case, d)

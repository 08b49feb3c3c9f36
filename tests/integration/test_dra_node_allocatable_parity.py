"""DRANodeAllocatableResources (alpha): ksched against the real kube-scheduler v1.37.2, both with the gate on, and
both with it off, on an API server with the gate on (it stores a device's `nodeAllocatableResources` and a pod's
`status.nodeAllocatableResourceClaimStatuses`).

On that one API server each scheduler gets, per case, its own two nodes (8 cpus each, declaring the
DRANodeAllocatableResources node feature, without which the API server refuses such slices), DeviceClass and driver with
identical slices, then the same pods in the same order; placements, allocated devices, the pods' claim statuses
and FailedScheduling messages must match. The cases: a device taking more cpu than the node has, one taking some
cpu and memory overhead (the status PreBind writes), a pod that no longer fits beside one whose claim takes cpu,
and a claim with a mapped device used by a second pod.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.cluster.kube.rest import ApiForbiddenError
from scheduler_runtime.controlplane import ControlPlane
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.testing.kube import (
    create_dra_nodes_and_class,
    create_resource_slice,
    ksched_runner,
    kube_scheduler,
    scheduler_config,
    wait_decision,
    wait_for,
)
from tests.controlplanes import started_control_plane

pytestmark = pytest.mark.integration
KSCHED = Path(sys.executable).parent / "ksched"
RES = "/apis/resource.k8s.io/v1"
GATE = "DRANodeAllocatableResources=true"


@pytest.fixture(scope="module")
def na_plane() -> Iterator[ControlPlane]:
    with started_control_plane(apiserver_args=(f"--feature-gates={GATE}",)) as cp:
        yield cp


#: case -> (node 0's devices' nodeAllocatableResources, pods: (claim index or None, cpu request, on node 0 only))
CASES: dict[str, tuple[list[dict[str, Any]], list[tuple[int | None, str, bool]]]] = {
    "too-big": ([{"cpu": {"mapping": {"deviceMultiplier": "10"}}}], [(0, "500m", True)]),
    "mapping-and-overhead": ([{"cpu": {"mapping": {"deviceMultiplier": "2"}},
                               "memory": {"overhead": {"perPod": "1Gi"}}}], [(0, "500m", True)]),
    "counted": ([{"cpu": {"mapping": {"deviceMultiplier": "6"}}}], [(0, "500m", True), (None, "2", True)]),
    "shared": ([{"cpu": {"mapping": {"deviceMultiplier": "1"}}}], [(0, "100m", True), (0, "100m", True)]),
}
#: kube-scheduler's decisions (node index, or None: pending) per case and pod, gate on / off
EXPECTED = {"too-big": ([None], [0]), "mapping-and-overhead": ([0], [0]), "counted": ([0, None], [0, 0]),
            "shared": ([0, None], [0, 0])}


def _setup(c: KubeClient, ns: str, group: str, who: str, case: str) -> dict[str, Any]:
    driver, cls, nodes = create_dra_nodes_and_class(c, "drana", who, f"{group}-{case}")
    nars, pods = CASES[case]
    for node in nodes:  # kube-apiserver takes such a slice only for a node declaring the feature
        c.call("PATCH", f"/api/v1/nodes/{node}/status", body={"status": {
            "declaredFeatures": ["DRANodeAllocatableResources"]}}, content_type="application/merge-patch+json")
    devices = [{"name": f"cpu-{i}", "nodeAllocatableResources": nar} for i, nar in enumerate(nars)]
    # the API server checks the feature against its cached copy of the node, which may not show the status
    # patch above yet (CI saw "does not support DRANodeAllocatableResources feature"): retry until it does

    def created() -> bool:
        try:
            create_resource_slice(c, driver, nodes[0], devices)
        except ApiForbiddenError as exc:
            if "does not support" not in str(exc):
                raise
            return False
        return True

    wait_for(created, timeout=30, interval=0.2, what="the API server to see the node's declared feature")
    stored = c.call("GET", f"{RES}/resourceslices/{nodes[0]}-slice")
    assert stored["spec"]["devices"][0].get("nodeAllocatableResources"), "the API server dropped the field"
    for i in {p[0] for p in pods if p[0] is not None}:
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{case}-{i}"},
            "spec": {"devices": {"requests": [{"name": "cpu", "exactly": {"deviceClassName": cls}}]}}})
    return {"nodes": nodes, "group": f"{who}-{group}-{case}", "pods": pods}


@pytest.mark.parametrize("gate", ["on", "off"])
def test_node_allocatable_resources_match_kube_scheduler(gate: str, na_plane: ControlPlane, tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(na_plane.kubeconfig_path)))
    ns, group = f"t-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:5]
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cases = sorted(CASES)
    ctx = {who: {case: _setup(c, ns, group, who, case) for case in cases} for who in ("kube", "ours")}
    names = {"kube": f"drana-kube-{group}", "ours": f"drana-ours-{group}"}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(names["kube"], na_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(names["ours"]))
    flags = [GATE] if gate == "on" else []
    got: dict[str, dict[str, list[Any]]] = {"kube": {}, "ours": {}}
    with kube_scheduler(na_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log",
                        args=tuple(f"--feature-gates={f}" for f in flags)), \
            ksched_runner(ours_cfg, na_plane.kubeconfig_path, feature_gates=parse_feature_gates(flags)):
        for case in cases:
            for i, (claim, cpu, node0) in enumerate(CASES[case][1]):
                for who in ("kube", "ours"):
                    here = ctx[who][case]
                    name = f"{who}-{case}-p{i}"
                    container: dict[str, Any] = {"name": "c", "image": "pause",
                                                 "resources": {"requests": {"cpu": cpu}}}
                    spec: dict[str, Any] = {"schedulerName": names[who], "containers": [container],
                                            "nodeSelector": {"dra-group": here["group"]}}
                    if node0:
                        spec["nodeSelector"]["kubernetes.io/hostname"] = here["nodes"][0]
                    claim_name = None
                    if claim is not None:
                        claim_name = f"{who}-{case}-{claim}"
                        container["resources"]["claims"] = [{"name": "cpus"}]
                        spec["resourceClaims"] = [{"name": "cpus", "resourceClaimName": claim_name}]
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                        "spec": spec})
                    d = wait_decision(c, ns, name, need_message=True)
                    devices = None
                    if claim_name is not None:
                        stored = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{claim_name}")
                        alloc = (stored.get("status") or {}).get("allocation")
                        devices = None if alloc is None else [r["device"] for r in alloc["devices"]["results"]]
                    pod = c.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
                    statuses = (pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses")
                    if statuses:
                        statuses = [{**s, "resourceClaimName": s["resourceClaimName"].replace(who, "W")}
                                    for s in statuses]
                    if d[0] == "bound":
                        got[who].setdefault(case, []).append((here["nodes"].index(d[1]), devices, statuses))
                    else:
                        msg = d[1].replace(here["group"], "G").replace(who, "W")
                        got[who].setdefault(case, []).append(("pending", msg, devices, statuses))
    print(f"\nkube-scheduler: {got['kube']}\nksched:         {got['ours']}")
    assert got["ours"] == got["kube"]
    for case in cases:
        for d, w in zip(got["kube"][case], EXPECTED[case][0 if gate == "on" else 1], strict=True):
            assert (d[0] == "pending") if w is None else d[0] == w, (case, d)

"""Consumable capacity (DRAConsumableCapacity, on by default in 1.37) against the real kube-scheduler v1.37 on the
same API server: claims sharing devices that allow multiple allocations get the same placements, devices,
consumedCapacity and FailedScheduling messages from both schedulers, and each share a shareID.

Each scheduler gets its own two nodes, DeviceClass and driver with identical slices: node 0 has one shared device
of 8Gi with a request policy (default 2Gi, 2Gi..8Gi in steps of 2Gi), node 1 one shared device of 4Gi without
one; a claim's selector picks the node, so placements do not depend on scoring.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.quantity import parse_quantity
from scheduler_runtime.testing.kube import (
    create_dra_nodes_and_class,
    create_resource_slice,
    ksched_runner,
    kube_scheduler,
    scheduler_config,
    wait_decision,
)

pytestmark = pytest.mark.integration
KUBE, OURS = "dra-cc-kube-scheduler", "dra-cc-ksched"
RES = "/apis/resource.k8s.io/v1"
#: (pod and claim, device model, memory requested or None): in order, each decided before the next is created
STEPS = [("a-3gi", "a", "3Gi"), ("a-default", "a", None), ("a-4gi", "a", "4Gi"), ("a-over-max", "a", "10Gi"),
         ("a-2gi", "a", "2Gi"), ("b-4gi", "b", "4Gi"), ("b-1", "b", "1")]


def _setup(c: KubeClient, who: str, group: str, ns: str) -> dict[str, Any]:
    driver, cls, nodes = create_dra_nodes_and_class(c, "dra-cc", who, group)
    policy = {"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi", "max": "8Gi"}}
    for node, model, memory in ((nodes[0], "a", {"value": "8Gi", "requestPolicy": policy}),
                                (nodes[1], "b", {"value": "4Gi"})):
        create_resource_slice(c, driver, node, [{"name": "gpu-0", "allowMultipleAllocations": True,
                                                 "attributes": {"model": {"string": model}},
                                                 "capacity": {"memory": memory}}])
    for name, model, memory in STEPS:
        body: dict[str, Any] = {"deviceClassName": cls, "selectors": [
            {"cel": {"expression": f'device.attributes["{driver}"].model == "{model}"'}}]}
        if memory is not None:
            body["capacity"] = {"requests": {"memory": memory}}
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": body}]}}})
    return {"driver": driver, "nodes": nodes, "group": f"{who}-{group}"}


def _pod(ns: str, name: str, sched: str, group: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": sched, "nodeSelector": {"dra-group": group},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}


def _claim_view(c: KubeClient, ns: str, name: str, ctx: dict[str, Any]) -> Any:
    """A claim's allocation with the scheduler's own names made neutral, its shareID checked and replaced by
    whether there is one, consumed amounts by their value."""
    alloc = (c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{name}").get("status") or {}).get("allocation")
    if not alloc:
        return None
    node_index = {n: f"node-{i}" for i, n in enumerate(ctx["nodes"])}
    out = []
    for r in alloc["devices"]["results"]:
        assert r["driver"] == ctx["driver"]
        share = r.get("shareID")
        if share is not None:
            assert str(uuid.UUID(share)) == share
        out.append((r["request"], node_index.get(r["pool"], r["pool"]), r["device"], share is not None,
                    sorted((k, parse_quantity(v)) for k, v in (r.get("consumedCapacity") or {}).items())))
    return sorted(out)


def test_shared_device_capacity_is_allocated_like_kube_scheduler(control_plane, namespace, tmp_path: Path):
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:6]
    ctx = {who: _setup(c, who, group, ns) for who in ("kube", "ours")}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
        for step, _model, _memory in STEPS:
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-{step}"
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, name, sched, ctx[who]["group"], name))
                d = wait_decision(c, ns, name, need_message=True)
                if d[0] == "bound":
                    d = ("bound", f"node-{ctx[who]['nodes'].index(d[1])}")
                else:
                    d = ("pending", d[1].replace(ctx[who]["group"], "G").replace(name, "CLAIM"))
                got[who][step] = (d, _claim_view(c, ns, name, ctx[who]))
    assert got["ours"] == got["kube"]
    # the scenario means something: rounding, the default, exhaustion and the policy's max as designed
    k = got["kube"]
    gi = parse_quantity("1Gi")
    assert k["a-3gi"] == (("bound", "node-0"), [("gpu", "node-0", "gpu-0", True, [("memory", 4 * gi)])])
    assert k["a-default"][1] == [("gpu", "node-0", "gpu-0", True, [("memory", 2 * gi)])]
    assert k["a-4gi"][0][0] == "pending" and "cannot allocate all claims" in k["a-4gi"][0][1]
    assert k["a-over-max"][0][0] == "pending" and k["a-2gi"][0] == ("bound", "node-0")
    assert k["b-4gi"][1] == [("gpu", "node-1", "gpu-0", True, [("memory", 4 * gi)])]
    assert k["b-1"][0][0] == "pending"

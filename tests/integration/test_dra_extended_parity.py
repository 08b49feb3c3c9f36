"""Extended resources backed by DRA (DRAExtendedResource) against the real kube-scheduler v1.36 on the same API
server: placements, the claim each scheduler creates for a pod (name, annotations, owner, finalizer, requests,
allocated devices, reservedFor), `pod.status.extendedResourceClaimStatus`, and the FailedScheduling message of
a pod that fits nowhere must match.

Each scheduler gets its own nodes, DeviceClass (with its own `extendedResourceName`, since the class mapping is
cluster-wide) and driver with identical slices, then the same pods in the same order, each decided before the
next is created.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.testing.kube import (
    create_node,
    ksched_runner,
    kube_scheduler,
    put_node,
    scheduler_config,
    wait_decision,
    wait_for,
)

pytestmark = pytest.mark.integration
KUBE, OURS = "drax-kube-scheduler", "drax-ksched"
RES = "/apis/resource.k8s.io/v1"


def _setup(c: KubeClient, who: str, group: str) -> dict[str, Any]:
    """n0: two devices, n1: one device (DRA only); n2: no devices but 1 of the resource from a device plugin."""
    driver = f"{who}-{group}.example.com"
    cls = f"gpu-{who}-{group}"
    ext = f"example.com/gpu-{who}-{group}"
    nodes = [f"drax-{who}-{group}-{i}" for i in range(3)]
    labels = {"drax-group": f"{who}-{group}"}
    create_node(c, nodes[0], labels=labels)
    create_node(c, nodes[1], labels=labels)
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110", ext: "1"}
    put_node(c, {"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": nodes[2], "labels": {"kubernetes.io/hostname": nodes[2], **labels}},
                 "status": {"capacity": alloc, "allocatable": alloc,
                            "conditions": [{"type": "Ready", "status": "True"}]}})
    c.call("POST", f"{RES}/deviceclasses", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                 "extendedResourceName": ext}})
    for node, count in ((nodes[0], 2), (nodes[1], 1)):
        c.call("POST", f"{RES}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(count)]}})
    return {"driver": driver, "class": cls, "ext": ext, "nodes": nodes, "group": f"{who}-{group}"}


def _pod(ns: str, name: str, sched: str, ctx: dict[str, Any], kind: str) -> dict[str, Any]:
    def container(cname: str, reqs: dict[str, str]) -> dict[str, Any]:
        return {"name": cname, "image": "pause", "resources": {"requests": {"cpu": "100m", **reqs},
                                                               "limits": dict(reqs)}}

    implicit = f"deviceclass.resource.kubernetes.io/{ctx['class']}"
    spec: dict[str, Any] = {"schedulerName": sched, "nodeSelector": {"drax-group": ctx["group"]}}
    if kind == "mixed":  # an init container reuses the main container's device; the implicit name
        spec["initContainers"] = [container("init", {implicit: "1"})]
        spec["containers"] = [container("main", {implicit: "1"})]
    else:
        spec["containers"] = [container("main", {ctx["ext"]: "2" if kind == "two" else "1"})]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _view(c: KubeClient, ns: str, name: str, who: str, ctx: dict[str, Any]) -> Any:
    """The pod's extended-resource claim and status, with the scheduler-specific names made neutral."""
    pod = c.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    ers = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    claims = [x for x in c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims")["items"]
              if any(o.get("uid") == pod["metadata"]["uid"] for o in x["metadata"].get("ownerReferences") or [])]
    if ers is None and not claims:
        return None
    assert len(claims) == 1, claims
    claim = claims[0]
    m = claim["metadata"]
    assert ers["resourceClaimName"] == m["name"]
    assert m["name"].startswith(f"{name}-extended-resources-") and len(m["name"]) == len(name) + 25
    node_index = {n: f"node-{i}" for i, n in enumerate(ctx["nodes"])}

    def neutral(s: str) -> str:
        return s.replace(ctx["ext"], "EXT").replace(ctx["class"], "CLASS").replace(name, "POD")

    alloc = claim["status"]["allocation"]
    return {
        "generateName": neutral(m["generateName"]), "annotations": m.get("annotations"),
        "labels": m.get("labels"), "finalizers": m.get("finalizers"),
        "owners": [{**o, "name": neutral(o["name"]), "uid": o["uid"] == pod["metadata"]["uid"]}
                   for o in m["ownerReferences"]],
        "requests": [{**r, "exactly": {**r["exactly"], "deviceClassName": neutral(r["exactly"]["deviceClassName"])}}
                     for r in claim["spec"]["devices"]["requests"]],
        "results": sorted((r["request"], node_index[r["pool"]], r["device"]) for r in alloc["devices"]["results"]),
        "nodeSelector": [node_index.get(v, v) for t in alloc["nodeSelector"]["nodeSelectorTerms"]
                         for f in t.get("matchFields") or [] for v in f["values"]],
        "timestamp": bool(alloc.get("allocationTimestamp")),
        "reservedFor": [(r.get("resource"), r.get("name") == name, r.get("uid") == pod["metadata"]["uid"])
                        for r in claim["status"].get("reservedFor") or []],
        "mappings": [{k: neutral(v) for k, v in x.items()} for x in ers["requestMappings"]],
    }


def _prepare(control_plane: Any, namespace: str, tmp_path: Path
             ) -> tuple[KubeClient, str, dict[str, dict[str, Any]], Path, Path]:
    """Each test's start: a client, both schedulers' own devices (`_setup`) and their two config files."""
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    group = uuid.uuid4().hex[:6]
    ctx = {who: _setup(c, who, group) for who in ("kube", "ours")}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    return c, namespace, ctx, cfg, ours_cfg


def test_extended_resources_are_allocated_like_kube_scheduler(control_plane, namespace, tmp_path: Path):
    c, ns, ctx, cfg, ours_cfg = _prepare(control_plane, namespace, tmp_path)
    # each step has one feasible node: two devices (n0), the implicit name that no device plugin offers (n1),
    # the device plugin (n2), nothing left
    steps = ["two", "mixed", "dp", "more"]
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
        for step in steps:
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-{step}"
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, name, sched, ctx[who], step))
                d = wait_decision(c, ns, name, need_message=True)
                if d[0] == "bound":
                    d = ("bound", f"node-{ctx[who]['nodes'].index(d[1])}")
                    view = _view(c, ns, name, who, ctx[who])
                else:
                    d = ("pending", d[1].replace(ctx[who]["ext"], "EXT"))
                    view = None
                got[who][step] = (d, view)
        # a claim left by an earlier attempt (as after a crash between PreBind and binding): Filter refuses it,
        # PostFilter deletes it
        for who, sched in (("kube", KUBE), ("ours", OURS)):
            name = f"{who}-stale"
            body = _pod(ns, name, sched, ctx[who], "stale")
            body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
            uid = c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)["metadata"]["uid"]
            c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": f"{name}-extended-resources-old00",
                             "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid,
                                                  "controller": True}]},
                "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
                    "deviceClassName": ctx[who]["class"], "count": 1}}]}}})
            # the scheduler's claim informer must hold the stale claim before the pod is tried; nothing outside
            # kube-scheduler shows when it does, so give the watch a moment (a loaded machine once missed it)
            time.sleep(1.0)
            c.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", body={"spec": {"schedulingGates": None}},
                   content_type="application/merge-patch+json")
            d = wait_decision(c, ns, name, need_message=True)
            got[who]["stale"] = (d[0], d[1].replace(ctx[who]["ext"], "EXT"))
            wait_for(lambda n=name: not [x for x in c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims")["items"]
                                         if x["metadata"]["name"] == f"{n}-extended-resources-old00"],
                     what=f"{name}'s stale claim deleted")
        assert got["ours"] == got["kube"]
        assert "cannot schedule extended resource claim" in got["kube"]["stale"][1]
        assert "deletion of ResourceClaim completed" in got["kube"]["stale"][1]
        # the scenario means something: each step as designed
        k = got["kube"]
        assert k["two"][0] == ("bound", "node-0")
        assert k["two"][1]["results"] == [("container-0-request-1", "node-0", "gpu-0"),
                                          ("container-0-request-1", "node-0", "gpu-1")]
        assert k["two"][1]["requests"] == [{"name": "container-0-request-1", "exactly": {
            "deviceClassName": "CLASS", "allocationMode": "ExactCount", "count": 2}}]
        assert k["dp"] == (("bound", "node-2"), None)  # the device plugin's node: no claim
        assert k["mixed"][0] == ("bound", "node-1")
        assert [m["containerName"] for m in k["mixed"][1]["mappings"]] == ["main", "init"]
        assert k["more"][0][0] == "pending" and "Insufficient EXT" in k["more"][0][1]
        assert "cannot allocate all claims" in k["more"][0][1]


def test_a_burst_of_pods_never_shares_a_device(control_plane, namespace, tmp_path: Path):
    """Five pods asking for one device each, created at once: the claims created one after another in PreBind
    must each see the devices the previous ones took (in flight, then written, then in the informer), so four
    are bound (two devices on n0, one on n1, the device plugin's on n2), each with its own device, and one waits;
    as with kube-scheduler."""
    c, ns, ctx, cfg, ours_cfg = _prepare(control_plane, namespace, tmp_path)
    port = _free_port()
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log",
                        args=(f"--secure-port={port}", "--bind-address=127.0.0.1",
                              "--authorization-always-allow-paths=/metrics,/healthz")), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path) as runner:
        got = {}
        for who, sched in (("kube", KUBE), ("ours", OURS)):
            names = [f"{who}-burst-{i}" for i in range(5)]
            for name in names:
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, name, sched, ctx[who], "one"))
            decisions = [wait_decision(c, ns, name) for name in names]
            per_node = sorted(f"node-{ctx[who]['nodes'].index(d[1])}" if d[0] == "bound" else "pending"
                              for d in decisions)
            devices = []
            for x in c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims")["items"]:
                if x["metadata"]["name"].startswith(f"{who}-burst-"):
                    devices += [(r["pool"], r["device"]) for r in x["status"]["allocation"]["devices"]["results"]]
            assert len(devices) == len(set(devices)) == 3, devices
            got[who] = per_node
        assert got["ours"] == got["kube"] == ["node-0", "node-0", "node-1", "node-2", "pending"]
        # one claim created per pod that got devices, counted under kube-scheduler 1.37's name and labels
        kube_metrics = _get_metrics(port)
        labels = {"status": "success", "admin_access": "false", "owner_api_group": "", "owner_api_kind": "Pod"}
        ours = runner.metrics.registry.get_sample_value("dynamic_resource_allocation_resourceclaim_creates_total",
                                                        labels)
        assert ('dynamic_resource_allocation_resourceclaim_creates_total{admin_access="false",owner_api_group="",'
                'owner_api_kind="Pod",status="success"} 3') in kube_metrics
        assert ours == 3


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_metrics(port: int) -> str:
    import ssl
    import urllib.request

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate
    return wait_for(lambda: urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx,  # noqa: S310
                                                   timeout=5).read().decode(), what="kube-scheduler's /metrics")


def test_with_the_feature_gate_off_no_class_backs_an_extended_resource(control_plane, namespace, tmp_path: Path,
                                                                       prev_kube_scheduler: Path):
    """--feature-gates=DRAExtendedResource=false (locked on in 1.37): kube-scheduler 1.36.3 beside ksched at
    --emulated-version 1.36: the resource is checked like any extended resource, so only the device plugin's
    node fits, and no claim is created."""
    from scheduler_runtime.featuregates import parse_feature_gates

    c, ns, ctx, cfg, ours_cfg = _prepare(control_plane, namespace, tmp_path)
    with kube_scheduler(prev_kube_scheduler.parent, cfg, tmp_path / "kube-scheduler.log",
                        args=("--feature-gates=DRAExtendedResource=false",)), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path,
                          feature_gates=parse_feature_gates(["DRAExtendedResource=false"], emulated="1.36")):
        got: dict[str, list[Any]] = {"kube": [], "ours": []}
        for step in ("one", "two"):
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-off-{step}"
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, name, sched, ctx[who], step))
                d = wait_decision(c, ns, name, need_message=True)
                got[who].append(("bound", f"node-{ctx[who]['nodes'].index(d[1])}") if d[0] == "bound"
                                else ("pending", d[1].replace(ctx[who]["ext"], "EXT")))
        claims = [x["metadata"]["name"] for x in c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims")["items"]]
        assert not claims
        assert got["ours"] == got["kube"]
        assert got["kube"][0] == ("bound", "node-2") and "3 Insufficient EXT" in got["kube"][1][1]

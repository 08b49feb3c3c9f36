"""DynamicResources against the real kube-scheduler v1.37.2 on the same API server.

As kube-scheduler's own integration tests do, the test publishes ResourceSlices and creates ResourceClaims
directly (no device driver; the template test starts kube-controller-manager's resourceclaim controller to turn
templates into claims). Each scheduler gets its own
nodes, DeviceClass and driver with identical slices, then the same pods in the same order: placements, the
devices written to each claim's status.allocation, reservedFor, and FailedScheduling messages must match.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import DRA_PERMISSIONS, KubeClient, load_connection
from scheduler_runtime.testing.kube import (
    create_dra_nodes_and_class,
    create_resource_slice,
    ksched_runner,
    kube_scheduler,
    scheduler_config,
    wait_decision,
)

pytestmark = pytest.mark.integration
KUBE, OURS = "dra-kube-scheduler", "dra-ksched"
RES = "/apis/resource.k8s.io/v1"


def _setup(c: KubeClient, who: str, group: str, ns: str) -> dict[str, Any]:
    """Two nodes (two A100 on n0, one T4 on n1) behind a class and driver of this scheduler's own."""
    driver, cls, nodes = create_dra_nodes_and_class(c, "dra", who, group)

    def dev(name: str, model: str, mem: str) -> dict[str, Any]:
        return {"name": name, "attributes": {"model": {"string": model}}, "capacity": {"memory": {"value": mem}}}

    for node, devices in ((nodes[0], [dev("gpu-0", "a100", "80Gi"), dev("gpu-1", "a100", "80Gi")]),
                          (nodes[1], [dev("gpu-0", "t4", "16Gi")])):
        create_resource_slice(c, driver, node, devices)

    def claim(name: str, requests: list[dict[str, Any]]) -> None:
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{name}"},
            "spec": {"devices": {"requests": requests}}})

    model = lambda m: [{"cel": {"expression": f'device.attributes["{driver}"].model == "{m}"'}}]  # noqa: E731
    claim("a100", [{"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": model("a100")}}])
    claim("two", [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": 2}}])
    claim("flex", [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": cls, "selectors": model("a100")},
        {"name": "small", "deviceClassName": cls, "selectors": model("t4")}]}])
    claim("flex2", [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": cls, "selectors": model("a100")},
        {"name": "small", "deviceClassName": cls, "selectors": model("t4")}]}])
    claim("nocls", [{"name": "gpu", "exactly": {"deviceClassName": f"missing-{group}"}}])
    claim("celerr", [{"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": [
        {"cel": {"expression": f'device.attributes["{driver}"].vendor == "x"'}}]}}])
    return {"driver": driver, "nodes": nodes, "group": f"{who}-{group}"}


def _pod(ns: str, name: str, sched: str, group: str, claim: str | None, cpu: str = "100m") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": sched, "nodeSelector": {"dra-group": group},
                            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _claim_view(c: KubeClient, ns: str, name: str, ctx: dict[str, Any]) -> Any:
    """A claim's allocation with the scheduler-specific names (driver, pools, nodes) made neutral."""
    got = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{name}")
    st = got.get("status") or {}
    alloc = st.get("allocation")
    if not alloc:
        return None
    node_index = {n: f"node-{i}" for i, n in enumerate(ctx["nodes"])}
    results = sorted((r["request"], node_index.get(r["pool"], r["pool"]), r["device"])
                     for r in alloc["devices"]["results"])
    for r in alloc["devices"]["results"]:
        assert r["driver"] == ctx["driver"]
    sel = alloc.get("nodeSelector") or {}
    sel_nodes = sorted(node_index.get(v, v) for t in sel.get("nodeSelectorTerms") or []
                       for f in t.get("matchFields") or [] for v in f.get("values") or [])
    return {"results": results, "nodeSelector": sel_nodes, "reservedFor": len(st.get("reservedFor") or []),
            "finalizers": got["metadata"].get("finalizers"), "timestamp": bool(alloc.get("allocationTimestamp"))}


def test_system_kube_scheduler_has_the_dra_permissions(control_plane):
    """The RBAC ksched's preflight checks when DynamicResources runs is what system:kube-scheduler grants."""
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    for verb, group, resource, sub in DRA_PERMISSIONS:
        review = c.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "system:kube-scheduler", "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "subresource": sub, "namespace": "default"}}})
        assert review["status"].get("allowed"), (verb, group, resource, sub, review["status"])


def test_claims_are_allocated_like_kube_scheduler(control_plane, namespace, tmp_path: Path):
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:6]
    ctx = {who: _setup(c, who, group, ns) for who in ("kube", "ours")}

    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    # (pod, claim or None, cpu): in order, each decided before the next is created
    steps = [("celerr", "celerr", "100m"), ("a100", "a100", "100m"), ("flex", "flex", "100m"), ("two", "two", "100m"),
             ("flex2", "flex2", "100m"), ("nocls", "nocls", "100m"), ("plain-too-big", None, "500"),
             ("missing", "no-such-claim", "100m")]
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
        for pod, claim, cpu in steps:
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-{pod}"
                claim_name = f"{who}-{claim}" if claim else None
                c.call("POST", f"/api/v1/namespaces/{ns}/pods",
                       body=_pod(ns, name, sched, ctx[who]["group"], claim_name, cpu))
                if pod == "missing":
                    continue  # held back by PreEnqueue: no attempt, no condition
                d = wait_decision(c, ns, name, need_message=True)
                if d[0] == "bound":
                    d = ("bound", f"node-{ctx[who]['nodes'].index(d[1])}")
                else:
                    d = ("pending", d[1].replace(ctx[who]["group"], "G").replace(
                        f"{who}-{claim}", "CLAIM").replace(ctx[who]["driver"], "DRIVER"))
                    # kube 1.37 names the device of a CEL runtime error: the first node whose Filter errors, a
                    # race between kube's parallel Filter calls, so the pool (one per node) is not compared
                    d = (d[0], re.sub(r" on device (\S+)/dra-G-\d+/", r" on device \1/POOL/", d[1]))
                view = _claim_view(c, ns, claim_name, ctx[who]) if claim_name else None
                got[who][pod] = (d, view)
        assert got["ours"] == got["kube"]
        # the scenario means something: placements, devices and messages as designed
        k = got["kube"]
        assert k["a100"][0] == ("bound", "node-0") and k["a100"][1]["results"] == [("gpu", "node-0", "gpu-0")]
        assert k["a100"][1]["reservedFor"] == 1 and k["a100"][1]["nodeSelector"] == ["node-0"]
        assert k["flex"][1]["results"] == [("gpu/big", "node-0", "gpu-1")]
        assert k["two"][0][0] == "pending" and "cannot allocate all claims" in k["two"][0][1]
        assert k["flex2"][1]["results"] == [("gpu/small", "node-1", "gpu-0")]
        assert "device class missing-" in k["nocls"][0][1]
        # kube 1.37's DynamicResources PostFilter gives no reason (1.36's "no new claims to deallocate")
        assert "no new claims" not in k["plain-too-big"][0][1] and "preemption:" in k["plain-too-big"][0][1]
        assert "CEL runtime error: no such key: vendor. consider using CEL optional chaining" in k["celerr"][0][1]
        for who in ("kube", "ours"):
            p = c.call("GET", f"/api/v1/namespaces/{ns}/pods/{who}-missing")
            assert not p["spec"].get("nodeName")


def test_claims_from_templates_via_kube_controller_manager(controller_manager, namespace, tmp_path: Path):
    """kube-controller-manager's resourceclaim controller turns each pod's template into its own claim; both
    schedulers then wait for it (PreEnqueue), place the pods alike and allocate the same devices."""
    cp = controller_manager
    c = KubeClient(load_connection(str(cp.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:6]
    ctx = {who: _setup(c, who, group, ns) for who in ("kube", "ours")}
    for who in ("kube", "ours"):
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaimtemplates", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": f"{who}-t4"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": f"gpu-{who}-{group}",
                "selectors": [{"cel": {"expression":
                                       f'device.attributes["{ctx[who]["driver"]}"].model == "t4"'}}]}}]}}}})
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, cp.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    with kube_scheduler(cp.bin_dir, cfg, tmp_path / "kube-scheduler.log"), ksched_runner(ours_cfg, cp.kubeconfig_path):
        got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
        for pod in ("t4-a", "t4-b"):
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-{pod}"
                body = _pod(ns, name, sched, ctx[who]["group"], None)
                body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"{who}-t4"}]
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
                d = wait_decision(c, ns, name, need_message=True)
                if d[0] == "bound":
                    d = ("bound", f"node-{ctx[who]['nodes'].index(d[1])}")
                else:
                    d = ("pending", d[1])
                st = c.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")["status"]["resourceClaimStatuses"]
                claim = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{st[0]['resourceClaimName']}")
                owner = claim["metadata"]["ownerReferences"][0]
                assert owner["kind"] == "Pod" and owner["name"] == name
                got[who][pod] = (d, _claim_view(c, ns, st[0]["resourceClaimName"], ctx[who]))
        assert got["ours"] == got["kube"]
        k = got["kube"]
        assert k["t4-a"][0] == ("bound", "node-1") and k["t4-a"][1]["results"] == [("gpu", "node-1", "gpu-0")]
        assert k["t4-b"][0][0] == "pending" and "cannot allocate all claims" in k["t4-b"][0][1]


def test_binding_conditions_wait_and_nomination_match_kube_scheduler(control_plane, namespace, tmp_path: Path):
    """A device with binding conditions (DRADeviceBindingConditions, beta and on): both schedulers allocate the
    claim in PreBind, write the pod's status.nominatedNodeName first (NominatedNodeNameForExpectation) and wait;
    once the test (standing in for the driver) sets the device's condition, both bind the pod, and the API server
    clears the nomination. A second pod whose device reports its failure condition is not bound by either, and
    the scheduler's FailedScheduling event carries the same message."""
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:6]
    ctx: dict[str, dict[str, Any]] = {}
    for who in ("kube", "ours"):
        driver, cls, nodes = create_dra_nodes_and_class(c, "drabc", who, group)
        create_resource_slice(c, driver, nodes[0], [
            {"name": f"gpu-{i}", "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"],
             "bindsToNode": True} for i in range(2)])
        for name in ("ok", "bad"):
            c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{name}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}})
        ctx[who] = {"driver": driver, "nodes": nodes, "group": f"{who}-{group}"}

    def pod_of(who: str, name: str) -> dict[str, Any]:
        return c.call("GET", f"/api/v1/namespaces/{ns}/pods/{who}-{name}")

    def allocated(who: str, name: str) -> dict[str, Any] | None:
        st = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{who}-{name}").get("status") or {}
        return st.get("allocation")

    def set_condition(who: str, name: str, ctype: str) -> None:
        alloc = allocated(who, name)
        assert alloc is not None
        r = alloc["devices"]["results"][0]
        c.call("PATCH", f"{RES}/namespaces/{ns}/resourceclaims/{who}-{name}/status", body={"status": {"devices": [
            {"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": [
                {"type": ctype, "status": "True", "reason": "Test", "message": "set by the test",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}}, content_type="application/merge-patch+json")

    def wait(cond: Any, what: str, timeout: float = 60) -> Any:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = cond()
            if got:
                return got
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    seen: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        for who, sched in (("kube", KUBE), ("ours", OURS)):
            for name in ("ok", "bad"):
                c.call("POST", f"/api/v1/namespaces/{ns}/pods",
                       body=_pod(ns, f"{who}-{name}", sched, ctx[who]["group"], f"{who}-{name}"))
        for who in ("kube", "ours"):
            for name in ("ok", "bad"):
                wait(lambda w=who, n=name: allocated(w, n), f"{who}'s {name} claim allocated")
                # waiting in PreBind: nominated, not bound
                nnn = wait(lambda w=who, n=name: (pod_of(w, n).get("status") or {}).get("nominatedNodeName"),
                           f"{who}'s {name} pod nominated")
                seen[who][f"{name}-nominated"] = ctx[who]["nodes"].index(nnn)
                seen[who][f"{name}-bound-while-waiting"] = bool(pod_of(who, name)["spec"].get("nodeName"))
            set_condition(who, "ok", "Attached")
            set_condition(who, "bad", "AttachFailed")
        for who in ("kube", "ours"):
            node = wait(lambda w=who: pod_of(w, "ok")["spec"].get("nodeName"), f"{who}'s ok pod bound", timeout=90)
            seen[who]["ok-bound"] = ctx[who]["nodes"].index(node)
            seen[who]["ok-nominated-after"] = (pod_of(who, "ok").get("status") or {}).get("nominatedNodeName")

            def failed(who: str = who) -> str | None:
                evs = c.call("GET", f"/api/v1/namespaces/{ns}/events",
                             query={"fieldSelector": f"involvedObject.name={who}-bad"}).get("items") or []
                msgs = [e.get("message") or e.get("note") or "" for e in evs if e.get("reason") == "FailedScheduling"]
                return next((m for m in msgs if "binding failed" in m), None)

            msg = wait(failed, f"{who}'s bad pod's FailedScheduling event", timeout=90)
            seen[who]["bad-message"] = msg.replace(f"{who}-bad", "<claim>")
            seen[who]["bad-bound"] = bool(pod_of(who, "bad")["spec"].get("nodeName"))
    print(f"\nkube-scheduler: {seen['kube']}\nksched:         {seen['ours']}")
    assert seen["kube"] == seen["ours"]
    assert seen["kube"]["ok-bound"] == 0 and seen["kube"]["ok-nominated-after"] is None
    assert not seen["kube"]["bad-bound"]

"""Randomized DRA scenarios: ksched against the real kube-scheduler v1.37.2 (pinned) on the same API server.

Per seed, each scheduler gets three nodes that pods prefer in a fixed order (node affinity weights far apart,
so scores never tie and placements are deterministic), random ResourceSlices (1-4 devices per node: model,
memory, numa, an IP address and a firmware version), its own DeviceClass and driver, and the same random claims:
ExactCount with selectors (plain attribute/capacity tests and the Kubernetes CEL libraries: IP, CIDR, URL,
regex `find`/`findAll`, sets, lists, two-variable comprehensions, semver; a selector failing at run time), counts,
`matchAttribute` constraints, `firstAvailable` alternatives, allocationMode All, admin access, and one claim shared
by two pods; claims with one to three requests (each exact, `firstAvailable` or All, with a model or capacity
selector, sometimes tolerating a device taint or asking for some memory of a device that allows several
allocations) under a `matchAttribute` constraint across all or some of them, and a pod with two such claims; then
pods asking for the class's extended resource (DRAExtendedResource: by its `extendedResourceName` or its implicit
name, 1-3 devices, sometimes from an init container too; the third node may offer it through a device plugin).
Pods are created one at a time; the placement, the devices (and consumed capacity) written to each of the pod's
claims (for an extended resource, the claim the scheduler created), `reservedFor` and the FailedScheduling message
must be the same for both (a Filter error's node-dependent parts left out: see dra_messages.py).
KSCHED_DRA_SEEDS sets how many seeds run (default 6; the test's timeout grows with it),
KSCHED_DRA_FIRST the first seed; KSCHED_DRA_REPORT names a JSON file for the counts per kind of comparison.
"""

from __future__ import annotations

import json
import os
import random
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
    pod_scheduled_condition,
    put_node,
    scheduler_config,
    wait_for,
)
from tests.integration.dra_messages import comparable_message

pytestmark = pytest.mark.integration
KUBE, OURS = "drx-kube-scheduler", "drx-ksched"
RES = "/apis/resource.k8s.io/v1"
SEEDS = int(os.environ.get("KSCHED_DRA_SEEDS", "6"))
FIRST = int(os.environ.get("KSCHED_DRA_FIRST", "0"))
#: selectors using the Kubernetes CEL libraries kube's DRA environment enables; {a} is the driver's attributes
LIBRARY_SELECTORS = [
    'cidr("10.0.{net}.0/24").containsIP({a}.ip)',
    'ip({a}.ip).family() == 4 && !ip({a}.ip).isLoopback() && isIP({a}.ip)',
    'string(cidr({a}.ip + "/23").masked()) == "10.0.0.0/23"',
    '{a}.model.find("[0-9]+") == "100"',
    '{a}.model.findAll("[a-z]").size() == 1 && {a}.model.matches("^[ah]")',
    'url("https://" + {a}.model + ".example.com:8443/p?q=1").getHostname().startsWith("a")',
    'sets.contains(["a100", "h100"], [{a}.model])',
    '[3, 1, 2].sort().isSorted() && lists.range(2).sum() == 1 && {a}.numa <= [0, 1].max()',
    '{{"a100": 0, "t4": 1}}.exists(k, v, k == {a}.model && v == {a}.numa)',
    '{a}.model in ["t4", "h100"] && {a}.model.indexOf("1") >= 0',
    '{a}.fw.isGreaterThan(semver("1.2.0"))',
    'cel.bind(m, {a}.model, m.upperAscii().replace("A", "B") == "B100")',
    'ip({a}.model).family() == 4',  # fails at run time for every device: kube's runtime error for the claim
]


def _scenario(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    devices = []
    for n in range(3):
        devices.append([{"model": rng.choice(["a100", "t4", "h100"]), "memory": rng.choice(["16Gi", "40Gi", "80Gi"]),
                         "numa": rng.randint(0, 1), "ip": f"10.0.{rng.randint(0, 2)}.{10 * n + k}",
                         "fw": rng.choice(["1.1.0", "1.2.0", "1.10.3"])} for k in range(rng.randint(1, 4))])
    claims = []
    for i in range(4):
        kind = rng.choice(["exact", "exact", "first", "constrained", "all", "admin", "library"])
        sel = rng.choice([None, ("model", rng.choice(["a100", "t4", "h100"])),
                          ("memory", rng.choice(["20Gi", "40Gi", "60Gi"]))])
        if kind == "library" or rng.random() < 0.25:
            lib = rng.randrange(len(LIBRARY_SELECTORS) - (0 if rng.random() < 0.3 else 1))
            sel = ("library", LIBRARY_SELECTORS[lib].replace("{net}", str(rng.randint(0, 2))))
        claims.append({"name": f"c{i}", "kind": kind, "sel": sel, "count": rng.randint(1, 2),
                       "alt": rng.choice(["a100", "t4", "h100"])})
    shared = rng.randint(0, 3)
    extended = [{"count": rng.randint(1, 3), "implicit": rng.random() < 0.3, "init": rng.random() < 0.3}
                for _ in range(2)]
    return {"devices": devices, "claims": claims, "shared": shared, "extended": extended,
            "plugin": rng.choice([0, 0, 1, 2]), **_wide(seed, [len(d) for d in devices])}


#: selectors for the requests of the multi-request claims: {a} the driver's attributes, {c} its capacities
WIDE_SELECTORS = [
    None, None,
    '{a}.model == "a100"', '{a}.model != "t4"', '{a}.numa == 1',
    '{c}.memory.isGreaterThan(quantity("16Gi"))', '{c}.memory.compareTo(quantity("80Gi")) < 0',
    '{c}.memory.asApproximateFloat() >= 42949672960.0',
    'sign({c}.memory) == 1 && {c}.memory.isInteger() && {c}.memory.asInteger() > 17179869184',
]


def _wide(seed: int, per_node: list[int]) -> dict[str, Any]:
    """Claims with several requests, from their own random stream (the draws of _scenario stay as they were):
    the last one is the second claim of a pod with two claims; where their pods come in the order is drawn too.
    Then perhaps a device with a NoSchedule taint and perhaps one shared by several allocations
    (allowMultipleAllocations, DRAConsumableCapacity) with or without a request policy for its memory; requests
    of the claims may tolerate the taint and ask for some of a device's memory."""
    rng = random.Random(f"wide-{seed}")
    claims = []
    for i in range(3):
        reqs = [{"name": f"r{r}", "form": rng.choice(["exact", "exact", "exact", "exact", "first", "all"]),
                 "sel": rng.choice(WIDE_SELECTORS), "count": rng.choice([1, 1, 2]), "alt": rng.choice(WIDE_SELECTORS)}
                for r in range(rng.randint(1, 3) if i == 0 else rng.randint(1, 2))]
        match = rng.choice([None, "numa", "numa", "model", "fw"])
        names = [r["name"] for r in reqs]
        subset = rng.sample(names, rng.randint(1, len(names))) if len(names) > 1 and rng.random() < 0.4 else []
        claims.append({"name": f"m{i}", "requests": reqs, "match": match, "subset": sorted(subset)})
    wide_at = rng.randint(0, 5)

    def some_device() -> tuple[int, int] | None:
        if rng.random() < 0.5:
            return None
        n = rng.randrange(3)
        return n, rng.randrange(per_node[n])
    tainted, multi = some_device(), some_device()
    policy = rng.choice([None, {"default": "8Gi", "validRange": {"min": "4Gi", "step": "4Gi"}},
                         {"default": "8Gi", "validValues": ["4Gi", "8Gi", "16Gi"]}])  # <= every memory
    for cl in claims:
        for r in cl["requests"]:
            r["tolerate"] = rng.random() < 0.4
            r["memory"] = rng.choice([None, None, "4Gi", "10Gi", "20Gi"])
    return {"wide": claims, "wide_at": wide_at, "tainted": tainted, "multi": multi, "policy": policy}


def _wide_claim(driver: str, cls: str, cl: dict[str, Any]) -> dict[str, Any]:
    def sel(expr: str | None) -> list[dict[str, Any]]:
        if expr is None:
            return []
        a, c = f'device.attributes["{driver}"]', f'device.capacity["{driver}"]'
        return [{"cel": {"expression": expr.format(a=a, c=c)}}]

    requests: list[dict[str, Any]] = []
    for r in cl["requests"]:
        base: dict[str, Any] = {"deviceClassName": cls, "selectors": sel(r["sel"])}
        if r["tolerate"]:
            base["tolerations"] = [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
        if r["memory"] and r["form"] != "all":
            base["capacity"] = {"requests": {"memory": r["memory"]}}
        if r["form"] == "first":
            requests.append({"name": r["name"], "firstAvailable": [
                {"name": "pref", **base, "count": r["count"]},
                {"name": "alt", "deviceClassName": cls, "selectors": sel(r["alt"])}]})
        elif r["form"] == "all":
            requests.append({"name": r["name"], "exactly": {**base, "allocationMode": "All"}})
        else:
            requests.append({"name": r["name"], "exactly": {**base, "count": r["count"]}})
    constraints = []
    if cl["match"]:
        constraints.append({"matchAttribute": f"{driver}/{cl['match']}", **(
            {"requests": cl["subset"]} if cl["subset"] else {})})
    return {"requests": requests, "constraints": constraints}


def _selector(driver: str, sel: tuple[str, str] | None) -> list[dict[str, Any]]:
    if sel is None:
        return []
    if sel[0] == "model":
        return [{"cel": {"expression": f'device.attributes["{driver}"].model == "{sel[1]}"'}}]
    if sel[0] == "library":
        return [{"cel": {"expression": sel[1].format(a=f'device.attributes["{driver}"]')}}]
    return [{"cel": {"expression": f'device.capacity["{driver}"].memory.compareTo(quantity("{sel[1]}")) >= 0'}}]


def _setup(c: KubeClient, ns: str, who: str, tag: str, sc: dict[str, Any]) -> dict[str, Any]:
    driver, cls, group = f"{who}-{tag}.example.com", f"gpu-{who}-{tag}", f"{who}-{tag}"
    nodes = [f"drx-{who}-{tag}-{i}" for i in range(3)]
    ext = f"example.com/gpu-{who}-{tag}"
    for rank, n in enumerate(nodes):
        labels = {"drx-group": group, "drx-rank": str(rank)}
        if rank == 2 and sc["plugin"]:  # a device plugin offers the extended resource on the third node
            alloc = {"cpu": "32", "memory": "32Gi", "pods": "110", ext: str(sc["plugin"])}
            put_node(c, {"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, **labels}},
                         "status": {"capacity": alloc, "allocatable": alloc,
                                    "conditions": [{"type": "Ready", "status": "True"}]}})
            continue
        create_node(c, n, cpu="32", labels=labels)
    c.call("POST", f"{RES}/deviceclasses", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                 "extendedResourceName": ext}})
    for i, (n, devs) in enumerate(zip(nodes, sc["devices"], strict=True)):
        devices = [{"name": f"gpu-{k}", "attributes": {"model": {"string": d["model"]}, "numa": {"int": d["numa"]},
                                                       "ip": {"string": d["ip"]}, "fw": {"version": d["fw"]}},
                    "capacity": {"memory": {"value": d["memory"]}}} for k, d in enumerate(devs)]
        if sc["tainted"] and sc["tainted"][0] == i:
            devices[sc["tainted"][1]]["taints"] = [{"key": "example.com/maintenance", "value": "true",
                                                    "effect": "NoSchedule"}]
        if sc["multi"] and sc["multi"][0] == i:
            devices[sc["multi"][1]]["allowMultipleAllocations"] = True
            if sc["policy"]:
                devices[sc["multi"][1]]["capacity"]["memory"]["requestPolicy"] = sc["policy"]
        c.call("POST", f"{RES}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{n}-slice"},
            "spec": {"driver": driver, "nodeName": n, "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}})
    for cl in sc["claims"]:
        base = {"deviceClassName": cls, "selectors": _selector(driver, cl["sel"])}
        if cl["kind"] == "first":
            requests = [{"name": "gpu", "firstAvailable": [
                {"name": "pref", **base, "count": cl["count"]},
                {"name": "alt", "deviceClassName": cls, "selectors": _selector(driver, ("model", cl["alt"]))}]}]
            constraints = []
        elif cl["kind"] == "all":
            requests = [{"name": "gpu", "exactly": {**base, "allocationMode": "All"}}]
            constraints = []
        else:
            exactly = {**base, "count": cl["count"]}
            if cl["kind"] == "admin":
                exactly["adminAccess"] = True
            requests = [{"name": "gpu", "exactly": exactly}]
            constraints = [{"matchAttribute": f"{driver}/numa"}] if cl["kind"] == "constrained" else []
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{who}-{tag}-{cl['name']}"},
            "spec": {"devices": {"requests": requests, "constraints": constraints}}})
    for cl in sc["wide"]:
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{who}-{tag}-{cl['name']}"}, "spec": {"devices": _wide_claim(driver, cls, cl)}})
    return {"driver": driver, "nodes": nodes, "group": group, "ext": ext, "class": cls}


def _view(c: KubeClient, ns: str, pod: str, claims: list[str], ctx: dict[str, Any], who: str, tag: str) -> Any:
    got = c.call("GET", f"/api/v1/namespaces/{ns}/pods/{pod}")
    node = got["spec"].get("nodeName")
    if node:
        place: Any = ("bound", ctx["nodes"].index(node))
    else:
        cond = pod_scheduled_condition(got) or {}
        msg = cond.get("message") if cond.get("status") == "False" else None
        if msg is None:
            return None
        place = ("pending", comparable_message(msg.replace(f"{who}-{tag}", "X")))
    if claims:
        got_claims = [c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{claim}") for claim in claims]
    else:  # the claim the scheduler created for the pod's extended resources, if any
        mine = [x for x in c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims")["items"]
                if any(o.get("uid") == got["metadata"]["uid"] for o in x["metadata"].get("ownerReferences") or [])]
        got_claims = [mine[0] if mine else {}]
    devices, reserved = [], []
    for k, cl in enumerate(got_claims):
        alloc = (cl.get("status") or {}).get("allocation")
        devices += sorted((k, r["request"], ctx["nodes"].index(r["pool"]), r["device"],
                           sorted((r.get("consumedCapacity") or {}).items()))  # not the shareID: random
                          for r in (alloc or {}).get("devices", {}).get("results", []))
        reserved.append(len((cl.get("status") or {}).get("reservedFor") or []))
    return place, devices, reserved


def _kinds(kube: Any, ours: Any) -> dict[str, bool]:
    """Agreement per kind of comparison: placement (node or pending), allocation (devices), reservedFor, message."""
    (kp, kd, kr), (op, od, orr) = kube, ours
    return {"placements": kp[0] == op[0] and (kp[0] != "bound" or kp[1] == op[1]),
            "allocations": kd == od, "reservedFor": kr == orr,
            "messages": kp[0] != "pending" or op[0] != "pending" or kp[1] == op[1]}


@pytest.mark.timeout(max(300, 20 * SEEDS))  # one test for every seed: ~4-10 s each on a shared 2-core machine
def test_random_dra_scenarios_match_kube_scheduler(control_plane, namespace, tmp_path: Path):
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns = namespace
    # admin access claims are allowed only in namespaces labelled for it (kube-apiserver's admission)
    c.call("PATCH", f"/api/v1/namespaces/{ns}", body={"metadata": {"labels": {
        "resource.kubernetes.io/admin-access": "true"}}}, content_type="application/merge-patch+json")
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    disagreements = []
    decisions = 0
    counts = {k: [0, 0] for k in ("placements", "allocations", "reservedFor", "messages")}
    pending = 0
    by_kind: dict[str, list[int]] = {}  # claim kind -> [bound, pending] (kube's outcome)
    outcomes: set[str] = set()
    start = time.monotonic()
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path):
        for seed in range(FIRST, FIRST + SEEDS):
            sc = _scenario(seed)
            tag = f"{seed}-{uuid.uuid4().hex[:4]}"
            ctx = {who: _setup(c, ns, who, tag, sc) for who in ("kube", "ours")}
            order = [[cl["name"]] for cl in sc["claims"]] + [[sc["claims"][sc["shared"]]["name"]]]
            order[sc["wide_at"]:sc["wide_at"]] = [["m0"], ["m1", "m2"]]  # a pod with two multi-request claims
            for i, claim_names in enumerate(order):
                got = {}
                for who, sched in (("kube", KUBE), ("ours", OURS)):
                    pod, claims = f"{who}-{tag}-p{i}", [f"{who}-{tag}-{name}" for name in claim_names]
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
                        "spec": {"schedulerName": sched, "nodeSelector": {"drx-group": ctx[who]["group"]},
                                 "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                     {"weight": w, "preference": {"matchExpressions": [
                                         {"key": "drx-rank", "operator": "In", "values": [str(r)]}]}}
                                     for r, w in ((0, 10), (1, 50), (2, 100))]}},
                                 "containers": [{"name": "c", "image": "pause",
                                                 "resources": {"requests": {"cpu": "1"}}}],
                                 "resourceClaims": [{"name": f"gpu{k}", "resourceClaimName": claim}
                                                    for k, claim in enumerate(claims)]}})
                    got[who] = wait_for(lambda pod=pod, claims=claims, who=who, cx=ctx[who], tg=tag: _view(
                        c, ns, pod, claims, cx, who, tg), 60, f"a decision for {pod}")
                decisions += 1
                pending += got["kube"][0][0] == "pending"
                if claim_names[0].startswith("m"):
                    kind = "multi-request" if len(claim_names) == 1 else "multi-request+two-claims"
                else:
                    spec = next(cl for cl in sc["claims"] if cl["name"] == claim_names[0])
                    kind = spec["kind"] if spec["kind"] != "library" else "exact"
                    kind += "+library" if spec["sel"] and spec["sel"][0] == "library" else ""
                    kind += "+shared" if i == (4 if sc["wide_at"] == 5 else 6) else ""
                by_kind.setdefault(kind, [0, 0])[got["kube"][0][0] == "pending"] += 1
                for kind, same in _kinds(got["kube"], got["ours"]).items():
                    counts[kind][0] += 1
                    counts[kind][1] += not same
                if got["kube"] != got["ours"]:
                    disagreements.append((seed, i, got["kube"], got["ours"]))
            for j, x in enumerate(sc["extended"]):
                got = {}
                for who, sched in (("kube", KUBE), ("ours", OURS)):
                    pod = f"{who}-{tag}-x{j}"
                    res = f"deviceclass.resource.kubernetes.io/{ctx[who]['class']}" if x["implicit"] \
                        else ctx[who]["ext"]
                    spec = {"schedulerName": sched, "nodeSelector": {"drx-group": ctx[who]["group"]},
                            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": w, "preference": {"matchExpressions": [
                                    {"key": "drx-rank", "operator": "In", "values": [str(r)]}]}}
                                for r, w in ((0, 10), (1, 50), (2, 100))]}},
                            "containers": [{"name": "c", "image": "pause", "resources": {
                                "requests": {"cpu": "1", res: str(x["count"])}, "limits": {res: str(x["count"])}}}]}
                    if x["init"]:
                        spec["initContainers"] = [{"name": "i", "image": "pause", "resources": {
                            "requests": {res: "1"}, "limits": {res: "1"}}}]
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods",
                           body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod}, "spec": spec})
                    got[who] = wait_for(lambda pod=pod, who=who, cx=ctx[who], tg=tag: _view(
                        c, ns, pod, [], cx, who, tg), 60, f"a decision for {pod}")
                decisions += 1
                pending += got["kube"][0][0] == "pending"
                by_kind.setdefault("extended", [0, 0])[got["kube"][0][0] == "pending"] += 1
                for kind, same in _kinds(got["kube"], got["ours"]).items():
                    counts[kind][0] += 1
                    counts[kind][1] += not same
                if got["kube"] != got["ours"]:
                    disagreements.append((seed, f"x{j}", got["kube"], got["ours"]))
                outcomes.add("claim" if got["kube"][1] else got["kube"][0][0])
    report = {"seeds": SEEDS, "first": FIRST, "decisions": decisions, "pending": pending,
              "compared": {k: v[0] for k, v in counts.items()}, "disagreements": {k: v[1] for k, v in counts.items()},
              "seconds": round(time.monotonic() - start, 1), "by_kind_bound_pending": by_kind,
              "details": [repr(d) for d in disagreements]}
    if os.environ.get("KSCHED_DRA_REPORT"):
        Path(os.environ["KSCHED_DRA_REPORT"]).write_text(json.dumps(report, indent=1))
    assert not disagreements, disagreements
    assert decisions == SEEDS * 9
    assert outcomes == {"claim", "pending", "bound"} or SEEDS < 6, outcomes  # devices, none left, device plugin

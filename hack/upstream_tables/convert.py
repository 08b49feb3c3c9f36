"""Turn harvested upstream table cases (raw/*.jsonl) into ksched's table format (tests/data/upstream_tables).

Format of one case (JSON):
  id       "<upstream test function>/<case name>"
  plugin   ksched plugin name
  args     plugin args, camelCase as in a KubeSchedulerConfiguration (optional)
  nodes    Node objects; pods: existing Pod objects (spec.nodeName places them); pod: the pod to schedule
  steps    what to run, in order, and what kube-scheduler's test expects:
           {"op": "prefilter", "status": S, "nodes": [names] | null}
           {"op": "filter", "node": name, "status": S}
           {"op": "prescore", "status": S}
           {"op": "score", "scores": {node: score}, "normalize": true|false}
           {"op": "sign", "fragments": [{"key", "value"}] | null, "code": C, "must_succeed": true}
             SignPod (opportunistic batching): `fragments` as kube's test compares them (its Go values: a
             ResourcesSignerName value is kube's framework.Resource), present only when the test compares
             them; `code`: the exact status code it expects; `must_succeed`: it only fails a non-success
           where S is null (Success) or {"code": "<Code name>", "reasons": [...]}
  na       why the case does not apply to ksched (then it has no steps)
  gates    feature gates the case's plugin is built with (kube's feature.Features fields it sets)

Usage: python hack/upstream_tables/convert.py   (reads raw/, writes tests/data/upstream_tables/<pkg>.json)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_VERSION = "1.37.2"
#: where each release's cases go: the pinned release's are the default set, earlier ones a subdirectory
DATA = HERE.parents[1] / "tests/data/upstream_tables"
OUT = DATA
VERSION = DEFAULT_VERSION


def src() -> str:
    return f"k8s.io/kubernetes@v{VERSION} pkg/scheduler/framework/plugins"

NOISE = {"daemonEndpoints", "nodeInfo", "creationTimestamp", "TypeMeta"}


def clean(v: Any) -> Any:
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in NOISE:
                continue
            c = clean(x)
            if c is None:  # empty maps and lists stay: `labelSelector: {}` selects everything
                continue
            out[k] = c
        return out
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


def status(s: Any) -> Any:
    if s is None:
        return None
    if s.get("code") == "Success" and not s.get("reasons"):
        return None
    return {"code": s["code"], "reasons": s.get("reasons") or []}


def lower_keys(v: Any) -> Any:
    """Go field names of internal config structs -> camelCase config keys (only all-capitalised maps)."""
    if isinstance(v, dict):
        if v and all(k[:1].isupper() for k in v):
            return {k[0].lower() + k[1:]: lower_keys(x) for k, x in v.items()}
        return {k: lower_keys(x) for k, x in v.items()}
    if isinstance(v, list):
        return [lower_keys(x) for x in v]
    return v


def scores(lst: Any) -> dict[str, int]:
    return {e["Name"]: e["Score"] for e in lst or []}


def na(reason: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda c: {"na": reason}


def pod_of(c: dict[str, Any], key: str = "pod") -> dict[str, Any]:
    p = clean(c.get(key) or {})
    p.setdefault("metadata", {}).setdefault("name", "pod")
    return p


def named(nodes: list[Any]) -> list[dict[str, Any]]:
    return [clean(n) for n in nodes or [] if n]


# ------------------------------------------------------------------------------------------ per plugin

def taint_score(c):
    if c.get("enableTaintTolerationComparisonOps"):
        return {"na": "TaintTolerationComparisonOperators feature gate (alpha, off by default)"}
    nodes = named(c["nodes"])
    return {"plugin": "TaintToleration", "nodes": nodes, "pod": pod_of(c),
            "steps": [{"op": "prescore", "status": None},
                      {"op": "score", "scores": scores(c["expectedList"]), "normalize": True}]}


def single_filter(plugin: str, gate: str | None = None, want: str = "wantStatus"):
    def f(c):
        if gate and c.get(gate):
            return {"na": f"{gate}: alpha feature gate, off by default"}
        node = clean(c.get("node") or {})
        node.setdefault("metadata", {}).setdefault("name", "node")
        return {"plugin": plugin, "nodes": [node], "pod": pod_of(c),
                "steps": [{"op": "filter", "node": node["metadata"]["name"], "status": status(c.get(want))}]}
    return f


def nodeports(c):
    ni = c.get("nodeInfo") or {}
    node = clean(ni.get("node") or {}) or {"metadata": {"name": "node"}}
    node.setdefault("metadata", {}).setdefault("name", "node")
    pods = []
    for i, p in enumerate(ni.get("pods") or []):
        p = clean(p)
        p.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        p.setdefault("spec", {})["nodeName"] = node["metadata"]["name"]
        pods.append(p)
    pre = status(c.get("wantPreFilterStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre}]
    if not pre or pre["code"] != "Skip":
        steps.append({"op": "filter", "node": node["metadata"]["name"], "status": status(c.get("wantFilterStatus"))})
    return {"plugin": "NodePorts", "nodes": [node], "pods": pods, "pod": pod_of(c), "steps": steps}


def queue_less(c):
    """TestLess: PrioritySort's Less on two queued pods; queue times as seconds after the case's earliest."""
    from datetime import datetime

    def when(q: dict[str, Any]) -> datetime | None:
        ts = (q.get("QueueingParams") or q).get("Timestamp") or ""  # 1.36 has no QueueingParams
        return datetime.fromisoformat(ts) if ts else None

    def queued(q: dict[str, Any], t0: datetime | None) -> dict[str, Any]:
        t = when(q)
        prio = (((q.get("PodInfo") or {}).get("spec")) or {}).get("priority") or 0
        return {"priority": prio, "timestamp": 0 if t is None or t0 is None else (t - t0).total_seconds()}

    times = [t for t in (when(c["p1"]), when(c["p2"])) if t is not None]
    t0 = min(times) if times else None
    return {"plugin": "PrioritySort",
            "steps": [{"op": "less", "p1": queued(c["p1"], t0), "p2": queued(c["p2"], t0), "want": c["expected"]}]}


def nodename_prefilter(c):
    """NodeName's PreFilter (1.37): a pod naming its node narrows the nodes to it."""
    want = (c.get("wantResult") or {}).get("NodeNames")
    return {"plugin": "NodeName", "nodes": [], "pod": pod_of(c),
            "steps": [{"op": "prefilter", "status": None, "nodes": sorted(want) if want is not None else None}]}


def imagelocality(c):
    nodes = named(c["nodes"])
    pods = [clean(p) for p in c.get("pods") or []]
    return {"plugin": "ImageLocality", "nodes": nodes, "pods": pods, "pod": pod_of(c),
            "steps": [{"op": "score", "scores": scores(c["expectedList"]), "normalize": False}]}


def nodeaffinity_filter(c):
    name = c.get("nodeName") or ""
    node = {"metadata": {"name": name or "node-without-name", "labels": c.get("labels") or {}}}
    if not name:
        node["metadata"]["x-empty-name"] = True
    steps: list[dict[str, Any]] = []
    if c.get("runPreFilter"):
        res = c.get("wantPreFilterResult")
        names = sorted((res or {}).get("NodeNames") or {}) if res and (res.get("NodeNames") is not None) else None
        steps.append({"op": "prefilter", "status": status(c.get("wantPreFilterStatus")), "nodes": names})
    steps.append({"op": "filter", "node": node["metadata"]["name"], "status": status(c.get("wantStatus"))})
    return {"plugin": "NodeAffinity", "args": lower_keys(clean(c.get("args") or {})), "nodes": [node],
            "pod": pod_of(c), "steps": steps}


def nodeaffinity_score(c):
    steps: list[dict[str, Any]] = []
    if c.get("runPreScore"):
        steps.append({"op": "prescore", "status": status(c.get("wantPreScoreStatus"))})
        st = c.get("wantPreScoreStatus")
        if st and st.get("code") not in ("Success", None):
            return {"plugin": "NodeAffinity", "args": lower_keys(clean(c.get("args") or {})),
                    "nodes": named(c["nodes"]), "pod": pod_of(c), "steps": steps}
    steps.append({"op": "score", "scores": scores(c["expectedList"]), "normalize": True})
    return {"plugin": "NodeAffinity", "args": lower_keys(clean(c.get("args") or {})), "nodes": named(c["nodes"]),
            "pod": pod_of(c), "steps": steps}


IPA_NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam2.team1": {"team": "team1"},
                  "subteam1.team2": {"team": "team2"}, "subteam2.team2": {"team": "team2"}}


def existing(pods: Any) -> list[dict[str, Any]]:
    out = []
    for i, p in enumerate(pods or []):
        p = clean(p)
        p.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        out.append(p)
    return out


def ipa_single(c):
    node = clean(c["node"])
    pre = status(c.get("wantPreFilterStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre}]
    if pre is None:
        steps.append({"op": "filter", "node": node["metadata"]["name"], "status": status(c.get("wantFilterStatus"))})
    return {"plugin": "InterPodAffinity", "namespaces": IPA_NAMESPACES, "nodes": [node],
            "pods": existing(c.get("pods")), "pod": pod_of(c), "steps": steps}


def ipa_multi(c):
    nodes = named(c["nodes"])
    pre = status(c.get("wantPreFilterStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre}]
    if not pre or pre["code"] != "Skip":
        for n, want in zip(nodes, c.get("wantFilterStatuses") or [], strict=False):
            steps.append({"op": "filter", "node": n["metadata"]["name"], "status": status(want)})
    return {"plugin": "InterPodAffinity", "namespaces": {"NS1": {}}, "nodes": nodes,
            "pods": existing(c.get("pods")), "pod": pod_of(c), "steps": steps}


def ipa_score(args_of: Callable[[dict[str, Any]], dict[str, Any]], contains: bool):
    def f(c):
        want = status(c.get("wantStatus"))
        steps: list[dict[str, Any]] = [{"op": "prescore", "status": want, "contains": contains}]
        if want is None:
            steps.append({"op": "score", "scores": scores(c["expectedList"]), "normalize": True})
        return {"plugin": "InterPodAffinity", "args": args_of(c), "namespaces": IPA_NAMESPACES,
                "nodes": named(c["nodes"]), "pods": existing(c.get("pods")), "pod": pod_of(c), "steps": steps}
    return f


def gates(c):
    want = status(c.get("want"))
    return {"plugin": "SchedulingGates", "nodes": [], "pod": pod_of(c),
            "steps": [{"op": "preenqueue", "status": want}]}


def _sets_policies(pod: dict[str, Any]) -> bool:
    return any("nodeAffinityPolicy" in c or "nodeTaintsPolicy" in c
               for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or [])


def _sets_match_label_keys(pod: dict[str, Any]) -> bool:
    return any("matchLabelKeys" in c for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or [])


def pts_gates(c: dict[str, Any], pod: dict[str, Any]) -> str:
    if c.get("enableNodeInclusionPolicy") is False and _sets_policies(pod):
        return "runs with NodeInclusionPolicyInPodTopologySpread disabled (on by default)"
    if c.get("enableMatchLabelKeys") is False and _sets_match_label_keys(pod):
        return ("runs with MatchLabelKeysInPodTopologySpread disabled (beta, on by default; ksched does not honour "
                "turning it off)")
    return ""


def pts_filter(c):
    pod = pod_of(c)
    why = pts_gates(c, pod)
    if why:
        return {"na": why}
    nodes = named(c["nodes"])
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": None}]
    for n in nodes:
        name = n["metadata"]["name"]
        code = (c.get("wantStatusCode") or {}).get(name)
        if c.get("wantStatusCode"):
            steps.append({"op": "filter", "node": name, "code": code or "Success"})
    return {"plugin": "PodTopologySpread", "args": {"defaultingType": "List"}, "nodes": nodes,
            "pods": existing(c.get("existingPods")), "pod": pod, "steps": steps}


def pts_score(c):
    pod = pod_of(c)
    why = pts_gates(c, pod)
    if why:
        return {"na": why}
    nodes = named(c["nodes"])
    names = [n["metadata"]["name"] for n in nodes]
    return {"plugin": "PodTopologySpread", "args": {"defaultingType": "System"},
            "nodes": nodes + named(c.get("failedNodes")), "objs": [clean(o) for o in c.get("objs") or []],
            "pods": existing(c.get("existingPods")), "pod": pod,
            "steps": [{"op": "prescore", "status": None, "nodes": names},
                      {"op": "score", "scores": scores(c["want"]), "normalize": True, "nodes": names}]}


def pts_prescore_skip(c):
    args = lower_keys(clean(c.get("config") or {}))
    return {"plugin": "PodTopologySpread", "args": args, "nodes": named(c["nodes"]),
            "objs": [clean(o) for o in c.get("objs") or []], "pod": pod_of(c),
            "steps": [{"op": "prescore", "status": {"code": "Skip", "reasons": []}}]}


ENOUGH_NODE = {"cpu": "10m", "memory": "20", "pods": "32", "example.com/aaa": "5", "ephemeral-storage": "20",
               "hugepages-2Mi": "5"}


#: the DeviceClass kube's testEnoughRequests gives its DRA manager when DRAExtendedResource is on
NR_DRA_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "device-class-name"},
                "spec": {"extendedResourceName": "extended.resource.dra.io/something"}}


def dra_objects(objs: Any) -> list[dict[str, Any]]:
    """kube's draObjects (a DeviceClass and ResourceSlices) with their kinds."""
    out = []
    for o in objs or []:
        o = clean(o)
        kind = "ResourceSlice" if "driver" in (o.get("spec") or {}) else "DeviceClass"
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": kind, **o})
    return out


def fit_node(alloc: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "node"}, "status": {"allocatable": alloc}}


def _pod_level(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resources"))


def fit_args(a: Any) -> dict[str, Any]:
    args = lower_keys(clean(a or {}))
    if not args.get("scoringStrategy"):
        args.pop("scoringStrategy", None)
    for k in ("ignoredResources", "ignoredResourceGroups"):
        if not args.get(k):
            args.pop(k, None)
    return args


def fit_filter(alloc: dict[str, str], prefilter_want: str | None = None):
    def f(c):
        pod = pod_of(c)
        if c.get("podLevelResourcesEnabled") is False and _pod_level(pod):
            return {"na": "runs with PodLevelResources disabled (beta, on by default; ksched does not honour turning "
                          "it off)"}
        if c.get("enableSidecarContainers") is False:
            return {"na": "runs with SidecarContainers disabled (GA)"}
        node = fit_node(alloc)
        pods = []
        for i, p in enumerate(((c.get("nodeInfo") or {}).get("pods")) or []):
            p = clean(p)
            p.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
            p.setdefault("spec", {})["nodeName"] = "node"
            pods.append(p)
        steps: list[dict[str, Any]] = []
        if prefilter_want:
            pre = status(c.get(prefilter_want))
            steps.append({"op": "prefilter", "status": pre})
            if pre is not None:
                return {"plugin": "NodeResourcesFit", "args": fit_args(c.get("args")), "nodes": [node],
                        "pods": pods, "pod": pod, "steps": steps}
        else:
            steps.append({"op": "prefilter", "status": None})
        steps.append({"op": "filter", "node": "node",
                      "status": status(c.get("wantFilterStatus") if prefilter_want else c.get("wantStatus"))})
        out = {"plugin": "NodeResourcesFit", "args": fit_args(c.get("args")), "nodes": [node], "pods": pods,
               "pod": pod, "steps": steps}
        if c.get("draExtendedResourceEnabled") and not c.get("nilDRAManager"):
            out["objs"] = [NR_DRA_CLASS]  # the cluster's DRA manager knows this class
        return out
    return f


#: kube 1.37's pod event resources (the pod being scheduled, another bound pod, another pending pod): ksched has
#: one Pod resource whose hints tell the pods apart
POD_RESOURCES = {"AssignedPod": "Pod", "TargetPod": "Pod", "UnscheduledPod": "Pod"}


def fit_events(c):
    """TestEventsToRegister: the events NodeResourcesFit registers, per resource the union of the actions (kube's
    AssignedPod and TargetPod are both ksched's Pod)."""
    if not c.get("enableInPlacePodVerticalScaling"):
        return {"na": "runs with InPlacePodVerticalScaling disabled (GA and locked on)"}
    if "enableSchedulingQueueHint" in c and not c["enableSchedulingQueueHint"]:  # 1.36's table has the field
        return {"na": "runs with SchedulerQueueingHints disabled (GA and locked on)"}
    want: dict[str, set[str]] = {}
    for e in c.get("expectedClusterEvents") or []:
        ev = e["Event"]
        want.setdefault(POD_RESOURCES.get(ev["Resource"], ev["Resource"]), set()).update(ev["ActionType"] or [])
    return {"plugin": "NodeResourcesFit", "args": {}, "pod": {"metadata": {"name": "pod"}},
            "gates": {"DRAExtendedResource": bool(c.get("enableDRAExtendedResource"))},
            "steps": [{"op": "events", "events": {r: sorted(a) for r, a in sorted(want.items())}}]}


def deferred_resize_fit(c):
    """TestDeferredResizeFit: Filter of a bound pod on its node (the gate-off cases: kube then counts the pod's
    requests once as the incoming pod's and once as the node's, as ksched does)."""
    if c.get("enablePreemptionFeature"):
        return {"na": "runs with InPlacePodVerticalScalingSchedulerPreemption (alpha, off by default): a deferred "
                      "resize's Filter without its own requests counted twice"}
    alloc = c.get("nodeAllocatable") or {}
    node = {"metadata": {"name": "test-node"},
            "status": {"allocatable": {"cpu": f"{alloc.get('MilliCPU') or 0}m", "memory": str(alloc.get("Memory") or 0),
                                       "pods": "32"}}}
    pods = []
    for i, p in enumerate(c.get("existingPods") or []):
        p = clean(p)
        p.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        p.setdefault("spec", {})["nodeName"] = "test-node"
        pods.append(p)
    return {"plugin": "NodeResourcesFit", "nodes": [node], "pods": pods, "pod": pod_of(c),
            "steps": [{"op": "prefilter", "status": None},
                      {"op": "filter", "node": "test-node", "status": status(c.get("wantStatus"))}]}


def fit_score(c):
    steps: list[dict[str, Any]] = []
    if c.get("runPreScore"):
        steps.append({"op": "prescore", "status": None})
    steps.append({"op": "score", "scores": scores(c["expectedPriorities"]), "normalize": False})
    out = {"plugin": "NodeResourcesFit", "args": fit_args(c.get("nodeResourcesFitArgs")),
           "nodes": named(c["nodes"]), "pods": existing(c.get("existingPods")), "pod": pod_of(c, "requestedPod"),
           "steps": steps}
    if c.get("draObjects"):
        out["objs"] = dra_objects(c["draObjects"])
    return out


def strategy_score(kind: str):
    def f(c):
        res = lower_keys(clean(c.get("resources") or []))
        if not res or any(not r.get("weight") for r in res):
            return {"na": "internal args that skip v1 defaulting: through a KubeSchedulerConfiguration (ksched's only "
                          "way in) empty resources default to cpu+memory and weight 0 to 1"}
        strat: dict[str, Any] = {"type": kind, "resources": res}
        if kind == "RequestedToCapacityRatio":
            strat["requestedToCapacityRatio"] = {"shape": lower_keys(clean(c.get("shape") or []))}
        args = {"scoringStrategy": strat}
        base = {"plugin": "NodeResourcesFit", "args": args, "nodes": named(c["nodes"]),
                "pods": existing(c.get("existingPods")), "pod": pod_of(c, "requestedPod")}
        if c.get("wantErrs"):
            return {**base, "steps": [{"op": "args_error"}]}
        return {**base, "steps": [{"op": "prescore", "status": None},
                                  {"op": "score", "scores": scores(c["expectedScores"]), "normalize": False}]}
    return f


def binpacking(resources: list[dict[str, Any]]):
    """Both tests build their args in the test body (not the table): RequestedToCapacityRatio with the shape
    {0: 0, 100: 1} over the resources given here, as read from the test."""
    def f(c):
        args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": resources,
                                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                           {"utilization": 100, "score": 1}]}}}
        return {"plugin": "NodeResourcesFit", "args": args, "nodes": named(c["nodes"]),
                "pods": existing(c.get("pods")), "pod": pod_of(c),
                "steps": [{"op": "prescore", "status": None},
                          {"op": "score", "scores": scores(c["expectedScores"]), "normalize": False}]}
    return f


def balanced(c):
    args = lower_keys(clean(c.get("args") or {}))
    steps: list[dict[str, Any]] = []
    base = {"plugin": "NodeResourcesBalancedAllocation", "args": args, "nodes": named(c["nodes"]),
            "pods": existing(c.get("existingPods")), "pod": pod_of(c, "requestedPod")}
    if c.get("draObjects"):
        base["objs"] = dra_objects(c["draObjects"])
    if c.get("runPreScore"):
        code = c.get("expectedPreScoreStatusCode")
        code = code if isinstance(code, str) else "Success"
        steps.append({"op": "prescore", "status": None if code == "Success" else {"code": code, "reasons": []},
                      "code_only": True})
        if code == "Skip":
            return {**base, "steps": steps}
    steps.append({"op": "score", "scores": scores(c["expectedScores"]), "normalize": False})
    return {**base, "steps": steps}


def _kinded(objs: Any, kind: str) -> list[dict[str, Any]]:
    api = "storage.k8s.io/v1" if kind == "StorageClass" else "v1"
    return [{"apiVersion": api, "kind": kind, **clean(o)} for o in objs or [] if o]


def _fixture_objs(rec: dict[str, Any]) -> list[dict[str, Any]]:
    fx = rec.get("fixtures") or {}
    return (_kinded(fx.get("scLister"), "StorageClass") + _kinded(fx.get("pvLister"), "PersistentVolume")
            + _kinded(fx.get("pvcLister"), "PersistentVolumeClaim"))


#: kube's fake listers (pkg/scheduler/testing/framework) word NotFound with the plural resource; the informer
#: listers kube-scheduler runs with (client-go listers/storage/v1) use the singular, as ksched does
FAKE_LISTER_NOT_FOUND = [('storageclasses.storage.k8s.io "', 'storageclass.storage.k8s.io "'),
                         ('persistentvolumeclaims "', 'persistentvolumeclaim "')]


def _real_lister(st: Any) -> Any:
    if st is None:
        return None
    reasons = []
    for r in st["reasons"]:
        for fake, real in FAKE_LISTER_NOT_FOUND:
            r = r.replace(fake, real)
        reasons.append(r)
    return {**st, "reasons": reasons}


def volumezone(c, rec):
    """TestSingleZone/MultiZone/WithBinding: PreFilter, then Filter on the case's node (kube's test calls Filter
    whatever PreFilter said), against the listers the test function builds before its table."""
    node = clean(c["Node"])
    pod = pod_of(c, "Pod")
    return {"plugin": "VolumeZone", "nodes": [node], "pod": pod, "objs": _fixture_objs(rec),
            "steps": [{"op": "prefilter", "status": _real_lister(status(c.get("wantPreFilterStatus")))},
                      {"op": "filter", "node": node["metadata"]["name"],
                       "status": _real_lister(status(c.get("wantFilterStatus")))}]}


def volumerestrictions(c):
    """Disk conflicts (nodeInfo's pods on an unnamed node) and ReadWriteOncePod conflicts (existing pods,
    nodes and PVCs listed): PreFilter, then Filter only when PreFilter succeeded, as kube's test does."""
    nodes = named(c.get("existingNodes")) or [{"metadata": {"name": "node"}}]
    where = nodes[0]["metadata"]["name"]
    pods = [clean(p) for p in c.get("existingPods") or []]
    if not pods:
        for p in (c.get("nodeInfo") or {}).get("pods") or []:
            p = clean(p)
            p.setdefault("spec", {})["nodeName"] = where
            pods.append(p)
    pre = status(c.get("preFilterWantStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre}]
    if pre is None:
        steps.append({"op": "filter", "node": where, "status": status(c.get("wantStatus"))})
    return {"plugin": "VolumeRestrictions", "nodes": nodes, "pods": pods, "pod": pod_of(c),
            "objs": _kinded(c.get("existingPVCs"), "PersistentVolumeClaim"), "steps": steps}


#: volume_binding_test.go's package-level classes and driver, which every TestVolumeBinding case is fed
VB_CLASSES = [
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "immediate-sc"},
     "volumeBindingMode": "Immediate"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wait-sc"},
     "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wait-hdd-sc"},
     "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wait-sc-with-storage-capacity"},
     "provisioner": "driver-with-storage-capacity", "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "driver-with-storage-capacity"},
     "spec": {"storageCapacity": True}},
]


def volumebinding(c):
    """TestVolumeBinding: PreFilter (no PreFilterResult), Filter on every node, PreScore, as kube's test."""
    scoring = bool((c.get("fts") or {}).get("EnableStorageCapacityScoring"))
    if scoring and VERSION.startswith("1.36."):
        return {"na": "StorageCapacityScoring (alpha and off by default in 1.36, with 1.36's shape default); ksched "
                      "follows its 1.37 beta at every emulated version"}
    nodes = named(c.get("nodes"))
    objs = VB_CLASSES + _kinded(c.get("pvcs"), "PersistentVolumeClaim") + _kinded(c.get("pvs"), "PersistentVolume")
    objs += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", **clean(x)}
             for x in c.get("capacities") or []]
    pre = status(c.get("wantPreFilterStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre, "nodes": None}]
    if pre is None:
        for n, want in zip(nodes, c.get("wantFilterStatus") or [], strict=True):
            steps.append({"op": "filter", "node": n["metadata"]["name"], "status": status(want)})
        steps.append({"op": "prescore", "status": status(c.get("wantPreScoreStatus"))})
        if scoring and status(c.get("wantPreScoreStatus")) is None:
            steps.append({"op": "score", "normalize": False,
                          "scores": {n["metadata"]["name"]: w for n, w in zip(nodes, c.get("wantScores") or [],
                                                                                strict=True)}})
    # kube's test: the case's args, else bindTimeoutSeconds 300 (and, with the gate on, the shape it defaults to)
    args = lower_keys(clean(c["args"])) if isinstance(c.get("args"), dict) else {"bindTimeoutSeconds": 300}
    return {"plugin": "VolumeBinding", "args": args, "nodes": nodes, "pod": pod_of(c), "objs": objs,
            "steps": steps, "gates": {"StorageCapacityScoring": scoring}}


def csi_limits(c, rec):
    """TestCSILimits: the node, CSINode, listers and VolumeAttachments the case loop builds (dumped after they
    exist); PreFilter, then Filter unless PreFilter skipped, as kube's test does."""
    fx = rec.get("fixtures") or {}
    ni = fx.get("node") or {}
    node = clean(ni.get("node") or {})
    name = node["metadata"]["name"]
    pods = []
    for p in ni.get("pods") or []:
        p = clean(p)
        p.setdefault("spec", {})["nodeName"] = name
        pods.append(p)
    objs = (_kinded(fx.get("scs"), "StorageClass") + _kinded(fx.get("pvs"), "PersistentVolume")
            + _kinded(fx.get("pvcs"), "PersistentVolumeClaim"))
    if fx.get("csiNode"):
        objs += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", **clean(fx["csiNode"])}]
    objs += [{"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", **clean(v)} for v in fx.get("vas") or []]
    pre = status(c.get("wantPreFilterStatus"))
    steps: list[dict[str, Any]] = [{"op": "prefilter", "status": pre}]
    if (pre or {}).get("code") != "Skip":
        steps.append({"op": "filter", "node": name, "status": _real_lister(status(c.get("wantStatus")))})
    return {"plugin": "NodeVolumeLimits", "nodes": [node], "pods": pods, "pod": pod_of(c, "newPod"), "objs": objs,
            "steps": steps}


def volume_limit_scaling(c, rec):
    """TestVolumeLimitScalingGate: TestCSILimits' fixtures plus the CSIDriver objects its lister holds, with the
    case's VolumeLimitScaling setting (beta, on by default from 1.37)."""
    fx = rec.get("fixtures") or {}
    out = csi_limits({"wantStatus": c.get("wantStatus")}, rec)
    out["pod"] = pod_of({"pod": fx.get("pod")})
    out["objs"] += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", **clean(d)}
                    for d in fx.get("drivers") or []]
    out["steps"] = [{"op": "prefilter", "not_code": "Skip"}, out["steps"][-1]]
    out["gates"] = {"VolumeLimitScaling": bool(c.get("enableVolumeLimitScaling"))}
    return out


def _statuses(fns: Any) -> dict[str, Any]:
    """kube's NodeToStatus: each listed node's status, and the one every other node has."""
    fns = fns or {}
    out = {n: status(st) or {"code": "Success", "reasons": []} for n, st in (fns.get("nodeToStatus") or {}).items()}
    absent = status(fns.get("absentNodesStatus")) or {"code": "UnschedulableAndUnresolvable", "reasons": []}
    return {"nodes": out, "absent": absent}


def post_filter(c):
    """TestPostFilter: DefaultPreemption's PostFilter after PreFilter, given the Filter statuses, in a profile of
    PrioritySort, NodeResourcesFit (PreFilter, Filter), DefaultPreemption and DefaultBinder, as kube's test
    registers (its extra no-op PreFilter plugin has no ksched counterpart and changes nothing)."""
    if c.get("extender"):
        return {"na": "a fake preempt extender object (no HTTP): ksched's extenders are HTTP clients, covered by "
                      "tests/integration/test_extender_parity.py against kube-scheduler"}
    if c.get("podGroups") or any((c.get("features") or {}).values()):
        return {"na": "PodGroups / workload-aware preemption (alpha TopologyAwareWorkloadScheduling, "
                      "WorkloadAwarePreemption): not in the defaults"}
    if "TestPlugin" in (c.get("name") or ""):
        return {"na": "a test-only PreFilter plugin whose RemovePod fails on purpose: no ksched counterpart"}
    want = c.get("wantResult") or {}
    st = status(c.get("wantStatus"))
    return {"plugin": "DefaultPreemption", "nodes": named(c.get("nodes")),
            "pods": [clean(p) for p in c.get("pods") or []], "pod": pod_of(c),
            "objs": [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", **clean(x)}
                     for x in c.get("pdbs") or []],
            "steps": [{"op": "postfilter", "statuses": _statuses(c.get("filteredNodesStatuses")),
                       "nominated": ((want.get("NominatingInfo") or {}).get("NominatedNodeName")
                                     if want else None), "status": st}]}


def _vb_class(name: str, mode: str, provisioner: str = "", topo: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "volumeBindingMode": mode}
    if provisioner:
        out["provisioner"] = provisioner
    if topo is not None:
        out["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "nodeKey", "values": topo}]}]
    return out


#: binder_test.go's newTestBinder classes and its test node
BINDER_CLASSES = [
    _vb_class("waitClassWithProvisioner", "WaitForFirstConsumer", "test-provisioner", ["node1", "reference-value"]),
    _vb_class("immediateClass", "Immediate"),
    _vb_class("waitClass", "WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
    _vb_class("topoMismatchClass", "WaitForFirstConsumer", "test-provisioner", ["reference-value"]),
]
BINDER_NODE = {"metadata": {"name": "node1", "labels": {"nodeKey": "node1"}}}


def find_pod_volumes(c, rec=None):
    """TestFindPodVolumesWithoutProvisioning: kube's test runs GetPodVolumeClaims (an unbound Immediate claim
    is an error there) and FindPodVolumes on node1; here VolumeBinding's PreFilter and Filter on node1 (a
    failing PreFilter or an Error from Filter is the test's error), the reasons, and the static bindings."""
    pvcs = c.get("cachePVCs") if c.get("cachePVCs") is not None else c.get("podPVCs")
    pod = clean(c["pod"]) if c.get("pod") else {
        "metadata": {"name": "test-pod", "namespace": "testns"},
        "spec": {"nodeName": "node1", "volumes": [
            {"name": f"vol{i}", "persistentVolumeClaim": {"claimName": p["metadata"]["name"]}}
            for i, p in enumerate(c.get("podPVCs") or [])]}}
    pod.setdefault("metadata", {}).setdefault("name", "test-pod")
    if not pod["metadata"].get("uid"):
        # the Go test's pod and its ephemeral claim's owner reference both have an empty UID (equal for kube's
        # IsControlledBy); ksched names a pod without a UID by its key, so both get the same stand-in
        pod["metadata"]["uid"] = "test-pod-uid"
        for p in pvcs or []:
            for r in p.get("metadata", {}).get("ownerReferences") or []:
                if not r.get("uid"):
                    r["uid"] = "test-pod-uid"
    bindings = sorted([b["pvc"]["metadata"]["name"], b["pv"]["metadata"]["name"]]
                      for b in c.get("expectedBindings") or [])
    driver = ((rec or {}).get("fixtures") or {}).get("csiDriver")
    objs = BINDER_CLASSES + _kinded(c.get("pvs"), "PersistentVolume") + _kinded(pvcs, "PersistentVolumeClaim")
    reasons = list(c.get("reasons") or [])
    provisions = sorted(p["PVC"]["metadata"]["name"] for p in c.get("expectedProvisions") or [])
    if driver:
        objs.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", **clean(driver)})
        if c.get("needsCapacity") and (driver.get("spec") or {}).get("storageCapacity"):
            # kube's test: without CSIStorageCapacity objects, provisioning is blocked
            reasons.append("node(s) did not have enough free storage")
            provisions = []
    return {"plugin": "VolumeBinding", "args": {"bindTimeoutSeconds": 300}, "nodes": [BINDER_NODE], "pod": pod,
            "objs": objs,
            "steps": [{"op": "find_pod_volumes", "node": "node1", "should_fail": bool(c.get("shouldFail")),
                       "reasons": reasons, "bindings": bindings, "provisions": provisions}]}


def capacity(c, rec):
    """TestCapacity: provisioning through a CSIDriver that opts into capacity tracking (or not: then kube's
    test expects no reasons and no error) against the case's CSIStorageCapacities, on node1."""
    opt_in = bool(((rec or {}).get("fixtures") or {}).get("optIn"))
    pvcs = c.get("pvcs") or []
    pod = {"metadata": {"name": "test-pod", "namespace": "testns"},
           "spec": {"nodeName": "node1", "volumes": [
               {"name": f"vol{i}", "persistentVolumeClaim": {"claimName": p["metadata"]["name"]}}
               for i, p in enumerate(pvcs)]}}
    objs = BINDER_CLASSES + _kinded(pvcs, "PersistentVolumeClaim")
    objs.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "test-provisioner"},
                 "spec": {"storageCapacity": opt_in}})
    # the test adds them to an informer's store, keyed by name: a later one of the same name replaces it
    caps = {x["metadata"]["name"]: x for x in c.get("capacities") or []}
    objs += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", **clean(x)} for x in caps.values()]
    reasons = list(c.get("reasons") or []) if opt_in else []
    step: dict[str, Any] = {"op": "find_pod_volumes", "node": "node1",
                            "should_fail": bool(c.get("shouldFail")) and opt_in, "reasons": reasons, "bindings": []}
    if not c.get("reasons"):  # with reasons (even unexpected ones) kube's test takes the computed provisions
        step["provisions"] = sorted(p["PVC"]["metadata"]["name"] for p in c.get("expectedProvisions") or [])
    return {"plugin": "VolumeBinding", "args": {"bindTimeoutSeconds": 300}, "nodes": [BINDER_NODE], "pod": pod,
            "objs": objs, "steps": [step]}


def csi_qhint_pod_deleted(c):
    deleted = clean(c.get("deletedPod") or {})
    if not c.get("deletedPodNotScheduled"):
        deleted.setdefault("spec", {})["nodeName"] = "node-for-max-pd-test-1"
    return {"plugin": "NodeVolumeLimits", "pod": pod_of(c, "newPod"),
            "steps": [{"op": "hint", "resource": "Pod", "action": "Delete", "old": deleted, "new": None,
                       "want": c["wantQHint"]}]}


def csi_qhint_pvc_added(c):
    return {"plugin": "NodeVolumeLimits", "pod": pod_of(c, "newPod"),
            "steps": [{"op": "hint", "resource": "PersistentVolumeClaim", "action": "Add", "old": None,
                       "new": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **clean(c.get("addedPvc") or {})},
                       "want": c["wantQHint"]}]}


def csi_qhint_va_deleted(c):
    """TestCSILimitsDeletedVolumeAttachmentQHint: the hint for a deleted VolumeAttachment (the test's PVC lister
    holds existingPVC; the hint does not read it)."""
    return {"plugin": "NodeVolumeLimits", "pod": pod_of(c, "newPod"),
            "objs": _kinded([c.get("existingPVC")], "PersistentVolumeClaim"),
            "steps": [{"op": "hint", "resource": "storage.k8s.io/VolumeAttachment", "action": "Delete",
                       "old": {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                               **clean(c.get("deletedVA") or {})}, "new": None, "want": c["wantQHint"]}]}


def csi_qhint_csinode_updated(c):
    def csinode(drivers: Any) -> dict[str, Any]:
        return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "test-node"},
                "spec": {"drivers": [clean(d) for d in drivers or []]}}
    return {"plugin": "NodeVolumeLimits", "pod": {"metadata": {"name": "pod"}, "spec": {}},
            "steps": [{"op": "hint", "resource": "storage.k8s.io/CSINode", "action": "Update",
                       "old": csinode(c.get("oldDrivers")), "new": csinode(c.get("newDrivers")),
                       "want": c["wantQHint"]}]}


def preempt(c):
    """TestPreempt: the evaluator with every node Unschedulable, in a profile of the case's Filter plugin
    (NodeResourcesFit, or PodTopologySpread for the spreading case: the test registers them per case in Go,
    transcribed here by case), over nodes named "hostname/zone/region" with 500m CPU, 500 bytes, 32 pods;
    the nominated node and the victims deleted."""
    if c.get("extenders"):
        return {"na": "fake extender objects (no HTTP): ksched's extenders are HTTP clients, covered by "
                      "tests/integration/test_extender_parity.py against kube-scheduler"}
    nodes = []
    for spec_ in c.get("nodeNames") or []:
        labels = dict(zip(("hostname", "zone", "region"), spec_.split("/"), strict=False))
        res = {"cpu": "500m", "memory": "500", "pods": "32"}
        nodes.append({"metadata": {"name": labels["hostname"], "labels": labels},
                      "status": {"capacity": res, "allocatable": res}})
    want = (c.get("want") or {}).get("NominatingInfo") or {}
    plugin = "PodTopologySpread" if "topology spread" in (c.get("name") or "") else "NodeResourcesFit"
    return {"plugin": "DefaultPreemption", "filter_plugin": plugin, "nodes": nodes,
            "pods": [clean(p) for p in c.get("pods") or []],
            "pod": pod_of(c, "preemptor" if "preemptor" in c else "pod"),  # 1.37 names it preemptor
            "steps": [{"op": "postfilter",
                       "statuses": {"nodes": {n["metadata"]["name"]: {"code": "Unschedulable", "reasons": []}
                                              for n in nodes},
                                    "absent": {"code": "UnschedulableAndUnresolvable", "reasons": []}},
                       "nominated": want.get("NominatedNodeName") if c.get("want") else None,
                       "victims": sorted(c.get("expectedPods") or [])}]}


def select_best_candidate(c):
    """TestSelectBestCandidate: the node preemption nominates, over nodes of 500m CPU, 500 bytes, 32 pods with
    NodeResourcesFit as the Filter plugin (as every case registers), must be one of the expected ones."""
    if "different start time" in (c.get("name") or ""):
        return {"na": "start times 1 ns apart (epochTime1/2): metav1.Time's JSON, as the API serves it, has whole "
                      "seconds, so the harvested pods all start at 0 and no API object can differ that little"}
    res = {"cpu": "500m", "memory": "500", "pods": "32"}
    nodes = [{"metadata": {"name": n}, "status": {"capacity": res, "allocatable": res}}
             for n in c.get("nodeNames") or []]
    return {"plugin": "DefaultPreemption", "nodes": nodes, "pods": [clean(p) for p in c.get("pods") or []],
            "pod": pod_of(c),
            "steps": [{"op": "postfilter",
                       "statuses": {"nodes": {n["metadata"]["name"]: {"code": "Unschedulable", "reasons": []}
                                              for n in nodes},
                                    "absent": {"code": "UnschedulableAndUnresolvable", "reasons": []}},
                       "nominated_in": sorted(c.get("expected") or [])}]}


def async_preenqueue(c):
    """TestPreEnqueue (SchedulerAsyncPreemption, beta and on by default): PreEnqueue holds back a pod while
    preemption on its behalf runs asynchronously (`preempting`: the preemptors in flight). PodGroup
    preemptors are alpha."""
    fts = c.get("features") or {}
    if fts.get("EnableGenericWorkload") or fts.get("EnableCompositePodGroup") or fts.get(
            "EnableWorkloadAwarePreemption"):
        return {"na": "PodGroup preemptors (GenericWorkload / CompositePodGroup: alpha, off by default)"}
    trigger = (c.get("podToTriggerPreemption") or {}).get("metadata") or {}
    return {"plugin": "DefaultPreemption", "nodes": [], "pod": pod_of(c, "podToCheck"),
            "gates": {"SchedulerAsyncPreemption": bool(fts.get("EnableAsyncPreemption"))},
            "steps": [{"op": "preenqueue", "preempting": [trigger.get("uid")] if c.get("expectPreemption") else [],
                       "status": status(c.get("wantStatus"))}]}


def eligible(c):
    """TestPodEligibleToPreemptOthers: PostFilter says "not eligible" exactly when kube's check is false."""
    if (c.get("features") or {}).get("EnableGenericWorkload"):
        return {"na": "a preemptor in a PodGroup (GenericWorkload: alpha, off by default)"}
    res = {"cpu": "500m", "memory": "500", "pods": "32"}
    nodes = [{"metadata": {"name": n if isinstance(n, str) else n["metadata"]["name"]},
              "status": {"capacity": res, "allocatable": res}} for n in c.get("nodes") or []]
    pod = pod_of(c)
    nominated = (pod.get("status") or {}).get("nominatedNodeName")
    statuses = {n["metadata"]["name"]: {"code": "Unschedulable", "reasons": []} for n in nodes}
    if nominated and c.get("nominatedNodeStatus"):
        statuses[nominated] = status(c["nominatedNodeStatus"])
    return {"plugin": "DefaultPreemption", "nodes": nodes, "pods": [clean(p) for p in c.get("pods") or []],
            "pod": pod,
            "steps": [{"op": "postfilter", "statuses": {"nodes": statuses, "absent": {
                "code": "UnschedulableAndUnresolvable", "reasons": []}}, "eligible": bool(c.get("expected"))}]}


VB_INTERNAL = na("the volume binder's PreBind internals (Assume/Bind/CheckBindings, CSI-migration variants, "
                 "PreBindPreFlight against a fake binder and fake API calls): no extension point of ksched's; the "
                 "differential test's WaitForFirstConsumer bindings cover what they decide")


def hint(plugin: str, resource: str, action: str, update_action: str | None = None):
    """A queueing hint test: the hint ksched's plugin registers for `resource`/`action` (`update_action` when
    the case has an old object), on (pod, old, new)."""
    def f(c):
        if c.get("expectedErr") or c.get("wantErr"):
            return {"na": "hands the hint a malformed object (not the event's kind): kube returns Queue with an "
                          "error; ksched's informers only deliver objects of the registered kind"}
        act = update_action if update_action and c.get("oldObj") else action
        args = {"args": lower_keys(clean(c["args"]))} if isinstance(c.get("args"), dict) else {}
        return {"plugin": plugin, **args, "pod": pod_of(c),
                "steps": [{"op": "hint", "resource": resource, "action": act, "old": clean(c.get("oldObj")),
                           "new": clean(c.get("newObj")), "want": c["expectedHint"]}]}
    return f


def hint_of(plugin: str, resource: str, old_key: str, new_key: str, want_key: str, *, add: str = "Add",
            update: str = "Update", delete: str = "Delete", pod_key: str = "pod",
            gate_off: Callable[[dict[str, Any]], str] | None = None):
    """A queueing hint test whose table names its own fields: the hint ksched's plugin registers for `resource`
    and the action the case's objects imply (both: `update`, only the new one: `add`, only the old: `delete`),
    on (pod, old, new)."""
    def f(c):
        if c.get("expectedErr") or c.get("wantErr") or c.get("err") is True:
            return {"na": "hands the hint a malformed object (not the event's kind): kube returns Queue with an "
                          "error; ksched's informers only deliver objects of the registered kind"}
        why = gate_off(c) if gate_off else ""
        if why:
            return {"na": why}
        old, new = clean(c.get(old_key)), clean(c.get(new_key))
        act = update if old is not None and new is not None else (add if new is not None else delete)
        return {"plugin": plugin, "pod": pod_of(c, pod_key),
                "steps": [{"op": "hint", "resource": resource, "action": act, "old": old, "new": new,
                           "want": c[want_key]}]}
    return f


def _pts_hint_gate(c: dict[str, Any]) -> str:
    """The hints read only nodeTaintsPolicy; with the gate off kube takes every constraint as Ignore."""
    honors = any(x.get("nodeTaintsPolicy") == "Honor"
                 for x in (pod_of(c).get("spec") or {}).get("topologySpreadConstraints") or [])
    if c.get("enableNodeInclusionPolicyInPodTopologySpread") is False and honors:
        return "runs with NodeInclusionPolicyInPodTopologySpread disabled (on by default): a nodeTaintsPolicy: Honor " \
               "it reads as Ignore"
    return ""


def _resize_deferred(pod: Any) -> bool:
    """A pod whose in-place resize the kubelet deferred (condition PodResizePending, reason Deferred)."""
    return any(x.get("type") == "PodResizePending" and x.get("reason") == "Deferred"
               for x in ((pod or {}).get("status") or {}).get("conditions") or [])


def _fit_hint_gate(c: dict[str, Any]) -> str:
    if c.get("enablePreemptionGate") or _resize_deferred(c.get("pod")):
        return ("runs with InPlacePodVerticalScalingSchedulerPreemption (alpha, off by default): the hints of a "
                "bound pod whose resize is deferred")
    if c.get("enableInPlacePodVerticalScaling") is False and c.get("oldObj") and c.get("newObj"):
        return "runs with InPlacePodVerticalScaling disabled (GA and locked on)"
    return ""


IPA_POD_HINT = hint_of("InterPodAffinity", "Pod", "oldPod", "newPod", "expectedHint", update="UpdatePodLabel")
IPA_NODE_HINT = hint_of("InterPodAffinity", "Node", "oldNode", "newNode", "expectedHint", update="UpdateNodeLabel")
PTS_POD_HINT = hint_of("PodTopologySpread", "Pod", "oldPod", "newPod", "expectedHint", update="UpdatePodLabel",
                       gate_off=_pts_hint_gate)
PTS_NODE_HINT = hint_of("PodTopologySpread", "Node", "oldNode", "newNode", "expectedHint",
                        update="UpdateNodeLabel")
FIT_POD_HINT = hint_of("NodeResourcesFit", "Pod", "oldObj", "newObj", "expectedHint",
                       update="UpdatePodScaleDown", gate_off=_fit_hint_gate)
FIT_NODE_HINT = hint_of("NodeResourcesFit", "Node", "oldObj", "newObj", "expectedHint",
                        update="UpdateNodeAllocatable")
FIT_DEVICE_CLASS_HINT = hint_of("NodeResourcesFit", "resource.k8s.io/DeviceClass", "oldObj", "newObj",
                                "expectedHint")


def _vb_hint(resource: str, old_key: str, new_key: str):
    return hint_of("VolumeBinding", resource, old_key, new_key, "expect")


VB_HINTS = {
    "TestIsSchedulableAfterCSINodeChange": _vb_hint("storage.k8s.io/CSINode", "oldObj", "newObj"),
    "TestIsSchedulableAfterPersistentVolumeClaimChange": _vb_hint("PersistentVolumeClaim", "oldPVC", "newPVC"),
    "TestIsSchedulableAfterStorageClassChange": _vb_hint("storage.k8s.io/StorageClass", "oldSC", "newSC"),
    "TestIsSchedulableAfterCSIStorageCapacityChange": _vb_hint("storage.k8s.io/CSIStorageCapacity", "oldCap",
                                                               "newCap"),
    "TestIsSchedulableAfterCSIDriverChange": _vb_hint("storage.k8s.io/CSIDriver", "oldObj", "newObj"),
}


# ------------------------------------------------------------------------------------ SignPod (batching)

#: noderesources' deviceClassWithExtendResourceName (fit_test.go): the DeviceClass backing the extended
#: resource in its tests' DRA manager (a package variable, so not in the dumped case)
DRA_EXT_DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                        "metadata": {"name": "device-class-name"},
                        "spec": {"extendedResourceName": "extended.resource.dra.io/something"}}


def fragments(lst: Any) -> list[dict[str, Any]] | None:
    return None if lst is None else [{"key": f["Key"], "value": f["Value"]} for f in lst]


def resources_sign(plugin: str):
    """testFitSignPod / testBalancedAllocationSignPod: the exact status code, and the fragments on success."""
    def f(c):
        on = not c.get("disableDRAExtendedResource")
        step: dict[str, Any] = {"op": "sign", "code": c["expectedStatusCode"]}
        if step["code"] == "Success":
            step["fragments"] = fragments(c.get("expectedFragments"))
        out = {"plugin": plugin, "gates": {"DRAExtendedResource": on}, "pod": pod_of(c), "steps": [step]}
        if on:  # kube's test gives the plugin a DRA manager holding the DeviceClass only then
            out["objs"] = [DRA_EXT_DEVICE_CLASS]
        return out
    return f


def signature(plugin: str, ok_key: str, args_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
              prefilter: bool = False):
    """The SignPod tables that compare the fragments (nil included) and fail only an unexpected non-success."""
    def f(c):
        step: dict[str, Any] = {"op": "sign", "fragments": fragments(c.get("expectedSignature"))}
        if c.get(ok_key):
            step["must_succeed"] = True
        steps = ([{"op": "prefilter", "not_code": "Error"}] if prefilter else []) + [step]
        out = {"plugin": plugin, "pod": pod_of(c), "steps": steps}
        if args_of is not None:
            out["args"] = args_of(c)
        return out
    return f


def pts_signature(c: dict[str, Any]) -> dict[str, Any]:
    if any((t.get("maxSkew") or 0) <= 0 for t in ((c.get("pod") or {}).get("spec") or {}).get(
            "topologySpreadConstraints") or []):
        return {"na": "its pod has maxSkew 0, which the API server rejects (ksched refuses such a pod as it reads "
                      "it); TestPodTopoSignatures' other cases and tests/unit/test_batching.py cover signing"}
    return signature("PodTopologySpread", "scheduleable", _config, prefilter=True)(c)


def _config(c: dict[str, Any]) -> dict[str, Any]:
    return lower_keys(clean(c.get("config") or {}))


NR_INTERNAL = na("private helper of the plugin package (no extension point); its effect is covered by the "
                 "Filter/Score tables")
NR_NA_DRA = na("a private helper run with kubelet's option (NodeResourcesFit's PreFilter never sets it); its 4 "
               "cases run as the node accounting of a pod's claim statuses in tests/unit/test_dra_node_allocatable.py")

PTS_STATE = na("compares the plugin's private PreFilter/PreScore state struct; ksched keeps its own state "
               "(verdicts and scores are covered by the filter and score tables)")

ADAPTERS: dict[str, dict[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "tainttoleration": {
        "TestTaintTolerationScore": taint_score,
        "TestTaintTolerationFilter": single_filter("TaintToleration", "enableTaintTolerationComparisonOps"),
        "TestTaintTolerationFilterWithFeatureGate": single_filter("TaintToleration",
                                                                  "enableTaintTolerationComparisonOps"),
        "TestIsSchedulableAfterNodeChange": hint("TaintToleration", "Node", "Add", "UpdateNodeTaint"),
        "Test_isSchedulableAfterPodTolerationChange": hint("TaintToleration", "Pod", "UpdatePodToleration"),
        # 1.37 names the pod events by whose pod changed (TargetPod: the pod itself); ksched's Pod events cover it
        "Test_isSchedulableAfterTargetPodTolerationChange": hint("TaintToleration", "Pod", "UpdatePodToleration"),
    },
    "nodeunschedulable": {
        "TestNodeUnschedulable": single_filter("NodeUnschedulable"),
        "TestIsSchedulableAfterNodeChange": hint("NodeUnschedulable", "Node", "Add", "UpdateNodeTaint"),
        "TestIsSchedulableAfterPodTolerationChange": hint("NodeUnschedulable", "Pod", "UpdatePodToleration"),
    },
    "nodename": {"TestNodeName": single_filter("NodeName"), "TestNodeName_PreFilter": nodename_prefilter},
    "nodeports": {
        "TestNodePorts": nodeports, "Test_isSchedulableAfterPodDeleted": hint("NodePorts", "Pod", "Delete"),
        "Test_isSchedulableAfterAssignedPodDeleted": hint("NodePorts", "Pod", "Delete"),
        "TestFits": na("internal helper fitsPorts on port maps; its cases are covered through TestNodePorts"),
    },
    "imagelocality": {
        "TestImageLocalityPriority": imagelocality,
        "TestImageSignature": signature("ImageLocality", ""),
        "TestNormalizedImageName": na("private helper normalizedImageName (1.36); its effect is covered by "
                                      "TestImageLocalityPriority"),
    },
    "nodeaffinity": {
        "TestNodeAffinity": nodeaffinity_filter, "TestNodeAffinityPriority": nodeaffinity_score,
        "Test_isSchedulableAfterNodeChange": hint("NodeAffinity", "Node", "Add", "UpdateNodeLabel"),
    },
    "interpodaffinity": {
        "TestRequiredAffinitySingleNode": ipa_single, "TestRequiredAffinityMultipleNodes": ipa_multi,
        "TestPreferredAffinity": ipa_score(lambda c: {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods":
                                                      bool(c.get("ignorePreferredTermsOfExistingPods"))}, True),
        "TestPreferredAffinityWithHardPodAffinitySymmetricWeight": ipa_score(
            lambda c: {"hardPodAffinityWeight": c.get("hardPodAffinityWeight") or 0}, False),
        "TestPreFilterStateAddRemovePod": na("checks the private preFilterState counters after AddPod/RemovePod; "
                                             "ksched keeps different internal state (its Filter verdicts are "
                                             "covered by the filter tables)"),
        "TestGetTPMapMatchingIncomingAffinityAntiAffinity": na("private helper returning internal topology maps"),
        "Test_isSchedulableAfterPodChange": IPA_POD_HINT, "Test_isSchedulableAfterNodeChange": IPA_NODE_HINT,
        "Test_isSchedulableAfterAssignedPodChange": IPA_POD_HINT, "Test_isSchedulableAfterTargetPodUpdateLabel":
            IPA_POD_HINT,
        "TestPodAffinitySignature": signature("InterPodAffinity", "schedulable", _config),
    },
    "podtopologyspread": {
        "TestSingleConstraint": pts_filter, "TestMultipleConstraints": pts_filter,
        "TestPodTopologySpreadScore": pts_score, "TestPreScoreSkip": pts_prescore_skip,
        "TestPreScoreStateEmptyNodes": PTS_STATE, "TestPreFilterState": PTS_STATE,
        "TestPreFilterStateAddPod": PTS_STATE, "TestPreFilterStateRemovePod": PTS_STATE,
        "TestPodTopoSignatures": pts_signature,
        "Test_isSchedulableAfterNodeChange": PTS_NODE_HINT, "Test_isSchedulableAfterPodChange": PTS_POD_HINT,
        "Test_isSchedulableAfterAssignedPodChange": PTS_POD_HINT, "Test_isSchedulableAfterTargetPodChange":
            PTS_POD_HINT,
    },
    "noderesources": {
        "testEnoughRequests": fit_filter(ENOUGH_NODE),
        "testNotEnoughRequests": fit_filter({"cpu": "10m", "memory": "20", "pods": "1", "example.com/aaa": "0",
                                             "ephemeral-storage": "0", "hugepages-2Mi": "0"}),
        "testStorageRequests": fit_filter(ENOUGH_NODE),
        "testRestartableInitContainers": fit_filter({"cpu": "2m", "memory": "0", "pods": "1", "example.com/aaa": "0",
                                                     "ephemeral-storage": "0", "hugepages-2Mi": "0"},
                                                    "wantPreFilterStatus"),
        "testFitScore": fit_score,
        "TestDeferredResizeFit": deferred_resize_fit,
        "TestLeastAllocatedScoringStrategy": strategy_score("LeastAllocated"),
        "TestMostAllocatedScoringStrategy": strategy_score("MostAllocated"),
        "TestRequestedToCapacityRatioScoringStrategy": strategy_score("RequestedToCapacityRatio"),
        "TestResourceBinPackingSingleExtended": binpacking([{"name": "intel.com/foo", "weight": 1}]),
        "TestResourceBinPackingMultipleExtended": binpacking([{"name": "intel.com/foo", "weight": 3},
                                                              {"name": "intel.com/bar", "weight": 5}]),
        "testNodeResourcesBalancedAllocation": balanced,
        "testBalancedAllocationSignPod": resources_sign("NodeResourcesBalancedAllocation"),
        "testFitSignPod": resources_sign("NodeResourcesFit"),
        "TestEventsToRegister": fit_events,
        "Test_isSchedulableAfterPodChange": FIT_POD_HINT, "Test_isSchedulableAfterNodeChange": FIT_NODE_HINT,
        **{f"Test_isSchedulableAfter{w}": FIT_POD_HINT for w in (
            "AssignedPodDelete", "AssignedPodScaleDown", "AssignedPodScaleUp", "TargetPodScaleDown",
            "TargetPodScaleUp")},
        "Test_isSchedulableAfterDeviceClassChange": FIT_DEVICE_CLASS_HINT,
        "TestIsFit": NR_INTERNAL, "testHaveAnyRequestedResourcesIncreased": NR_INTERNAL,
        "TestBrokenLinearFunction": NR_INTERNAL, "TestResourceAllocationScorerCalculateRequests": NR_INTERNAL,
        "testCalculateResourceAllocatableRequest": NR_INTERNAL, "TestNodeMatchCaching": NR_INTERNAL,
        "TestScorePlacement_Resources": na("PlacementScore for PodGroups (alpha TopologyAwareWorkloadScheduling)"),
        "testComputePodResourceRequestWithNodeAllocatableDRA": NR_NA_DRA,
    },
    "queuesort": {"TestLess": queue_less},
    "schedulinggates": {"TestPreEnqueue": gates, "Test_isSchedulableAfterPodChange": hint(
        "SchedulingGates", "Pod", "UpdatePodSchedulingGatesEliminated"),
        "TestIsSchedulableAfterUpdateTargetPodSchedulingGatesEliminated": hint(
            "SchedulingGates", "Pod", "UpdatePodSchedulingGatesEliminated")},
    "volumezone": {
        "TestSingleZone": volumezone, "TestMultiZone": volumezone, "TestWithBinding": volumezone,
        "TestIsSchedulableAfterPersistentVolumeClaimAdded": hint("VolumeZone", "PersistentVolumeClaim", "Add"),
        "TestIsSchedulableAfterPersistentVolumeChange": hint("VolumeZone", "PersistentVolume", "Add", "Update"),
        "TestIsSchedulableAfterStorageClassAdded": hint("VolumeZone", "storage.k8s.io/StorageClass", "Add"),
    },
    "volumerestrictions": {
        "TestGCEDiskConflicts": volumerestrictions, "TestAWSDiskConflicts": volumerestrictions,
        "TestRBDDiskConflicts": volumerestrictions, "TestISCSIDiskConflicts": volumerestrictions,
        "TestAccessModeConflicts": volumerestrictions,
        "Test_isSchedulableAfterPodDeleted": hint("VolumeRestrictions", "Pod", "Delete"),
        "Test_isSchedulableAfterAssignedPodDeleted": hint("VolumeRestrictions", "Pod", "Delete"),
        "Test_isSchedulableAfterPersistentVolumeClaimChange": hint("VolumeRestrictions", "PersistentVolumeClaim",
                                                                   "Add"),
    },
    "volumebinding": {
        "TestVolumeBinding": volumebinding,
        "TestFindPodVolumesWithoutProvisioning": find_pod_volumes,
        "TestFindPodVolumesWithProvisioning": find_pod_volumes,
        **{t: VB_INTERNAL for t in (
                                    "TestCheckBindings", "TestBindPodVolumes", "TestBindAPIUpdate",
                                    "TestAssumePodVolumes", "TestAssume", "TestCheckBindingsWithCSIMigration",
                                    "TestFindPodVolumesWithCSIMigration", "Test_PreBindPreFlight")},
        "TestCapacity": capacity,
        "TestScore": na("the private scorer (classResourceMap -> score) of StorageCapacityScoring: no extension point; "
                        "TestVolumeBinding's StorageCapacityScoring cases score through it"),
        **VB_HINTS,
    },
    "nodevolumelimits": {
        "TestCSILimits": csi_limits,
        "TestCSILimitsQHint": csi_qhint_pod_deleted, "TestCSILimitsAddedPVCQHint": csi_qhint_pvc_added,
        "TestCSILimitsAfterCSINodeUpdatedQHint": csi_qhint_csinode_updated,
        "TestCSILimitsDeletedVolumeAttachmentQHint": csi_qhint_va_deleted,
        "TestVolumeLimitScalingGate": volume_limit_scaling,
    },
    "defaultpreemption": {
        "TestPostFilter": post_filter, "TestPreempt": preempt, "TestSelectBestCandidate": select_best_candidate,
        **{t: na("the preemption evaluator's internals (dry run, candidate selection, victim ordering, custom "
                 "hooks) against fake frameworks: no extension point of ksched; TestPostFilter's cases and the "
                 "differential test's nominated/victims comparisons cover what they decide")
           for t in ("TestDryRunPreemption", "TestCustomSelection",
                     "TestCustomOrdering")},
        "TestPodEligibleToPreemptOthers": eligible,
        "TestPreEnqueue": async_preenqueue,
        "TestSelectVictimsOnNode": na("the preemption evaluator's SelectVictimsOnNode against a fake framework: no "
                                      "extension point of ksched; TestPostFilter's and TestPreempt's victims cover it"),
        **{f"TestDefaultPreemption_PodGroupPostFilter_{t}": na(
            "PodGroup PostFilter (workload-aware preemption; GenericWorkload / WorkloadAwarePreemption: alpha, off "
            "by default)") for t in ("CompositePodGroup", "ErrorWrapping", "InvalidSnapshot",
                                     "WorkloadPreemptionAttempts")},
    },
}
#: an earlier release's cases whose behaviour the pinned release changed without a gate or version check: ksched
#: has the pinned release's behaviour at every emulated version, so these expectations no longer apply
SUPERSEDED: dict[str, dict[str, str]] = {
    "1.36.3": {
        "TestImageLocalityPriority/pod with ImageVolume": "kube 1.37 counts image volumes in the image count "
                                                          "(ungated); the 1.37.2 set tests the new score",
    },
}
#: adapters that also read the test function's fixtures (listers built before the table)
WITH_FIXTURES = {volumezone, csi_limits, find_pod_volumes, capacity, volume_limit_scaling}


def convert(pkg: str, extra: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
            only: set[str] | None = None) -> int:
    """Write tests/data/upstream_tables/<pkg>.json; with `only`, regenerate just those test functions' cases
    and keep the file's others as they are (cases moved to a later release's expectations stay)."""
    adapters = {**ADAPTERS.get(pkg, {}), **(extra or {})}
    cases = []
    seen: dict[str, int] = {}
    for line in (HERE / "raw" / VERSION / f"{pkg}.jsonl").open():
        rec = json.loads(line)
        c = rec.get("case") or {}
        name = c.get("name") or c.get("desc") or rec.get("key") or ""
        cid = f"{rec['test']}/{name}"
        seen[cid] = seen.get(cid, 0) + 1
        if seen[cid] > 1:
            cid += f" #{seen[cid]}"
        fn = adapters.get(rec["test"])
        if fn is None:
            out: dict[str, Any] = {"na": f"no adapter for {rec['test']} yet"}
        else:
            try:
                out = fn(c, rec) if fn in WITH_FIXTURES else fn(c)
            except Exception as exc:  # a case shape the adapter does not know: say so in the data
                out = {"na": f"adapter could not read the case: {type(exc).__name__}: {exc}"}
        if cid in SUPERSEDED.get(VERSION, {}):
            out = {"na": f"superseded by v{DEFAULT_VERSION}: {SUPERSEDED[VERSION][cid]}"}
        cases.append({"id": cid, **out})
    if only is not None:
        fresh = [c for c in cases if c["id"].split("/", 1)[0] in only]
        kept = [c for c in json.loads((OUT / f"{pkg}.json").read_text())["cases"]
                if c["id"].split("/", 1)[0] not in only]
        cases = kept + fresh
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"source": f"{src()}/{pkg}/*_test.go", "cases": cases}
    (OUT / f"{pkg}.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return len(cases)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="raw/<pkg>.jsonl -> tests/data/upstream_tables/<pkg>.json")
    ap.add_argument("--kube-version", default=DEFAULT_VERSION,
                    help="release whose raw/<version>/ cases to convert (default %(default)s; another release's "
                         "set goes to tests/data/upstream_tables/<version>/)")
    ap.add_argument("packages", nargs="*")
    ap.add_argument("--only", action="append", metavar="TEST",
                    help="regenerate only this upstream test function's cases (repeatable)")
    ns = ap.parse_args()
    VERSION = ns.kube_version
    OUT = DATA if VERSION == DEFAULT_VERSION else DATA / VERSION
    for p in ns.packages or sorted(ADAPTERS):
        if (HERE / "raw" / VERSION / f"{p}.jsonl").exists():
            print(p, convert(p, only=set(ns.only) if ns.only else None))

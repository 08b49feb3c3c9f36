"""kube-scheduler's own plugin test tables (v1.37.2; plugins built at emulated 1.37), replayed through ksched's plugins.

The cases live as data in tests/data/upstream_tables/<package>.json (format: hack/upstream_tables/convert.py),
each named by the upstream test function and case; the previous release's set (v1.36.3) lives in
tests/data/upstream_tables/1.36.3/ and runs at emulated 1.36. A case kube's test runs through an extension point ksched
does not have (alpha feature gates, private helpers) carries `na` with the reason and is not run.
`python tests/unit/test_upstream_tables.py` prints the counts per plugin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.featuregates import FeatureGates, default_gates
from scheduler_runtime.framework import signers
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code, Status
from scheduler_runtime.framework.types import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    NodeInfo,
    NodeScore,
    PreFilterResult,
    QueuedPodInfo,
)
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins import GATE_READERS, in_tree
from scheduler_runtime.plugins.gates import GATES_CONTEXT, PluginFeatures

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream_tables"
#: the minor the tables' release runs its plugins at (kube's tests build them with that binary's gate defaults)
EMULATED = "1.37"
#: earlier releases' sets (tests/data/upstream_tables/<release>/, `convert.py --kube-version`), each run at its
#: minor's emulated version: what `--emulated-version` promises for the gated and versioned behaviour
PREVIOUS = {"1.36.3": "1.36"}
#: the gates kube's tables leave at zero that switch ksched's plugins (on by default from 1.37)
TEST_GATES_OFF = {"StorageCapacityScoring": False, "VolumeLimitScaling": False, "DRADeviceTaintRules": False}
PLUGINS = {cls.name: cls for cls in in_tree()}


def load_cases() -> list[tuple[str, dict[str, Any]]]:
    """(package, case) of the pinned release's set, then of each earlier set (package named `<release>/<pkg>`,
    the case carrying the `emulated` minor it runs at)."""
    out = []
    for f in sorted(DATA.glob("*.json")):
        for c in json.loads(f.read_text())["cases"]:
            out.append((f.stem, c))
    for release, minor in PREVIOUS.items():
        for f in sorted((DATA / release).glob("*.json")):
            for c in json.loads(f.read_text())["cases"]:
                out.append((f"{release}/{f.stem}", {**c, "emulated": minor}))
    return out


CASES = load_cases()
APPLICABLE = [(pkg, c) for pkg, c in CASES if "na" not in c]


def _status(st: Any) -> dict[str, Any] | None:
    """A plugin's return (None, Status or a tuple ending in one) as the data format's status."""
    if isinstance(st, tuple):
        st = st[-1]
    if st is None or (isinstance(st, Status) and st.code == Code.Success and not st.reasons):
        return None
    assert isinstance(st, Status), f"not a Status: {st!r}"
    return {"code": st.code.name, "reasons": list(st.all_reasons)}


def _default_namespace(v: Any) -> Any:
    """kube's tests leave namespaces empty; ksched reads a missing namespace as "default", so a term's
    `namespaces: [""]` (the empty namespace of those pods) reads as "default" too."""
    if isinstance(v, dict):
        return {k: ([("default" if n == "" else n) for n in x] if k == "namespaces" and isinstance(x, list)
                    else _default_namespace(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [_default_namespace(x) for x in v]
    return v


def _build(case: dict[str, Any]) -> tuple[Any, Snapshot, Pod]:
    snap = Snapshot()
    snap.namespace_labels.update(case.get("namespaces") or {})
    infos: dict[str, NodeInfo] = {}
    for raw in case.get("nodes") or []:
        ni = NodeInfo(Node.from_dict(raw))
        snap.add_node(ni)
        infos[ni.name] = ni
    for i, raw in enumerate(case.get("pods") or []):
        raw = json.loads(json.dumps(raw))
        raw.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        raw["metadata"].setdefault("uid", f"existing-uid-{i}")
        node = (raw.get("spec") or {}).get("nodeName")
        if node in infos:
            snap.add_pod(infos[node], Pod.from_dict(raw))
    cls = PLUGINS[case["plugin"]]
    # kube's plugin tests build plugins with feature.Features{} unless a case sets a gate: off, whatever the
    # release's defaults (cases that turn one on carry `na` or live in their own tests)
    gates = _gates(case)
    args = (cls.args_model.model_validate(case.get("args") or {}, context={GATES_CONTEXT: gates})
            if cls.args_model is not None else PluginFeatures(gates) if cls.name in GATE_READERS else None)
    cluster = None
    if "objs" in case:  # the plugin reads informers: a cluster, even with nothing in it
        cluster = MemoryCluster()
        for i, o in enumerate(case["objs"]):
            o = json.loads(json.dumps(o))
            o.setdefault("metadata", {}).setdefault("name", f"obj-{i}")
            o["metadata"].setdefault("namespace", "default")
            o.setdefault("apiVersion", "apps/v1" if o.get("kind") in ("ReplicaSet", "StatefulSet") else "v1")
            if "kind" not in o:
                o["kind"] = _guess_kind(o)
            stored = cluster.create(o, emit=False)
            if o["kind"] == "StorageClass" and "volumeBindingMode" not in o:
                # kube's fake lister hands the plugin the class as written: no API-server defaulting
                stored.pop("volumeBindingMode", None)
    handle = Handle(snap, cluster=cluster)
    handle.feature_gates = gates
    plugin = cls(args, handle)
    return plugin, snap, Pod.from_dict(case["pod"])


def _gates(case: dict[str, Any]) -> FeatureGates:
    """The case's minor's defaults, the gates kube's tables leave at zero off, then the gates the case sets."""
    em = case.get("emulated", EMULATED)
    return FeatureGates({**default_gates(em), **TEST_GATES_OFF, **(case.get("gates") or {})}, em)


def _guess_kind(o: dict[str, Any]) -> str:
    """The dumped informer objects carry no TypeMeta: tell Services from ReplicaSets/StatefulSets by shape."""
    spec = o.get("spec") or {}
    if "ports" in spec or ("selector" in spec and isinstance(spec["selector"], dict)
                           and "matchLabels" not in spec["selector"] and "matchExpressions" not in spec["selector"]):
        return "Service"
    return "StatefulSet" if "serviceName" in spec else "ReplicaSet"


def _rows(snap: Snapshot, names: list[str] | None) -> NodeList:
    if names is None:
        return NodeList(snap)
    index = {ni.name: i for i, ni in enumerate(snap.node_infos)}
    return NodeList(snap, np.array([index[n] for n in names], dtype=np.int64))


def run_case(case: dict[str, Any]) -> list[str]:
    """Run the case's steps; the list of differences (empty when ksched agrees)."""
    case = _default_namespace(case)
    if case["steps"][0]["op"] == "args_error":
        try:
            _build(case)
        except ValueError:
            return []
        return ["args: kube rejects them, ksched accepted them"]
    if case["steps"][0]["op"] == "less":
        return _run_less(case)
    if case["steps"][0]["op"] == "hint":
        return _run_hint(case)
    if case["steps"][0]["op"] == "events":
        return _run_events(case)
    if case["steps"][0]["op"] == "postfilter":
        return _run_post_filter(case)
    plugin, snap, pod = _build(case)
    state = CycleState()
    diffs: list[str] = []
    for step in case["steps"]:
        op = step["op"]
        if op == "prefilter" and "not_code" in step:  # kube's test only rules out one code
            got = _status(plugin.pre_filter(state, pod, NodeList(snap)))
            if (got or {}).get("code", "Success") == step["not_code"]:
                diffs.append(f"PreFilter status: want anything but {step['not_code']}, got {got}")
        elif op == "prefilter":
            ret = plugin.pre_filter(state, pod, NodeList(snap))
            got = _status(ret)
            if got != step["status"]:
                diffs.append(f"PreFilter status: want {step['status']}, got {got}")
            if "nodes" in step:
                res = ret[0] if isinstance(ret, tuple) else None
                names = sorted(res.node_names) if isinstance(res, PreFilterResult) and res.node_names is not None \
                    else None
                if names != step["nodes"]:
                    diffs.append(f"PreFilterResult nodes: want {step['nodes']}, got {names}")
            if got is not None and got["code"] == "Skip":
                state.skip_filter_plugins.add(plugin.name)
        elif op == "filter":
            ni = snap.get(step["node"])
            got = _status(plugin.filter(state, pod, ni))
            if "code" in step:  # kube's test compares the status code only
                if (got or {}).get("code", "Success") != step["code"]:
                    diffs.append(f"Filter on {step['node']}: want code {step['code']}, got {got}")
            elif got != step["status"]:
                diffs.append(f"Filter on {step['node']}: want {step['status']}, got {got}")
        elif op == "prescore":
            if not hasattr(plugin, "pre_score"):  # never scored: what kube's PreScore Skip amounts to
                got = {"code": "Skip", "reasons": []}
            else:
                got = _status(plugin.pre_score(state, pod, _rows(snap, step.get("nodes"))))
            want = step["status"]
            same = (got or {}).get("code") == (want or {}).get("code")
            if same and want is not None and got is not None and not step.get("code_only"):
                w, g = ", ".join(want["reasons"]), ", ".join(got["reasons"])
                same = (w in g) if step.get("contains") else w == g  # kube's test: strings.Contains
            if not same:
                diffs.append(f"PreScore status: want {want}, got {got}")
            if got is not None:
                return diffs
        elif op == "find_pod_volumes":  # kube's binder test: an error, the conflict reasons, the static bindings
            failed, reasons = False, []
            pre = _status(plugin.pre_filter(state, pod, NodeList(snap)))
            if pre is not None and pre["code"] != "Skip":
                failed = True
            elif pre is None:
                got = plugin.filter(state, pod, snap.get(step["node"]))
                failed = got is not None and got.code == Code.Error
                reasons = [] if got is None or failed else list(got.all_reasons)
            if failed != step["should_fail"]:
                diffs.append(f"error: want {step['should_fail']}, got {failed} ({pre})")
            if not failed and reasons != step["reasons"]:
                diffs.append(f"reasons: want {step['reasons']}, got {reasons}")
            if not failed and pre is None and not reasons:
                vs = state.get("VolumeBinding")
                got_b = sorted([c["metadata"]["name"], v["metadata"]["name"]]
                               for v, c in vs.by_node[step["node"]].static) if vs is not None else []
                if got_b != step["bindings"]:
                    diffs.append(f"bindings: want {step['bindings']}, got {got_b}")
                got_p = sorted(c["metadata"]["name"] for c in vs.by_node[step["node"]].provisions) \
                    if vs is not None else []
                if "provisions" in step and got_p != step["provisions"]:
                    diffs.append(f"provisions: want {step.get('provisions')}, got {got_p}")
        elif op == "sign":
            diffs += _check_sign(plugin.sign_pod(pod), step)
        elif op == "preenqueue":
            for uid in step.get("preempting") or ():  # kube's test marks these preemptors as in flight
                plugin._preempting.add(uid)
            got = _status(plugin.pre_enqueue(pod))
            if got != step["status"]:
                diffs.append(f"PreEnqueue status: want {step['status']}, got {got}")
        elif op == "score":
            scores = []
            only = step.get("nodes")
            for ni in snap.node_infos if only is None else [snap.get(n) for n in only]:
                ret = plugin.score(state, pod, ni)
                scores.append(NodeScore(ni.name, int(ret[0] if isinstance(ret, tuple) else ret)))
            if step.get("normalize") and hasattr(plugin, "normalize_score"):
                plugin.normalize_score(state, pod, scores)
            got_scores = {s.name: s.score for s in scores}
            if got_scores != step["scores"]:
                diffs.append(f"scores: want {step['scores']}, got {got_scores}")
    return diffs


def _kube_value(key: str, value: Any) -> Any:
    """A ksched fragment's value as the Go value kube's SignPod puts under the same key (what its tests compare):
    the requests signature is kube's framework.Resource; the other signers' values already have kube's shape."""
    if key != signers.RESOURCES:
        return value
    req = dict(value)
    scalars = {n: q for n, q in req.items() if n not in ("cpu", "memory", "ephemeral-storage", "pods")}
    return {"Resource": {"MilliCPU": req.get("cpu", 0), "Memory": req.get("memory", 0),
                         "EphemeralStorage": req.get("ephemeral-storage", 0), "AllowedPodNumber": req.get("pods", 0),
                         "ScalarResources": scalars or None}}


def _check_sign(ret: Any, step: dict[str, Any]) -> list[str]:
    """SignPod against kube's expectations: the exact code (`code`), only success (`must_succeed`), and the
    fragments' keys and values in order, nil (None) distinct from an empty list as cmp.Diff has them."""
    frags, st = ret if isinstance(ret, tuple) else ((None, ret) if isinstance(ret, Status) else (ret, None))
    got_code = "Success" if st is None else st.code.name
    diffs = []
    if "code" in step and got_code != step["code"]:
        diffs.append(f"SignPod status: want {step['code']}, got {got_code} ({st})")
    if step.get("must_succeed") and got_code != "Success":
        diffs.append(f"SignPod status: want Success, got {st}")
    if "fragments" in step:
        got = None if frags is None else [{"key": f.key, "value": json.loads(json.dumps(_kube_value(f.key, f.value)))}
                                          for f in frags]
        if got != step["fragments"]:
            diffs.append(f"SignPod fragments: want {step['fragments']}, got {got}")
    return diffs


def _run_hint(case: dict[str, Any]) -> list[str]:
    """A queueing hint: the function the plugin registers for the step's resource and action."""
    case = {**case, "objs": case.get("objs") or [], "pod": _with_uid(case["pod"])}
    plugin, _, pod = _build(case)
    diffs = []
    for step in case["steps"]:
        happened = ClusterEvent(step["resource"], ActionType[step["action"]])
        fns = [ev.hint for ev in plugin.events_to_register() if ev.event.matches(happened)]
        if not fns or fns[0] is None:
            diffs.append(f"no hint function registered for {step['resource']}/{step['action']}")
            continue

        def obj(raw: Any, resource: str = step["resource"]) -> Any:
            if raw is None or resource not in ("Pod", "Node"):
                return raw
            raw = json.loads(json.dumps(raw))
            raw.setdefault("metadata", {}).setdefault("name", "other")  # kube's test objects may be unnamed
            return Pod.from_dict(_with_uid(raw)) if resource == "Pod" else Node.from_dict(raw)

        got = fns[0](pod, obj(step["old"]), obj(step["new"]))
        want = QUEUE if step["want"] == "Queue" else QUEUE_SKIP
        if got != want:
            diffs.append(f"hint: want {step['want']}, got {'Queue' if got == QUEUE else 'QueueSkip'}")
    return diffs


def _run_events(case: dict[str, Any]) -> list[str]:
    """EventsToRegister: per resource, the union of the action flags the plugin registers."""
    plugin, _, _ = _build(case)
    got: dict[str, set[str]] = {}
    for ev in plugin.events_to_register():
        got.setdefault(ev.event.resource, set()).update(
            a.name for a in ActionType if a.name and a.value.bit_count() == 1 and ev.event.action & a)
    want = {r: set(a) for r, a in case["steps"][0]["events"].items()}
    return [] if got == want else [f"events: want {want}, got {got}"]


def _with_uid(raw: dict[str, Any]) -> dict[str, Any]:
    """kube's test pods without a UID all have the empty UID (hints compare UIDs: such pods are the same pod);
    ksched would name a pod without a UID by its key, so they all get one stand-in."""
    if (raw.get("metadata") or {}).get("uid"):
        return raw
    return {**raw, "metadata": {**(raw.get("metadata") or {}), "uid": "(empty uid)"}}


POSTFILTER_PROFILE = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: t
  plugins:
    multiPoint: {disabled: [{name: "*"}]}
    queueSort: {enabled: [{name: PrioritySort}]}
    preFilter: {enabled: [{name: FILTER}]}
    filter: {enabled: [{name: FILTER}]}
    postFilter: {enabled: [{name: DefaultPreemption}]}
    bind: {enabled: [{name: DefaultBinder}]}
"""


def _run_post_filter(case: dict[str, Any]) -> list[str]:
    """PostFilter through a framework of the case's plugins over a cluster of its nodes, pods and PDBs."""
    import tempfile

    from scheduler_runtime.config import load_config
    from scheduler_runtime.plugins.registry import build_registry
    from scheduler_runtime.scheduler import Scheduler

    cluster = MemoryCluster()
    for raw in case.get("nodes") or []:
        cluster.create({"apiVersion": "v1", "kind": "Node", **json.loads(json.dumps(raw))}, emit=False)
    for raw in case.get("pods") or []:
        cluster.create({"apiVersion": "v1", "kind": "Pod", **json.loads(json.dumps(raw))}, emit=False)
    for raw in case.get("objs") or []:
        o = json.loads(json.dumps(raw))
        o["metadata"].setdefault("namespace", "default")
        cluster.create(o, emit=False)
    reg = build_registry([])
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(POSTFILTER_PROFILE.replace("FILTER", case.get("filter_plugin") or "NodeResourcesFit"))
    gates = _gates(case)
    sched = Scheduler(cluster, load_config(Path(f.name), reg, feature_gates=gates), reg, seed=1, feature_gates=gates,
                      kube_minor=int(gates.emulated.split(".")[1]))
    Path(f.name).unlink()
    sched.start()
    fw = sched.frameworks["t"]
    snap = sched.cache.snapshot
    pod = Pod.from_dict(case["pod"])
    state = CycleState()
    fw.run_pre_filter(state, pod, NodeList(snap))
    step = case["steps"][0]

    def st(d: dict[str, Any]) -> Status:
        return Status(Code[d["code"]], *d["reasons"])

    statuses = {ni.name: st(step["statuses"]["nodes"].get(ni.name) or step["statuses"]["absent"])
                for ni in snap.node_infos}
    statuses = {n: s for n, s in statuses.items() if s.code != Code.Success}
    before = set(cluster.deleted)
    result, got = fw.run_post_filter(state, pod, statuses)
    diffs = []
    got_d = None if got.code == Code.Success and not got.reasons else {"code": got.code.name,
                                                                      "reasons": list(got.all_reasons)}
    if "status" in step and got_d != step["status"]:
        diffs.append(f"PostFilter status: want {step['status']}, got {got_d}")
    if got.code == Code.Error and "eligible" not in step:  # eligibility cases may well end in kube's error too
        diffs.append(f"PostFilter error: {got.message}")
    if "victims" in step:
        victims = sorted(k.split("/", 1)[1] for k in set(cluster.deleted) - before)
        if victims != step["victims"]:
            diffs.append(f"victims: want {step['victims']}, got {victims}")
    if "eligible" in step:
        if (not got.message.startswith("preemption: not eligible")) != step["eligible"]:
            diffs.append(f"eligible to preempt: want {step['eligible']}, got {got.message!r}")
        return diffs
    nominated = result.nominated_node_name if result is not None else None
    if "nominated_in" in step:
        if nominated not in step["nominated_in"]:
            diffs.append(f"nominated node: want one of {step['nominated_in']}, got {nominated!r}")
    elif nominated != step["nominated"]:
        diffs.append(f"nominated node: want {step['nominated']!r}, got {nominated!r}")
    return diffs


def _run_less(case: dict[str, Any]) -> list[str]:
    """QueueSort: Less(p1, p2) on two queued pods given by priority and queue timestamp."""
    plugin = PLUGINS[case["plugin"]](None, None)
    diffs = []
    for step in case["steps"]:
        a, b = (QueuedPodInfo(Pod.from_dict({"metadata": {"name": n}, "spec": {"priority": q["priority"]}}),
                              timestamp=float(q["timestamp"])) for n, q in (("p1", step["p1"]), ("p2", step["p2"])))
        got = plugin.less(a, b)
        if got != step["want"]:
            diffs.append(f"Less: want {step['want']}, got {got}")
    return diffs


@pytest.mark.parametrize("case", [c for _, c in APPLICABLE], ids=[f"{p}:{c['id']}" for p, c in APPLICABLE])
def test_upstream_case(case: dict[str, Any]) -> None:
    diffs = run_case(case)
    assert not diffs, "\n".join(diffs)


def test_every_case_applies_or_says_why() -> None:
    assert len(CASES) >= 100
    for _, c in CASES:
        assert ("na" in c) != ("steps" in c), c["id"]
        if "na" in c:
            assert c["na"].strip(), c["id"]
            # a harvested test function the converter has no adapter for, or a case shape it cannot read, is a
            # gap in the conversion, never a reason the case does not apply
            assert not c["na"].startswith(("no adapter for", "adapter could not read")), (c["id"], c["na"])


def summary() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for pkg, c in CASES:
        row = out.setdefault(pkg, {"cases": 0, "pass": 0, "fail": 0, "na": 0})
        row["cases"] += 1
        if "na" in c:
            row["na"] += 1
            continue
        try:
            ok = not run_case(c)
        except Exception:
            ok = False
        row["pass" if ok else "fail"] += 1
    return out


if __name__ == "__main__":
    verbose = "-v" in sys.argv
    for pkg, row in summary().items():
        print(f"{pkg:20} cases {row['cases']:4}  pass {row['pass']:4}  fail {row['fail']:3}  n/a {row['na']:3}")
    if verbose:
        for pkg, c in CASES:
            if "na" in c:
                continue
            try:
                d = run_case(c)
            except Exception as exc:
                d = [f"{type(exc).__name__}: {exc}"]
            if d:
                print(f"FAIL {pkg}:{c['id']}: " + "; ".join(d))

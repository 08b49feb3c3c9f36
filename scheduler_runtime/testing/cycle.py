"""Run one scheduling attempt of one pod with a plugin under test and return every plugin's verdicts.

The runner schedules with the real runtime (queue, cache, framework, default plugins) on the embedded
cluster, or on a real API server, and reads the verdicts from the simulator-format results the runtime
records (`--results=simulator`), so a test sees exactly what `describe-pod` users see: per node the
filter verdict of each plugin, per node the raw and weighted score of each plugin.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.memory import MemoryCluster
from ..config.loader import API_VERSION, KIND, build
from ..framework.plugin import Plugin
from ..framework.registry import Registry, load_plugin_dir
from ..objects import Pod
from ..plugins.registry import build_registry
from ..queue import GATED
from ..scheduler import Scheduler
from ..simresults import PREFIX

SCHEDULER_NAME = "ksched-test"


@dataclass
class CycleResult:
    """What one attempt decided. `outcome` is scheduled / unschedulable / error / waiting, or `gated` when a
    PreEnqueue plugin kept the pod out of the queue (then nothing else ran). `filters[node][plugin]` is
    "passed" or the rejection message; `scores[node][plugin]` the raw Score, `normalized` after
    NormalizeScore, `weighted` normalized x weight. Per-plugin maps hold "success", "wait" or a message."""

    outcome: str
    node: str
    message: str
    filters: dict[str, dict[str, str]] = field(default_factory=dict)
    preenqueue: dict[str, str] = field(default_factory=dict)
    prefilter: dict[str, str] = field(default_factory=dict)
    postfilter: str = ""
    nominated_node: str = ""
    prescore: dict[str, str] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    normalized: dict[str, dict[str, int]] = field(default_factory=dict)
    weighted: dict[str, dict[str, int]] = field(default_factory=dict)
    reserve: dict[str, str] = field(default_factory=dict)
    permit: dict[str, str] = field(default_factory=dict)
    prebind: dict[str, str] = field(default_factory=dict)
    bind: dict[str, str] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def total(self, node: str) -> int:
        return sum(self.weighted.get(node, {}).values())

    def rejected_by(self, node: str) -> tuple[str, str] | None:
        """(plugin, message) that filtered `node` out, or None when it passed every filter."""
        for plugin, verdict in self.filters.get(node, {}).items():
            if verdict != "passed":
                return plugin, verdict
        return None


def plugin_from_folder(folder: str | Path, name: str | None = None) -> type[Plugin]:
    """The plugin class of a plugin folder (pass `__file__` of a test inside the folder)."""
    d = Path(folder)
    if d.is_file():
        d = d.parent
    classes = [cls for cls, _ in load_plugin_dir(d.parent) if Path(_).resolve() == d.resolve()]
    for cls in classes:
        if name is None or cls.name == name:
            return cls
    raise LookupError(f"no plugin {name or ''} in {d}")


def config_for(plugin: type[Plugin] | None, args: dict[str, Any] | None = None, weight: int | None = None,
               scheduler_name: str = SCHEDULER_NAME) -> dict[str, Any]:
    """The default profile plus `plugin` at every extension point it implements (multiPoint)."""
    prof: dict[str, Any] = {"schedulerName": scheduler_name}
    if plugin is not None:
        entry: dict[str, Any] = {"name": plugin.name}
        if weight is not None:
            entry["weight"] = weight
        plugins: dict[str, Any] = {"multiPoint": {"enabled": [entry]}}
        if callable(getattr(plugin, "less", None)):  # a QueueSort plugin replaces PrioritySort
            plugins["queueSort"] = {"enabled": [{"name": plugin.name}], "disabled": [{"name": "*"}]}
        prof["plugins"] = plugins
        if args:
            prof["pluginConfig"] = [{"name": plugin.name, "args": args}]
    return {"apiVersion": API_VERSION, "kind": KIND, "leaderElection": {"leaderElect": False}, "profiles": [prof]}


def _registry(plugin: type[Plugin] | None, registry: Registry | None) -> Registry:
    reg = registry or build_registry([])
    if plugin is not None and reg.get(plugin.name) is None:
        reg.register(plugin, "test")
    return reg


def _result(sched: Scheduler, profile: str, uid: str, key: str, ann: dict[str, str], node: str) -> CycleResult:
    """Read one attempt back: the simulator-format annotations for the verdicts, the scheduler's own
    ResultStore for outcome and PostFilter, its queue for a pod that PreEnqueue gated."""
    def j(name: str) -> Any:
        raw = ann.get(PREFIX + name)
        return json.loads(raw) if raw else {}

    fw = sched.frameworks[profile]
    res = sched.results.get(key)
    out = CycleResult(
        outcome=res.outcome if res else "not attempted", node=node, message=res.message if res else "",
        filters=j("filter-result"), prefilter=j("prefilter-result-status"), prescore=j("prescore-result"),
        scores={n: {p: int(v) for p, v in d.items()} for n, d in j("score-result").items()},
        weighted={n: {p: int(v) for p, v in d.items()} for n, d in j("finalscore-result").items()},
        reserve=j("reserve-result"), permit=j("permit-result"), prebind=j("prebind-result"), bind=j("bind-result"),
        postfilter=res.postfilter_message if res else "", nominated_node=res.nominated_node if res else "")
    weights = {cp.name: cp.weight for cp in fw.score}
    out.normalized = {n: {p: v // weights[p] if weights.get(p) else 0 for p, v in d.items()}
                      for n, d in out.weighted.items()}
    gated = [q for q in sched.queue.pods((GATED,)) if q.pod.uid == uid]
    if res is None and gated:
        plugin = gated[0].gating_plugin
        out.outcome, out.message = "gated", f"PreEnqueue plugin {plugin} keeps the pod out of the queue"
        for cp in fw.pre_enqueue:
            out.preenqueue[cp.name] = "gated" if cp.name == plugin else "success"
            if cp.name == plugin:
                break
    else:
        out.preenqueue = {cp.name: "success" for cp in fw.pre_enqueue}
    return out


def _one_attempt(sched: Scheduler) -> None:
    """Exactly one scheduling attempt, as kube-scheduler makes per pop: no retry after a preemption or a
    failure, so the result shows that attempt (e.g. the nominated node). A pod parked by Permit Wait is
    waited for until a plugin allows or rejects it or its timeout passes."""
    sched.drain_inbox()
    qpi = sched.queue.pop(timeout=0)
    if qpi is not None:
        sched.schedule_one(qpi)
    _finish_binding(sched)


def _finish_binding(sched: Scheduler, deadline: float | None = None, uid: str = "") -> None:
    """Wait for the attempt's binding cycle, which runs on its own thread when Permit made it wait, and apply
    what it handed back to the loop."""
    while sched._inflight_bindings:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"pod {uid}'s binding cycle did not finish before the timeout")
        time.sleep(0.005)
    sched.finish_bindings()
    sched.drain_inbox()


def _first_attempt(sched: Scheduler, uid: str, deadline: float) -> None:
    """`_one_attempt` for a pod that reaches the queue through the API server's watch: wait for it, make one
    attempt, finish its binding cycle. Scheduling until idle instead would retry the pod whenever the attempt's
    own writes (its result annotations, its status) come back as a pod update that a plugin without queueing
    hints takes as a reason to retry, so which attempt was read back, and when the run ended, would depend on
    timing. Running out of time raises rather than returning half an attempt."""
    while True:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"pod {uid} was neither gated nor attempted before the timeout")
        sched.drain_inbox()
        if sched.queue.where(uid) == GATED:
            return
        qpi = sched.queue.pop(timeout=0.05)
        if qpi is None:
            continue
        sched.schedule_one(qpi)
        if qpi.pod.uid == uid:
            break
    _finish_binding(sched, deadline, uid)


def run_cycle(plugin: type[Plugin] | None, nodes: list[dict[str, Any]], pod: dict[str, Any], *,
              args: dict[str, Any] | None = None, weight: int | None = None, existing: list[dict[str, Any]] = (),
              objects: list[dict[str, Any]] = (), config: dict[str, Any] | None = None,
              registry: Registry | None = None, seed: int = 0) -> CycleResult:
    """One scheduling attempt of `pod` on the embedded cluster holding `nodes`, bound pods `existing` and any
    other `objects` (PDBs, custom objects ...). Returns every plugin's verdicts for that attempt."""
    reg = _registry(plugin, registry)
    doc = config or config_for(plugin, args, weight)
    cfg = build(doc, reg)
    name = cfg.profiles[0].scheduler_name
    cluster = MemoryCluster()
    for obj in [*nodes, *existing, *objects]:
        cluster.create(obj, emit=False)
    sched = Scheduler(cluster, cfg, reg, seed=seed, results_mode="simulator")
    sched.start()
    p = dict(pod)
    p["spec"] = {**pod.get("spec", {}), "schedulerName": pod.get("spec", {}).get("schedulerName") or name}
    cluster.create(p)
    _one_attempt(sched)
    meta = p["metadata"]
    key = f"{meta.get('namespace', 'default')}/{meta['name']}"
    raw = cluster.get_pod(meta.get("namespace", "default"), meta["name"]) or {}
    rmeta = raw.get("metadata") or {}
    out = _result(sched, name, rmeta.get("uid", ""), key, rmeta.get("annotations") or {},
                  (raw.get("spec") or {}).get("nodeName") or "")
    out.events = [f"{e.reason}: {e.note}" for e in cluster.events_for(meta.get("namespace", "default"), meta["name"])]
    return out


def run_cycle_on_api_server(kubeconfig: str, plugin: type[Plugin] | None, nodes: list[dict[str, Any]],
                            pod: dict[str, Any], *, args: dict[str, Any] | None = None, weight: int | None = None,
                            existing: list[dict[str, Any]] = (), config: dict[str, Any] | None = None,
                            registry: Registry | None = None, seed: int = 0, timeout: float = 30.0) -> CycleResult:
    """The same attempt against a real kube-apiserver: node names get a unique suffix, the pods go to a fresh
    namespace, and everything is deleted afterwards. Result keys use the names you gave."""
    from ..cluster.kube import KubeClient, KubeCluster, load_connection

    reg = _registry(plugin, registry)
    run = uuid.uuid4().hex[:6]
    sched_name = f"{SCHEDULER_NAME}-{run}"
    doc = config or config_for(plugin, args, weight, scheduler_name=sched_name)
    doc = json.loads(json.dumps(doc))
    doc["profiles"][0]["schedulerName"] = sched_name
    cfg = build(doc, reg)
    client = KubeClient(load_connection(kubeconfig), qps=0)
    ns = f"ksched-test-{run}"
    rename = {n["metadata"]["name"]: f"{n['metadata']['name']}-{run}" for n in nodes}
    back = {v: k for k, v in rename.items()}
    client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns}})
    cluster = KubeCluster(kubeconfig, qps=0)
    try:
        for n in nodes:
            body = json.loads(json.dumps(n))
            body["metadata"]["name"] = rename[n["metadata"]["name"]]
            body["metadata"]["labels"]["kubernetes.io/hostname"] = body["metadata"]["name"]
            body["metadata"]["labels"]["ksched.io/test-run"] = run
            client.call("POST", "/api/v1/nodes", body=body)
            # no node controller runs on a test API server: drop the not-ready taint admission adds
            client.call("PATCH", f"/api/v1/nodes/{body['metadata']['name']}",
                        body={"spec": {"taints": n.get("spec", {}).get("taints")}},
                        content_type="application/merge-patch+json")
        for e in existing:
            body = json.loads(json.dumps(e))
            body["metadata"]["namespace"] = ns
            body["spec"]["nodeName"] = rename.get(body["spec"].get("nodeName", ""), body["spec"].get("nodeName"))
            client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
        sched = Scheduler(cluster, cfg, reg, seed=seed, results_mode="simulator")
        sched.start()
        body = json.loads(json.dumps(pod))
        body["metadata"]["namespace"] = ns
        body["spec"]["schedulerName"] = sched_name
        sel = body["spec"].setdefault("nodeSelector", {})
        sel["ksched.io/test-run"] = run  # only this run's nodes, whatever else the API server holds
        created = client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
        uid = (created.get("metadata") or {}).get("uid", "")
        key = f"{ns}/{body['metadata']['name']}"
        deadline = time.monotonic() + timeout
        try:
            _first_attempt(sched, uid, deadline)
            res = sched.results.get(key)
        finally:
            sched.stop()
        raw: dict[str, Any] = {}
        while res is not None:
            raw = client.call("GET", f"/api/v1/namespaces/{ns}/pods/{body['metadata']['name']}")
            if PREFIX + "selected-node" in ((raw.get("metadata") or {}).get("annotations") or {}):
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{key}: the attempt's results were not on the API server before the timeout")
            time.sleep(0.1)
        ann = {k: v for k, v in ((raw.get("metadata") or {}).get("annotations") or {}).items()}
        for k, v in list(ann.items()):
            for real, given in back.items():
                v = v.replace(f'"{real}"', f'"{given}"')
            ann[k] = v
        node = (raw.get("spec") or {}).get("nodeName") or ""
        out = _result(sched, sched_name, uid, key, ann, back.get(node, node))
        out.message = out.message.replace(f"-{run}", "")
        out.nominated_node = back.get(out.nominated_node, out.nominated_node)
        mine = set(rename)  # other tests' nodes on a shared API server are not part of the answer
        out.filters = {k: v for k, v in out.filters.items() if k in mine}
        out.scores = {k: v for k, v in out.scores.items() if k in mine}
        out.weighted = {k: v for k, v in out.weighted.items() if k in mine}
        out.normalized = {k: v for k, v in out.normalized.items() if k in mine}
        return out
    finally:
        cluster.stop()
        client.request("DELETE", f"/api/v1/namespaces/{ns}")
        for real in rename.values():
            client.request("DELETE", f"/api/v1/nodes/{real}")
        client.close()


def queue_order(plugin: type[Plugin] | None, pods: list[dict[str, Any]], *, args: dict[str, Any] | None = None,
                config: dict[str, Any] | None = None, registry: Registry | None = None) -> list[str]:
    """Names of `pods` in the order the scheduling queue pops them: the profile's QueueSort `less` (the plugin's,
    when it implements one) on the real queue. Pods a PreEnqueue plugin gates are left out."""
    reg = _registry(plugin, registry)
    cfg = build(config or config_for(plugin, args), reg)
    sched = Scheduler(MemoryCluster(), cfg, reg, seed=0)
    name = cfg.profiles[0].scheduler_name
    for i, raw in enumerate(pods):
        obj = json.loads(json.dumps(raw))
        obj["metadata"].setdefault("uid", f"queue-order-{i}")
        obj["spec"]["schedulerName"] = obj["spec"].get("schedulerName") or name
        sched.queue.add(Pod.from_dict(obj))
    out: list[str] = []
    while (qpi := sched.queue.pop(timeout=0)) is not None:
        out.append(qpi.pod.name)
        sched.queue.done(qpi.pod.uid)
    return out


@dataclass
class KschedCluster:
    """One backend for a test: `kind` is "embedded" or "api-server"; `kubeconfig` is set for the latter."""

    kind: str
    kubeconfig: str | None = None

    def run_cycle(self, plugin: type[Plugin] | None, nodes: list[dict[str, Any]], pod: dict[str, Any],
                  **kwargs: Any) -> CycleResult:
        """`run_cycle` or `run_cycle_on_api_server` with the same arguments, whichever this backend is."""
        if self.kubeconfig is None:
            return run_cycle(plugin, nodes, pod, **kwargs)
        return run_cycle_on_api_server(self.kubeconfig, plugin, nodes, pod, **kwargs)

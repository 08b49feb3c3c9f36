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
from ..framework.registry import Registry, build_registry, load_plugin_dir
from ..scheduler import Scheduler
from ..simresults import PREFIX

SCHEDULER_NAME = "ksched-test"


@dataclass
class CycleResult:
    """What one attempt decided. `filters[node][plugin]` is "passed" or the rejection message;
    `scores[node][plugin]` the raw Score, `weighted[node][plugin]` normalised x weight."""

    outcome: str
    node: str
    message: str
    filters: dict[str, dict[str, str]] = field(default_factory=dict)
    prefilter: dict[str, str] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    weighted: dict[str, dict[str, int]] = field(default_factory=dict)
    reserve: dict[str, str] = field(default_factory=dict)
    permit: dict[str, str] = field(default_factory=dict)
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


def _parse(ann: dict[str, str], outcome: str, node: str, message: str) -> CycleResult:
    def j(key: str) -> Any:
        raw = ann.get(PREFIX + key)
        return json.loads(raw) if raw else {}

    return CycleResult(
        outcome=outcome, node=node, message=message, filters=j("filter-result"),
        prefilter=j("prefilter-result-status"),
        scores={n: {p: int(v) for p, v in d.items()} for n, d in j("score-result").items()},
        weighted={n: {p: int(v) for p, v in d.items()} for n, d in j("finalscore-result").items()},
        reserve=j("reserve-result"), permit=j("permit-result"), bind=j("bind-result"))


def run_cycle(plugin: type[Plugin] | None, nodes: list[dict[str, Any]], pod: dict[str, Any], *,
              args: dict[str, Any] | None = None, weight: int | None = None, existing: list[dict[str, Any]] = (),
              objects: list[dict[str, Any]] = (), config: dict[str, Any] | None = None,
              registry: Registry | None = None, seed: int = 0) -> CycleResult:
    """Schedule `pod` once on the embedded cluster holding `nodes`, bound pods `existing` and any other
    `objects` (PDBs, custom objects ...). Returns every plugin's verdicts for that attempt."""
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
    sched.run(until_idle=True)
    meta = p["metadata"]
    key = f"{meta.get('namespace', 'default')}/{meta['name']}"
    res = sched.results.get(key)
    raw = cluster.get_pod(meta.get("namespace", "default"), meta["name"]) or {}
    out = _parse((raw.get("metadata") or {}).get("annotations") or {}, res.outcome if res else "not attempted",
                 (raw.get("spec") or {}).get("nodeName") or "", res.message if res else "")
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
        sched = Scheduler(cluster, cfg, reg, seed=seed, bind_async=True, results_mode="simulator")
        sched.start()
        body = json.loads(json.dumps(pod))
        body["metadata"]["namespace"] = ns
        body["spec"]["schedulerName"] = sched_name
        sel = body["spec"].setdefault("nodeSelector", {})
        sel["ksched.io/test-run"] = run  # only this run's nodes, whatever else the API server holds
        client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
        key = f"{ns}/{body['metadata']['name']}"
        deadline = time.monotonic() + timeout
        while sched.results.get(key) is None and time.monotonic() < deadline:
            sched.run(until_idle=True, idle_grace=0.2)
        res = sched.results.get(key)
        sched.stop()
        raw: dict[str, Any] = {}
        while time.monotonic() < deadline:
            raw = client.call("GET", f"/api/v1/namespaces/{ns}/pods/{body['metadata']['name']}")
            if PREFIX + "selected-node" in ((raw.get("metadata") or {}).get("annotations") or {}):
                break
            time.sleep(0.1)
        ann = {k: v for k, v in ((raw.get("metadata") or {}).get("annotations") or {}).items()}
        for k, v in list(ann.items()):
            for real, given in back.items():
                v = v.replace(f'"{real}"', f'"{given}"')
            ann[k] = v
        node = (raw.get("spec") or {}).get("nodeName") or ""
        out = _parse(ann, res.outcome if res else "not attempted", back.get(node, node),
                     (res.message if res else "").replace(f"-{run}", ""))
        mine = set(rename)  # other tests' nodes on a shared API server are not part of the answer
        out.filters = {k: v for k, v in out.filters.items() if k in mine}
        out.scores = {k: v for k, v in out.scores.items() if k in mine}
        out.weighted = {k: v for k, v in out.weighted.items() if k in mine}
        return out
    finally:
        cluster.stop()
        client.request("DELETE", f"/api/v1/namespaces/{ns}")
        for real in rename.values():
            client.request("DELETE", f"/api/v1/nodes/{real}")
        client.close()

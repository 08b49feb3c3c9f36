"""kube-scheduler's scheduler_perf workloads, as data, in memory and against a real API server.

The workloads follow the shapes of kubernetes `test/integration/scheduler_perf` at v1.36 (node, init-pod
and measured-pod templates; the sizes and CI thresholds of its `performance` workloads), written here as
Python data. Differences, kept on purpose: nodes are named `node-<i>` and carry `kubernetes.io/hostname`
(as kubelet-registered nodes do), allocatable equals capacity, and a label strategy assigns values round-robin
instead of at random, so runs are repeatable.

Modes:
  memory  the embedded cluster and the default profile, init pods scheduled first (not measured); prints
          pods/s, p50/p99 scheduling-cycle ms, CPU µs per measured pod, peak RSS.
  e2e     per workload and per scheduler a fresh local control plane (~/.cache/ksched/controlplane): nodes,
          init pods already bound (placed by an in-memory ksched run, so both schedulers start from the same
          cluster), measured pods created, then the scheduler starts (kube-scheduler first, then ksched, same
          clientConnection QPS/burst, ksched with results recording on); pods/s (first to last bind), p50/p99
          start-to-bound seconds, scheduler CPU seconds, peak RSS and the ratios ksched/kube.

Not a test: `python bench/scheduler_perf.py [--mode memory|e2e] [--scale 0.1] [--only A,B] [--growth]
[--feature-gates OpportunisticBatching=false]`.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from e2e_common import CONFIG, ksched_command, measure_scheduler, parallel  # noqa: E402

from scheduler_runtime import gcpolicy  # noqa: E402
from scheduler_runtime.cluster.memory import MemoryCluster  # noqa: E402
from scheduler_runtime.config import load_config  # noqa: E402
from scheduler_runtime.featuregates import parse_feature_gates  # noqa: E402
from scheduler_runtime.plugins.registry import build_registry  # noqa: E402
from scheduler_runtime.scheduler import Scheduler  # noqa: E402

Template = Callable[[int], dict[str, Any]]

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
PAUSE = "registry.k8s.io/pause:3.10"

# ------------------------------------------------------------------------------------------- templates


def _container(cpu: str | None = "100m", memory: str | None = "500Mi", limits: bool = True, port: bool = True,
               extra: dict[str, str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "pause", "image": PAUSE}
    if port:
        c["ports"] = [{"containerPort": 80}]
    req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    req.update(extra or {})
    if req:
        c["resources"] = {"requests": req, **({"limits": dict(req)} if limits else {})}
    return c


def pod_tpl(labels: dict[str, str] | None = None, container: dict[str, Any] | None = None,
            **spec: Any) -> Template:
    """A pod template: `spec` keys are merged into the pod's spec; names are filled in per index."""
    base_container = container if container is not None else _container()

    def make(i: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": f"pod-{i}"}
        if labels:
            meta["labels"] = dict(labels)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"containers": [copy.deepcopy(base_container)], **copy.deepcopy(spec)}}
    return make


def node_tpl(pods: str = "110", labels: Callable[[int], dict[str, str]] | None = None,
             taints: list[dict[str, str]] | None = None, name: str | None = None,
             extra: Callable[[int], dict[str, str]] | None = None) -> Template:
    """node-default.yaml (cpu 4, memory 32Gi, 110 pods, Ready) with optional labels/taints/extra resources."""
    def make(i: int) -> dict[str, Any]:
        nm = name or f"node-{i}"
        cap = {"pods": pods, "cpu": "4", "memory": "32Gi", **(extra(i) if extra else {})}
        meta: dict[str, Any] = {"name": nm, "labels": {HOSTNAME: nm, **(labels(i) if labels else {})}}
        return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"taints": taints} if taints else {},
                "status": {"capacity": cap, "allocatable": dict(cap),
                           "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}}
    return make


def zones(*values: str) -> Callable[[int], dict[str, str]]:
    return lambda i: {ZONE: values[i % len(values)]}


def _term(color: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key,
            "namespaces": ["sched-1", "sched-0"]}


POD_DEFAULT = pod_tpl()
POD_ANTI_AFFINITY = pod_tpl({"color": "green"}, affinity={"podAntiAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME)]}})
POD_ANTI_AFFINITY_LABEL = pod_tpl({"color": "green"})
POD_AFFINITY = pod_tpl({"color": "blue"}, affinity={"podAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE)]}})
POD_PREFERRED_AFFINITY = pod_tpl({"color": "red"}, affinity={"podAffinity": {
    "preferredDuringSchedulingIgnoredDuringExecution": [{"podAffinityTerm": _term("red", HOSTNAME), "weight": 1}]}})
POD_PREFERRED_ANTI_AFFINITY = pod_tpl({"color": "yellow"}, affinity={"podAntiAffinity": {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"podAffinityTerm": _term("yellow", HOSTNAME), "weight": 1}]}})
POD_NODE_AFFINITY = pod_tpl(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}}})


def _spread(when: str, key: str = ZONE, skew: int = 5, **extra: Any) -> Template:
    return pod_tpl({"color": "blue"}, topologySpreadConstraints=[{
        "maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"color": "blue"}}, **extra}])


POD_SPREADING = _spread("DoNotSchedule")
POD_PREFERRED_SPREADING = _spread("ScheduleAnyway")
POD_NODE_INCLUSION = pod_tpl({"foo": "bar"}, topologySpreadConstraints=[{
    "maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
    "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Honor", "labelSelector": {"matchLabels": {"foo": "bar"}}}])
POD_WITH_LABEL = pod_tpl({"app": "scheduler-perf"}, container=_container(None, None, port=False))
POD_DAEMONSET = pod_tpl(container=_container(None, None, port=False), affinity={"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["scheduler-perf-node"]}]}]}}})
POD_LOW_PRIORITY = pod_tpl(container=_container("900m"), terminationGracePeriodSeconds=0)
POD_HIGH_PRIORITY = pod_tpl(container=_container("3000m"), priority=10)
POD_LARGE_CPU = pod_tpl(container=_container("9", limits=False))
POD_HIGH_PRIORITY_LARGE_CPU = pod_tpl(container=_container("9", limits=False), priority=10)
POD_LIGHT = pod_tpl(container=_container(None, None, port=False), terminationGracePeriodSeconds=0)
POD_GATED = pod_tpl(container=_container(None, None, port=False), schedulingGates=[{"name": "test.k8s.io/hold"}])


def pod_extended_resource(i: int) -> dict[str, Any]:
    return pod_tpl(container=_container(None, None, port=False, extra={f"foo.com/bar-{i}": "1"}))(i)


DRA_DRIVER = "test-driver.cdi.k8s.io"
DRA_NAMESPACE = "sched-perf"
DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}}
CLAIM_TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "test-claim-template", "namespace": DRA_NAMESPACE},
                  "spec": {"spec": {"devices": {"requests": [
                      {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}}
POD_WITH_CLAIM = pod_tpl(container={"name": "pause", "image": PAUSE, "resources": {"claims": [{"name": "resource"}]}},
                         resourceClaims=[{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}])


def slice_tpl(devices: int) -> Template:
    """createResourceDriver's slice: one pool per node, `maxClaimsPerNode` devices named item-<k>."""
    def make(i: int) -> dict[str, Any]:
        name = f"node-{i}"
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRA_DRIVER}"},
                "spec": {"driver": DRA_DRIVER, "nodeName": name,
                         "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"item-{k}"} for k in range(devices)]}}
    return make


NODE_DEFAULT = node_tpl()
#: test/integration/scheduler_perf/templates at v1.37: pod-hostport-80.yaml and pod-saturation.yaml
POD_HOSTPORT_80 = pod_tpl(container={"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                     "ports": [{"containerPort": 80, "hostPort": 80}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}})
POD_SATURATION = pod_tpl(container={"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                    "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}})
#: scheduler_perf/batching/scheduler-config-no-topology.yaml
NO_TOPOLOGY = """profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: []
"""
NODE_NAMED = node_tpl(pods="90000", name="scheduler-perf-node")
NODE_TAINTED = node_tpl(taints=[{"key": "foo", "effect": "NoSchedule"}])
NODE_EXTENDED = node_tpl(labels=lambda i: {"node-with-extended-resource": "true"},
                         extra=lambda i: {f"foo.com/bar-{i}": "1"})
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "service-0", "namespace": "service-ns"},
           "spec": {"selector": {"app": "scheduler-perf"}, "ports": [{"protocol": "TCP", "port": 80,
                                                                      "targetPort": 8000}]}}

# ------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Op:
    """One step. kind: nodes | slices (a ResourceSlice per node) | pods | measure | churn (a pod every interval
    while measuring) | delete (the namespace's pods, `rate` per second while measuring)."""

    kind: str
    count: str | int = 0  # a parameter name or a fixed count
    template: Template | None = None
    namespace: str = "default"
    wait: bool = True  # False: upstream's skipWaitToCompletion (pods that stay pending)
    interval: float = 0.2
    rate: float = 0.0


@dataclass
class Workload:
    name: str
    params: dict[str, int]  # upstream's performance size
    ops: list[Op]
    threshold: int | None = None  # upstream CI's pods/s floor for that size
    objects: list[dict[str, Any]] = field(default_factory=list)
    #: YAML of the profile list (`profiles:` onwards) when the workload has its own scheduler configuration
    profiles: str = ""

    def size(self) -> str:
        return "/".join(str(v) for v in self.params.values())


W = Workload
WORKLOADS = [
    W("SchedulingBasic", {"initNodes": 5000, "initPods": 1000, "measurePods": 10000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_DEFAULT),
       Op("measure", "measurePods", POD_DEFAULT)], 680),
    W("SchedulingNodeAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 10000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))), Op("pods", "initPods", POD_NODE_AFFINITY),
       Op("measure", "measurePods", POD_NODE_AFFINITY)], 220),
    W("SchedulingPodAntiAffinity", {"initNodes": 5000, "initPods": 1000, "measurePods": 2000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_ANTI_AFFINITY, "sched-1")], 60),
    W("SchedulingPodAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))), Op("pods", "initPods", POD_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_AFFINITY, "sched-1")], 35),
    W("SchedulingPreferredPodAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_PREFERRED_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_PREFERRED_AFFINITY, "sched-1")], 90),
    W("SchedulingPreferredPodAntiAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_PREFERRED_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_PREFERRED_ANTI_AFFINITY, "sched-1")], 90),
    W("TopologySpreading", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("moon-1", "moon-2", "moon-3"))),
       Op("pods", "initPods", POD_DEFAULT), Op("measure", "measurePods", POD_SPREADING)], 460),
    W("PreferredTopologySpreading", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("moon-1", "moon-2", "moon-3"))),
       Op("pods", "initPods", POD_DEFAULT), Op("measure", "measurePods", POD_PREFERRED_SPREADING)], 340),
    W("SchedulingDaemonset", {"initNodes": 15000, "measurePods": 30000},
      [Op("nodes", 1, NODE_NAMED), Op("nodes", "initNodes", NODE_DEFAULT),
       Op("measure", "measurePods", POD_DAEMONSET)], 1100),
    W("PreemptionBasic", {"initNodes": 1000, "initPods": 4000, "measurePods": 1000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_LOW_PRIORITY),
       Op("measure", "measurePods", POD_HIGH_PRIORITY)]),
    W("MixedSchedulingBasePod", {"initNodes": 5000, "initPods": 2000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))),
       *(Op("pods", "initPods", t, "sched-0") for t in (POD_DEFAULT, POD_AFFINITY, POD_ANTI_AFFINITY,
                                                         POD_PREFERRED_AFFINITY, POD_PREFERRED_ANTI_AFFINITY)),
       Op("measure", "measurePods", POD_DEFAULT)], 140),
    W("PodMatchingAntiAffinity", {"initNodes": 5000, "initPods": 1000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_ANTI_AFFINITY_LABEL, "sched-1")], 595),
    W("DefaultTopologySpreading", {"initNodes": 5000, "initPods": 5000, "measurePods": 10000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("moon-1", "moon-2", "moon-3"))),
       Op("pods", "initPods", POD_DEFAULT), Op("measure", "measurePods", POD_WITH_LABEL, "service-ns")],
      None, [SERVICE]),  # upstream's 160 pods/s floor is for its 50,000-pod size
    W("NodeInclusionPolicy", {"normalNodes": 4000, "taintNodes": 1000, "measurePods": 4000},
      [Op("nodes", "normalNodes", NODE_DEFAULT), Op("nodes", "taintNodes", NODE_TAINTED),
       Op("measure", "measurePods", POD_NODE_INCLUSION)], 270),
    W("PreemptionAsync", {"initNodes": 5000, "initPods": 20000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_LOW_PRIORITY),
       Op("churn", template=POD_HIGH_PRIORITY, namespace="churn"),
       Op("measure", "measurePods", POD_DEFAULT)], 570),
    W("Unschedulable", {"initNodes": 5000, "initPods": 100, "measurePods": 10000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_DEFAULT),
       Op("churn", template=POD_HIGH_PRIORITY_LARGE_CPU, namespace="churn"),
       Op("measure", "measurePods", POD_DEFAULT)], 590),
    W("SchedulingWhileGated", {"gatedPods": 10000, "deletingPods": 20000, "measurePods": 20000},
      [Op("nodes", 1, NODE_NAMED), Op("pods", "gatedPods", POD_GATED, "gated", wait=False),
       Op("pods", "deletingPods", POD_LIGHT, "deleting"), Op("delete", namespace="deleting", rate=50),
       Op("measure", "measurePods", POD_LIGHT)], 910),
    W("SchedulingWithExtendedResource", {"nodesWithExtendedResource": 5000, "measurePods": 5000},
      [Op("nodes", "nodesWithExtendedResource", NODE_EXTENDED),
       Op("measure", "measurePods", pod_extended_resource, "test")], 180),
    # test/integration/scheduler_perf/dra: 5000pods_500nodes, maxClaimsPerNode 10, threshold 56 (queueing hints
    # on); every pod gets its own claim from the template (the embedded cluster / kube-controller-manager's
    # resourceclaim controller create them)
    W("SchedulingWithResourceClaimTemplate", {"initNodes": 500, "initPods": 2500, "measurePods": 2500},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("slices", "initNodes", slice_tpl(10)),
       Op("pods", "initPods", POD_WITH_CLAIM, DRA_NAMESPACE),
       Op("measure", "measurePods", POD_WITH_CLAIM, DRA_NAMESPACE)], 56, [DEVICE_CLASS, CLAIM_TEMPLATE]),
]
# test/integration/scheduler_perf/batching at v1.37 (opportunistic batching, KEP-5598): one pod per node, every
# `signatureBatchSize` measured pods share a "signature" label; upstream has no pods/s floor for them
WORKLOADS += [
    W("HostPortConflict", {"initNodes": 20000, "measurePods": 20000, "signatureBatchSize": 1000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("measure", "measurePods", POD_HOSTPORT_80)],
      profiles=NO_TOPOLOGY),
    W("ResourceSaturation", {"initNodes": 20000, "measurePods": 20000, "signatureBatchSize": 1000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("measure", "measurePods", POD_SATURATION)],
      profiles=NO_TOPOLOGY),
]
BY_NAME = {w.name: w for w in WORKLOADS}


def scaled(w: Workload, scale: float, override: dict[str, int] | None = None) -> dict[str, int]:
    p = {k: max(1, round(v * scale)) for k, v in w.params.items()}
    p.update(override or {})
    return p


def count_of(op: Op, params: dict[str, int]) -> int:
    return op.count if isinstance(op.count, int) else params[op.count]


def _named(tpl: Template, i: int, ns: str, prefix: str) -> dict[str, Any]:
    obj = tpl(i)
    obj["metadata"]["name"] = f"{prefix}-{i}"
    obj["metadata"]["namespace"] = ns
    return obj


def _measured(measure: Op, i: int, params: dict[str, int]) -> dict[str, Any]:
    """Measured pod `i`; with a signatureBatchSize, scheduler_perf's "signature" label changes every so many."""
    obj = _named(measure.template, i, measure.namespace, "m")  # type: ignore[arg-type]
    batch = params.get("signatureBatchSize")
    if batch:
        obj["metadata"].setdefault("labels", {})["signature"] = f"signature-label-{i // batch}"
    return obj


def _feature_gates() -> list[str]:
    """--feature-gates for both schedulers, passed to the memory child through the environment."""
    g = os.environ.get("SCHED_PERF_FEATURE_GATES", "")
    return [g] if g else []


def _config_yaml(w: Workload) -> str:
    return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + w.profiles


def _namespaces(w: Workload) -> set[str]:
    return {op.namespace for op in w.ops if op.kind not in ("nodes", "slices")} | \
        {o["metadata"]["namespace"] for o in w.objects if "namespace" in o["metadata"]}


# ------------------------------------------------------------------------------------------- memory mode


def _node_objects(w: Workload, params: dict[str, int], kind: str = "nodes") -> list[dict[str, Any]]:
    """The nodes (or with kind="slices", the ResourceSlices, numbered like the nodes they belong to)."""
    out: list[dict[str, Any]] = []
    for op in w.ops:
        if op.kind == kind:
            base = len(out)
            out += [op.template(base + i) for i in range(count_of(op, params))]  # type: ignore[misc]
    return out


def _pod_ops(w: Workload) -> list[tuple[int, Op]]:
    return [(k, op) for k, op in enumerate(w.ops) if op.kind == "pods"]


def _background(cluster_create: Callable[[dict[str, Any]], None], cluster_delete: Callable[[str, str], None],
                w: Workload, params: dict[str, int], stop: threading.Event) -> list[threading.Thread]:
    """Churn (a pod every interval) and deletions (a namespace's pods at a rate) while measuring."""
    threads = []
    for k, op in enumerate(w.ops):
        if op.kind == "churn":
            def churn(op: Op = op, k: int = k) -> None:
                i = 0
                while not stop.wait(op.interval):
                    cluster_create(_named(op.template, i, op.namespace, f"churn{k}"))  # type: ignore[arg-type]
                    i += 1
            threads.append(threading.Thread(target=churn, daemon=True))
        elif op.kind == "delete":
            src = next(o for o in w.ops if o.kind == "pods" and o.namespace == op.namespace)
            n = count_of(src, params)
            prefix = f"p{w.ops.index(src)}"

            def delete(op: Op = op, n: int = n, prefix: str = prefix) -> None:
                for i in range(n):
                    if stop.wait(1.0 / op.rate):
                        return
                    cluster_delete(op.namespace, f"{prefix}-{i}")
            threads.append(threading.Thread(target=delete, daemon=True))
    for t in threads:
        t.start()
    return threads


def run_memory(w: Workload, params: dict[str, int], seed: int = 1,
               placements: dict[str, str] | None = None) -> dict[str, Any]:
    """Schedule the init pods (not measured), then the measured ones; `placements` collects init binds."""
    reg = build_registry([])
    gates = parse_feature_gates(_feature_gates())
    if w.profiles:
        path = Path(tempfile.mkdtemp()) / "config.yaml"
        path.write_text(_config_yaml(w))
        cfg = load_config(path, reg, feature_gates=gates)
    else:
        cfg = load_config(None, reg, feature_gates=gates)
    cluster = MemoryCluster()
    for ns in sorted(_namespaces(w)):
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, emit=False)
    for obj in w.objects:
        cluster.create(obj, emit=False)
    for n in _node_objects(w, params) + _node_objects(w, params, "slices"):
        cluster.create(n, emit=False)
    sched = Scheduler(cluster, cfg, reg, seed=seed, record_breakdown=False, feature_gates=gates)
    gcpolicy.tune()  # as the kube-scheduler drop-in does (scheduler_runtime.app)
    sched.start()
    gcpolicy.freeze_synced_state()
    for k, op in _pod_ops(w):
        for i in range(count_of(op, params)):
            cluster.create(_named(op.template, i, op.namespace, f"p{k}"), emit=True)  # type: ignore[arg-type]
        sched.drain_inbox()
        sched.run(until_idle=True)
    if placements is not None:
        for raw in cluster.list("pods"):
            if raw["spec"].get("nodeName"):
                placements[f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"] = raw["spec"]["nodeName"]
    measure = next(op for op in w.ops if op.kind == "measure")
    n_measure = count_of(measure, params)
    for i in range(n_measure):
        cluster.create(_measured(measure, i, params), emit=True)
    sched.drain_inbox()
    sched.keep_cycle_times = True
    sched.cycle_seconds.clear()
    stop = threading.Event()
    threads = _background(lambda o: cluster.create(o, emit=True),
                          lambda ns, name: cluster.delete("pods", name, ns), w, params, stop)
    prof = None
    if os.environ.get("SCHED_PERF_PROFILE"):  # cProfile the measured phase into this file
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    cpu0, t0 = time.process_time(), time.perf_counter()
    bound = 0
    deadline = t0 + float(os.environ.get("SCHED_PERF_TIMEOUT", "600"))
    while True:
        sched.run(until_idle=True)
        bound = sum(1 for raw in cluster.list("pods", measure.namespace)
                    if raw["metadata"]["name"].startswith("m-") and raw["spec"].get("nodeName"))
        if bound >= n_measure or not threads or time.perf_counter() > deadline:
            break
        time.sleep(0.01)  # churn keeps arriving: measured pods waiting on a preemption's victims
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["SCHED_PERF_PROFILE"])
    stop.set()
    for t in threads:
        t.join()
    cycles = sorted(sched.cycle_seconds)
    return {"pods": n_measure, "bound": bound, "seconds": elapsed, "pods_per_second": bound / elapsed,
            "p50_ms": 1000 * statistics.median(cycles) if cycles else 0.0,
            "p99_ms": 1000 * cycles[max(0, int(len(cycles) * 0.99) - 1)] if cycles else 0.0,
            "cpu_us_per_pod": 1e6 * cpu / max(bound, 1),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def memory_in_subprocess(name: str, params: dict[str, int]) -> dict[str, Any]:
    """One workload per process, so peak RSS is the workload's own."""
    import json
    out = subprocess.run([sys.executable, __file__, "--_child", name, json.dumps(params)], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------- e2e mode


def _for_apiserver(obj: dict[str, Any]) -> dict[str, Any]:
    """The Priority admission plugin computes spec.priority from a PriorityClass: name one instead."""
    spec = obj.get("spec") or {}
    if "priority" in spec:
        spec["priorityClassName"] = f"bench-priority-{spec.pop('priority')}"
    return obj


def _uses_claims(w: Workload) -> bool:
    return any(op.template is not None and op.template(0)["spec"].get("resourceClaims") for op in w.ops)


def run_e2e(w: Workload, params: dict[str, int], qps: int) -> list[dict[str, Any]]:
    from scheduler_runtime.cluster.kube import KubeClient, load_connection
    from scheduler_runtime.controlplane import ControlPlane

    placements: dict[str, str] = {}
    if any(op.kind == "pods" for op in w.ops):
        run_memory(w, params, placements=placements)
    rows = []
    for label in ("kube-scheduler", "ksched"):
        with ControlPlane() as cp:
            if _uses_claims(w):  # the resourceclaim controller turns the templates into claims
                cp.start_controller_manager()
            client = KubeClient(load_connection(str(cp.kubeconfig_path)), qps=5000, burst=5000, pool_size=32)
            _populate(client, w, params, placements)
            rows.append(_measure_e2e(cp, client, w, params, label, qps))
    return rows


_RESOURCE = "/apis/resource.k8s.io/v1"


def _object_path(obj: dict[str, Any]) -> str:
    ns = obj["metadata"].get("namespace")
    return {"Service": f"/api/v1/namespaces/{ns}/services",
            "DeviceClass": f"{_RESOURCE}/deviceclasses",
            "ResourceSlice": f"{_RESOURCE}/resourceslices",
            "ResourceClaimTemplate": f"{_RESOURCE}/namespaces/{ns}/resourceclaimtemplates"}[obj["kind"]]


def _populate(client: Any, w: Workload, params: dict[str, int], placements: dict[str, str]) -> None:
    """Namespaces, priority classes, objects, nodes, slices and the init pods (bound where ksched placed them).
    Init pods' claims are created (by kube-controller-manager) but not allocated: both schedulers see the same
    free devices."""
    for ns in sorted(_namespaces(w) - {"default"}):
        client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    for prio in sorted({t(0)["spec"].get("priority") for op in w.ops if (t := op.template)} - {None}):
        client.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"bench-priority-{prio}"}, "value": prio})
    for obj in w.objects:
        client.call("POST", _object_path(obj), body=obj)
    nodes = _node_objects(w, params)
    parallel(lambda n: client.call("POST", "/api/v1/nodes", body=n), nodes)
    parallel(lambda n: client.call(  # the API server adds not-ready taints: back to the template's
        "PATCH", f"/api/v1/nodes/{n['metadata']['name']}", body={"spec": {"taints": n["spec"].get("taints")}},
        content_type="application/merge-patch+json"), nodes)
    parallel(lambda o: client.call("POST", _object_path(o), body=o), _node_objects(w, params, "slices"))
    for k, op in _pod_ops(w):
        def create(i: int, op: Op = op, k: int = k) -> None:
            obj = _for_apiserver(_named(op.template, i, op.namespace, f"p{k}"))  # type: ignore[arg-type]
            node = placements.get(f"{op.namespace}/p{k}-{i}")
            if node:
                obj["spec"]["nodeName"] = node
            client.call("POST", f"/api/v1/namespaces/{op.namespace}/pods", body=obj)
        parallel(create, range(count_of(op, params)))


def _wait_for_claims(client: Any, ns: str, want: int, timeout: float = 300.0) -> None:
    """Until kube-controller-manager has created a claim for every pod (the measured ones included), so
    neither scheduler's figures include the controller's pace."""
    deadline = time.monotonic() + timeout
    while True:
        have = len(client.call("GET", f"{_RESOURCE}/namespaces/{ns}/resourceclaims").get("items") or [])
        if have >= want:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {have}/{want} ResourceClaims in {ns} after {timeout:.0f}s")
        time.sleep(1)


def _measure_e2e(cp: Any, client: Any, w: Workload, params: dict[str, int], label: str, qps: int
                 ) -> dict[str, Any]:
    measure = next(op for op in w.ops if op.kind == "measure")
    ns, n_pods = measure.namespace, count_of(measure, params)
    parallel(lambda i: client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_for_apiserver(
        _measured(measure, i, params))), range(n_pods))
    if _uses_claims(w):
        _wait_for_claims(client, ns, n_pods + sum(count_of(op, params) for _, op in _pod_ops(w)
                                                  if op.namespace == ns))
    cfg = Path(tempfile.mkdtemp()) / "config.yaml"
    cfg.write_text(CONFIG.format(kubeconfig=cp.kubeconfig_path, qps=qps, burst=qps) + w.profiles)
    gate_flags = [f"--feature-gates={g}" for g in _feature_gates()]
    if label == "kube-scheduler":
        cmd = [str(cp.bin_dir / "kube-scheduler"), f"--config={cfg}", "--secure-port=0", *gate_flags]
    else:
        cmd = ksched_command(cfg, "--results=ksched", *gate_flags)

    def create(o: dict[str, Any]) -> None:
        client.call("POST", f"/api/v1/namespaces/{o['metadata']['namespace']}/pods", body=_for_apiserver(o))

    def delete(namespace: str, name: str) -> None:
        try:
            client.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0})
        except Exception:  # noqa: BLE001 - already gone
            pass

    def during() -> Callable[[], None]:
        stop = threading.Event()
        threads = _background(create, delete, w, params, stop)

        def end() -> None:
            stop.set()
            for t in threads:
                t.join()
        return end

    return measure_scheduler(client, cp.dir / f"{label}.log", label, cmd, ns, n_pods, prefix="m-",
                             timeout=float(os.environ.get("SCHED_PERF_TIMEOUT", "900")), during=during)


# ------------------------------------------------------------------------------------------- main

GROWTH = ("SchedulingBasic", "TopologySpreading", "SchedulingPodAntiAffinity", "SchedulingDaemonset")


def growth_params(w: Workload, nodes: int) -> dict[str, int]:
    """The workload at `nodes` nodes: init and measured pods in upstream's proportion to nodes, at most
    1,000 measured (so anti-affinity pods still fit one per node)."""
    p = dict(w.params)
    node_key = "initNodes"
    ratio = nodes / p[node_key]
    p[node_key] = nodes
    if "initPods" in p:
        p["initPods"] = max(1, round(p["initPods"] * ratio))
    p["measurePods"] = min(1000, max(1, round(p["measurePods"] * ratio)))
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["memory", "e2e"], default="memory")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every count (nodes, pods) by this")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--qps", type=int, default=5000, help="e2e: clientConnection qps and burst for both")
    ap.add_argument("--feature-gates", default="",
                    help="kube-scheduler's --feature-gates for both schedulers, e.g. OpportunisticBatching=false")
    ap.add_argument("--growth", action="store_true",
                    help="memory: per-pod CPU µs at 1k/5k/15k nodes for " + ", ".join(GROWTH))
    ap.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.feature_gates:
        parse_feature_gates([args.feature_gates])  # refused here, with kube's message, before any run
        os.environ["SCHED_PERF_FEATURE_GATES"] = args.feature_gates
    if args._child:
        import json
        print(json.dumps(run_memory(BY_NAME[args._child[0]], json.loads(args._child[1]))))
        return
    names = [n for n in args.only.split(",") if n] or [w.name for w in WORKLOADS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    if args.growth:
        print(f"{'per-pod CPU µs (memory)':<28}" + "".join(f"{f'{n // 1000}k nodes':>12}" for n in (1000, 5000, 15000)))
        for name in [n for n in GROWTH if n in names]:
            cells = []
            for nodes in (1000, 5000, 15000):
                r = memory_in_subprocess(name, growth_params(BY_NAME[name], nodes))
                cells.append(f"{r['cpu_us_per_pod']:>12.0f}" if "error" not in r else f"{'error':>12}")
            print(f"{name:<28}" + "".join(cells), flush=True)
        return
    if args.mode == "memory":
        # pods/CPU-s: measured pods per second of this process's CPU time, the figure that does not depend
        # on how many other processes share the cores
        print(f"{'workload':<34}{'size':>20}{'pods/s':>9}{'pods/CPU-s':>11}{'2x floor':>9}{'p50 ms':>8}"
              f"{'p99 ms':>8}{'CPU µs/pod':>11}{'RSS MB':>8}")
        for name in names:
            w = BY_NAME[name]
            params = scaled(w, args.scale)
            r = memory_in_subprocess(name, params)
            size = "/".join(str(v) for v in params.values())
            if "error" in r:
                print(f"{name:<34}{size:>20}  error: {r['error']}", flush=True)
                continue
            target = f"{2 * w.threshold}" if w.threshold else "-"
            print(f"{name:<34}{size:>20}{r['pods_per_second']:>9.0f}{1e6 / max(r['cpu_us_per_pod'], 1e-9):>11.0f}"
                  f"{target:>9}{r['p50_ms']:>8.2f}"
                  f"{r['p99_ms']:>8.2f}{r['cpu_us_per_pod']:>11.0f}{r['peak_rss_mb']:>8.0f}", flush=True)
            if r["bound"] != r["pods"]:
                print(f"  note: {r['bound']} of {r['pods']} measured pods bound", flush=True)
        return
    print(f"{'workload':<34}{'size':>20} {'scheduler':<16}{'pods/s':>8}{'p50 s':>7}{'p99 s':>7}{'CPU s':>7}"
          f"{'ms/pod':>7}{'RSS MB':>8}")
    for name in names:
        w = BY_NAME[name]
        params = scaled(w, args.scale)
        size = "/".join(str(v) for v in params.values())
        rows = run_e2e(w, params, args.qps)
        for r in rows:
            if "error" in r:
                print(f"{name:<34}{size:>20} {r['label']:<16}error: {r['error']}", flush=True)
                continue
            print(f"{name:<34}{size:>20} {r['label']:<16}{r['pods_per_second']:>8.0f}{r['p50']:>7.2f}"
                  f"{r['p99']:>7.2f}{r['cpu']:>7.1f}{r['cpu_ms_per_pod']:>7.2f}{r['rss']:>8.0f}", flush=True)
        k, o = rows
        if "error" not in k and "error" not in o:
            print(f"{'':<34}{'':>20} {'ratio ksched/kube':<16}{o['pods_per_second'] / k['pods_per_second']:>8.2f}"
                  f"{o['p50'] / max(k['p50'], 1e-3):>7.2f}{o['p99'] / max(k['p99'], 1e-3):>7.2f}"
                  f"{o['cpu'] / max(k['cpu'], 0.01):>7.2f}{'':>7}{o['rss'] / max(k['rss'], 1):>8.2f}", flush=True)


if __name__ == "__main__":
    main()

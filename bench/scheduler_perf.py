"""kube-scheduler's scheduler_perf workloads, as data, in memory and against a real API server.

The workloads are kubernetes `test/integration/scheduler_perf` ones written as Python data: its node, init-pod and
measured-pod templates, the sizes of its `performance` workloads and their pods/s floors (`threshold`), all
v1.37.2's (checked against that tag's performance-config.yaml files and templates, field by field for the pod
templates, pause image tags included). PreemptionBasic's preemptor and PreemptionAsync's churn pod are
default_preemption/templates/pod-high-priority.yaml (3970m CPU, priority 9999999, no port,
terminationGracePeriodSeconds 0): of a node's 4 CPUs it leaves 30m, so it fits only where every other pod is
evicted (the low-priority ones ask 900m each). The floors of the affinity workloads are v1.37.2's single ones
(v1.36.3 had two variants of each, with and without queueing hints, most with lower floors). Differences kept on
purpose: nodes are named `node-<i>` and carry `kubernetes.io/hostname` (as kubelet-registered nodes do), pods are
named `<prefix>-<i>` (upstream's templates use generateName or names of their own), allocatable equals capacity, a
label strategy assigns values round-robin instead of at random, so runs are repeatable, the extended-resource
DeviceClasses are written at resource.k8s.io/v1 (upstream's template: v1beta2, the same object), and
PodMatchingAntiAffinity is upstream's SchedulingPodMatchingAntiAffinity. The DRA workloads' sizes and floors match
`scheduler_perf/dra` at v1.37.2 (the bare SchedulingWithResourceClaimTemplate keeps an earlier release's shape);
its steady-state variants keep a few measured pods pending for a fixed time, deleting each pod once bound (which
releases its claim) and creating the next, and report pods/s over that window (which --scale leaves as is).

Modes:
  memory  the embedded cluster and the default profile, init pods scheduled first (not measured); prints
          pods/s, p50/p99 scheduling-cycle ms, CPU µs per measured pod, peak RSS.
  e2e     per workload and per scheduler a fresh local control plane (~/.cache/ksched/controlplane): nodes,
          init pods already bound (placed by an in-memory ksched run, so both schedulers start from the same
          cluster), measured pods created, then the scheduler starts (kube-scheduler first, then ksched, same
          clientConnection QPS/burst, ksched with results recording on); pods/s (first to last bind), p50/p99
          start-to-bound seconds, scheduler CPU seconds, peak RSS and the ratios ksched/kube.

Not a test: `python bench/scheduler_perf.py [--mode memory|e2e] [--scale 0.1] [--only A,B] [--growth]
[--feature-gates OpportunisticBatching=false]`. In e2e mode SCHED_PERF_KUBE_FLAGS and SCHED_PERF_KSCHED_FLAGS add
flags to one scheduler's command (e.g. `--v=3`: kube-scheduler's per-pod queue log in the control plane's
kube-scheduler.log, which the run removes at its end); SCHED_PERF_TIMELINE=DIR writes each run's bind times
(seconds from the scheduler's start, one per line) to DIR. ksched runs from the checkout the bench is in.
"""

from __future__ import annotations

import argparse
import copy
import itertools
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
#: the pause image tags of v1.37.2's templates (each template names its own; no effect on scheduling)
PAUSE = "registry.k8s.io/pause:3.10.1"
PAUSE_3_10_2 = "registry.k8s.io/pause:3.10.2"
PAUSE_3_9 = "registry.k8s.io/pause:3.9"

# ------------------------------------------------------------------------------------------- templates


def _container(cpu: str | None = "100m", memory: str | None = "500Mi", limits: bool = True, port: bool = True,
               extra: dict[str, str] | None = None, image: str = PAUSE) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "pause", "image": image}
    if port:
        c["ports"] = [{"containerPort": 80}]
    req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    req.update(extra or {})
    if req:
        c["resources"] = {"requests": req, **({"limits": dict(req)} if limits else {})}
    return c


def pod_tpl(labels: dict[str, str] | None = None, container: dict[str, Any] | None = None,
            **spec: Any) -> Template:
    """A pod template: `spec` keys are merged into the pod's spec; names are filled in per index. The default
    container is pod-default.yaml's (100m CPU and 500Mi requested and limited, port 80, pause 3.10.2)."""
    base_container = container if container is not None else _container(image=PAUSE_3_10_2)

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
POD_ANTI_AFFINITY_LABEL = pod_tpl({"color": "green"}, container=_container())
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
POD_NODE_INCLUSION = pod_tpl({"foo": "bar"}, container=_container(), topologySpreadConstraints=[{
    "maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
    "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Honor", "labelSelector": {"matchLabels": {"foo": "bar"}}}])
POD_WITH_LABEL = pod_tpl({"app": "scheduler-perf"}, container=_container(None, None, port=False))
POD_DAEMONSET = pod_tpl(container=_container(None, None, port=False), affinity={"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["scheduler-perf-node"]}]}]}}})
POD_LOW_PRIORITY = pod_tpl(container=_container("900m"), terminationGracePeriodSeconds=0)
POD_LARGE_CPU = pod_tpl(container=_container("9", limits=False))
POD_HIGH_PRIORITY_LARGE_CPU = pod_tpl(container=_container("9", limits=False), priority=10)
#: default_preemption/templates/pod-high-priority.yaml (v1.37.2's PreemptionBasic preemptor and PreemptionAsync
#: churn pod): 3970m CPU, so it fits only on a node emptied of every other pod; priority 9999999
POD_PREEMPTOR = pod_tpl(container=_container("3970m", port=False, image=PAUSE_3_10_2), terminationGracePeriodSeconds=0,
                        priority=9999999)
POD_LIGHT = pod_tpl(container=_container(None, None, port=False), terminationGracePeriodSeconds=0)
POD_GATED = pod_tpl(container=_container(None, None, port=False), schedulingGates=[{"name": "test.k8s.io/hold"}])


def pod_extended_resource(i: int) -> dict[str, Any]:
    """misc/templates/pod-with-extended-resource.yaml: pod i requests (and limits) one foo.com/bar-<i>."""
    return pod_tpl(container=_container(None, None, port=False, extra={f"foo.com/bar-{i}": "1"}, image=PAUSE_3_9))(i)


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


# scheduler_perf/dra/templates at v1.37, the shapes its performance-config.yaml files create
#: node-with-dra-test-driver.yaml: node-default.yaml's capacity and the label network-attached slices could select
NODE_DRA = node_tpl(labels=lambda i: {"node-with-dra": "true"})
#: resourceslice-basic-devices.yaml: an Intel GPU's attributes (driverVersion for semver selectors, two PCI-root
#: attributes cycling through `pci_roots` values for matchAttribute) and memory/millicores capacity
_BASIC_ATTRS = {"driver": {"string": "xe"}, "driverVersion": {"version": "1.2.3"},
                "family": {"string": "Arc Pro B-Series"}, "health": {"string": "Healthy"},
                "model": {"string": "B60"}, "pciId": {"string": "0xe211"}, "sriov": {"bool": True},
                "type": {"string": "gpu"}}


def basic_slice_tpl(devices: int = 10, pci_roots: int = 2) -> Template:
    """One slice and pool per node, `devices` GPUs whose PCI root cycles through `pci_roots` values (so a
    matchAttribute on it has to skip every other device)."""
    def device(k: int) -> dict[str, Any]:
        root = k % pci_roots
        attrs = {**_BASIC_ATTRS, "resource.k8s.io/pciRoot": {"string": str(root)},
                 "pciAddress": {"string": f"0000:0{k}:00.0"}, "pciRoot": {"string": f"0{root}"},
                 "resource.kubernetes.io/pciBusID": {"string": f"0000:0{k}:00.0"},
                 "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"}}
        return {"name": f"basic-device-{k}", "attributes": attrs,
                "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}}

    def make(i: int) -> dict[str, Any]:
        pool = f"resourceslice-{i}"
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": pool},
                "spec": {"driver": DRA_DRIVER, "nodeName": f"node-{i}",
                         "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                         "devices": [device(k) for k in range(devices)]}}
    return make


def claim_template(requests: int = 1, selectors: list[dict[str, Any]] | None = None,
                   constraints: list[dict[str, Any]] | None = None, namespace: str = "test") -> dict[str, Any]:
    """resourceclaimtemplate.yaml: `requests` requests req-<k> for one test-class device each, all with the
    same selectors, plus the claim's constraints."""
    exactly: dict[str, Any] = {"deviceClassName": "test-class"}
    if selectors:
        exactly["selectors"] = selectors
    devices: dict[str, Any] = {"requests": [{"name": f"req-{k}", "exactly": dict(exactly)} for k in range(requests)]}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "test-claim-template", "namespace": namespace}, "spec": {"spec": {"devices": devices}}}


def claim_tpl(i: int) -> dict[str, Any]:
    """resourceclaim.yaml: test-claim-<i>, one test-class device (the namespace is the op's)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"test-claim-{i}"},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}


_CLAIM_CONTAINER = {"name": "pause", "image": PAUSE,
                    "resources": {"claims": [{"name": "resource"}]}}
#: pod-with-claim-template.yaml
POD_WITH_CLAIM_TEMPLATE = pod_tpl(container=_CLAIM_CONTAINER, resourceClaims=[
    {"name": "resource", "resourceClaimTemplateName": "test-claim-template"}])


def pod_with_claim_ref(i: int) -> dict[str, Any]:
    """pod-with-claim-ref.yaml: five pods in a row share claim test-claim-<i // 5>."""
    return pod_tpl(container={**_CLAIM_CONTAINER, "image": PAUSE_3_9}, resourceClaims=[
        {"name": "resource", "resourceClaimName": f"test-claim-{i // 5}"}])(i)


#: the CEL selector of the "selector" variants: every device matches, but both clauses must be evaluated
DRIVER_VERSION_SELECTOR = [{"cel": {"expression": (
    f'device.attributes["{DRA_DRIVER}"].driverVersion.major() >= 1 && '
    f'device.capacity["{DRA_DRIVER}"].memory.isGreaterThan(quantity("1Mi"))')}}]


def extended_classes(classes: int, explicit: bool) -> list[dict[str, Any]]:
    """deviceclass-extended-resource.yaml times `classes`: test-class-<k>, each selecting every device; with
    `explicit` it backs example.com/gpu-<k>, otherwise only its implicit deviceclass.resource.kubernetes.io name."""
    out = []
    for k in range(classes):
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}
        if explicit:
            spec["extendedResourceName"] = f"example.com/gpu-{k}"
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": f"test-class-{k}"}, "spec": spec})
    return out


def pod_extended_dra(resource: str, classes: int) -> Template:
    """pod-with-extended-resource.yaml: pod i requests (and limits) one `<resource>-<i % classes>`."""
    def make(i: int) -> dict[str, Any]:
        return pod_tpl(container=_container(None, None, port=False, extra={f"{resource}-{i % classes}": "1"},
                                            image=PAUSE_3_9))(i)
    return make


NODE_DEFAULT = node_tpl()
#: test/integration/scheduler_perf/templates at v1.37: pod-hostport-80.yaml and pod-saturation.yaml
POD_HOSTPORT_80 = pod_tpl(container={"name": "pause", "image": PAUSE,
                                     "ports": [{"containerPort": 80, "hostPort": 80}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}})
POD_SATURATION = pod_tpl(container={"name": "pause", "image": PAUSE,
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
    """One step. kind: nodes | slices (a ResourceSlice per node) | claims (ResourceClaims named by the template,
    in the namespace) | alloc (upstream's allocResourceClaims: the namespace's claims allocated before any pod,
    no pod reserving them) | pods | measure | churn (a pod every interval while measuring) | delete (the
    namespace's pods, `rate` per second while measuring)."""

    kind: str
    count: str | int = 0  # a parameter name or a fixed count
    template: Template | None = None
    namespace: str = "default"
    wait: bool = True  # False: upstream's skipWaitToCompletion (pods that stay pending)
    interval: float = 0.2
    rate: float = 0.0
    #: measure only: upstream's steadyState for this many seconds (`count` pods pending at any time, each
    #: bound one deleted and replaced); 0 measures how fast `count` pods created at once get bound
    duration: float = 0.0


@dataclass
class Workload:
    name: str
    params: dict[str, int]  # upstream's performance size
    ops: list[Op]
    threshold: int | None = None  # upstream CI's pods/s floor for that size
    objects: list[dict[str, Any]] = field(default_factory=list)
    #: YAML of the profile list (`profiles:` onwards) when the workload has its own scheduler configuration
    profiles: str = ""
    #: count -> (count, n): derived as ceil(that count / n) after scaling
    per: dict[str, tuple[str, int]] = field(default_factory=dict)

    def size(self) -> str:
        return "/".join(str(v) for v in self.params.values())


W = Workload
WORKLOADS = [
    W("SchedulingBasic", {"initNodes": 5000, "initPods": 1000, "measurePods": 10000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_DEFAULT),
       Op("measure", "measurePods", POD_DEFAULT)], 680),
    W("SchedulingNodeAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 10000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))), Op("pods", "initPods", POD_NODE_AFFINITY),
       Op("measure", "measurePods", POD_NODE_AFFINITY)], 540),
    W("SchedulingPodAntiAffinity", {"initNodes": 5000, "initPods": 1000, "measurePods": 2000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_ANTI_AFFINITY, "sched-1")], 180),
    W("SchedulingPodAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))), Op("pods", "initPods", POD_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_AFFINITY, "sched-1")], 70),
    W("SchedulingPreferredPodAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_PREFERRED_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_PREFERRED_AFFINITY, "sched-1")], 160),
    W("SchedulingPreferredPodAntiAffinity", {"initNodes": 5000, "initPods": 5000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_PREFERRED_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_PREFERRED_ANTI_AFFINITY, "sched-1")], 190),
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
       Op("measure", "measurePods", POD_PREEMPTOR)]),
    W("MixedSchedulingBasePod", {"initNodes": 5000, "initPods": 2000, "measurePods": 5000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("zone1"))),
       *(Op("pods", "initPods", t, "sched-0") for t in (POD_DEFAULT, POD_AFFINITY, POD_ANTI_AFFINITY,
                                                         POD_PREFERRED_AFFINITY, POD_PREFERRED_ANTI_AFFINITY)),
       Op("measure", "measurePods", POD_DEFAULT)], 540),
    W("PodMatchingAntiAffinity", {"initNodes": 5000, "initPods": 1000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_ANTI_AFFINITY, "sched-0"),
       Op("measure", "measurePods", POD_ANTI_AFFINITY_LABEL, "sched-1")], 540),
    W("DefaultTopologySpreading", {"initNodes": 5000, "initPods": 5000, "measurePods": 10000},
      [Op("nodes", "initNodes", node_tpl(labels=zones("moon-1", "moon-2", "moon-3"))),
       Op("pods", "initPods", POD_DEFAULT), Op("measure", "measurePods", POD_WITH_LABEL, "service-ns")],
      None, [SERVICE]),  # upstream's 160 pods/s floor is for its 50,000-pod size
    W("NodeInclusionPolicy", {"normalNodes": 4000, "taintNodes": 1000, "measurePods": 4000},
      [Op("nodes", "normalNodes", NODE_DEFAULT), Op("nodes", "taintNodes", NODE_TAINTED),
       Op("measure", "measurePods", POD_NODE_INCLUSION)], 270),
    W("PreemptionAsync", {"initNodes": 5000, "initPods": 20000, "measurePods": 5000},
      [Op("nodes", "initNodes", NODE_DEFAULT), Op("pods", "initPods", POD_LOW_PRIORITY),
       Op("churn", template=POD_PREEMPTOR, namespace="churn"),
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
    # test/integration/scheduler_perf/dra: 5000pods_500nodes in its earlier shape (kept so figures stay
    # comparable; v1.37's is SchedulingWithResourceClaimTemplate/5000pods_500nodes below): maxClaimsPerNode 10
    # devices without attributes, half of them taken by init pods, threshold 56 (queueing hints on); every pod
    # gets its own claim from the template (the embedded cluster / kube-controller-manager's resourceclaim
    # controller create them)
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


def _rct(name: str, init_claims: int, threshold: int, measure_pods: int = 10, duration: float = 10.0,
         requests: int = 1, selectors: list[dict[str, Any]] | None = None,
         constraints: list[dict[str, Any]] | None = None) -> Workload:
    """A SchedulingWithResourceClaimTemplate variant: 500 nodes of 10 GPUs, `init_claims` of them allocated
    directly, then by default (steady state) 10 pods pending for 10 s, each bound one replaced by a new one."""
    return W(f"SchedulingWithResourceClaimTemplate/{name}",
             {"nodesWithDRA": 500, "initClaims": init_claims, "measurePods": measure_pods},
             [Op("nodes", "nodesWithDRA", NODE_DRA), Op("slices", "nodesWithDRA", basic_slice_tpl(10)),
              Op("claims", "initClaims", claim_tpl, "init"), Op("alloc", namespace="init"),
              Op("measure", "measurePods", POD_WITH_CLAIM_TEMPLATE, "test", duration=duration)],
             threshold, [DEVICE_CLASS, claim_template(requests, selectors, constraints)])


def _extended(name: str, resource: str, classes: int, explicit: bool, threshold: int) -> Workload:
    """An ExtendedResource variant: pods ask for `<resource>-<i % classes>`, which DRA devices back."""
    pod = pod_extended_dra(resource, classes)
    return W(f"ExtendedResource/{name}", {"nodesWithDRA": 500, "initPods": 2500, "measurePods": 2500},
             [Op("nodes", "nodesWithDRA", NODE_DRA), Op("slices", "nodesWithDRA", basic_slice_tpl(10)),
              Op("pods", "initPods", pod, "init"), Op("measure", "measurePods", pod, "test")],
             threshold, extended_classes(classes, explicit))


#: extendedresource/scoring/scheduler-config.yaml: LeastAllocated also weighing example.com/gpu
EXTENDED_SCORING = """profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
        - name: example.com/gpu
          weight: 1
"""
#: deviceclass-extended-resource-scoring.yaml: 20 classes all backing the one example.com/gpu
SCORING_CLASSES = [{**c, "metadata": {"name": f"scoring-{c['metadata']['name']}"},
                    "spec": {**c["spec"], "extendedResourceName": "example.com/gpu"}}
                   for c in extended_classes(20, explicit=False)]
#: pod-with-extended-resource-scoring.yaml
POD_EXTENDED_SCORING = pod_tpl(container=_container(None, None, port=False, extra={"example.com/gpu": "1"},
                                                    image=PAUSE_3_9))

# test/integration/scheduler_perf/dra at v1.37 (performance-config.yaml, extendedresource/ and its scoring/): the
# variants labelled `performance`, their sizes and CI floors (all with 0 nodes without DRA). Not here:
# PublishResourceSlices (times slice ingestion, no pods), distinct_* (commented out upstream), the
# fast/100nodes/200nodes sizes; and the other folders' workloads, alpha-gated ones among them: CompatibilityGroups
# (DRADeviceCompatibilityGroups), SchedulingWithResourceClaimTemplateListAttributes (DRAListTypeAttributes),
# SharedPodGroupResourceClaim* (DRAWorkloadResourceClaims, beta but off by default, and GenericWorkload).
WORKLOADS += [
    # the bare SchedulingWithResourceClaimTemplate above in v1.37's shape: half the devices taken by claims
    # allocated before any pod, not by init pods, and 2,500 pods created at once
    _rct("5000pods_500nodes", 2500, 56, measure_pods=2500, duration=0.0),
    _rct("empty_500nodes", 0, 64),
    _rct("half_500nodes", 2500, 60),  # half the devices in use
    _rct("full_500nodes", 4990, 60),  # room for exactly 10 more pods
    _rct("selector_empty_500nodes", 0, 64, selectors=DRIVER_VERSION_SELECTOR),
    # five requests on one PCI root: half a node per pod, every other device skipped
    _rct("match_empty_500nodes", 0, 64, requests=5,
         constraints=[{"matchAttribute": "resource.kubernetes.io/pciRoot"}]),
    # claims with fixed names, five pods sharing each, 2 devices per node; upstream's largest size (it has no
    # `performance` variant and no floor)
    W("SchedulingWithResourceClaim",
      {"nodesWithDRA": 500, "initPods": 2500, "initClaims": 500, "measurePods": 2500, "measureClaims": 500},
      [Op("nodes", "nodesWithDRA", NODE_DRA), Op("slices", "nodesWithDRA", basic_slice_tpl(2)),
       Op("claims", "initClaims", claim_tpl, "init"), Op("pods", "initPods", pod_with_claim_ref, "init"),
       Op("claims", "measureClaims", claim_tpl, "test"), Op("measure", "measurePods", pod_with_claim_ref, "test")],
      None, [DEVICE_CLASS], per={"initClaims": ("initPods", 5), "measureClaims": ("measurePods", 5)}),
    _extended("Explicit_25classes_5000pods_500nodes", "example.com/gpu", 25, True, 120),
    _extended("Explicit_50classes_5000pods_500nodes", "example.com/gpu", 50, True, 130),
    _extended("Implicit_25classes_5000pods_500nodes", "deviceclass.resource.kubernetes.io/test-class", 25, False,
              130),
    W("ExtendedResourceScoring/5000pods_500nodes", {"nodesWithDRA": 500, "measurePods": 5000},
      [Op("nodes", "nodesWithDRA", NODE_DRA), Op("slices", "nodesWithDRA", basic_slice_tpl(10)),
       Op("measure", "measurePods", POD_EXTENDED_SCORING, "test")],
      70, SCORING_CLASSES, profiles=EXTENDED_SCORING),
]
BY_NAME = {w.name: w for w in WORKLOADS}


def scaled(w: Workload, scale: float, override: dict[str, int] | None = None) -> dict[str, int]:
    """Every count times `scale`, at least 1 (0 stays 0: an empty cluster stays empty), then the counts
    derived from others (`per`), so claims shared by five pods still cover every pod."""
    p = {k: max(1, round(v * scale)) if v else 0 for k, v in w.params.items()}
    for k, (src, n) in w.per.items():
        p[k] = -(-p[src] // n)
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


def _allocation(node: str, picks: list[tuple[str, str, str]]) -> dict[str, Any]:
    """A claim's status.allocation: (request, pool, device) results on `node`, with the node selector the
    structured allocator gives node-local devices."""
    return {"devices": {"results": [{"request": r, "driver": DRA_DRIVER, "pool": pool, "device": dev}
                                    for r, pool, dev in picks]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def _claim_objects(w: Workload, params: dict[str, int], slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims ops' ResourceClaims; those in an alloc op's namespace carry the allocation upstream's
    allocResourceClaims gives them. Its claims ask for one test-class device per request, a class every
    device matches, so a device is any free one; upstream tries the nodes in random order, here claim j starts
    at node j (round-robin, as repeatable as the rest of this file)."""
    claims: list[dict[str, Any]] = []
    for op in w.ops:
        if op.kind == "claims":
            for i in range(count_of(op, params)):
                c = op.template(i)  # type: ignore[misc]
                c["metadata"]["namespace"] = op.namespace
                claims.append(c)
    alloc_ns = {op.namespace for op in w.ops if op.kind == "alloc"}
    free = [(s["spec"]["nodeName"], s["spec"]["pool"]["name"], [d["name"] for d in s["spec"]["devices"]])
            for s in slices]
    j = 0
    for c in claims:
        if c["metadata"]["namespace"] not in alloc_ns:
            continue
        requests = [r["name"] for r in c["spec"]["devices"]["requests"]]
        for k in range(len(free)):
            node, pool, devices = free[(j + k) % len(free)]
            if len(devices) >= len(requests):
                c["status"] = {"allocation": _allocation(node, [(r, pool, devices.pop(0)) for r in requests])}
                break
        else:
            raise SystemExit(f"alloc: no node has {len(requests)} free devices for claim {c['metadata']['name']}")
        j += 1
    return claims


def _double_allocated(claims: list[dict[str, Any]]) -> list[str]:
    """Devices that more than one claim's allocation holds (none, unless the scheduler over-allocated)."""
    seen: dict[tuple[str, str, str], int] = {}
    for c in claims:
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            key = (r.get("driver"), r.get("pool"), r.get("device"))
            seen[key] = seen.get(key, 0) + 1
    return sorted("/".join(k) for k, n in seen.items() if n > 1)


class _EverBound:
    """Measured pods (`<namespace>/m-<i>`) the embedded cluster has bound at least once, read from its binding
    log a batch at a time. A measured pod preempted after binding still counts: the embedded cluster deletes a
    victim at once, while upstream's scheduler_perf (an API server, no kubelet) keeps a bound victim with the
    default 30 s grace period Terminating with its nodeName, so its wait for scheduled pods still counts it."""

    def __init__(self, cluster: MemoryCluster, namespace: str) -> None:
        self.cluster, self.prefix = cluster, f"{namespace}/m-"
        self.keys: set[str] = set()
        self.seen = 0

    def count(self) -> int:
        log = self.cluster.bindings
        end = len(log)
        self.keys.update(key for key, _ in itertools.islice(log, self.seen, end) if key.startswith(self.prefix))
        self.seen = end
        return len(self.keys)

    def preempted(self) -> int:
        """Measured pods bound and then deleted as preemption victims."""
        return len({key for key in self.cluster.deleted if key.startswith(self.prefix)} & self.keys)


def run_memory(w: Workload, params: dict[str, int], seed: int = 1, placements: dict[str, str] | None = None,
               allocations: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Schedule the init pods (not measured), then the measured ones; `placements` collects init binds and
    `allocations` the allocations of the named claims the init pods use (for e2e mode to start from)."""
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
    slices = _node_objects(w, params, "slices")
    for n in _node_objects(w, params) + slices + _claim_objects(w, params, slices):
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
    if allocations is not None:
        pod_ns = {op.namespace for _, op in _pod_ops(w)}
        for raw in cluster.list("resourceclaims"):
            m = raw["metadata"]
            alloc = (raw.get("status") or {}).get("allocation")
            if alloc and m["namespace"] in pod_ns and not m.get("ownerReferences"):
                allocations[f"{m['namespace']}/{m['name']}"] = copy.deepcopy(alloc)
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
    ever_bound = _EverBound(cluster, measure.namespace)
    deadline = t0 + float(os.environ.get("SCHED_PERF_TIMEOUT", "600"))
    if measure.duration:  # steady state: each bound pod deleted (its claim released) and replaced at once
        created = n_measure
        while time.perf_counter() - t0 < measure.duration:
            sched.run(until_idle=True)
            done = [raw["metadata"]["name"] for raw in cluster.list("pods", measure.namespace)
                    if raw["spec"].get("nodeName")]
            for name in done:
                cluster.delete("pods", name, measure.namespace)
                cluster.create(_measured(measure, created, params), emit=True)
                created += 1
            bound += len(done)
            if not done:
                time.sleep(0.01)  # nothing fits: wait for the clock (a scaled-down "full" may have no room)
        n_measure = created
    while not measure.duration:
        sched.run(until_idle=True)
        bound = ever_bound.count()
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
            "steady": bool(measure.duration), "preempted": 0 if measure.duration else ever_bound.preempted(),
            "p50_ms": 1000 * statistics.median(cycles) if cycles else 0.0,
            "p99_ms": 1000 * cycles[max(0, int(len(cycles) * 0.99) - 1)] if cycles else 0.0,
            "cpu_us_per_pod": 1e6 * cpu / max(bound, 1),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "double_allocated": _double_allocated(cluster.list("resourceclaims"))}


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


def _uses_templates(w: Workload) -> bool:
    """Pods whose claims come from a ResourceClaimTemplate (kube-controller-manager creates those)."""
    return any(op.template is not None and op.kind in ("pods", "measure") and any(
        "resourceClaimTemplateName" in r for r in op.template(0)["spec"].get("resourceClaims") or [])
        for op in w.ops)


def run_e2e(w: Workload, params: dict[str, int], qps: int) -> list[dict[str, Any]]:
    from scheduler_runtime.cluster.kube import KubeClient, load_connection
    from scheduler_runtime.controlplane import ControlPlane

    placements: dict[str, str] = {}
    allocations: dict[str, dict[str, Any]] = {}
    if any(op.kind == "pods" for op in w.ops):
        run_memory(w, params, placements=placements, allocations=allocations)
    rows = []
    for label in ("kube-scheduler", "ksched"):
        with ControlPlane() as cp:
            if _uses_templates(w):  # the resourceclaim controller turns the templates into claims
                cp.start_controller_manager()
            client = KubeClient(load_connection(str(cp.kubeconfig_path)), qps=5000, burst=5000, pool_size=32)
            _populate(client, w, params, placements, allocations)
            rows.append(_measure_e2e(cp, client, w, params, label, qps))
    return rows


_RESOURCE = "/apis/resource.k8s.io/v1"


def _object_path(obj: dict[str, Any]) -> str:
    ns = obj["metadata"].get("namespace")
    return {"Service": f"/api/v1/namespaces/{ns}/services",
            "DeviceClass": f"{_RESOURCE}/deviceclasses",
            "ResourceClaim": f"{_RESOURCE}/namespaces/{ns}/resourceclaims",
            "ResourceSlice": f"{_RESOURCE}/resourceslices",
            "ResourceClaimTemplate": f"{_RESOURCE}/namespaces/{ns}/resourceclaimtemplates"}[obj["kind"]]


def _populate(client: Any, w: Workload, params: dict[str, int], placements: dict[str, str],
              allocations: dict[str, dict[str, Any]] | None = None) -> None:
    """Namespaces, priority classes, objects, nodes, slices, claims (allocated as an alloc op or the in-memory
    run left them, `allocations`) and the init pods (bound where ksched placed them). Claims that
    kube-controller-manager creates from templates for init pods, and those for extended resources, are not
    allocated: both schedulers see the same free devices."""
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
    slices = _node_objects(w, params, "slices")
    parallel(lambda o: client.call("POST", _object_path(o), body=o), slices)
    claims = _claim_objects(w, params, slices)
    parallel(lambda o: client.call("POST", _object_path(o), body={k: v for k, v in o.items() if k != "status"}),
             claims)

    def allocate(c: dict[str, Any]) -> None:
        m = c["metadata"]
        alloc = (c.get("status") or {}).get("allocation") or (allocations or {}).get(f"{m['namespace']}/{m['name']}")
        if alloc:  # the status subresource: a create drops status
            client.call("PATCH", f"{_object_path(c)}/{m['name']}/status", body={"status": {"allocation": alloc}},
                        content_type="application/merge-patch+json")
    parallel(allocate, claims)
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
    if _uses_templates(w):
        _wait_for_claims(client, ns, n_pods + sum(count_of(op, params) for _, op in _pod_ops(w)
                                                  if op.namespace == ns))
    cfg = cp.dir / f"{label}-config.yaml"  # with the control plane's files, not a temp dir left behind
    cfg.write_text(CONFIG.format(kubeconfig=cp.kubeconfig_path, qps=qps, burst=qps) + w.profiles)
    gate_flags = [f"--feature-gates={g}" for g in _feature_gates()]
    # extra flags for one scheduler, e.g. SCHED_PERF_KUBE_FLAGS=--v=3 for kube-scheduler's queue log
    extra = os.environ.get("SCHED_PERF_KUBE_FLAGS" if label == "kube-scheduler" else "SCHED_PERF_KSCHED_FLAGS", "")
    if label == "kube-scheduler":
        cmd = [str(cp.bin_dir / "kube-scheduler"), f"--config={cfg}", "--secure-port=0", *gate_flags,
               *extra.split()]
    else:
        cmd = ksched_command(cfg, "--results=ksched", *gate_flags, *extra.split())
    cmd += os.environ.get("SCHED_PERF_EXTRA_ARGS", "").split()  # e.g. -v=5 for a log to read: both schedulers

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

    on_bind = None
    if measure.duration:  # steady state: each bound measured pod deleted and replaced by the next
        created = itertools.count(n_pods)

        def on_bind(name: str) -> None:
            delete(ns, name)
            create(_measured(measure, next(created), params))

    return measure_scheduler(client, cp.dir / f"{label}.log", label, cmd, ns, n_pods, prefix="m-",
                             timeout=float(os.environ.get("SCHED_PERF_TIMEOUT", "900")), during=during,
                             on_bind=on_bind, duration=measure.duration)


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
    width = max(34, *(len(n) + 1 for n in names))
    if args.mode == "memory":
        # pods/CPU-s: measured pods per second of this process's CPU time, the figure that does not depend
        # on how many other processes share the cores
        print(f"{'workload':<{width}}{'size':>24}{'pods/s':>9}{'pods/CPU-s':>11}{'2x floor':>9}{'p50 ms':>8}"
              f"{'p99 ms':>8}{'CPU µs/pod':>11}{'RSS MB':>8}")
        for name in names:
            w = BY_NAME[name]
            params = scaled(w, args.scale)
            r = memory_in_subprocess(name, params)
            size = "/".join(str(v) for v in params.values())
            if "error" in r:
                print(f"{name:<{width}}{size:>24}  error: {r['error']}", flush=True)
                continue
            target = f"{2 * w.threshold}" if w.threshold else "-"
            print(f"{name:<{width}}{size:>24}{r['pods_per_second']:>9.0f}{1e6 / max(r['cpu_us_per_pod'], 1e-9):>11.0f}"
                  f"{target:>9}{r['p50_ms']:>8.2f}"
                  f"{r['p99_ms']:>8.2f}{r['cpu_us_per_pod']:>11.0f}{r['peak_rss_mb']:>8.0f}", flush=True)
            if r["steady"] and not r["bound"]:
                print(f"  note: no pod bound in the steady-state window ({r['pods']} created)", flush=True)
            elif not r["steady"] and r["bound"] != r["pods"]:
                print(f"  note: {r['bound']} of {r['pods']} measured pods bound", flush=True)
            if r.get("preempted"):
                print(f"  note: {r['preempted']} measured pods preempted after binding (counted as bound)", flush=True)
            if r["double_allocated"]:
                print(f"  note: devices allocated to more than one claim: {', '.join(r['double_allocated'][:5])}",
                      flush=True)
        return
    print(f"{'workload':<{width}}{'size':>24} {'scheduler':<16}{'pods/s':>8}{'p50 s':>7}{'p99 s':>7}{'CPU s':>7}"
          f"{'ms/pod':>7}{'RSS MB':>8}")
    for name in names:
        w = BY_NAME[name]
        params = scaled(w, args.scale)
        size = "/".join(str(v) for v in params.values())
        rows = run_e2e(w, params, args.qps)
        for r in rows:
            if "error" in r:
                print(f"{name:<{width}}{size:>24} {r['label']:<16}error: {r['error']}", flush=True)
                continue
            print(f"{name:<{width}}{size:>24} {r['label']:<16}{r['pods_per_second']:>8.0f}{r['p50']:>7.2f}"
                  f"{r['p99']:>7.2f}{r['cpu']:>7.1f}{r['cpu_ms_per_pod']:>7.2f}{r['rss']:>8.0f}", flush=True)
        k, o = rows
        if "error" not in k and "error" not in o:
            print(f"{'':<{width}}{'':>24} {'ratio ksched/kube':<16}{o['pods_per_second'] / k['pods_per_second']:>8.2f}"
                  f"{o['p50'] / max(k['p50'], 1e-3):>7.2f}{o['p99'] / max(k['p99'], 1e-3):>7.2f}"
                  f"{o['cpu'] / max(k['cpu'], 0.01):>7.2f}{'':>7}{o['rss'] / max(k['rss'], 1):>8.2f}", flush=True)


if __name__ == "__main__":
    main()

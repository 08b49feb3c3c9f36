"""Seeded random scenarios for the differential test against the real kube-scheduler.

A scenario is plain API objects: nodes (zones, capacities, taints, labels, images), priority classes,
pods already bound to nodes (requests, labels, anti-affinity that new pods must respect) and the pods to
schedule one at a time (requests set, explicitly zero or absent; priorities that need preemption; tolerations;
node and pod (anti-)affinity required and preferred; topology spreading with its policies; PDBs over bound pods;
scheduling gates, lifted after the scheduler has held the pod; PVCs of the kinds volumes.py describes).
The storage and gates draw from their own random streams, so adding them left the rest of a seed unchanged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .volumes import Storage, with_claims

ZONES = ["z1", "z2", "z3"]
APPS = ["web", "api", "db", "cache"]
IMAGES = [("registry.example/app-a:1", 300 * 1024 * 1024), ("registry.example/app-b:1", 800 * 1024 * 1024),
          ("registry.example/app-c:2", 60 * 1024 * 1024)]
#: name -> (value, preemptionPolicy); the Priority admission plugin copies both into the pod
PRIORITY_CLASSES = {"diff-low": (10, "PreemptLowerPriority"), "diff-mid": (100, "PreemptLowerPriority"),
                    "diff-high": (1000, "PreemptLowerPriority"), "diff-high-never": (1000, "Never")}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@dataclass
class Scenario:
    seed: int
    namespace: str
    scheduler_name: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    bound: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    csinodes: list[dict[str, Any]] = field(default_factory=list)
    capacities: list[dict[str, Any]] = field(default_factory=list)


def _requests(rng: random.Random, big: bool = False) -> dict[str, Any] | None:
    kind = rng.random()
    if kind < 0.12:
        return None  # no requests at all: the scoring defaults apply
    if kind < 0.22:
        return {"cpu": "0", "memory": rng.choice(["0", "256Mi"])}  # explicit zeros
    cpu = rng.choice(["3", "4", "6"]) if big else rng.choice(["100m", "250m", "500m", "1", "1500m", "2"])
    req: dict[str, Any] = {"cpu": cpu}
    if rng.random() < 0.8:
        req["memory"] = rng.choice(["128Mi", "512Mi", "1Gi", "2Gi", "3Gi"])
    return req


def _container(rng: random.Random, req: dict[str, Any] | None, image: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": image or rng.choice([i for i, _ in IMAGES] + ["registry.example/x:1"])}
    if req is not None:
        c["resources"] = {"requests": req}
    return c


def _sel(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _node(rng: random.Random, i: int, prefix: str) -> dict[str, Any]:
    name = f"{prefix}-n{i}"
    labels = {HOST: name, ZONE: ZONES[i % len(ZONES)], "diff": "yes"}
    if rng.random() < 0.3:
        labels["disktype"] = "ssd"
    if rng.random() < 0.3:
        labels["tier"] = rng.choice(["1", "2", "3"])
    taints = []
    r = rng.random()
    if r < 0.15:
        taints.append({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
    elif r < 0.27:
        taints.append({"key": "spot", "effect": "PreferNoSchedule"})
    cpu = rng.choice(["2", "4", "4", "8"])
    mem = rng.choice(["4Gi", "8Gi", "16Gi"])
    images = [{"names": [img], "sizeBytes": size} for img, size in IMAGES if rng.random() < 0.35]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": {"cpu": cpu, "memory": mem, "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": mem, "pods": "110"},
                       "images": images, "conditions": [{"type": "Ready", "status": "True"}]}}


def _affinity(rng: random.Random, app: str) -> dict[str, Any] | None:
    aff: dict[str, Any] = {}
    r = rng.random()
    if r < 0.12:
        aff["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["ssd"]}]},
            {"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}]}}
    elif r < 0.3:
        aff["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": rng.choice([1, 20, 50, 100]), "preference": {"matchExpressions": [
                {"key": "disktype", "operator": "In", "values": ["ssd"]}]}},
            {"weight": rng.choice([5, 30]), "preference": {"matchExpressions": [
                {"key": ZONE, "operator": "NotIn", "values": [rng.choice(ZONES)]}]}}]}
    r = rng.random()
    other = rng.choice(APPS)
    if r < 0.1:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": _sel(app), "topologyKey": HOST}]}
    elif r < 0.18:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": _sel(other), "topologyKey": ZONE}]}
    elif r < 0.38:
        aff["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": rng.choice([10, 50, 100]), "podAffinityTerm": {"labelSelector": _sel(other),
                                                                      "topologyKey": rng.choice([HOST, ZONE])}}]}
    elif r < 0.5:
        aff["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": rng.choice([10, 50, 100]), "podAffinityTerm": {"labelSelector": _sel(app),
                                                                      "topologyKey": rng.choice([HOST, ZONE])}}]}
    return aff or None


def _spread(rng: random.Random, app: str) -> list[dict[str, Any]] | None:
    if rng.random() > 0.25:
        return None
    c: dict[str, Any] = {"maxSkew": rng.choice([1, 1, 2]), "topologyKey": rng.choice([ZONE, HOST]),
                         "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                         "labelSelector": _sel(app)}
    if c["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.3:
        c["minDomains"] = rng.choice([2, 3, 4])
    if rng.random() < 0.3:
        c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
    if rng.random() < 0.3:
        c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
    return [c]


def _pod(rng: random.Random, sc: Scenario, name: str, bound_to: str | None = None) -> dict[str, Any]:
    app = rng.choice(APPS)
    high = rng.random() < 0.12 and bound_to is None
    prio = "diff-high" if high else rng.choice(["diff-low", "diff-low", "diff-mid"])
    spec: dict[str, Any] = {"schedulerName": sc.scheduler_name, "priorityClassName": prio,
                            "containers": [_container(rng, _requests(rng, big=high))]}
    if rng.random() < 0.05 and bound_to is None:
        spec["containers"].append(_container(rng, _requests(rng)) | {"name": "c2"})
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    elif rng.random() < 0.1:
        spec["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    aff = _affinity(rng, app)
    if aff:
        spec["affinity"] = aff
    if bound_to is None:
        spread = _spread(rng, app)
        if spread:
            spec["topologySpreadConstraints"] = spread
        if high and rng.random() < 0.2:
            spec["priorityClassName"] = "diff-high-never"
    else:
        spec["nodeName"] = bound_to
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": sc.namespace, "labels": {"app": app}}, "spec": spec}


def generate(seed: int, n_nodes: int = 10, n_pods: int = 30, n_bound: int | None = None,
             namespace: str = "diff", scheduler_name: str = "diff-scheduler", volumes: float = 0.6,
             gated: float = 0.05) -> Scenario:
    """`volumes`: the chance the scenario has storage; `gated`: each pod's chance of a scheduling gate."""
    rng = random.Random(seed)
    sc = Scenario(seed, namespace, scheduler_name)
    prefix = f"s{seed}"
    sc.nodes = [_node(rng, i, prefix) for i in range(n_nodes)]
    srng = random.Random(f"{seed}-storage")
    storage = Storage(srng, prefix, namespace, sc.nodes, ZONES) if srng.random() < volumes else None
    for i in range(n_nodes if n_bound is None else n_bound):
        node = rng.choice(sc.nodes)
        p = _pod(rng, sc, f"b{i:03d}", bound_to=node["metadata"]["name"])
        sc.bound.append(with_claims(p, storage.claims_for_bound(node)) if storage else p)
    grng = random.Random(f"{seed}-gates")
    for i in range(n_pods):
        p = _pod(rng, sc, f"p{i:03d}")
        if storage:
            with_claims(p, storage.claims_for_pending())
        if grng.random() < gated:
            p["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        sc.pods.append(p)
    if storage:
        sc.pvs, sc.pvcs, sc.csinodes, sc.capacities = storage.pvs, storage.pvcs, storage.csinodes, storage.capacities
    if rng.random() < 0.5:
        app = rng.choice(APPS)
        sc.pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": f"pdb-{app}", "namespace": namespace},
                        "spec": {"selector": _sel(app), "maxUnavailable": 1},
                        "status": {"disruptionsAllowed": rng.choice([0, 1]), "currentHealthy": 0,
                                   "desiredHealthy": 0, "expectedPods": 0}})
    return sc

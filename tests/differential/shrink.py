"""Shrink a disagreeing scenario to the nodes and pods that matter (delta debugging), and write it as YAML.

Each trial reruns the scenario with kube-scheduler and ksched (seconds each), so shrinking is bounded by a
number of trials; what is left when the budget runs out still reproduces, it is only less minimal.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import yaml

from .scenario import PRIORITY_CLASSES, Scenario
from .volumes import CSI_DRIVERS, STORAGE_CLASSES

T = TypeVar("T")


class Budget:
    def __init__(self, trials: int) -> None:
        self.left = trials

    def spend(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool], budget: Budget) -> list[T]:
    """Zeller's ddmin: a smaller list for which `fails` still holds (1-minimal if the budget allows)."""
    cur = list(items)
    n = 2
    while len(cur) >= 2:
        size = max(1, len(cur) // n)
        chunks = [cur[i:i + size] for i in range(0, len(cur), size)]
        reduced = False
        for i in range(len(chunks)):  # try each complement (removing one chunk)
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            if not budget.spend():
                return cur
            if fails(rest):
                cur, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(cur):
                break
            n = min(len(cur), n * 2)
    return cur


def _with(sc: Scenario, **parts: Any) -> Scenario:
    out = copy.copy(sc)
    for k, v in parts.items():
        setattr(out, k, v)
    return out


def _drop_nodes(sc: Scenario, keep: list[dict[str, Any]]) -> Scenario:
    names = {n["metadata"]["name"] for n in keep}
    return _with(sc, nodes=keep, bound=[p for p in sc.bound if p["spec"].get("nodeName") in names],
                 csinodes=[c for c in sc.csinodes if c["metadata"]["name"] in names])


def shrink(sc: Scenario, pod: str, still_fails: Callable[[Scenario], bool], trials: int = 60) -> Scenario:
    """The smallest scenario found (within `trials` reruns) in which `still_fails` holds; the pods after
    `pod` (the first that disagreed) are dropped first, then pods to schedule, bound pods and nodes."""
    budget = Budget(trials)
    idx = next(i for i, p in enumerate(sc.pods) if p["metadata"]["name"] == pod)
    cur = _with(sc, pods=sc.pods[:idx + 1])
    if budget.spend() and not still_fails(cur):
        cur = sc  # the disagreement needs a later pod's step after all: shrink from the whole scenario
    target = next(p for p in cur.pods if p["metadata"]["name"] == pod)
    others = [p for p in cur.pods if p is not target]
    keep = ddmin(others, lambda ps: still_fails(_with(cur, pods=[p for p in cur.pods if p is target or
                                                                  any(p is q for q in ps)])), budget)
    cur = _with(cur, pods=[p for p in cur.pods if p is target or any(p is q for q in keep)])
    bound = ddmin(cur.bound, lambda bs: still_fails(_with(cur, bound=bs)), budget)
    cur = _with(cur, bound=bound)
    nodes = ddmin(cur.nodes, lambda ns: still_fails(_drop_nodes(cur, ns)), budget)
    cur = _drop_nodes(cur, nodes)
    if cur.pdbs and budget.spend() and still_fails(_with(cur, pdbs=[])):
        cur = _with(cur, pdbs=[])
    pruned = _unused_storage_dropped(cur)
    if (len(pruned.pvs), len(pruned.pvcs)) != (len(cur.pvs), len(cur.pvcs)) and budget.spend() and \
            still_fails(pruned):
        cur = pruned
    return cur


def _unused_storage_dropped(sc: Scenario) -> Scenario:
    """Only the claims some pod uses, the PVs bound to them and the free PVs on the nodes left."""
    used = {v["persistentVolumeClaim"]["claimName"] for p in sc.bound + sc.pods
            for v in p["spec"].get("volumes") or [] if v.get("persistentVolumeClaim")}
    nodes = {n["metadata"]["name"] for n in sc.nodes}
    pvcs = [c for c in sc.pvcs if c["metadata"]["name"] in used]

    def keep(pv: dict[str, Any]) -> bool:
        ref = pv["spec"].get("claimRef")
        if ref:
            return ref["name"] in used
        pinned = [v for t in ((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get(
            "nodeSelectorTerms") or [] for e in t.get("matchExpressions") or [] for v in e.get("values") or []]
        return not pinned or any(v in nodes for v in pinned)

    return _with(sc, pvcs=pvcs, pvs=[pv for pv in sc.pvs if keep(pv)])


def scenario_yaml(sc: Scenario, header: str = "") -> str:
    """The scenario as a multi-document YAML in creation order: classes, nodes, storage, PDBs, the pods
    already bound, then the pods to schedule (one at a time, in this order). A PDB's status must be written
    through its status subresource; a node's not-ready taint, which kube-apiserver adds, must be removed."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
         "value": value, "preemptionPolicy": policy} for name, (value, policy) in PRIORITY_CLASSES.items()]
    if sc.pvs or sc.pvcs:
        docs += STORAGE_CLASSES + CSI_DRIVERS
    docs += sc.nodes + sc.pvs + sc.pvcs + sc.capacities + sc.csinodes + sc.pdbs + sc.bound + sc.pods
    head = "".join(f"# {line}\n" for line in header.splitlines())
    return head + yaml.safe_dump_all(docs, sort_keys=False)

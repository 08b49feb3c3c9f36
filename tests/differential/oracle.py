"""Run one scenario with the real kube-scheduler, then replay it through ksched, and compare decisions.

kube-scheduler runs on a real API server and decides one pod at a time: each pod is created, its decision
(bound node, or the FailedScheduling message with nominatedNodeName and the victims it evicted) is read, and
a pod left pending is deleted together with its victims, so every decision stands alone. ksched then replays
the same pods, exactly as the API server stored them (admission and defaulting applied), in an embedded
cluster whose bound pods (and PVs/PVCs: kube-controller-manager's PV controller completes the bindings
kube-scheduler's VolumeBinding starts) are kept identical to kube-scheduler's after every step. A pod created
with scheduling gates is held for a while, then its gates are lifted. Compared per pod:
  pending     both bound or both pending
  node        kube's node == ksched's where ksched's best total score is unique
  tied        kube's node among ksched's tied best nodes otherwise
  message     the FailedScheduling message, byte for byte (DynamicResources' PostFilter part included)
  nominated   status.nominatedNodeName after the attempt
  victims     the set of pods preemption evicted
  feasible    the nodes that passed filtering (kube's: the nodes its -v=10 log scored, or its one node)
  gated       a gated pod was held by both until its gates were lifted
  scores      every score plugin's weighted normalised score on every node (kube-scheduler logs them at
              -v=10 as "Plugin scored node for pod", after NormalizeScore and the weight), identical
"""

from __future__ import annotations

import copy
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.results import ResultStore
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing.kube import (
    kube_scheduler,
    pod_scheduled_condition,
    put_node,
    scheduler_config,
    wait_decision,
)

from .scenario import PRIORITY_CLASSES, Scenario
from .volumes import CSI_DRIVERS, STORAGE_CLASSES


@dataclass
class Decision:
    pod: str
    node: str | None = None
    message: str = ""
    nominated: str = ""
    victims: list[str] = field(default_factory=list)
    tied: list[str] | None = None  # ksched only: nodes sharing the best total (None: more than recorded)
    start_time: str = ""  # kube only: the startTime the harness gave the bound pod
    #: node -> score plugin -> weighted normalised score; None when scoring did not run (one feasible node)
    scores: dict[str, dict[str, int]] | None = None
    gated: bool | None = None  # a pod created with scheduling gates: was it held until they were lifted?
    ungated: dict[str, Any] | None = None  # kube only: the pod as stored once its gates were lifted
    #: kube only: the PVs and PVCs as stored after this pod's step (None: the pod has no claims)
    storage: list[dict[str, Any]] | None = None


@dataclass
class KubeOutcome:
    """kube-scheduler's run of a scenario and the stored objects ksched's replay starts from."""
    decisions: list[Decision]
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    stored: list[dict[str, Any]]  # the pods to schedule as created
    live: list[list[str]]  # live bound pod names after each step
    storage: list[dict[str, Any]] = field(default_factory=list)  # PVs, PVCs, CSINodes after setup


@dataclass
class Comparison:
    seed: int
    counts: dict[str, list[int]] = field(default_factory=dict)  # kind -> [agree, disagree]
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, ok: bool, pod: str = "", detail: Any = None) -> None:
        row = self.counts.setdefault(kind, [0, 0])
        row[0 if ok else 1] += 1
        if not ok:
            self.disagreements.append({"seed": self.seed, "kind": kind, "pod": pod, "detail": detail})

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.03)
    raise AssertionError(f"timed out waiting for {what}")


def _strip_server_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server stored it, minus what a fresh create would not carry (status.startTime
    stays: preemption orders victims by it)."""
    out = copy.deepcopy(raw)
    meta = out.get("metadata") or {}
    for k in ("resourceVersion", "managedFields", "generation"):
        meta.pop(k, None)
    start = (out.pop("status", None) or {}).get("startTime")
    if start:
        out["status"] = {"startTime": start}
    return out


def _start_time(i: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + i))


class KubeRun:
    """kube-scheduler on a real API server, one scenario per instance (nodes are cluster-scoped)."""

    def __init__(self, kubeconfig: Path, bin_dir: Path, work: Path) -> None:
        self.kubeconfig = kubeconfig
        self.bin_dir = bin_dir
        self.work = work
        self.c = KubeClient(load_connection(str(kubeconfig)))

    def _ensure_priority_classes(self) -> None:
        for name, (value, policy) in PRIORITY_CLASSES.items():
            try:
                self.c.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                            body={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                  "metadata": {"name": name}, "value": value, "preemptionPolicy": policy})
            except Exception as exc:  # already there from an earlier scenario
                if "already exists" not in str(exc) and "AlreadyExists" not in str(exc):
                    raise

    def _ensure_storage_classes(self) -> None:
        for body in STORAGE_CLASSES:
            try:
                self.c.call("POST", "/apis/storage.k8s.io/v1/storageclasses", body=body)
            except Exception as exc:  # already there from an earlier scenario
                if "already exists" not in str(exc) and "AlreadyExists" not in str(exc):
                    raise
        for body in CSI_DRIVERS:
            try:
                self.c.call("POST", "/apis/storage.k8s.io/v1/csidrivers", body=body)
            except Exception as exc:
                if "already exists" not in str(exc) and "AlreadyExists" not in str(exc):
                    raise

    def _delete_all(self, path: str, finalizers: bool = False) -> None:
        """Delete every object at `path`; with `finalizers`, first drop the protection finalizers no
        controller here would remove (kubernetes.io/pv-protection, pvc-protection)."""
        for o in self.c.call("GET", path).get("items") or []:
            name = o["metadata"]["name"]
            if finalizers and o["metadata"].get("finalizers"):
                self.c.call("PATCH", f"{path}/{name}", body={"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json")
            try:
                self.c.call("DELETE", f"{path}/{name}", body={"gracePeriodSeconds": 0})
            except Exception as exc:
                if "NotFound" not in str(exc) and "not found" not in str(exc):
                    raise

    def _clear(self, sc: Scenario) -> None:
        """Nodes are cluster-scoped: a scenario starts from none of an earlier one's objects."""
        self._delete_all("/apis/storage.k8s.io/v1/csinodes")
        for n in self.c.call("GET", "/api/v1/nodes").get("items") or []:
            self.c.call("DELETE", f"/api/v1/nodes/{n['metadata']['name']}")
        for p in self.c.call("GET", f"/api/v1/namespaces/{sc.namespace}/pods").get("items") or []:
            self.c.call("DELETE", f"/api/v1/namespaces/{sc.namespace}/pods/{p['metadata']['name']}",
                        body={"gracePeriodSeconds": 0})
        for pdb in self.c.call("GET", f"/apis/policy/v1/namespaces/{sc.namespace}/poddisruptionbudgets"
                               ).get("items") or []:
            self.c.call("DELETE", f"/apis/policy/v1/namespaces/{sc.namespace}/poddisruptionbudgets/"
                        f"{pdb['metadata']['name']}")
        self._delete_all(f"/apis/storage.k8s.io/v1/namespaces/{sc.namespace}/csistoragecapacities")
        self._delete_all(f"/api/v1/namespaces/{sc.namespace}/persistentvolumeclaims", finalizers=True)
        self._delete_all("/api/v1/persistentvolumes", finalizers=True)
        for path in (f"/api/v1/namespaces/{sc.namespace}/persistentvolumeclaims", "/api/v1/persistentvolumes"):
            _wait(lambda path=path: not self.c.call("GET", path).get("items"), 30, f"{path} emptied")

    def setup(self, sc: Scenario) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Create everything but the pods to schedule; returns (stored nodes, stored bound pods)."""
        self._ensure_priority_classes()
        self._ensure_storage_classes()
        try:
            self.c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": sc.namespace}})
        except Exception as exc:
            if "already exists" not in str(exc) and "AlreadyExists" not in str(exc):
                raise
        self._clear(sc)
        nodes = []
        for n in sc.nodes:
            nodes.append(put_node(self.c, n))
        for pdb in sc.pdbs:
            body = {k: v for k, v in pdb.items() if k != "status"}
            self.c.call("POST", f"/apis/policy/v1/namespaces/{sc.namespace}/poddisruptionbudgets", body=body)
            got = self.c.call("GET", f"/apis/policy/v1/namespaces/{sc.namespace}/poddisruptionbudgets/"
                              f"{pdb['metadata']['name']}")
            got["status"] = {**pdb["status"], "observedGeneration": got["metadata"].get("generation", 1)}
            self.c.call("PUT", f"/apis/policy/v1/namespaces/{sc.namespace}/poddisruptionbudgets/"
                        f"{pdb['metadata']['name']}/status", body=got)
        self.storage = self._setup_storage(sc)
        bound = []
        for p in sc.bound:
            self.c.call("POST", f"/api/v1/namespaces/{sc.namespace}/pods", body=p)
            bound.append(self._started(sc.namespace, p["metadata"]["name"]))
        return nodes, bound

    def _started(self, ns: str, name: str) -> dict[str, Any]:
        """Give a bound pod a distinct status.startTime, as a kubelet would: without one kube-scheduler's
        preemption orders equal-priority victims by time.Now() at comparison, which no replay can match."""
        self._clock += 1
        return self.c.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                           body={"status": {"startTime": _start_time(self._clock)}},
                           content_type="application/merge-patch+json")

    _clock = 0
    storage: list[dict[str, Any]] = []

    def _setup_storage(self, sc: Scenario) -> list[dict[str, Any]]:
        """Create the PVs, PVCs and CSINodes and wait for kube-controller-manager's PV controller to settle
        them (every PV Available or Bound, every pre-bound claim Bound); returns them as stored."""
        ns = sc.namespace
        for pv in sc.pvs:
            self.c.call("POST", "/api/v1/persistentvolumes", body=pv)
        for pvc in sc.pvcs:
            self.c.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body=pvc)
        for cn in sc.csinodes:
            self.c.call("POST", "/apis/storage.k8s.io/v1/csinodes", body=cn)
        caps = [self.c.call("POST", f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities", body=cap)
                for cap in sc.capacities]
        caps = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity"} | c for c in caps]
        if not sc.pvs and not sc.pvcs:
            return caps + [self.c.call("GET", f"/apis/storage.k8s.io/v1/csinodes/{cn['metadata']['name']}")
                           for cn in sc.csinodes]
        prebound = {p["metadata"]["name"] for p in sc.pvcs if (p.get("spec") or {}).get("volumeName")}

        def settled() -> bool:
            pvs = self.c.call("GET", "/api/v1/persistentvolumes").get("items") or []
            pvcs = self.c.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims").get("items") or []
            return (all((p.get("status") or {}).get("phase") in ("Available", "Bound") for p in pvs)
                    and all((p.get("status") or {}).get("phase") == "Bound" for p in pvcs
                            if p["metadata"]["name"] in prebound))

        _wait(settled, 60, "the PV controller to settle the scenario's volumes")
        return self._storage(ns) + caps + [
            self.c.call("GET", f"/apis/storage.k8s.io/v1/csinodes/{cn['metadata']['name']}") for cn in sc.csinodes]

    def _storage(self, ns: str) -> list[dict[str, Any]]:
        pvs = self.c.call("GET", "/api/v1/persistentvolumes").get("items") or []
        pvcs = self.c.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims").get("items") or []
        return [{"apiVersion": "v1", "kind": "PersistentVolume"} | p for p in pvs] + \
            [{"apiVersion": "v1", "kind": "PersistentVolumeClaim"} | p for p in pvcs]

    def run(self, sc: Scenario) -> KubeOutcome:
        nodes, bound = self.setup(sc)
        self._tail = PreemptionLog()
        cfg = self.work / f"kube-{sc.seed}.yaml"
        cfg.write_text(scheduler_config(sc.scheduler_name, self.kubeconfig))
        log = self.work / f"kube-scheduler-{sc.seed}.log"
        log.unlink(missing_ok=True)  # a rerun (shrinking) reads only its own score lines
        ns = sc.namespace
        decisions: list[Decision] = []
        stored: list[dict[str, Any]] = []
        live: list[list[str]] = []
        with kube_scheduler(self.bin_dir, cfg, log, verbosity=10):  # -v=10: the per-plugin scores
            for p in sc.pods:
                name = p["metadata"]["name"]
                stored.append(self.c.call("POST", f"/api/v1/namespaces/{ns}/pods", body=p))
                gated, ungated = None, None
                if p["spec"].get("schedulingGates"):
                    # held: a scheduler never attempts it (no verdict to wait for, so give it time), then lifted
                    time.sleep(0.5)
                    held = self.c.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
                    gated = not held["spec"].get("nodeName")
                    ungated = self.c.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                                          body={"spec": {"schedulingGates": None}},
                                          content_type="application/merge-patch+json")

                verdict, what = wait_decision(self.c, ns, name)
                d = Decision(name, what if verdict == "bound" else None, gated=gated, ungated=ungated)
                if p["spec"].get("volumes"):
                    d.storage = self._storage(ns)
                if d.node is not None:
                    d.start_time = self._started(ns, name)["status"]["startTime"]
                if d.node is None:
                    got = self.c.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
                    d.message = (pod_scheduled_condition(got) or {}).get("message") or ""
                    d.nominated = (got.get("status") or {}).get("nominatedNodeName") or ""
                    self.c.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body={"gracePeriodSeconds": 0})
                    if d.nominated:
                        d.victims = self._victims(log, f"{ns}/{name}")
                decisions.append(d)
                live.append(self._settle())
                if d.nominated or d.victims:
                    # kube-scheduler must see the preemptor and its victims gone (and drop the nomination)
                    # before the next pod, or it would still count them: there is no signal for that, so wait
                    time.sleep(1.5)
                elif d.node is None:
                    time.sleep(0.2)
        attach_kube_scores(decisions, ns, log)
        return KubeOutcome(decisions, nodes, bound, stored, live, self.storage)

    def _deleting(self, ns: str) -> list[str]:
        pods = self.c.call("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
        return sorted(p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp"))

    def _victims(self, log: Path, preemptor: str) -> list[str]:
        """The victims kube-scheduler's (asynchronous) preemption chose for `preemptor`, from its log: each
        victim's line, until the "finished" line (a loaded machine can start the deletions later than any
        fixed wait). Without that line in 30 s, the pods marked deleting once that set stops changing."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self._tail.read(log)
            if preemptor in self._tail.done:
                return sorted(v.split("/", 1)[1] for v in self._tail.victims.get(preemptor, ()))
            time.sleep(0.05)
        return self._victims_deleting()

    _tail: Any = None

    def _victims_deleting(self) -> list[str]:
        ns = self._ns
        seen = self._deleting(ns)
        stable_since = time.monotonic()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and time.monotonic() - stable_since < 0.6:
            time.sleep(0.1)
            now = self._deleting(ns)
            if now != seen:
                seen, stable_since = now, time.monotonic()
        return seen

    def _settle(self) -> list[str]:
        """Force-delete terminating pods (no kubelet finishes them) and list the live bound pods."""
        ns = self._ns
        for name in self._deleting(ns):
            try:
                self.c.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body={"gracePeriodSeconds": 0})
            except Exception:
                pass
        pods = self.c.call("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
        return sorted(p["metadata"]["name"] for p in pods
                      if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))

    _ns = "diff"


#: klog's text line for one plugin's weighted normalised score (pkg/scheduler/schedule_one.go, prioritizeNodes)
_SCORED = re.compile(r'"Plugin scored node for pod" pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')
_FINAL = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)"')


_VICTIM_LINES = ('"Preemptor Pod preempted victim Pod"', '"Victim Pod is already deleted"',
                 '"Victim Pod is already being deleted, skipping the API call for it"')
_FIELD = re.compile(r'(preemptor|victim)="([^"]+)"')


class PreemptionLog:
    """What kube-scheduler's preemption executor logged (-v=2 and up), read incrementally from its log:
    the victims per preemptor and the preemptors whose asynchronous preemption finished."""

    def __init__(self) -> None:
        self.offset = 0
        self.partial = ""
        self.victims: dict[str, set[str]] = {}
        self.done: set[str] = set()

    def read(self, log: Path) -> None:
        try:
            with open(log, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        self.offset += len(chunk)
        lines = (self.partial + chunk.decode("utf-8", "replace")).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if "Async Preemption finished completely" in line:
                fields = dict(_FIELD.findall(line))
                if "preemptor" in fields:
                    self.done.add(fields["preemptor"])
            elif any(m in line for m in _VICTIM_LINES):
                fields = dict(_FIELD.findall(line))
                if "preemptor" in fields and "victim" in fields:
                    self.victims.setdefault(fields["preemptor"], set()).add(fields["victim"])


def parse_kube_scores(lines: Any) -> dict[str, list[dict[str, dict[str, int]]]]:
    """pod key -> one {node: {plugin: score}} per scoring attempt, from kube-scheduler's -v=10 log. An
    attempt's plugin lines come before its "final score" lines, so a plugin line after a final one starts
    the next attempt."""
    out: dict[str, list[dict[str, dict[str, int]]]] = {}
    closed: set[str] = set()
    for line in lines:
        if "scored node for pod" in line:
            m = _SCORED.search(line)
            if m is None:
                continue
            pod, plugin, node, score = m.group(1), m.group(2), m.group(3), int(m.group(4))
            attempts = out.setdefault(pod, [])
            if not attempts or pod in closed:
                attempts.append({})
                closed.discard(pod)
            attempts[-1].setdefault(node, {})[plugin] = score
        elif "final score for pod" in line:
            m = _FINAL.search(line)
            if m is not None:
                closed.add(m.group(1))
    return out


def attach_kube_scores(decisions: list[Decision], ns: str, log: Path) -> None:
    """Each bound pod's scores from its (only) scoring attempt; pending pods were never scored."""
    with open(log, encoding="utf-8", errors="replace") as f:
        by_pod = parse_kube_scores(f)
    for d in decisions:
        attempts = by_pod.get(f"{ns}/{d.pod}") or []
        if d.node is not None and attempts:
            d.scores = attempts[-1]


def run_kube(kubeconfig: Path, bin_dir: Path, work: Path, sc: Scenario) -> KubeOutcome:
    k = KubeRun(kubeconfig, bin_dir, work)
    k._ns = sc.namespace
    return k.run(sc)


def _attempt_once(sched: Scheduler, qpi: Any = None) -> None:
    """One scheduling attempt of the pod just created (kube's pod is deleted after its first attempt too)."""
    sched.drain_inbox()
    if qpi is None:
        qpi = sched.queue.pop(timeout=5)
    assert qpi is not None, "ksched's queue has no pod to attempt"
    sched.schedule_one(qpi)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with sched._inflight_lock:
            if not sched._inflight_bindings:
                break
        time.sleep(0.002)
    sched.drain_inbox()


def _stored_object(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored PV, PVC or CSINode to recreate: status kept (the PV controller's phase), server fields dropped."""
    out = copy.deepcopy(raw)
    for k in ("resourceVersion", "managedFields", "generation"):  # uid kept: PVs name claims by it
        out["metadata"].pop(k, None)
    return out


def _align_storage(cluster: MemoryCluster, objs: list[dict[str, Any]]) -> None:
    """Make ksched's PVs and PVCs what kube's were after the same step (a claim kube-scheduler bound)."""
    for raw in objs:
        want = _stored_object(raw)
        resource = "persistentvolumes" if raw["kind"] == "PersistentVolume" else "persistentvolumeclaims"
        ns = raw["metadata"].get("namespace")
        have = next((o for o in cluster.list(resource, ns) if o["metadata"]["name"] == raw["metadata"]["name"]),
                    None)
        if have is None:
            cluster.create(want)
            continue
        if any(have.get(k) != want.get(k) for k in ("spec", "status")) or \
                (have["metadata"].get("annotations") or {}) != (want["metadata"].get("annotations") or {}):
            want["metadata"]["uid"] = have["metadata"].get("uid")
            cluster.update(want)


def run_ksched(sc: Scenario, kube_run: KubeOutcome, work: Path) -> list[Decision]:
    """Replay with ksched, aligning its bound pods (and PVs/PVCs) to kube-scheduler's after every pod."""
    nodes, bound, stored, kube, live = (kube_run.nodes, kube_run.bound, kube_run.stored, kube_run.decisions,
                                        kube_run.live)
    reg = build_registry([])
    cluster = MemoryCluster()
    for obj in STORAGE_CLASSES + CSI_DRIVERS:
        cluster.create(copy.deepcopy(obj), emit=False)
    for obj in kube_run.storage:
        cluster.create(_stored_object(obj), emit=False)
    for n in nodes:
        cluster.create(_strip_server_fields(n) | {"status": n.get("status") or {}}, emit=False)
    for pc, (value, policy) in PRIORITY_CLASSES.items():
        cluster.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc},
                        "value": value, "preemptionPolicy": policy}, emit=False)
    for pdb in sc.pdbs:
        cluster.create(copy.deepcopy(pdb), emit=False)
    by_name: dict[str, dict[str, Any]] = {}
    for b in bound:
        raw = _strip_server_fields(b)
        by_name[raw["metadata"]["name"]] = raw
        cluster.create(raw, emit=False)
    cfg = work / "ksched.yaml"
    cfg.write_text(scheduler_config(sc.scheduler_name))
    results = ResultStore()
    # record every node's total, not the top few, so a tie of any size is known in full (restored below: other
    # tests in the same session read the top few). Every runtime module holding the limit is patched, so this
    # survives the per-pod cycle moving out of scheduler.py.
    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("scheduler_runtime") and isinstance(getattr(m, "TOP_NODES", None), int)]
    saved = [(m, m.TOP_NODES) for m in holders]
    for m in holders:
        m.TOP_NODES = 1 << 30
    try:
        return _replay(sc, cluster, reg, cfg, results, stored, kube, live, by_name)
    finally:
        for m, v in saved:
            m.TOP_NODES = v


def _replay(sc: Scenario, cluster: MemoryCluster, reg: Any, cfg: Path, results: ResultStore,
            stored: list[dict[str, Any]], kube: list[Decision], live: list[list[str]],
            by_name: dict[str, dict[str, Any]]) -> list[Decision]:
    sched = Scheduler(cluster, load_config(cfg, reg), reg, seed=sc.seed, results=results)
    sched.start()
    out: list[Decision] = []
    ns = sc.namespace
    for raw_stored, k, alive in zip(stored, kube, live, strict=True):
        raw = _strip_server_fields(raw_stored)
        name = raw["metadata"]["name"]
        before = set(cluster.deleted)
        cluster.create(copy.deepcopy(raw))
        gated = None
        if k.ungated is not None:
            sched.drain_inbox()
            qpi = sched.queue.pop(timeout=0.05)
            gated = qpi is None
            if qpi is None:  # lift the gates as kube's run did
                lifted = _strip_server_fields(k.ungated)
                have = cluster.get_pod(ns, name) or {}
                lifted["metadata"]["uid"] = have["metadata"].get("uid")
                lifted["status"] = have.get("status") or {}
                cluster.update(lifted)
                _attempt_once(sched)
            else:
                _attempt_once(sched, qpi)
        else:
            _attempt_once(sched)
        got = cluster.get_pod(ns, name) or {}
        d = Decision(name, (got.get("spec") or {}).get("nodeName"), gated=gated)
        if d.node is None:
            cond = next((c for c in (got.get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled"), {})
            d.message = cond.get("message") or ""
            d.nominated = (got.get("status") or {}).get("nominatedNodeName") or ""
            d.victims = sorted(key.split("/", 1)[1] for key in set(cluster.deleted) - before)
        else:
            r = results.get(f"{ns}/{name}")
            top = [(s["node"], s["total"]) for s in (r.scores if r else [])]
            if r is not None and r.scores:
                d.scores = {s["node"]: {p: v["weighted"] for p, v in s["plugins"].items()} for s in r.scores}
            if top:
                best = top[0][1]
                d.tied = [n for n, t in top if t == best]
        out.append(d)
        # align: this pod as kube-scheduler decided it, and exactly kube's live bound pods
        if cluster.get_pod(ns, name) is not None:
            cluster.delete("pods", name, ns)
        if k.node is not None:
            aligned = copy.deepcopy(raw)
            aligned["spec"]["nodeName"] = k.node
            aligned["status"] = {"startTime": k.start_time}
            by_name[name] = aligned
        want = set(alive)
        for p in cluster.list("pods", ns):
            if p["metadata"]["name"] not in want:
                cluster.delete("pods", p["metadata"]["name"], ns)
        have = {p["metadata"]["name"] for p in cluster.list("pods", ns)}
        for missing in sorted(want - have):
            cluster.create(copy.deepcopy(by_name[missing]))
        if k.storage is not None:
            _align_storage(cluster, k.storage)
        sched.drain_inbox()
    sched.stop()
    return out


def compare(seed: int, kube: list[Decision], ours: list[Decision]) -> Comparison:
    cmp = Comparison(seed)
    for k, o in zip(kube, ours, strict=True):
        if k.gated is not None:
            cmp.add("gated", k.gated == o.gated, k.pod, {"kube": k.gated, "ksched": o.gated})
        cmp.add("pending", (k.node is None) == (o.node is None), k.pod,
                {"kube": k.node or k.message, "ksched": o.node or o.message})
        if k.node is not None and o.node is not None:
            if o.tied is not None and len(o.tied) == 1:
                cmp.add("node", k.node == o.node, k.pod, {"kube": k.node, "ksched": o.node})
            elif o.tied is not None:
                cmp.add("tied", k.node in o.tied, k.pod, {"kube": k.node, "ksched_tied": o.tied})
            else:  # one feasible node: ksched skipped scoring, the node must be kube's
                cmp.add("node", k.node == o.node, k.pod, {"kube": k.node, "ksched": o.node})
            kf = sorted(k.scores) if k.scores is not None else [k.node]
            of = sorted(o.scores) if o.scores is not None else [o.node]
            cmp.add("feasible", kf == of, k.pod, {"kube": kf, "ksched": of})
            if k.scores is not None or o.scores is not None:
                cmp.add("scores", k.scores == o.scores, k.pod, _score_diff(k.scores or {}, o.scores or {}))
        if k.node is None and o.node is None:  # byte for byte, DynamicResources' PostFilter part included
            cmp.add("message", k.message == o.message, k.pod, {"kube": k.message, "ksched": o.message})
            cmp.add("nominated", k.nominated == o.nominated, k.pod, {"kube": k.nominated, "ksched": o.nominated})
            cmp.add("victims", k.victims == o.victims, k.pod, {"kube": k.victims, "ksched": o.victims})
    return cmp


def _score_diff(kube: dict[str, dict[str, int]], ours: dict[str, dict[str, int]]) -> list[str]:
    """The (node, plugin) pairs whose scores differ, as "node plugin kube=.. ksched=.."."""
    out = []
    for node in sorted(set(kube) | set(ours)):
        k, o = kube.get(node, {}), ours.get(node, {})
        for plugin in sorted(set(k) | set(o)):
            if k.get(plugin) != o.get(plugin):
                out.append(f"{node} {plugin} kube={k.get(plugin)} ksched={o.get(plugin)}")
    return out

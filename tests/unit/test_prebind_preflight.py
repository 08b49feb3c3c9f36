"""PreBindPreFlight and the nominatedNodeName written before PreBind (kube-scheduler's binding cycle with
NominatedNodeNameForExpectation, beta and on since 1.35), on the embedded cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.loader import build
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.status import Status
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing import config_for


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
                     **spec}}


class _Flight(Plugin):
    """A PreBind plugin whose PreBindPreFlight answers what the pod's label `flight` says (absent: the plugin
    has no say, as a plugin without the method); its PreBind records the pod's status.nominatedNodeName and
    fails pods labelled `fail`."""

    name = "FlightCheck"
    seen: dict[str, Any] = {}

    def pre_bind_pre_flight(self, state: object, pod: Any, node_name: str) -> Status | None:
        answer = (pod.labels or {}).get("flight", "work")
        if answer == "skip":
            return Status.skip()
        if answer == "reject":
            return Status.unschedulable("no")
        if answer == "error":
            return Status.as_error("cannot tell")
        return None

    def pre_bind(self, state: object, pod: Any, node_name: str) -> Status | None:
        raw = self.handle.cluster.get_pod(pod.namespace, pod.name)
        self.seen[pod.name] = (raw.get("status") or {}).get("nominatedNodeName")
        return Status.unschedulable("not ready") if "fail" in (pod.labels or {}) else None


class _Recording(MemoryCluster):
    """The embedded cluster, noting each nomination the binding cycle writes (status-only writes raise no
    watch event there)."""

    def __init__(self) -> None:
        super().__init__()
        self.nominations: list[tuple[str, str, bool]] = []

    def nominate_for_binding(self, pod: Any, node_name: str) -> None:
        bound = bool((self.get_pod(pod.namespace, pod.name) or {}).get("spec", {}).get("nodeName"))
        self.nominations.append((pod.name, node_name, bound))
        super().nominate_for_binding(pod, node_name)


def _run(pods: list[dict[str, Any]], gates: dict[str, bool] | None = None,
         plugin: type[Plugin] | None = _Flight) -> _Recording:
    """Schedule `pods` with `plugin` in the profile (None: the default profile)."""
    cluster = _Recording()
    cluster.create(_node("a"), emit=False)
    reg = build_registry([])
    if plugin is not None:
        reg.register(plugin, "test")
    cfg = build(config_for(plugin, scheduler_name="default-scheduler"), reg) if plugin is not None else build(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}, reg)
    s = Scheduler(cluster, cfg, reg, seed=1, feature_gates=gates)
    s.start()
    for p in pods:
        cluster.create(p)
    s.run(until_idle=True)
    return cluster


def test_nominated_node_is_written_before_prebind_and_cleared_by_the_binding() -> None:
    _Flight.seen.clear()
    cluster = _run([_pod("w")])
    assert cluster.nominations == [("w", "a", False)]  # before the binding
    assert _Flight.seen == {"w": "a"}  # PreBind already sees it
    assert cluster.get_pod("ns", "w")["spec"]["nodeName"] == "a"
    assert "nominatedNodeName" not in cluster.get_pod("ns", "w")["status"]  # the binding cleared it


def test_a_failed_prebind_clears_the_nomination_it_was_written_for() -> None:
    """kube's failure handler clears the nomination (clearNominatedNode) from the pod as last written, which
    carries the interim one: the pod is not left nominated to a node it did not get."""
    _Flight.seen.clear()
    pod = _pod("f")
    pod["metadata"]["labels"] = {"fail": "yes"}
    cluster = _run([pod])
    assert cluster.nominations and cluster.nominations[0] == ("f", "a", False)
    assert _Flight.seen == {"f": "a"}
    got = cluster.get_pod("ns", "f")
    assert not got["spec"].get("nodeName") and "nominatedNodeName" not in got["status"]
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")


def test_skip_means_no_nomination_and_no_prebind_call() -> None:
    _Flight.seen.clear()
    pod = _pod("s")
    pod["metadata"]["labels"] = {"flight": "skip"}
    cluster = _run([pod])
    assert _Flight.seen == {}  # kube does not run a PreBind plugin whose PreBindPreFlight said Skip
    assert cluster.nominations == []
    assert cluster.get_pod("ns", "s")["spec"]["nodeName"] == "a"


def test_gate_off_runs_every_prebind_and_nominates_nothing() -> None:
    _Flight.seen.clear()
    pod = _pod("g")
    pod["metadata"]["labels"] = {"flight": "skip"}
    cluster = _run([pod], gates={"NominatedNodeNameForExpectation": False})
    assert _Flight.seen == {"g": None}
    assert cluster.nominations == []


def test_preflight_errors_and_unsupported_codes_fail_the_binding_with_kubes_messages() -> None:
    _Flight.seen.clear()
    err, rej = _pod("e"), _pod("r")
    err["metadata"]["labels"] = {"flight": "error"}
    rej["metadata"]["labels"] = {"flight": "reject"}
    cluster = _run([err, rej])
    assert _Flight.seen == {} and cluster.nominations == []
    notes = {n: [e.note for e in cluster.events_for("ns", n) if e.reason == "FailedScheduling"] for n in "er"}
    assert notes["e"] and notes["e"][0].endswith('running PreBindPreFlight "FlightCheck": cannot tell')
    assert notes["r"] and notes["r"][0].endswith(
        'PreBindPreFlight FlightCheck returned "Unschedulable", which is unsupported. It is supposed to return '
        'Success, Skip, or Error status')
    assert not cluster.get_pod("ns", "e")["spec"].get("nodeName")


class _Waiter(Plugin):
    """Permit makes every pod wait; a thread allows it once its nomination is visible."""

    name = "WaitHere"

    def permit(self, state: object, pod: Any, node_name: str) -> tuple[Status, float]:
        def allow() -> None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                raw = self.handle.cluster.get_pod(pod.namespace, pod.name)
                if (raw.get("status") or {}).get("nominatedNodeName") == node_name:
                    wp = self.handle.get_waiting_pod(pod.uid)
                    if wp is not None:
                        wp.allow(self.name)
                        return
                time.sleep(0.01)
        threading.Thread(target=allow, daemon=True).start()
        return Status.wait(), 10.0


def test_a_pod_waiting_on_permit_is_nominated_while_it_waits() -> None:
    """No PreBind plugin in the profile, but the pod waits on Permit: kube nominates it (the Coscheduling case);
    the Permit plugin allows the pod only once it sees the nomination."""
    cluster = _run([_pod("p")], plugin=_Waiter)
    assert cluster.nominations == [("p", "a", False)]
    assert cluster.get_pod("ns", "p")["spec"]["nodeName"] == "a"


def test_pods_without_volumes_or_claims_are_never_nominated_by_the_default_profile() -> None:
    """VolumeBinding and DynamicResources say Skip for a plain pod: no extra write per pod."""
    cluster = _run([_pod("plain")], plugin=None)
    assert cluster.get_pod("ns", "plain")["spec"]["nodeName"] == "a"
    assert cluster.nominations == []


def test_a_pod_with_a_claim_is_nominated_and_a_plain_one_is_not() -> None:
    """DynamicResources' PreBindPreFlight: Success for a pod with claims (PreBind allocates them), Skip without."""
    driver = "gpu.example.com"
    objects = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "a-gpus"},
         "spec": {"driver": driver, "nodeName": "a", "pool": {"name": "a", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}},
    ]
    with_claim = _pod("gpu", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}])
    cluster = _Recording()
    for o in [_node("a"), *objects]:
        cluster.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(cluster, build({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                  "kind": "KubeSchedulerConfiguration"}, reg), reg, seed=1)
    s.start()
    cluster.create(with_claim)
    cluster.create(_pod("plain"))
    s.run(until_idle=True)
    assert cluster.get_pod("ns", "gpu")["spec"]["nodeName"] == "a"
    assert cluster.get_pod("ns", "plain")["spec"]["nodeName"] == "a"
    assert cluster.nominations == [("gpu", "a", False)]


class _Side(Plugin):
    """A PreBind plugin that allows parallel PreBind (kube 1.37's AllowParallel). Its PreBind meets the other
    instances at a barrier, which only a side-by-side run passes; a pod labelled `fail-<name>` makes that
    instance fail at once, and the others then note whether the framework told them to stop."""

    allow_parallel_pre_bind = True
    barrier: threading.Barrier | None = None
    log: list[tuple[str, str]] = []

    def pre_bind_pre_flight(self, state: object, pod: Any, node_name: str) -> Status | None:
        return None

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> Status | None:
        if f"fail-{self.name}" in (pod.labels or {}):
            self.log.append((self.name, "failed"))
            return Status.unschedulable(f"{self.name} gave up")
        cancelled = state.pre_bind_cancelled
        if any(k.startswith("fail-") for k in pod.labels or {}):
            stopped = cancelled is not None and cancelled.wait(30)
            self.log.append((self.name, "stopped" if stopped else "not stopped"))
            return Status.as_error("context canceled") if stopped else None
        assert self.barrier is not None
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            self.log.append((self.name, "alone"))
            return Status.as_error("ran alone")
        self.log.append((self.name, "together"))
        return None


class _SideA(_Side):
    name = "SideA"


class _SideB(_Side):
    name = "SideB"


class _Serial(_Flight):
    name = "Serial"


def _run_side(pod: dict[str, Any], gates: dict[str, bool] | None = None,
              order: tuple[str, ...] = ("SideA", "SideB")) -> MemoryCluster:
    cluster = MemoryCluster()
    cluster.create(_node("a"), emit=False)
    reg = build_registry([])
    for cls in (_SideA, _SideB, _Serial):
        reg.register(cls, "test")
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "default-scheduler",
                         "plugins": {"preBind": {"enabled": [{"name": n} for n in order]}}}]}
    s = Scheduler(cluster, build(doc, reg), reg, seed=1, feature_gates=gates)
    s.start()
    cluster.create(pod)
    s.run(until_idle=True)
    return cluster


def test_prebind_plugins_that_allow_it_run_side_by_side() -> None:
    """Two neighbouring PreBind plugins that allow parallel running meet at a barrier: run one after the
    other, the first would wait there for good (the 20 s timeout only ends a broken run)."""
    _Side.log, _Side.barrier = [], threading.Barrier(2, timeout=20)
    cluster = _run_side(_pod("both"))
    assert sorted(_Side.log) == [("SideA", "together"), ("SideB", "together")]
    assert cluster.get_pod("ns", "both")["spec"]["nodeName"] == "a"


def test_the_first_failure_in_a_parallel_group_stops_the_others_and_is_the_one_reported() -> None:
    _Side.log, _Side.barrier = [], None
    pod = _pod("one-fails")
    pod["metadata"]["labels"] = {"fail-SideB": "yes"}
    cluster = _run_side(pod)
    assert sorted(_Side.log) == [("SideA", "stopped"), ("SideB", "failed")]
    notes = [e.note for e in cluster.events_for("ns", "one-fails") if e.reason == "FailedScheduling"]
    assert notes == ["0/1 nodes are available: 1 SideB gave up."]
    assert not cluster.get_pod("ns", "one-fails")["spec"].get("nodeName")


def test_a_plugin_without_parallel_permission_splits_the_groups() -> None:
    """SideA, Serial, SideB: three groups run in turn, so SideA and SideB never meet at the barrier."""
    _Side.log, _Side.barrier = [], threading.Barrier(2, timeout=0.5)
    _Flight.seen.clear()
    cluster = _run_side(_pod("split"), order=("SideA", "Serial", "SideB"))
    assert _Side.log == [("SideA", "alone")]  # the first group's failure ends PreBind
    assert _Flight.seen == {}
    assert not cluster.get_pod("ns", "split")["spec"].get("nodeName")


def test_without_the_preflight_gate_prebind_runs_one_plugin_after_another() -> None:
    """No PreBindPreFlight, so no plugin said it may run in parallel: kube runs every PreBind in turn."""
    _Side.log, _Side.barrier = [], threading.Barrier(2, timeout=0.5)
    _run_side(_pod("gate-off"), gates={"NominatedNodeNameForExpectation": False})
    assert _Side.log == [("SideA", "alone")]

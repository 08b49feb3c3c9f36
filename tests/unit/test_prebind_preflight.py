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

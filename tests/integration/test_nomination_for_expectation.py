"""NominatedNodeNameForExpectation on a real kube-apiserver: the binding cycle's interim nomination is on the
API server while PreBind runs, the API server clears it when the pod binds, and the failure handler clears it
when PreBind fails (kube's clearNominatedNode); with the gate off nothing is nominated."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, KubeCluster, load_connection
from scheduler_runtime.config.loader import build
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.status import Status
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing import config_for
from scheduler_runtime.testing.cycle import _first_attempt

pytestmark = pytest.mark.integration


class SeeNomination(Plugin):
    """PreBind reads the pod from the API server, as the cluster autoscaler would while PreBind runs, and
    fails pods labelled `fail`."""

    name = "SeeNomination"
    client: KubeClient
    seen: dict[str, str | None] = {}

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raw = self.client.call("GET", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        self.seen[pod.name] = (raw.get("status") or {}).get("nominatedNodeName")
        return Status.unschedulable("not ready yet") if "fail" in pod.labels else None


@pytest.fixture
def admin(control_plane: Any) -> Iterator[KubeClient]:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)), qps=0)
    yield c
    c.close()


@pytest.fixture
def run(admin: KubeClient) -> Iterator[str]:
    """A namespace and a node of this test's own (other tests share the API server)."""
    rid = uuid.uuid4().hex[:6]
    node = f"nfe-{rid}"
    admin.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": node}})
    admin.call("POST", "/api/v1/nodes", body={
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "ksched.io/test-run": rid}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
    # no node controller runs here: drop the not-ready taint admission adds
    admin.call("PATCH", f"/api/v1/nodes/{node}", body={"spec": {"taints": None}},
               content_type="application/merge-patch+json")
    yield node
    admin.request("DELETE", f"/api/v1/namespaces/{node}")
    admin.request("DELETE", f"/api/v1/nodes/{node}")


def _attempt(control_plane: Any, admin: KubeClient, node: str, name: str, gates: dict[str, bool]) -> dict[str, Any]:
    """One attempt of a pod `name` (labelled `fail` when the name says so); the pod as the API server then
    holds it, once every write of the attempt has landed."""
    reg = build_registry([])
    reg.register(SeeNomination, "test")
    SeeNomination.client = admin
    cfg = build(config_for(SeeNomination, scheduler_name=node), reg)
    cluster = KubeCluster(str(control_plane.kubeconfig_path), qps=0)
    try:
        sched = Scheduler(cluster, cfg, reg, seed=0, feature_gates=gates)
        sched.start()
        created = admin.call("POST", f"/api/v1/namespaces/{node}/pods", body={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"fail": "yes"} if name.startswith("fail") else {}},
            "spec": {"schedulerName": node, "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]}})
        _first_attempt(sched, created["metadata"]["uid"], deadline=time.monotonic() + 60)  # a guard, not a measure
        sched.stop()
        assert cluster.flush()
    finally:
        cluster.stop()
    return admin.call("GET", f"/api/v1/namespaces/{node}/pods/{name}")


def test_nominated_while_prebind_runs_then_cleared_by_the_binding_or_the_failure(
        control_plane: Any, admin: KubeClient, run: str) -> None:
    SeeNomination.seen.clear()
    ok = _attempt(control_plane, admin, run, "ok", {})
    failed = _attempt(control_plane, admin, run, "fail", {})
    assert SeeNomination.seen == {"ok": run, "fail": run}  # on the API server before PreBind
    assert ok["spec"]["nodeName"] == run and "nominatedNodeName" not in ok["status"]  # the binding cleared it
    assert not failed["spec"].get("nodeName")
    assert "nominatedNodeName" not in failed["status"]  # the failure handler cleared it
    cond = next(c for c in failed["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")


def test_gate_off_nominates_nothing(control_plane: Any, admin: KubeClient, run: str) -> None:
    SeeNomination.seen.clear()
    gates = {"NominatedNodeNameForExpectation": False}
    ok = _attempt(control_plane, admin, run, "ok", gates)
    failed = _attempt(control_plane, admin, run, "fail", gates)
    assert SeeNomination.seen == {"ok": None, "fail": None}
    assert ok["spec"]["nodeName"] == run
    assert "nominatedNodeName" not in failed["status"]

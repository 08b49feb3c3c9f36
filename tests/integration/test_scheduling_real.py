"""ksched as a scheduler of a real kube-apiserver: binds, events, conditions, requeue on events, describe-pod."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration
KSCHED = Path(sys.executable).parent / "ksched"


@pytest.fixture(scope="module")
def admin(control_plane) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


SCHEDULER = "ksched-it"  # its own schedulerName: other tests' pods on the shared API server are not ours


@pytest.fixture(scope="module")
def ksched_runner(control_plane, tmp_path_factory) -> Iterator[Runner]:
    reg = build_registry([])
    f = tmp_path_factory.mktemp("cfg") / "config.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                 f"leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {SCHEDULER}\n")
    cfg = load_config(f, reg)
    runner = Runner(cfg, reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path), secure_port=0,
                                         leader_overrides={"leader_elect": False}, seed=1))
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    yield runner
    runner.stop()
    t.join(30)


def make_node(admin: KubeClient, name: str, cpu: str, group: str, memory: str = "32Gi") -> None:
    create_node(admin, name, cpu=cpu, memory=memory, labels={"test-group": group})


def make_pod(admin: KubeClient, ns: str, name: str, group: str, cpu: str = "500m", **spec: object) -> dict:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeSelector": {"test-group": group}, "schedulerName": SCHEDULER,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                     **spec}}
    return admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body=body)


def pod(admin: KubeClient, ns: str, name: str) -> dict:
    return admin.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")


def events(admin: KubeClient, ns: str, name: str) -> list[dict]:
    return admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
                      query={"fieldSelector": f"regarding.name={name}"}).get("items") or []


def test_binds_pods_with_scheduled_events(admin, ksched_runner, namespace):
    g = namespace
    for i in range(3):
        make_node(admin, f"{g}-n{i}", "4", g)
    for i in range(12):
        make_pod(admin, namespace, f"p{i}", g)
    for i in range(12):
        wait_for(lambda i=i: pod(admin, namespace, f"p{i}")["spec"].get("nodeName"), what=f"p{i} bound")
    placed = [pod(admin, namespace, f"p{i}")["spec"]["nodeName"] for i in range(12)]
    assert set(placed) <= {f"{g}-n0", f"{g}-n1", f"{g}-n2"}
    assert max(placed.count(n) for n in set(placed)) <= 6  # LeastAllocated spreads them
    ev = wait_for(lambda: [e for e in events(admin, namespace, "p0") if e["reason"] == "Scheduled"], what="event")
    assert ev[0]["note"] == f"Successfully assigned {namespace}/p0 to {placed[0]}"
    assert ev[0]["reportingController"] == SCHEDULER
    # the result travels in the Binding: it is on the pod in the same write as nodeName
    from scheduler_runtime.describe import RESULT_ANNOTATION

    p0 = pod(admin, namespace, "p0")
    res = json.loads(p0["metadata"]["annotations"][RESULT_ANNOTATION])
    assert res["outcome"] == "scheduled" and res["node"] == placed[0]
    # the scheduler's own pod cache leaves it out (a few KB per pod that nothing reads back)
    informer = ksched_runner.scheduler.cluster.informer("pods")
    cached = wait_for(lambda: (o := informer.get("p0", namespace)) is not None and o["spec"].get("nodeName") and o,
                      what="p0 bound in the scheduler's cache")
    assert RESULT_ANNOTATION not in (cached["metadata"].get("annotations") or {})
    # ...and only there: a scheduler serving a cluster keeps no result per pod in memory (it would hold every
    # pod it ever saw, deleted ones included, for the life of the process)
    assert ksched_runner.scheduler.results.all() == {} and not ksched_runner.scheduler.results.retain


def test_unschedulable_then_node_added(admin, ksched_runner, namespace):
    g = namespace
    make_node(admin, f"{g}-small", "2", g)
    make_pod(admin, namespace, "big", g, cpu="3")
    cond = wait_for(lambda: [c for c in (pod(admin, namespace, "big").get("status") or {}).get("conditions") or []
                             if c["type"] == "PodScheduled" and c["status"] == "False"], what="condition")
    assert cond[0]["reason"] == "Unschedulable"
    assert cond[0]["message"].startswith("0/")
    assert "Insufficient cpu" in cond[0]["message"]
    failed = wait_for(lambda: [e for e in events(admin, namespace, "big") if e["reason"] == "FailedScheduling"],
                      what="FailedScheduling event")
    assert failed[0]["type"] == "Warning" and failed[0]["action"] == "Scheduling"
    t0 = time.monotonic()
    make_node(admin, f"{g}-large", "8", g)
    wait_for(lambda: pod(admin, namespace, "big")["spec"].get("nodeName") == f"{g}-large", timeout=30,
             what="requeue on NodeAdd")
    assert time.monotonic() - t0 < 30  # the node event moved it, not the 5-minute flush


def test_other_scheduler_ignored_and_foreign_pods_counted(admin, ksched_runner, namespace):
    g = namespace
    make_node(admin, f"{g}-only", "4", g)
    # bound by someone else: takes 3.5 of the node's 4 CPUs
    make_pod(admin, namespace, "foreign", g, cpu="3500m", nodeName=f"{g}-only")
    make_pod(admin, namespace, "mine", g, cpu="1")
    make_pod(admin, namespace, "not-mine", g, cpu="100m", schedulerName="other-scheduler")
    wait_for(lambda: [e for e in events(admin, namespace, "mine") if e["reason"] == "FailedScheduling"],
             what="mine rejected because foreign pod uses the room")
    time.sleep(1.0)
    assert not pod(admin, namespace, "not-mine")["spec"].get("nodeName")
    assert not events(admin, namespace, "not-mine")


def test_describe_pod_on_real_cluster(admin, ksched_runner, namespace, control_plane):
    g = namespace
    make_node(admin, f"{g}-d", "2", g)
    make_pod(admin, namespace, "fits", g, cpu="500m")
    make_pod(admin, namespace, "toobig", g, cpu="5")
    wait_for(lambda: pod(admin, namespace, "fits")["spec"].get("nodeName"), what="fits bound")
    wait_for(lambda: "ksched.io/scheduling-result" in (pod(admin, namespace, "toobig")["metadata"].get(
        "annotations") or {}), what="result annotation")
    kc = str(control_plane.kubeconfig_path)
    out = subprocess.run([str(KSCHED), "describe-pod", "toobig", "-n", namespace, "--kubeconfig", kc, "-o", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["node"] == ""
    assert d["schedulingResult"]["outcome"] == "unschedulable"
    assert any("lack" in line and "CPU" in line for line in d["summary"])
    out = subprocess.run([str(KSCHED), "describe-pod", "fits", "-n", namespace, "--kubeconfig", kc],
                         capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin"})
    assert out.returncode == 0, out.stderr
    assert "Successfully assigned" in out.stdout
    out = subprocess.run([str(KSCHED), "describe-pod", "nope", "-n", namespace, "--kubeconfig", kc],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "not found" in out.stderr and "Traceback" not in out.stderr

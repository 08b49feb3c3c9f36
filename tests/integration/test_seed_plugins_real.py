"""The seeds' CRD plugins and MyPreFilter scheduling on the real kube-apiserver, with the CRDs of examples/crds/
installed: objects come from watches, changes requeue pods, gangs bind together, describe-pod explains."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
CSR = "/apis/scheduling.sigs.k8s.io/v1alpha1/clusterscopedresources"


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


def install_crd(admin: KubeClient, file: str) -> None:
    crd = next(d for d in yaml.safe_load_all((ROOT / "examples/crds" / file).read_text()) if d)
    r = admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    assert r.status in (201, 409), r.message()
    name = crd["metadata"]["name"]

    def established() -> bool:
        got = admin.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (got.get("status") or {}).get("conditions") or [])
    wait_for(established, what=f"CRD {name} established")


def make_node(admin: KubeClient, name: str, group: str, cpu: str = "8") -> None:
    create_node(admin, name, cpu=cpu, labels={"test-group": group})


def make_pod(admin: KubeClient, ns: str, name: str, group: str, scheduler: str, requests: dict[str, str],
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> None:
    admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"nodeSelector": {"test-group": group}, "schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": requests, "limits": {
                                     k: v for k, v in requests.items() if "/" in k}}}]}})


def node_of(admin: KubeClient, ns: str, name: str) -> str:
    return admin.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")["spec"].get("nodeName") or ""


def csr(admin: KubeClient, node: str, enabled: bool, score: int) -> None:
    body = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ClusterScopedResource",
            "metadata": {"name": node},
            "spec": {"resourcesFilter": {"company.net/memory": enabled, "cpu": True},
                     "resourcesScore": {"company.net/memory": score, "cpu": 50}}}
    r = admin.request("POST", CSR, body=body)
    if r.status == 409:
        cur = admin.call("GET", f"{CSR}/{node}")
        body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        admin.call("PUT", f"{CSR}/{node}", body=body)
    else:
        assert r.status == 201, r.message()


@pytest.fixture
def run_with(control_plane: Any, tmp_path: Path) -> Iterator[Callable[[str], tuple[Runner, str]]]:
    runners: list[tuple[Runner, threading.Thread]] = []

    def start(profile_yaml: str) -> tuple[Runner, str]:
        scheduler = f"ksched-seed-{uuid.uuid4().hex[:6]}"
        f = tmp_path / f"{scheduler}.yaml"
        f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "leaderElection: {leaderElect: false}\nprofiles:\n"
                     f"- schedulerName: {scheduler}\n" + profile_yaml)
        reg = build_registry([ROOT / "plugins"])
        r = Runner(load_config(f, reg), reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path),
                                                        keep_results=True,
                                                       secure_port=0, seed=1))
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        runners.append((r, t))
        wait_for(lambda: r._started and r._booted.is_set() and r.cluster.health()[0], what="runner started")
        return r, scheduler

    yield start
    for r, t in runners:
        r.stop()
        t.join(60)


def test_node_crd_resource_fit_reads_objects_by_watch_and_requeues_on_their_changes(
        admin: KubeClient, namespace: str, run_with: Callable[[str], tuple[Runner, str]]) -> None:
    install_crd(admin, "clusterscopedresource-crd.yaml")
    g = namespace
    nodes = [f"{g}-a", f"{g}-b", f"{g}-c"]
    for n in nodes:
        make_node(admin, n, g)
    csr(admin, nodes[0], True, 90)
    csr(admin, nodes[1], True, 55)
    # nodes[2] has no object: rejected with "CRD for node not found"
    r, sched = run_with("""  plugins:
    multiPoint:
      enabled:
      - name: NodeCRDResourceFit
        weight: 3
  pluginConfig:
  - name: NodeCRDResourceFit
    args:
      resource: clusterscopedresources.scheduling.sigs.k8s.io
  - name: NodeResourcesFit
    args:
      ignoredResourceGroups: [company.net]
""")
    req = {"cpu": "100m", "company.net/memory": "1"}
    make_pod(admin, namespace, "first", g, sched, req)
    wait_for(lambda: node_of(admin, namespace, "first") == nodes[0], what="first on the best-scored node")
    # the object of node a now disables the resource: the next pod goes to b, no API call per node needed
    csr(admin, nodes[0], False, 90)
    wait_for(lambda: r.cluster.informer("clusterscopedresources.scheduling.sigs.k8s.io").get(nodes[0])
             ["spec"]["resourcesFilter"]["company.net/memory"] is False, what="the watch to deliver the change")
    make_pod(admin, namespace, "second", g, sched, req)
    wait_for(lambda: node_of(admin, namespace, "second") == nodes[1], what="second on b")
    csr(admin, nodes[1], False, 55)
    wait_for(lambda: r.cluster.informer("clusterscopedresources.scheduling.sigs.k8s.io").get(nodes[1])
             ["spec"]["resourcesFilter"]["company.net/memory"] is False, what="b disabled")
    make_pod(admin, namespace, "third", g, sched, req)
    res = wait_for(lambda: (x := r.scheduler.results.get(f"{namespace}/third")) and x, what="third attempted")
    assert res.outcome == "unschedulable"
    assert "CRD for node not found" in res.message and "Node does not enable resource company.net/memory" \
        in res.message
    # an object for node c arrives: the ClusterScopedResource event requeues the pod at once
    t0 = time.monotonic()
    csr(admin, nodes[2], True, 10)
    wait_for(lambda: node_of(admin, namespace, "third") == nodes[2], what="third on c after the object arrived")
    assert time.monotonic() - t0 < 20


def test_coscheduling_binds_a_gang_only_when_it_is_complete(
        admin: KubeClient, namespace: str, run_with: Callable[[str], tuple[Runner, str]]) -> None:
    install_crd(admin, "podgroup-crd.yaml")
    g = namespace
    for i in range(2):
        make_node(admin, f"{g}-n{i}", g, cpu="4")
    admin.call("POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups", body={
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "gang", "namespace": namespace}, "spec": {"minMember": 3}})
    r, sched = run_with("""  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
""")
    label = {"scheduling.x-k8s.io/pod-group": "gang"}
    for i in range(2):
        make_pod(admin, namespace, f"m{i}", g, sched, {"cpu": "1"}, labels=label)
    wait_for(lambda: all(r.scheduler.results.get(f"{namespace}/m{i}") for i in range(2)), what="two attempts")
    time.sleep(2.0)
    assert not node_of(admin, namespace, "m0") and not node_of(admin, namespace, "m1"), \
        "an incomplete gang must not be bound"
    msg = r.scheduler.results.get(f"{namespace}/m0").message
    assert "minMember" in msg or "sibling" in msg or "waiting" in msg.lower(), msg
    make_pod(admin, namespace, "m2", g, sched, {"cpu": "1"}, labels=label)
    wait_for(lambda: all(node_of(admin, namespace, f"m{i}") for i in range(3)), timeout=40,
             what="the whole gang bound once the third member exists")


def test_my_prefilter_rejects_annotated_pods_and_describe_pod_says_why(
        admin: KubeClient, namespace: str, control_plane: Any,
        run_with: Callable[[str], tuple[Runner, str]]) -> None:
    g = namespace
    make_node(admin, f"{g}-n", g)
    r, sched = run_with("""  plugins:
    multiPoint:
      enabled:
      - name: MyPreFilter
  pluginConfig:
  - name: MyPreFilter
    args:
      annotationKeys: [mycompany.com/environment]
""")
    make_pod(admin, namespace, "plain", g, sched, {"cpu": "100m"})
    make_pod(admin, namespace, "tagged", g, sched, {"cpu": "100m"},
             annotations={"mycompany.com/environment": "staging"})
    wait_for(lambda: node_of(admin, namespace, "plain"), what="plain bound")

    def condition() -> dict[str, Any] | None:
        pod = admin.call("GET", f"/api/v1/namespaces/{namespace}/pods/tagged")
        return next((c for c in (pod.get("status") or {}).get("conditions") or []
                     if c["type"] == "PodScheduled" and c["status"] == "False"), None)
    cond = wait_for(condition, what="PodScheduled=False on the tagged pod")
    assert cond["reason"] == "Unschedulable" and "mycompany.com/environment" in cond["message"]
    wait_for(lambda: "ksched.io/scheduling-result" in (admin.call(
        "GET", f"/api/v1/namespaces/{namespace}/pods/tagged")["metadata"].get("annotations") or {}),
        what="results annotation")
    out = subprocess.run([str(KSCHED), "describe-pod", "tagged", "-n", namespace, "--kubeconfig",
                          str(control_plane.kubeconfig_path), "-o", "json"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    text = json.dumps(d)
    assert "MyPreFilter" in text and "mycompany.com/environment" in text
    assert not node_of(admin, namespace, "tagged")

"""On a real kube-apiserver: a pod that stays unschedulable over several attempts gets its FailedScheduling
events aggregated into an events.k8s.io/v1 EventSeries (client-go's broadcaster), and its PodScheduled
condition is patched only when it changes (kube-scheduler's updatePod)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration
SCHEDULER = "ksched-series"
ATTEMPTS = 5


@pytest.fixture(scope="module")
def admin(control_plane) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


@pytest.fixture
def runner(control_plane, tmp_path) -> Iterator[Runner]:
    reg = build_registry([])
    f = tmp_path / "config.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                 f"leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {SCHEDULER}\n")
    cfg = load_config(f, reg)
    # the default results mode: ksched's result annotation is rewritten only when the result changes, so
    # retries leave the pod (and its resourceVersion) alone, as kube-scheduler's do
    r = Runner(cfg, reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path),
                                    keep_results=True, secure_port=0, results="ksched",
                                    leader_overrides={"leader_elect": False}, seed=1))
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    yield r
    r.stop()
    t.join(30)


def _pod(admin: KubeClient, ns: str, name: str, cpu: str, **spec: object) -> dict:
    return admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                 **spec}})


def test_unschedulable_pod_gets_one_event_series(admin, runner, namespace) -> None:
    ns = node = namespace
    create_node(admin, node, cpu="1", labels={"test-group": ns})
    try:
        # pods already on the node: deleting one is a cluster event that retries the pending pod, and its
        # unschedulable message stays the same
        for i in range(ATTEMPTS - 1):
            _pod(admin, ns, f"filler{i}", "100m", nodeName=node)
        created = _pod(admin, ns, "target", "2", schedulerName=SCHEDULER, nodeSelector={"test-group": ns})
        key = f"{ns}/target"

        def attempts() -> int:
            r = runner.scheduler.results.get(key)
            return r.attempt if r is not None else 0

        def pod() -> dict:
            return admin.call("GET", f"/api/v1/namespaces/{ns}/pods/target")

        def scheduled_condition() -> dict | None:
            return next((c for c in pod()["status"].get("conditions") or () if c["type"] == "PodScheduled"), None)

        wait_for(lambda: attempts() >= 1, what="first attempt")
        cond = wait_for(scheduled_condition, what="PodScheduled condition")
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
        assert "Insufficient cpu" in cond["message"]
        wait_for(lambda: "ksched.io/scheduling-result" in (pod()["metadata"].get("annotations") or {}),
                 what="the result annotation")
        patched = pod()
        for i in range(ATTEMPTS - 1):
            admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/filler{i}", body={"gracePeriodSeconds": 0})
            wait_for(lambda i=i: attempts() >= i + 2, timeout=60, what=f"attempt {i + 2}")
        assert attempts() == ATTEMPTS
        cluster = runner.cluster
        assert cluster.flush(10)

        # the condition and the result annotation were written once each: later attempts found both
        # unchanged and left the pod alone
        final = pod()
        assert final["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        assert scheduled_condition() == cond
        assert cluster._pod_writer.written == 2 and cluster._pod_writer.skipped >= ATTEMPTS - 1

        def failed_events() -> list[dict]:
            items = admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
                               query={"fieldSelector": "regarding.name=target"})["items"]
            return [e for e in items if e["reason"] == "FailedScheduling"]

        events = failed_events()
        series = [e for e in events if e.get("series")]
        assert len(series) == 1, events
        ev = series[0]
        assert ev["series"]["count"] >= 2
        assert ev["regarding"]["resourceVersion"] == final["metadata"]["resourceVersion"]
        assert ev["type"] == "Warning" and ev["action"] == "Scheduling"
        assert ev["reportingController"] == SCHEDULER
        assert ev["reportingInstance"] == f"{SCHEDULER}-{cluster.hostname}"
        assert "Insufficient cpu" in ev["note"]
        # as with kube-scheduler, the first attempt's event regards the pod before its PodScheduled patch,
        # so it is a different (isomorphic-key) event; every later attempt joined the one series
        others = [e for e in events if not e.get("series")]
        assert len(others) <= 1, events
        for e in others:
            assert e["regarding"]["resourceVersion"] == created["metadata"]["resourceVersion"]

        # occurrences past the second are counted in memory; the periodic refresh writes them
        writer = cluster._event_writer
        assert writer.series_count(ev) == ATTEMPTS - len(others)
        assert writer.refresh_series() >= 1
        events = failed_events()
        total = sum((e.get("series") or {}).get("count", 1) for e in events)
        assert total == ATTEMPTS, events
    finally:
        admin.request("DELETE", f"/api/v1/nodes/{node}")

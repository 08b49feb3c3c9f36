"""The local control plane itself: it serves, binds and survives an API-server restart."""

from __future__ import annotations

import subprocess

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.kubeversion import KUBE_VERSION

pytestmark = pytest.mark.integration


def _client(cp) -> KubeClient:
    return KubeClient(load_connection(str(cp.kubeconfig_path)))


def test_node_pod_bind_and_restart(control_plane, namespace):
    c = _client(control_plane)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"cp-node-{namespace}"},
            "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    created = c.call("POST", "/api/v1/nodes", body=node)
    assert created["metadata"]["name"] == node["metadata"]["name"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    p = c.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "p", "namespace": namespace, "uid": p["metadata"]["uid"]},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"]}}
    r = c.request("POST", f"/api/v1/namespaces/{namespace}/pods/p/binding", body=binding)
    assert r.status == 201
    control_plane.restart_apiserver()
    got = _client(control_plane).call("GET", f"/api/v1/namespaces/{namespace}/pods/p")
    assert got["spec"]["nodeName"] == node["metadata"]["name"]


def test_kube_scheduler_binary_runs(control_plane):
    out = subprocess.run([str(control_plane.bin_dir / "kube-scheduler"), "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and f"v{KUBE_VERSION}" in out.stdout


def test_dev_cluster_up_then_down_reports_each_process(tmp_path):
    """`dev-cluster up` records etcd and kube-apiserver by identity; `down` stops exactly those, one line each."""
    import json
    import sys
    import time
    from pathlib import Path

    from scheduler_runtime import processes
    from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable

    try:
        ControlPlane(state_dir=tmp_path)
    except ControlPlaneUnavailable as exc:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    repo = Path(__file__).resolve().parents[2]

    def ksched(*args):
        return subprocess.run([sys.executable, "-m", "ksched_cli", "dev-cluster", *args, "--state-dir",
                               str(tmp_path)], cwd=repo, capture_output=True, text=True, timeout=180)

    # a stale state file of a cluster that is not ready: `up` stops what is still ours of it, then starts
    stale = subprocess.Popen(["sh", "-c", "echo ready; exec sleep 60"], stdout=subprocess.PIPE,
                             start_new_session=True)
    assert stale.stdout is not None and stale.stdout.readline() == b"ready\n"
    while (ident := processes.identify(stale.pid)) is None or ident.cmdline != ("sleep", "60"):
        time.sleep(0.01)  # until exec is done
    (tmp_path / "state.json").write_text(json.dumps({"version": 2, "api_port": 1, "etcd_port": 2, "processes": [
        {"name": "kube-apiserver", **ident.to_json()}]}))
    try:
        up = ksched("up")
        assert stale.wait(30) == -15
    finally:
        stale.kill()
        stale.wait()
    assert f"previous dev cluster: kube-apiserver pid {stale.pid}: stopped by SIGTERM" in up.stderr
    st = json.loads((tmp_path / "state.json").read_text()) if (tmp_path / "state.json").exists() else {}
    pids = [e["pid"] for e in st.get("processes", [])]
    try:
        assert up.returncode == 0, up.stderr
        assert [e["name"] for e in st["processes"]] == ["kube-apiserver", "etcd"]
        for p, e in zip(pids, st["processes"], strict=True):
            assert processes.identify(p) == processes.Identity.from_json(e)
        down = ksched("down")
        assert down.returncode == 0, down.stderr
        assert down.stdout.splitlines() == [f"kube-apiserver pid {pids[0]}: stopped by SIGTERM",
                                            f"etcd pid {pids[1]}: stopped by SIGTERM", "stopped"]
        assert all(processes.identify(p) is None for p in pids)
    finally:
        for p in pids:  # whatever a failed assertion left running
            ident = processes.identify(p)
            if ident is not None and ident == processes.Identity.from_json(
                    next(e for e in st["processes"] if e["pid"] == p)):
                processes.stop("leftover", ident, grace=5)

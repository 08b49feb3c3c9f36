"""`ksched dev-cluster up --nodes` for real: kube-apiserver, kube-controller-manager's node lifecycle controller
and the kwok controller (built from Go modules by hack/build-kwok.sh). Nodes turn Ready with leases, the
API server admits every example pod, `ksched run` schedules them and KWOK runs them; `down` leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime import devcluster, kwok, processes
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable, find_binaries

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
#: generous: a bound on a hang, not a performance assertion
WAIT = 120.0


def _need_binaries() -> None:
    try:
        find_binaries()
        kwok.find_kwok()
    except (ControlPlaneUnavailable, kwok.KwokUnavailable) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def _ksched(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ksched_cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


#: what `up --nodes` starts
AGENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")


def _started_for(d: Path) -> dict[int, processes.Identity]:
    """Live processes (by pid) whose command line names a file under `d`: whatever this test's dev cluster
    started, recorded in its state file or not (the binaries' flags all point into the state dir)."""
    out = {}
    for entry in os.scandir("/proc"):
        ident = processes.identify(int(entry.name)) if entry.name.isdigit() else None
        if ident is not None and any(f"{d}/" in arg for arg in ident.cmdline):
            out[ident.pid] = ident
    return out


def _agents(d: Path) -> dict[str, list[int]]:
    """Pids of AGENTS started for `d`, by binary name."""
    out: dict[str, list[int]] = {n: [] for n in AGENTS}
    for pid, ident in _started_for(d).items():
        name = Path(ident.cmdline[0]).name if ident.cmdline else ""
        if name in out:
            out[name].append(pid)
    return out


def _in_groups(pgids: set[int]) -> list[int]:
    """Live processes in any of the process groups `pgids`."""
    out = []
    for entry in os.scandir("/proc"):
        fields = processes._stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) in pgids:
            out.append(int(entry.name))
    return out


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A dev cluster's state dir; whatever it still records at the end is stopped (SIGKILL after 5 s), and so
    is anything else still running for it, so a failing test leaves nothing behind either."""
    _need_binaries()
    d = tmp_path / "dev"
    yield d
    ControlPlane.stop_detached(d, grace=5)
    for pid, ident in _started_for(d).items():
        processes.stop(f"leftover pid {pid}", ident, grace=0)


def _wait(what: str, check: Any) -> Any:
    deadline = time.monotonic() + WAIT
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT:g} s")
        time.sleep(0.5)


def test_kwok_nodes_turn_ready_and_scheduled_example_pods_run(state_dir: Path) -> None:
    bound = state_dir.parent / "bound.yaml"
    bound.write_text("".join(
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: pinned}}\n"
        f"spec: {{nodeName: {node}, containers: [{{name: c, image: pause}}]}}\n"
        for name, node in (("on-kwok", "kwok-node-1"), ("on-nothing", "no-such-node"))))
    up = _ksched("dev-cluster", "up", "--state-dir", str(state_dir), "--nodes", "3", "-f", str(bound))
    assert up.returncode == 0, up.stderr
    assert "pods: 2 created, 0 already there, 0 refused (2 bound to a node, 0 pending for a scheduler)" in up.stderr
    assert "warning: pod/pinned/on-nothing is bound to node no-such-node, which this cluster does not have: " \
           "it stays Pending" in up.stderr
    assert "on-kwok" not in up.stderr
    kubeconfig = up.stdout.strip()
    assert kubeconfig == str(state_dir / "admin.kubeconfig")
    assert "nodes: 3/3 Ready" in up.stderr
    c = KubeClient(load_connection(kubeconfig, fallbacks=False))
    nodes = c.call("GET", "/api/v1/nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["kwok-node-0", "kwok-node-1", "kwok-node-2"]
    assert all(kwok.node_ready(n) and not n["spec"].get("taints") for n in nodes)  # not-ready taint removed
    pinned = _wait("a pod bound to a KWOK node Running", lambda: (p := c.call(
        "GET", "/api/v1/namespaces/pinned/pods/on-kwok"))["status"].get("phase") == "Running" and p)
    assert pinned["status"]["podIP"].startswith("10.244.") and pinned["status"]["hostIP"] == "127.0.0.1"
    leases = c.call("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]
    assert {le["metadata"]["name"] for le in leases} >= {"kwok-node-0", "kwok-node-1", "kwok-node-2"}
    first = _agents(state_dir)
    assert all(len(pids) == 1 for pids in first.values()), first

    # the example cluster and every example pod: nothing refused
    up2 = _ksched("dev-cluster", "up", "--state-dir", str(state_dir), "--nodes", "examples/cluster",
                  "-f", "examples/pods.yaml")
    assert up2.returncode == 0, up2.stderr
    assert "nodes: 6/6 Ready" in up2.stderr
    assert "pods: 24 created, 0 already there, 0 refused (4 bound to a node, 20 pending for a scheduler)" \
        in up2.stderr, up2.stderr
    assert "refused" not in up2.stderr.replace("0 refused", "")
    assert "started" not in up2.stderr, up2.stderr  # the running agents are reused...
    assert _agents(state_dir) == first  # ...not joined by a second kwok

    status = _ksched("dev-cluster", "status", "--state-dir", str(state_dir))
    assert status.returncode == 0, status.stderr
    assert "nodes: 9 (9 Ready, 9 managed by kwok)" in status.stdout
    for name in ("kwok", "kube-controller-manager", "kube-apiserver", "etcd"):
        assert f"\n{name} pid " in status.stdout

    with open(state_dir / "ksched-run.log", "wb") as log:
        run = subprocess.Popen([sys.executable, "-m", "ksched_cli", "run", "--kubeconfig", kubeconfig,
                                "--leader-elect=false", "--secure-port=0"], cwd=REPO, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def pods() -> dict[str, dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in c.call("GET", "/api/v1/namespaces/shop/pods")["items"]}

        def decided() -> dict[str, dict[str, Any]] | None:
            ps = pods()
            scheduled = [p for p in ps.values() if p["spec"].get("nodeName")]
            unschedulable = [p for p in ps.values() if any(
                co["type"] == "PodScheduled" and co.get("reason") == "Unschedulable"
                for co in p["status"].get("conditions") or [])]
            gated = [p for p in ps.values() if p["spec"].get("schedulingGates")]
            running = all(p["status"].get("phase") == "Running" for p in scheduled)
            return ps if len(scheduled) + len(unschedulable) + len(gated) == len(ps) and running else None

        ps = _wait("every example pod scheduled and Running, or unschedulable with a reason", decided)
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(10)
    kwok_nodes = {n["metadata"]["name"] for n in c.call("GET", "/api/v1/nodes")["items"] if kwok.is_kwok_node(n)}
    running = {name: p["spec"]["nodeName"] for name, p in ps.items() if p["status"].get("phase") == "Running"}
    assert len(running) >= 15, running
    assert set(running.values()) <= kwok_nodes
    assert running["trainer"] == "node-gpu"  # the one node with GPUs and the toleration for its taint
    assert {"cache-0", "db-0", "web-1", "web-2", "api-1"} <= set(running)
    assert "huge" not in running and "needs-gpu-no-toleration" not in running and "gated" not in running
    assert all(p["status"].get("podIP") for name, p in ps.items() if name in running)

    # teardown: every recorded process stops, nothing started for this cluster is left, the state file goes
    st = json.loads((state_dir / "state.json").read_text())
    recorded = devcluster.recorded(st)
    assert [n for n, _ in recorded] == ["kube-controller-manager", "kwok", "kube-apiserver", "etcd"]
    assert {ident.pid for _, ident in recorded if ident} == {pids[0] for pids in first.values()}
    assert all(ident and ident.cmdline for _, ident in recorded), recorded  # recorded after exec, not during
    groups = set(_started_for(state_dir))  # each leads its own session, so its pid is its process group
    down = _ksched("dev-cluster", "down", "--state-dir", str(state_dir), "--grace-period", "10")
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip().endswith("stopped")
    for name, ident in recorded:
        assert ident is not None and processes.identify(ident.pid) is None, name
    assert _started_for(state_dir) == {}
    assert _in_groups(groups) == []
    assert not (state_dir / "state.json").exists()
    assert _ksched("dev-cluster", "status", "--state-dir", str(state_dir)).returncode == 1

"""The real control plane for integration tests: etcd + kube-apiserver built from Go modules."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable, find_prev_scheduler
from tests.controlplanes import started_control_plane


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with started_control_plane() as cp:
        yield cp


@pytest.fixture(scope="session")
def ksched_control_plane(control_plane: ControlPlane) -> ControlPlane:
    """The `ksched_cluster` fixture's API server is the suite's shared one: no second etcd per session."""
    return control_plane


@pytest.fixture(scope="session")
def controller_manager(control_plane: ControlPlane) -> ControlPlane:
    """The shared control plane with kube-controller-manager's resourceclaim controller running."""
    try:
        control_plane.start_controller_manager()
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    return control_plane


@pytest.fixture(scope="session")
def prev_kube_scheduler() -> Path:
    """The previous minor's real kube-scheduler (hack/controlplane-prev/VERSION), for the parity tests of
    `--emulated-version <previous minor>`."""
    try:
        return find_prev_scheduler()
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace per test, so tests on the shared API server do not see each other's pods."""
    from scheduler_runtime.cluster.kube import KubeClient, load_connection

    client = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}})
    return name


def _serve_secure_port(cmd: list[str], log: Path, ready: Callable[[int], bool], timeout: float = 90.0
                       ) -> Iterator[int]:
    """Start a scheduler (`cmd`) serving its secure port on a free local port; yield the port once `ready`
    says so; on close stop its process group (SIGTERM, then SIGKILL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = log.open("wb")
    proc = subprocess.Popen([*cmd, f"--secure-port={port}", "--bind-address=127.0.0.1"], stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready(port):
                    break
            except OSError:
                pass
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        out.close()


@pytest.fixture(scope="session")
def serve_secure_port() -> Callable[..., Iterator[int]]:
    """`serve(cmd, log, ready, timeout)`: a generator that starts a scheduler on a free secure port, yields the
    port once `ready(port)` is true and stops the process when closed (kube-scheduler and ksched alike)."""
    return _serve_secure_port

"""The real control plane for integration tests: etcd + kube-apiserver built from Go modules."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable, find_prev_scheduler


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        cp = ControlPlane()
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


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

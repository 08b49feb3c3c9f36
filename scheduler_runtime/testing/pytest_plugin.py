"""pytest plugin: run one plugin test on the embedded cluster and again on a real kube-apiserver.

Load it in a test module (or the root conftest.py) with
`pytest_plugins = ["scheduler_runtime.testing.pytest_plugin"]`, or with `pytest -p
scheduler_runtime.testing.pytest_plugin`. A test that takes the `ksched_cluster` fixture runs twice:

    def test_spot_nodes(ksched_cluster):
        r = ksched_cluster.run_cycle(AvoidSpot, nodes, pod)      # same arguments as run_cycle
        assert_scheduled_to(r, "on-demand")

`[embedded]` schedules in memory; `[api-server]` starts etcd + kube-apiserver once per session (binaries from
KUBEBUILDER_ASSETS or the cache `hack/build-controlplane.sh` fills) and schedules through it. Without the
binaries that case is skipped with the reason, except under CI=true, where it fails: a CI run that silently
tested nothing on the real API server would be worse than a red one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from ..controlplane import ControlPlane, ControlPlaneUnavailable
from .cycle import KschedCluster

BACKENDS = ("embedded", "api-server")


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the real control plane is unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ksched_control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback for the whole session (skipped, or failed under CI=true, without
    the binaries)."""
    try:
        cp = ControlPlane()
    except ControlPlaneUnavailable as exc:
        _unavailable(str(exc))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(params=BACKENDS)
def ksched_cluster(request: pytest.FixtureRequest) -> KschedCluster:
    """The backend of this run of the test; the test runs once per backend."""
    if request.param == "embedded":
        return KschedCluster("embedded")
    cp: ControlPlane = request.getfixturevalue("ksched_control_plane")
    return KschedCluster("api-server", str(cp.kubeconfig_path))

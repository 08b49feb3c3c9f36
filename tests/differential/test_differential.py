"""Randomized differential test: ksched decides as the real kube-scheduler v1.37.2 does (see oracle.py).

A few seeds in CI; `python bench/differential.py --seeds N` runs many and prints the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_runtime.controlplane import ControlPlane
from tests.controlplanes import started_control_plane

from .oracle import compare, run_ksched, run_kube
from .scenario import generate

pytestmark = pytest.mark.integration
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def own_control_plane(tmp_path_factory: pytest.TempPathFactory):
    with started_control_plane(state_dir=tmp_path_factory.mktemp("diff-cp")) as cp:
        cp.start_controller_manager(("persistentvolume-binder-controller",))
        yield cp


@pytest.mark.parametrize("seed", SEEDS)
def test_ksched_decides_as_kube_scheduler(own_control_plane: ControlPlane, tmp_path: Path, seed: int) -> None:
    sc = generate(seed, n_nodes=8, n_pods=20)
    kube = run_kube(own_control_plane.kubeconfig_path, own_control_plane.bin_dir, tmp_path, sc)
    ours = run_ksched(sc, kube, tmp_path)
    cmp = compare(seed, kube.decisions, ours)
    compared = sum(a + d for a, d in cmp.counts.values())
    assert compared >= len(sc.pods), cmp.counts
    assert sum(cmp.counts.get("scores", [0, 0])) > 0, cmp.counts  # kube's -v=10 score lines were read
    assert not cmp.disagreements, "\n".join(str(d) for d in cmp.disagreements)

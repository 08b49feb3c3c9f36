"""The harness's API-server runner gives the same verdicts as the embedded one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.status import Status
from scheduler_runtime.framework.types import NodeInfo, NodeScore
from scheduler_runtime.objects import Pod
from scheduler_runtime.testing import (
    KschedCluster,
    assert_gated,
    assert_scheduled_to,
    assert_score,
    make_node,
    make_pod,
    plugin_from_folder,
    run_cycle,
    run_cycle_on_api_server,
)

pytestmark = pytest.mark.integration
pytest_plugins = ["scheduler_runtime.testing.pytest_plugin"]
ROOT = Path(__file__).resolve().parents[2]


def test_same_verdicts_embedded_and_on_the_api_server(control_plane: Any) -> None:
    plugin = plugin_from_folder(ROOT / "plugins/my_prefilter", "MyPreFilter")
    nodes = [make_node("small").capacity(cpu="1").build(), make_node("big").capacity(cpu="8").build(),
             make_node("gpu").capacity(cpu="8").taint("dedicated", "gpu").build()]
    for pod in (make_pod("p").req(cpu="2").build(),
                make_pod("q").req(cpu="100m").annotate("mycompany.com/environment", "x").build()):
        mem = run_cycle(plugin, nodes, pod)
        real = run_cycle_on_api_server(str(control_plane.kubeconfig_path), plugin, nodes, pod)
        assert (real.outcome, real.node) == (mem.outcome, mem.node)
        assert real.prefilter == mem.prefilter
        strip = {"NodeAffinity"}  # the real run pins the pod to its own nodes with a nodeSelector
        assert {n: {p: v for p, v in d.items() if p not in strip} for n, d in real.filters.items()} == \
            {n: {p: v for p, v in d.items() if p not in strip} for n, d in mem.filters.items()}
        assert real.scores.keys() == mem.scores.keys()


class GateRankBind(Plugin):
    """Gates pods labelled `hold`, scores nodes by their `rank` label, fails PreBind for pods labelled
    `no-volume`: verdicts at PreEnqueue, Score/NormalizeScore and PreBind that must read back the same."""

    name = "GateRankBind"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return Status.unschedulable("held") if "hold" in pod.labels else None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        return int(node_info.node.labels.get("rank", "0"))

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        top = max(s.score for s in scores)
        for s in scores:
            s.score = s.score * 100 // top if top else 0
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return Status.unschedulable("volume not ready") if "no-volume" in pod.labels else None


def test_gating_scores_and_prebind_read_back_the_same_on_the_api_server(ksched_cluster: KschedCluster) -> None:
    nodes = [make_node(f"r{i}").capacity(cpu="8").label("rank", str(i)).build() for i in (1, 2, 4)]
    # a gated pod ends the attempt at once: were it waited for like a queued pod, the harness would raise
    # TimeoutError instead of returning
    gated = ksched_cluster.run_cycle(GateRankBind, nodes, make_pod("held").label("hold").build())
    assert_gated(gated, by="GateRankBind")
    r = ksched_cluster.run_cycle(GateRankBind, nodes, make_pod("p").req(cpu="1").build(), weight=2)
    assert_scheduled_to(r, "r4")
    assert_score(r, "r1", "GateRankBind", raw=1, normalized=25, weighted=50)
    assert_score(r, "r4", "GateRankBind", raw=4, normalized=100, weighted=200)
    failed = ksched_cluster.run_cycle(GateRankBind, nodes, make_pod("v").label("no-volume").build())
    assert failed.prebind["GateRankBind"] == "volume not ready" and failed.node == ""

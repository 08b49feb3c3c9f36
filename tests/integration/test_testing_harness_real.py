"""The harness's API-server runner gives the same verdicts as the embedded one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.testing import make_node, make_pod, plugin_from_folder, run_cycle, run_cycle_on_api_server

pytestmark = pytest.mark.integration
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

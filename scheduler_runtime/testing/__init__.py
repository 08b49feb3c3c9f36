"""Test harness for ksched plugins: build nodes and pods, run one scheduling attempt, assert verdicts.

    from scheduler_runtime.testing import make_node, make_pod, run_cycle, assert_filtered
    r = run_cycle(MyPlugin, [make_node("a").build()], make_pod("p").req(cpu="1").build())

`scheduler_runtime.testing.pytest_plugin` adds the `ksched_cluster` fixture (embedded and real API server).
See docs/testing-plugins.md.
"""

from .asserts import (
    assert_filtered,
    assert_gated,
    assert_passed,
    assert_scheduled_to,
    assert_score,
    assert_unschedulable,
)
from .builders import NodeBuilder, PodBuilder, make_node, make_pod
from .cycle import (
    CycleResult,
    KschedCluster,
    config_for,
    plugin_from_folder,
    queue_order,
    run_cycle,
    run_cycle_on_api_server,
)

__all__ = [
    "CycleResult", "KschedCluster", "NodeBuilder", "PodBuilder", "assert_filtered", "assert_gated", "assert_passed",
    "assert_score", "assert_scheduled_to", "assert_unschedulable", "config_for", "make_node", "make_pod",
    "plugin_from_folder", "queue_order", "run_cycle", "run_cycle_on_api_server",
]

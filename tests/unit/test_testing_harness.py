"""The plugin test harness: builders, one-cycle runner, assertions (embedded cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.status import Status
from scheduler_runtime.framework.types import NodeInfo, NodeScore, QueuedPodInfo
from scheduler_runtime.objects import Pod
from scheduler_runtime.testing import (
    KschedCluster,
    assert_filtered,
    assert_gated,
    assert_passed,
    assert_scheduled_to,
    assert_score,
    assert_unschedulable,
    make_node,
    make_pod,
    plugin_from_folder,
    queue_order,
    run_cycle,
)

ROOT = Path(__file__).resolve().parents[2]
MyPreFilter = plugin_from_folder(ROOT / "plugins/my_prefilter", "MyPreFilter")


def nodes() -> list[dict]:
    return [make_node("small").capacity(cpu="1").build(), make_node("big").capacity(cpu="8").build(),
            make_node("gpu").capacity(cpu="8").taint("dedicated", "gpu").build()]


def test_default_profile_verdicts_per_node() -> None:
    r = run_cycle(None, nodes(), make_pod("p").req(cpu="2").build())
    assert_scheduled_to(r, "big")
    assert_filtered(r, "small", by="NodeResourcesFit", reason="Insufficient cpu")
    assert_filtered(r, "gpu", by="TaintToleration", reason="untolerated taint")
    assert_passed(r, "big")
    with pytest.raises(AssertionError, match="expected the pod on small"):
        assert_scheduled_to(r, "small")


def test_scores_raw_and_weighted() -> None:
    r = run_cycle(None, [make_node("a").capacity(cpu="4").build(), make_node("b").capacity(cpu="8").build()],
                  make_pod("p").req(cpu="1", memory="1Gi").build())
    assert_score(r, "b", "TaintToleration", raw=0, weighted=300)  # no taints: normalised 100 x weight 3
    assert r.total("b") > r.total("a")
    assert_scheduled_to(r, "b")


def test_plugin_under_test_with_args_and_prefilter_rejection() -> None:
    pod = make_pod("p").req(cpu="100m").annotate("team.io/frozen", "yes").build()
    r = run_cycle(MyPreFilter, nodes(), pod, args={"annotationKeys": ["team.io/frozen"]})
    assert_unschedulable(r, contains="team.io/frozen")
    assert r.prefilter["MyPreFilter"] != "success"
    assert_filtered(r, "big", by="MyPreFilter", reason="does not allow")
    ok = run_cycle(MyPreFilter, nodes(), make_pod("q").req(cpu="100m").build(),
                   args={"annotationKeys": ["team.io/frozen"]})
    assert_scheduled_to(ok, "big")


def test_existing_pods_take_room() -> None:
    r = run_cycle(None, [make_node("a").capacity(cpu="2").build(), make_node("b").capacity(cpu="2").build()],
                  make_pod("p").req(cpu="1500m").build(),
                  existing=[make_pod("old").req(cpu="1").on_node("b").build()])
    assert_scheduled_to(r, "a")
    assert_filtered(r, "b", by="NodeResourcesFit")


def test_per_node_plugin_after_batch_plugins_reports_the_first_rejecting_plugin() -> None:
    class RejectB(Plugin):
        name = "RejectB"

        def filter(self, state, pod, node_info):  # noqa: ANN001, ANN202
            return Status.unschedulable("names with b are out") if node_info.node.name.startswith("b") else None

    ns = [make_node("a").capacity(cpu="8").build(), make_node("big").capacity(cpu="8").build(),
          make_node("bare").capacity(cpu="1").build(), make_node("c").capacity(cpu="1").build()]
    r = run_cycle(RejectB, ns, make_pod("p").req(cpu="2").build())
    assert_scheduled_to(r, "a")
    assert_filtered(r, "big", by="RejectB", reason="names with b")
    # fails NodeResourcesFit (a batch plugin, earlier in the profile) and RejectB: the first one is reported
    assert_filtered(r, "bare", by="NodeResourcesFit", reason="Insufficient cpu")
    assert "RejectB" not in r.filters["bare"]
    assert_filtered(r, "c", by="NodeResourcesFit")


def test_crd_plugin_reads_objects_by_plural_group_on_the_embedded_cluster() -> None:
    fit = plugin_from_folder(ROOT / "plugins/node_crd_resource_fit", "NodeCRDResourceFit")

    def csr(node: str, enabled: bool, score: int) -> dict:
        return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ClusterScopedResource",
                "metadata": {"name": node}, "spec": {"resourcesFilter": {"cpu": enabled},
                                                      "resourcesScore": {"cpu": score}}}

    ns = [make_node(n).capacity(cpu="8").build() for n in ("a", "b", "c")]
    r = run_cycle(fit, ns, make_pod("p").req(cpu="1").build(),
                  args={"resource": "clusterscopedresources.scheduling.sigs.k8s.io"},
                  objects=[csr("a", True, 20), csr("b", True, 90), csr("c", False, 100)])
    assert_filtered(r, "c", by="NodeCRDResourceFit", reason="does not enable resource cpu")
    assert_score(r, "b", "NodeCRDResourceFit", raw=90)
    assert_scheduled_to(r, "b")


class HoldLabelled(Plugin):
    """PreEnqueue gate + QueueSort by name + PreScore/Score/NormalizeScore + PreBind: one plugin per point
    the harness reports, each with a verdict the tests can tell apart from the defaults."""

    name = "HoldLabelled"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return Status.unschedulable("held") if "hold" in pod.labels else None

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.pod.name < b.pod.name

    def pre_score(self, state: CycleState, pod: Pod, nodes: Any) -> Status | None:
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        return int(node_info.node.labels.get("rank", "0"))

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        top = max(s.score for s in scores)
        for s in scores:
            s.score = s.score * 100 // top if top else 0
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return Status.unschedulable("volume not ready") if "no-volume" in pod.labels else None


def ranked() -> list[dict]:
    return [make_node(f"r{i}").capacity(cpu="8").label("rank", str(i)).build() for i in (1, 2, 4)]


def test_preenqueue_gate_is_reported_and_nothing_else_runs() -> None:
    r = run_cycle(HoldLabelled, ranked(), make_pod("p").label("hold").build())
    assert_gated(r, by="HoldLabelled")
    assert r.outcome == "gated" and r.node == "" and r.filters == {} and "HoldLabelled" in r.message
    ok = run_cycle(HoldLabelled, ranked(), make_pod("q").build())
    assert ok.preenqueue == {"SchedulingGates": "success", "DynamicResources": "success",
                             "DefaultPreemption": "success", "HoldLabelled": "success"}
    with pytest.raises(AssertionError, match="gated by HoldLabelled"):
        assert_gated(ok, by="HoldLabelled")


def test_raw_normalized_and_weighted_scores_and_prescore() -> None:
    r = run_cycle(HoldLabelled, ranked(), make_pod("p").req(cpu="1").build(), weight=3)
    assert r.prescore["HoldLabelled"] == "success"
    assert_score(r, "r1", "HoldLabelled", raw=1, normalized=25, weighted=75)
    assert_score(r, "r4", "HoldLabelled", raw=4, normalized=100, weighted=300)
    assert r.normalized["r2"]["HoldLabelled"] == 50
    assert_scheduled_to(r, "r4")
    with pytest.raises(AssertionError, match="normalized score of r1 is 25, expected 30"):
        assert_score(r, "r1", "HoldLabelled", normalized=30)


def test_prebind_rejection_is_recorded() -> None:
    r = run_cycle(HoldLabelled, ranked(), make_pod("p").label("no-volume").build())
    assert r.prebind["HoldLabelled"] == "volume not ready"
    assert r.outcome == "unschedulable" and r.node == ""
    # the PreBind plugins before the failing one passed; the message is pinned on the one that gave it
    assert r.prebind == {"VolumeBinding": "success", "DynamicResources": "success",
                         "HoldLabelled": "volume not ready"}


def test_queue_order_uses_the_plugins_less_and_skips_gated_pods() -> None:
    pods = [make_pod(n).priority(p).build() for n, p in (("c", 1000), ("a", 1), ("b", 500))]
    assert queue_order(HoldLabelled, pods) == ["a", "b", "c"]  # by name, priority ignored
    assert queue_order(None, pods) == ["c", "b", "a"]  # PrioritySort
    held = [*pods, make_pod("0-held").label("hold").build()]
    assert queue_order(HoldLabelled, held) == ["a", "b", "c"]


def test_postfilter_preemption_nominates_a_node() -> None:
    ns = [make_node("only").capacity(cpu="2").build()]
    victim = make_pod("low").req(cpu="2").priority(0).on_node("only").build()
    r = run_cycle(None, ns, make_pod("vip").req(cpu="2").priority(1000).build(), existing=[victim])
    # one attempt, as kube-scheduler makes: the victim is evicted and the node nominated, the pod not yet bound
    assert r.outcome == "unschedulable" and r.nominated_node == "only" and r.node == ""
    # kube 1.37's preemption says where it preempts, in the FailedScheduling message too
    placement = "preemption: found a potential placement for pod on node only, preempting 1 victims"
    assert r.postfilter == placement
    assert r.events == [f"FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu. {placement}"]
    nothing = run_cycle(None, ns, make_pod("big").req(cpu="4").build())
    assert_unschedulable(nothing, contains="Insufficient cpu")
    assert "preemption" in nothing.postfilter and nothing.nominated_node == ""


def test_records_for_calling_a_method_directly() -> None:
    info = make_node("n").capacity(cpu="2").taint("k", "v").node_info(make_pod("old").req(cpu="1500m").build())
    assert info.requested["cpu"] == 1500 and info.node.taints[0].key == "k" and info.pods[0].node_name == "n"
    pod = make_pod("p").req(cpu="500m", memory="1Gi").toleration("k", "v").record()
    assert pod.requests["cpu"] == 500 and pod.tolerations[0].key == "k"
    assert HoldLabelled(None, None).score(CycleState(), pod, make_node("x").label("rank", "7").node_info()) == 7
    assert HoldLabelled(None, None).pre_enqueue(make_pod("h").label("hold").record()).message == "held"


def test_ksched_cluster_embedded_runs_run_cycle() -> None:
    r = KschedCluster("embedded").run_cycle(None, nodes(), make_pod("p").req(cpu="2").build())
    assert r.outcome == "scheduled" and r.node == "big"


def test_ksched_cluster_fixture_skips_without_binaries_but_fails_under_ci(tmp_path: Path) -> None:
    (tmp_path / "test_both.py").write_text(
        'pytest_plugins = ["scheduler_runtime.testing.pytest_plugin"]\n\n\n'
        "def test_backend(ksched_cluster):\n"
        "    assert ksched_cluster.kind in ('embedded', 'api-server')\n")
    empty = tmp_path / "no-binaries"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(KUBEBUILDER_ASSETS=str(empty), KSCHED_CACHE=str(empty))

    def pytest_run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_both.py"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, **extra})

    local = pytest_run({})
    assert local.returncode == 0, local.stdout
    assert "1 passed, 1 skipped" in local.stdout and "no kube-apiserver/etcd binaries" in local.stdout
    ci = pytest_run({"CI": "true"})
    assert ci.returncode == 1, ci.stdout
    assert "1 passed, 1 error" in ci.stdout and "CI=true and the real control plane is unavailable" in ci.stdout

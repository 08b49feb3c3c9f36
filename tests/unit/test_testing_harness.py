"""The plugin test harness: builders, one-cycle runner, assertions (embedded cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_runtime.testing import (
    assert_filtered,
    assert_passed,
    assert_scheduled_to,
    assert_score,
    assert_unschedulable,
    make_node,
    make_pod,
    plugin_from_folder,
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
    from scheduler_runtime.framework.plugin import Plugin
    from scheduler_runtime.framework.status import Status

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

"""Shrinking keeps exactly what a disagreement needs (checked with a predicate, no control plane)."""

from __future__ import annotations

import yaml

from .scenario import generate
from .shrink import Budget, ddmin, scenario_yaml, shrink


def test_ddmin_finds_the_two_items_that_matter() -> None:
    calls = []

    def fails(xs: list[int]) -> bool:
        calls.append(len(xs))
        return 3 in xs and 11 in xs

    assert ddmin(list(range(20)), fails, Budget(200)) == [3, 11]
    assert ddmin(list(range(20)), fails, Budget(2)) != [3, 11]  # out of budget: still failing, less minimal
    assert len(calls) < 200


def test_shrink_keeps_the_pod_its_predecessor_and_the_node_they_need() -> None:
    sc = generate(7, n_nodes=6, n_pods=30)
    node = sc.nodes[4]["metadata"]["name"]

    def still_fails(s) -> bool:  # the disagreement needs p005 before p009, and node 4
        names = [p["metadata"]["name"] for p in s.pods]
        return "p005" in names and "p009" in names and node in {n["metadata"]["name"] for n in s.nodes}

    small = shrink(sc, "p009", still_fails, trials=300)
    assert [p["metadata"]["name"] for p in small.pods] == ["p005", "p009"]
    assert [n["metadata"]["name"] for n in small.nodes] == [node]
    assert small.bound == [] and small.pdbs == []
    assert all(c["metadata"]["name"] == node for c in small.csinodes)
    used = {v["persistentVolumeClaim"]["claimName"] for p in small.pods for v in p["spec"].get("volumes") or []}
    assert {c["metadata"]["name"] for c in small.pvcs} == used  # unused claims pruned
    docs = list(yaml.safe_load_all(scenario_yaml(small, "seed 7\nwhy")))
    kinds = [d["kind"] for d in docs]
    assert kinds.count("Node") == 1 and kinds[-2:] == ["Pod", "Pod"]
    assert scenario_yaml(small, "seed 7").startswith("# seed 7\n")

"""What `ksched dev-cluster up --nodes N|FILE -f FILE` reads before anything starts: KWOK nodes from a count or
a file, the objects to create, and bad input refused with one line and nothing started.

No binaries here: tests/integration/test_devcluster_kwok.py runs the same against kube-apiserver and kwok."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_runtime import devcluster, kwok
from scheduler_runtime.errors import InputError, UsageError

REPO = Path(__file__).resolve().parents[2]


def test_a_count_makes_kwok_nodes_spread_over_three_zones() -> None:
    nodes = devcluster.load_source("4", []).nodes
    assert [n["metadata"]["name"] for n in nodes] == [f"kwok-node-{i}" for i in range(4)]
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes] == \
        ["zone-a", "zone-b", "zone-c", "zone-a"]
    for n in nodes:
        assert kwok.is_kwok_node(n)
        assert n["status"]["allocatable"] == kwok.NODE_CAPACITY == n["status"]["capacity"]
        assert n["metadata"]["labels"]["kubernetes.io/hostname"] == n["metadata"]["name"]
        assert not kwok.node_ready(n)  # KWOK, not ksched, makes it Ready


def test_nodes_from_a_file_are_marked_for_kwok_without_the_status_kwok_sets() -> None:
    """examples/cluster: six nodes, annotated; their capacity and the GPU node's own taint stay, the
    Ready condition in the file is dropped (KWOK's node-initialize stage sets it) and so would be a
    not-ready taint (the node lifecycle controller owns it)."""
    src = devcluster.load_source(str(REPO / "examples" / "cluster"), [])
    assert len(src.nodes) == 6 and all(kwok.is_kwok_node(n) for n in src.nodes)
    gpu = next(n for n in src.nodes if n["metadata"]["name"] == "node-gpu")
    assert gpu["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert "conditions" not in gpu["status"]
    kinds = sorted({o["kind"] for o, _ in src.objects})
    assert kinds == ["Namespace", "Pod", "PodDisruptionBudget", "PriorityClass", "Service"]


def test_not_ready_taints_in_a_node_file_are_dropped() -> None:
    raw = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "resourceVersion": "7"},
           "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                               {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"}], "phase": "Running"}}
    node = kwok.as_kwok_node(raw)
    assert "taints" not in node["spec"] and node["status"] == {} and "resourceVersion" not in node["metadata"]
    assert raw["spec"]["taints"]  # the caller's object is left alone


def test_example_pods_name_priority_classes_the_examples_define() -> None:
    """kube-apiserver's Priority admission refuses a pod whose `priority` differs from its class's value (no
    class: 0), and an extended resource request without an equal limit: the examples satisfy both, so the
    dev cluster admits every example pod (the integration test creates them for real)."""
    src = devcluster.load_source(str(REPO / "examples" / "cluster"), [str(REPO / "examples" / "pods.yaml")])
    classes = {o["metadata"]["name"]: o["value"] for o, _ in src.objects if o["kind"] == "PriorityClass"}
    pods = [o for o, _ in src.objects if o["kind"] == "Pod"]
    assert len(pods) == 24
    for p in pods:
        spec = p["spec"]
        want = classes[spec["priorityClassName"]] if "priorityClassName" in spec else 0
        assert spec.get("priority", want) == want, p["metadata"]["name"]
        for c in spec["containers"]:
            res = c.get("resources") or {}
            for name, q in (res.get("requests") or {}).items():
                if "/" in name:
                    assert (res.get("limits") or {}).get(name) == q, (p["metadata"]["name"], name)


@pytest.mark.parametrize("count", ["0", str(devcluster.MAX_FAKE_NODES + 1)])
def test_a_node_count_out_of_range_is_a_usage_error(count: str) -> None:
    with pytest.raises(UsageError, match=f"--nodes {count}: a node count must be between 1 and"):
        devcluster.load_source(count, [])


def test_a_file_without_nodes_is_invalid_input(tmp_path: Path) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    with pytest.raises(InputError) as e:
        devcluster.load_source(str(f), [])
    assert e.value.exit_code == 1 and str(e.value).startswith(f"{f}: kind: holds no Node object")


def test_duplicate_node_names_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "n.yaml"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Node\n"
                 "metadata: {name: a}\n")
    with pytest.raises(InputError, match=r'nodes\[1\].metadata.name: Duplicate value: "a"'):
        devcluster.load_source(str(f), [])


def test_standard_input_is_read_once() -> None:
    doc = "apiVersion: v1\nkind: Node\nmetadata: {name: from-stdin}\n"
    src = devcluster.load_source("-", [], stdin=lambda: doc)
    assert [n["metadata"]["name"] for n in src.nodes] == ["from-stdin"]
    with pytest.raises(UsageError, match="standard input"):
        devcluster.load_source("-", ["-"], stdin=lambda: doc)
    with pytest.raises(InputError) as e:
        devcluster.load_source("-", [], stdin=lambda: "apiVersion: v1\nkind: Node\nmetadata: [\n")
    assert str(e.value).startswith("-: ") and e.value.exit_code == 2


def test_summary_says_what_was_refused_one_line_each() -> None:
    Out = devcluster.Outcome
    s = devcluster.Summary([Out("Node", "a", None, "created"), Out("Node", "b", None, "exists")], ["a", "b"], [],
                           [Out("Namespace", "shop", None, "created", source="implied"),
                            Out("Pod", "p", "shop", "created", source="f.yaml", bound_to="a"),
                            Out("Pod", "q", "shop", "created", source="f.yaml"),
                            Out("Pod", "r", "shop", "refused", 'pods "r" is forbidden: no', source="f.yaml")])
    assert s.lines() == [
        "nodes: 2/2 Ready (KWOK-managed; 1 registered now, 1 already there)",
        "pods: 2 created, 0 already there, 1 refused (1 bound to a node, 1 pending for a scheduler)",
        "other objects: namespace/shop",
        'refused pod/shop/r (f.yaml): pods "r" is forbidden: no',
    ]


def _up(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ksched_cli", "dev-cluster", "up", "--state-dir",
                           str(tmp_path / "state"), *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_up_refuses_bad_input_before_starting_anything(tmp_path: Path) -> None:
    r = _up(tmp_path, "--nodes", "0")
    assert r.returncode == 2 and r.stderr.strip() == \
        f"error: --nodes 0: a node count must be between 1 and {devcluster.MAX_FAKE_NODES}"
    r = _up(tmp_path, "--nodes", "3", "-f", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and r.stderr.strip() == f"error: {tmp_path / 'missing.yaml'}: no such file or directory"
    r = _up(tmp_path, "--nodes", "3", "--timeout", "5x")
    assert r.returncode == 2 and r.stderr.strip() == 'error: --timeout 5x: time: unknown unit "x" in duration "5x"'
    assert not (tmp_path / "state").exists()


def test_up_without_kwok_says_how_to_build_it_and_starts_nothing(tmp_path: Path) -> None:
    r = _up(tmp_path, "--nodes", "3", KSCHED_KWOK_DIR=str(tmp_path / "nokwok"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"error: no kwok controller with its stage files in {tmp_path / 'nokwok'}")
    assert "bash hack/build-kwok.sh" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "state").exists()

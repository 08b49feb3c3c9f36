"""Strict field validation the way kubectl does it: unknown fields in pods and nodes are named by path,
from the kubernetes package's OpenAPI models (issue 17)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scheduler_runtime.cluster import fieldcheck
from scheduler_runtime.cluster.memory import MemoryCluster, load_objects
from scheduler_runtime.simulate import load_pods_in_order

ROOT = Path(__file__).resolve().parents[2]

POD = """apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop, labelz: {a: b}}
spec:
  tolerattions: [{key: a, operator: Exists}]
  containers:
  - name: c
    image: x
    imagePullPolicyy: Always
    resources: {requests: {cpu: 100m}}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, valuez: [a]}]
"""


def test_unknown_fields_are_named_by_path() -> None:
    import yaml

    raw = yaml.safe_load(POD)
    assert fieldcheck.unknown_fields(raw, "V1Pod") == [
        "metadata.labelz", "spec.tolerattions", "spec.containers[0].imagePullPolicyy",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].valuez"]


def test_known_fields_come_from_the_kubernetes_models_not_a_list() -> None:
    """Every field of the models counts, including ones ksched never reads (status.nodeInfo, managedFields)."""
    from kubernetes.client.models import V1NodeSystemInfo

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "managedFields": [{"manager": "kubectl"}]},
            "status": {"nodeInfo": {j: "x" for j in V1NodeSystemInfo.attribute_map.values()},
                       "capacityy": {"cpu": "1"}}}
    assert fieldcheck.unknown_fields(node, "V1Node") == ["status.capacityy"]
    assert fieldcheck.model_name("policy/v1", "PodDisruptionBudget") == "V1PodDisruptionBudget"
    assert fieldcheck.model_name("example.com/v1", "Widget") is None  # CRDs are not checked


def test_loading_warns_once_per_field_with_the_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text(POD)
    with caplog.at_level(logging.WARNING, logger="ksched.fields"):
        pods = load_pods_in_order([f])
    assert len(pods) == 1  # the object still loads, as kube-apiserver stores it with fieldValidation=Warn
    msgs = [r.getMessage() for r in caplog.records if r.name == "ksched.fields"]
    assert f'{f}: unknown field "spec.tolerattions" in Pod shop/web' in msgs and len(msgs) == 4


def test_a_kindless_pod_in_a_pods_file_is_checked_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text("metadata: {name: p}\nspec: {containerz: [], containers: [{name: c, image: x}]}\n")
    with caplog.at_level(logging.WARNING, logger="ksched.fields"):
        load_pods_in_order([f])
    assert any('unknown field "spec.containerz"' in r.getMessage() for r in caplog.records)


def test_the_examples_have_no_unknown_fields(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ksched.fields"):
        MemoryCluster.from_paths([ROOT / "examples/cluster"])
        for p in (ROOT / "examples").rglob("*.yaml"):
            if "configs" not in p.parts and "crds" not in p.parts:
                try:
                    load_objects(p)
                except Exception:  # noqa: S112 - not every example file is a list of objects
                    continue
    assert [r.getMessage() for r in caplog.records if r.name == "ksched.fields"] == []

"""What the kube backend's pod cache keeps of a pod: managedFields and the scheduler's own annotations go."""

from __future__ import annotations

from scheduler_runtime.cluster.kube.reflector import strip_managed_fields, stripper
from scheduler_runtime.describe import RESULT_ANNOTATION


def _pod(annotations: dict[str, str] | None) -> dict:
    meta: dict = {"name": "p", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {}}


def test_only_the_named_annotations_are_dropped() -> None:
    strip = stripper(frozenset({RESULT_ANNOTATION}))
    got = strip(_pod({RESULT_ANNOTATION: "{}", "team": "a"}))
    assert got["metadata"] == {"name": "p", "namespace": "ns", "annotations": {"team": "a"}}


def test_annotations_left_empty_are_removed_as_if_never_set() -> None:
    got = stripper(frozenset({RESULT_ANNOTATION}))(_pod({RESULT_ANNOTATION: "{}"}))
    assert got["metadata"] == {"name": "p", "namespace": "ns"}
    assert stripper(frozenset({RESULT_ANNOTATION}))(_pod(None))["metadata"] == {"name": "p", "namespace": "ns"}


def test_without_annotations_to_drop_it_is_the_managed_fields_strip() -> None:
    assert stripper(frozenset()) is strip_managed_fields
    got = strip_managed_fields(_pod({RESULT_ANNOTATION: "{}"}))
    assert got["metadata"]["annotations"] == {RESULT_ANNOTATION: "{}"} and "managedFields" not in got["metadata"]

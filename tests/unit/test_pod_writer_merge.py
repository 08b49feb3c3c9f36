"""The kube backend's pod writer: a failed attempt's status and its result annotation, both queued for one pod,
go out as one PATCH of pods/status; a lone write keeps its own patch."""

from __future__ import annotations

import threading
from typing import Any

import orjson

from scheduler_runtime.cluster.kube.rest import Response
from scheduler_runtime.cluster.kube.status import PodWriter
from scheduler_runtime.objects import Pod

COND = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}
RESULT = "ksched.io/result"


class _Host:
    """Records the writes; the first one waits for `release`, so writes queue up behind it meanwhile."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], str]] = []
        self.release = threading.Event()
        self.first = True

    def gated_write(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                    **kw: Any) -> Response:
        if self.first:
            self.first = False
            self.release.wait(5)
        self.calls.append((method, path, body, content_type or ""))
        return Response(200, {}, orjson.dumps({}))

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def _pod(name: str, annotations: dict[str, str] | None = None) -> Pod:
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                                       "annotations": annotations or {}},
                          "spec": {"containers": [{"name": "c", "image": "x"}]}})


def test_a_failures_status_and_result_annotation_are_one_patch() -> None:
    host = _Host()
    w = PodWriter(host, shards=1)  # type: ignore[arg-type]
    try:
        w.put("status", _pod("busy"), (COND, None))  # the worker waits in this one
        p = _pod("p")
        w.put("status", p, (COND, ""))
        w.put("annotate", p, {RESULT: "r1"})
        w.put("annotate", _pod("q"), {RESULT: "r2"})
        host.release.set()
        assert w.flush(5)
    finally:
        w.stop()
    paths = [c[1] for c in host.calls]
    assert paths == ["/api/v1/namespaces/ns/pods/busy/status", "/api/v1/namespaces/ns/pods/p/status",
                     "/api/v1/namespaces/ns/pods/q/status"]
    _, _, body, ctype = host.calls[1]
    assert ctype == "application/strategic-merge-patch+json"
    assert body["metadata"] == {"uid": "uid-p", "annotations": {RESULT: "r1"}}
    assert body["status"]["conditions"][0]["reason"] == "Unschedulable"
    _, _, body, ctype = host.calls[2]  # alone: the annotation's own merge patch, as before
    assert ctype == "application/merge-patch+json" and body == {"metadata": {"uid": "uid-q",
                                                                            "annotations": {RESULT: "r2"}}}
    assert w.written == 4 and w.skipped == 0


def test_an_unchanged_part_leaves_the_other_its_own_patch() -> None:
    host = _Host()
    w = PodWriter(host, shards=1)  # type: ignore[arg-type]
    try:
        w.put("status", _pod("busy"), (COND, None))
        p = _pod("p", {RESULT: "same"})
        w.put("annotate", p, {RESULT: "same"})  # already on the pod: nothing to write
        w.put("status", p, (COND, None))
        host.release.set()
        assert w.flush(5)
    finally:
        w.stop()
    assert len(host.calls) == 2
    _, _, body, ctype = host.calls[1]
    assert ctype == "application/strategic-merge-patch+json" and "annotations" not in body["metadata"]
    assert w.written == 2 and w.skipped == 1


def test_wait_written_returns_once_the_pods_writes_are_sent() -> None:
    """A preemptor's nomination is waited for: wait_written blocks while the pod's writes are queued behind
    another one the worker is still sending."""
    host = _Host()
    w = PodWriter(host, shards=1)  # type: ignore[arg-type]
    try:
        w.put("status", _pod("busy"), (COND, None))  # the worker waits in this one until released
        p = _pod("p")
        w.put("status", p, (COND, "node-1"))
        w.put("annotate", p, {RESULT: "r"})
        threading.Timer(0.05, host.release.set).start()
        w.wait_written(p)
        assert [c[1] for c in host.calls] == ["/api/v1/namespaces/ns/pods/busy/status",
                                              "/api/v1/namespaces/ns/pods/p/status"]
        w.wait_written(_pod("never-queued"))  # nothing queued: returns at once
    finally:
        w.stop()

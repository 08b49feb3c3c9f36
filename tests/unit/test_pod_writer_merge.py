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
        self.entered = threading.Event()  # the first write has begun

    def gated_write(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                    **kw: Any) -> Response:
        if self.first:
            self.first = False
            self.entered.set()
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


def test_send_now_writes_the_pods_status_and_annotation_on_the_calling_thread() -> None:
    """The scheduling loop's wait for a failure's status (kube's synchronous updatePod): sent as one patch on
    the caller's thread while the only worker is stuck on another pod's write; nothing of the pod stays queued."""
    host = _Host()
    w = PodWriter(host, shards=1)  # type: ignore[arg-type]
    try:
        w.put("status", _pod("busy"), (COND, None))  # the worker waits in this one
        assert host.entered.wait(5)
        p = _pod("p")
        w.put("status", p, (COND, ""))
        w.put("annotate", p, {RESULT: "r1"})
        w.send_now(p)
        assert [c[1] for c in host.calls] == ["/api/v1/namespaces/ns/pods/p/status"]
        assert w.pending() == 1  # only the worker's write
        host.release.set()
        assert w.flush(5)
    finally:
        w.stop()
    assert [c[1] for c in host.calls][1:] == ["/api/v1/namespaces/ns/pods/busy/status"]
    _, _, body, ctype = host.calls[0]
    assert ctype == "application/strategic-merge-patch+json"
    assert body["metadata"] == {"uid": "uid-p", "annotations": {RESULT: "r1"}}
    assert body["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert w.written == 3


class _BlockingHost(_Host):
    """Records the writes; the first write to pod `blocked` waits for `release` (`entered` says it began)."""

    def __init__(self, blocked: str) -> None:
        super().__init__()
        self.first = False
        self.blocked = f"/pods/{blocked}/"
        self.entered = threading.Event()

    def gated_write(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                    **kw: Any) -> Response:
        if self.blocked in path and not self.entered.is_set():
            self.entered.set()
            self.release.wait(5)
        return super().gated_write(method, path, body=body, content_type=content_type)


def test_send_now_keeps_a_pods_writes_in_order() -> None:
    """A write of the pod that a worker is sending goes first: send_now waits for it, then sends the newer."""
    host = _BlockingHost("p")
    w = PodWriter(host, shards=1)  # type: ignore[arg-type]
    try:
        w.put("status", _pod("p"), (COND, "node-1"))
        assert host.entered.wait(5)
        w.put("status", _pod("p"), (COND, "node-2"))
        threading.Timer(0.05, host.release.set).start()
        w.send_now(_pod("p"))
        assert [c[2]["status"]["nominatedNodeName"] for c in host.calls] == ["node-1", "node-2"]
    finally:
        host.release.set()
        w.stop()

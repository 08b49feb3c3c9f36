"""KubeCluster against a real kube-apiserver + etcd (the session `control_plane` fixture)."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler_runtime.cluster.base import BindError
from scheduler_runtime.cluster.kube import (
    ApiForbiddenError,
    ApiUnauthorizedError,
    ApiUnreachableError,
    Connection,
    KubeClient,
    KubeCluster,
    KubeConfigError,
    load_connection,
)
from scheduler_runtime.objects import Pod

pytestmark = pytest.mark.integration

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


# ----------------------------------------------------------------------------------------- helpers


def wait_until(cond: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = "") -> Any:
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}")
        time.sleep(interval)


class Recorder:
    """Collects (resource, action, old, new) as the scheduler's handler would receive them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, dict | None, dict | None]] = []

    def __call__(self, resource: str, action: str, old: dict | None, new: dict | None) -> None:
        with self.lock:
            self.events.append((resource, action, old, new))

    def of(self, resource: str, namespace: str | None = None, since: int = 0) -> list[tuple[str, str, str]]:
        """[(action, name, resourceVersion of the object the action is about)]"""
        out = []
        with self.lock:
            evs = self.events[since:]
        for r, a, old, new in evs:
            if r != resource:
                continue
            obj = new if new is not None else old
            meta = obj["metadata"]
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            out.append((a, meta["name"], meta.get("resourceVersion")))
        return out

    def __len__(self) -> int:
        with self.lock:
            return len(self.events)


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> Iterator[KubeClient]:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)), qps=0, pool_size=32)
    yield c
    c.close()


@pytest.fixture
def ns(admin: KubeClient) -> Iterator[str]:
    name = f"kb-{uuid.uuid4().hex[:8]}"
    admin.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": name}})
    yield name
    admin.request("DELETE", f"/api/v1/namespaces/{name}")


def pod_body(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "10m"}}}], **spec}}


def create_pod(admin: KubeClient, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body=pod_body(name, ns, **spec))


def create_node(admin: KubeClient, name: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    r = admin.request("POST", "/api/v1/nodes", body=body)
    assert r.status in (201, 409), r.message()
    return admin.call("GET", f"/api/v1/nodes/{name}")


def get_pod(admin: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    r = admin.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return r.json() if r.ok else None


def new_cluster(control_plane: Any, **kw: Any) -> KubeCluster:
    kw.setdefault("qps", 0)
    kw.setdefault("backoff_initial", 0.2)
    kw.setdefault("backoff_cap", 2.0)
    return KubeCluster(str(control_plane.kubeconfig_path), **kw)


@pytest.fixture
def started(control_plane: Any) -> Iterator[tuple[KubeCluster, Recorder]]:
    c = new_cluster(control_plane)
    rec = Recorder()
    c.start(rec, timeout=60)
    yield c, rec
    c.stop()


# ------------------------------------------------------------------------------------ list / watch


def test_paginated_list_and_start_order(control_plane: Any, admin: KubeClient, ns: str) -> None:
    node = f"pg-node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node)
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda i: create_pod(admin, ns, f"p{i:03d}"), range(130)))
    c = new_cluster(control_plane, page_size=25)
    rec = Recorder()
    try:
        c.start(rec, timeout=60)
        pods = c.informer("pods")
        assert pods.stats["pages"] >= 130 // 25 + 1  # really paginated (plus pods of other tests)
        assert len(c.list("pods", ns)) == 130
        assert c.list("nodes") and c.informer("nodes").get(node) is not None
        assert "managedFields" not in c.list("pods", ns)[0]["metadata"]
        assert c.list("pods", ns)[0]["kind"] == "Pod" and c.list("pods", ns)[0]["apiVersion"] == "v1"
        added = rec.of("pods", ns)
        assert sorted(n for a, n, _ in added) == [f"p{i:03d}" for i in range(130)]
        assert all(a == "ADDED" for a, _, _ in added)
        # namespaces and nodes are delivered before any pod
        kinds = [r for r, _, _, _ in rec.events]
        first_pod = kinds.index("pods")
        assert "namespaces" in kinds[:first_pod] and "nodes" in kinds[:first_pod]
        last_node = max(i for i, k in enumerate(kinds[:first_pod + 130]) if k == "nodes")
        assert last_node < first_pod
        assert c.health() == (True, "ok")
    finally:
        c.stop()
        admin.request("DELETE", f"/api/v1/nodes/{node}")


def test_watch_add_update_delete(started: tuple[KubeCluster, Recorder], admin: KubeClient, ns: str) -> None:
    c, rec = started
    mark = len(rec)
    create_pod(admin, ns, "w1")
    wait_until(lambda: rec.of("pods", ns, mark), what="ADDED")
    admin.call("PATCH", f"/api/v1/namespaces/{ns}/pods/w1", body={"metadata": {"labels": {"x": "y"}}},
               content_type="application/merge-patch+json")
    wait_until(lambda: len(rec.of("pods", ns, mark)) >= 2, what="MODIFIED")
    admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/w1", body={"gracePeriodSeconds": 0})
    wait_until(lambda: len(rec.of("pods", ns, mark)) >= 3, what="DELETED")
    time.sleep(0.3)
    with rec.lock:
        evs = [e for e in rec.events[mark:] if ((e[3] or e[2]) or {}).get("metadata", {}).get("namespace") == ns]
    # the API server marks the pod (deletionTimestamp) in an update before it removes it: that update is
    # delivered as the server sent it, exactly once
    marking = [e for e in evs[2:-1] if e[1] == "MODIFIED" and e[3]["metadata"].get("deletionTimestamp")]
    assert [e[1] for e in evs] == ["ADDED", "MODIFIED", *(["MODIFIED"] * len(marking)), "DELETED"]
    assert len(marking) <= 1
    with rec.lock:
        mod = [e for e in rec.events[mark:] if e[1] == "MODIFIED" and (e[3] or {}).get("metadata", {}).get(
            "namespace") == ns][0]
    assert mod[2]["metadata"].get("labels", {}).get("x") is None and mod[3]["metadata"]["labels"]["x"] == "y"
    assert c.get_pod(ns, "w1") is None


def _check_no_dup_no_loss(c: KubeCluster, rec: Recorder, admin: KubeClient, ns: str, mark: int) -> None:
    server = {p["metadata"]["name"]: p["metadata"]["resourceVersion"]
              for p in admin.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]}
    wait_until(lambda: {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in c.list("pods", ns)}
               == server, timeout=30, what="the store to converge to the server")
    evs = rec.of("pods", ns, mark)
    dups = [k for k, v in Counter(evs).items() if v > 1]
    assert not dups, f"delivered twice: {dups}"
    # replaying the events from the marked state reproduces the server's state exactly
    return None


def test_apiserver_restart_reconnects_without_loss_or_duplicates(control_plane: Any, admin: KubeClient,
                                                                 ns: str) -> None:
    c = new_cluster(control_plane, resources=("namespaces", "nodes", "pods"))
    rec = Recorder()
    try:
        for i in range(10):
            create_pod(admin, ns, f"r{i}")
        c.start(rec, timeout=60)
        before = {p["metadata"]["name"]: p for p in c.list("pods", ns)}
        assert len(before) == 10
        mark = len(rec)
        watches = c.informer("pods").stats["watches"]
        control_plane.restart_apiserver()
        admin_fresh = admin  # urllib3 reconnects on its own
        for i in range(10, 20):
            create_pod(admin_fresh, ns, f"r{i}")
        for i in range(3):
            admin_fresh.call("PATCH", f"/api/v1/namespaces/{ns}/pods/r{i}",
                             body={"metadata": {"labels": {"after": "restart"}}},
                             content_type="application/merge-patch+json")
        for i in range(3, 6):
            admin_fresh.call("DELETE", f"/api/v1/namespaces/{ns}/pods/r{i}", body={"gracePeriodSeconds": 0})
        _check_no_dup_no_loss(c, rec, admin, ns, mark)
        assert c.informer("pods").stats["watches"] > watches, "the watch was re-established"
        # every change is seen exactly once: net effect of the events == the changes made
        evs = rec.of("pods", ns, mark)
        added = sorted(n for a, n, _ in evs if a == "ADDED")
        deleted = sorted(n for a, n, _ in evs if a == "DELETED")
        modified = {n for a, n, _ in evs if a == "MODIFIED"}
        assert added == sorted(f"r{i}" for i in range(10, 20))
        assert deleted == [f"r{i}" for i in range(3, 6)]
        assert {f"r{i}" for i in range(3)} <= modified
        wait_until(lambda: c.health()[0], timeout=20, what="healthy again")
    finally:
        c.stop()


def test_forced_410_relists_and_emits_the_diff(control_plane: Any, admin: KubeClient, ns: str) -> None:
    c = new_cluster(control_plane, resources=("namespaces", "nodes", "pods"))
    rec = Recorder()
    try:
        for i in range(6):
            create_pod(admin, ns, f"g{i}")
        c.start(rec, timeout=60)
        pods = c.informer("pods")
        relists = pods.stats["relists"]
        pods.pause()
        time.sleep(0.3)
        mark = len(rec)
        create_pod(admin, ns, "g-new1")
        create_pod(admin, ns, "g-new2")
        admin.call("PATCH", f"/api/v1/namespaces/{ns}/pods/g0", body={"metadata": {"labels": {"v": "2"}}},
                   content_type="application/merge-patch+json")
        admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/g1", body={"gracePeriodSeconds": 0})
        admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/g2", body={"gracePeriodSeconds": 0})
        time.sleep(0.3)
        assert rec.of("pods", ns, mark) == [], "paused: nothing delivered yet"
        pods.resume(resource_version="1")  # far too old: the server answers 410 Expired
        wait_until(lambda: pods.stats["relists"] > relists, what="a re-list after 410")
        _check_no_dup_no_loss(c, rec, admin, ns, mark)
        evs = rec.of("pods", ns, mark)
        assert sorted((a, n) for a, n, _ in evs) == sorted(
            [("ADDED", "g-new1"), ("ADDED", "g-new2"), ("MODIFIED", "g0"), ("DELETED", "g1"), ("DELETED", "g2")])
        # and the watch continues normally afterwards
        create_pod(admin, ns, "g-after")
        wait_until(lambda: any(n == "g-after" for _, n, _ in rec.of("pods", ns, mark)), what="live event")
    finally:
        c.stop()


def test_crd_informer_by_plural_group(control_plane: Any, admin: KubeClient, ns: str) -> None:
    group = f"t{uuid.uuid4().hex[:6]}.ksched.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    admin.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    c = new_cluster(control_plane, resources=("namespaces", "nodes", "pods"))
    try:
        def established() -> bool:
            r = admin.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")
            return any(cd["type"] == "Established" and cd["status"] == "True"
                       for cd in (r.get("status") or {}).get("conditions") or ())
        wait_until(established, what="CRD established")
        wait_until(lambda: admin.request("GET", f"/apis/{group}/v1alpha1").ok, what="discovery")
        path = f"/apis/{group}/v1alpha1/namespaces/{ns}/widgets"
        admin.call("POST", path, body={"apiVersion": f"{group}/v1alpha1", "kind": "Widget",
                                       "metadata": {"name": "w-before"}, "size": 1})
        store = c.informer(f"widgets.{group}")          # asked for before start, like a plugin's __init__
        seen: list[tuple[str, str]] = []
        store.add_handler(lambda a, o, n: seen.append((a, (n or o)["metadata"]["name"])))
        missing = c.informer(f"gadgets.{group}")          # a CRD that is not installed
        rec = Recorder()
        c.start(rec, timeout=60)
        assert store.synced and store.ref is not None and store.ref.version == "v1alpha1" and store.ref.namespaced
        assert store.get("w-before", ns)["size"] == 1
        assert c.informer(f"{group}/v1alpha1/widgets") is store
        assert ("ADDED", "w-before") in seen
        assert any(r == "widgets" and a == "ADDED" for r, a, _, _ in rec.events)
        admin.call("POST", path, body={"apiVersion": f"{group}/v1alpha1", "kind": "Widget",
                                       "metadata": {"name": "w-after"}, "size": 2})
        wait_until(lambda: store.get("w-after", ns) is not None, what="CR watched")
        wait_until(lambda: any(r == "widgets" and (n or {}).get("metadata", {}).get("name") == "w-after"
                               for r, a, _, n in rec.events), what="CR event to the scheduler")
        assert c.list(f"widgets.{group}", ns) and len(c.list(f"widgets.{group}", ns)) == 2
        assert not missing.synced
        ok, why = c.health()
        assert not ok and "gadgets" in why and "not served" in why
    finally:
        c.stop()
        admin.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")


# ------------------------------------------------------------------------------------------- writes


def test_bind_success_already_bound_and_deleted(started: tuple[KubeCluster, Recorder], admin: KubeClient,
                                                ns: str) -> None:
    c, rec = started
    node = f"bind-node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node)
    try:
        raw = create_pod(admin, ns, "b1")
        pod = Pod.from_dict(raw)
        c.bind(pod, node)
        got = get_pod(admin, ns, "b1")
        assert got["spec"]["nodeName"] == node
        assert any(cd["type"] == "PodScheduled" and cd["status"] == "True" for cd in got["status"]["conditions"])
        wait_until(lambda: (c.get_pod(ns, "b1") or {}).get("spec", {}).get("nodeName") == node, what="watch")
        # a retry after a lost answer: 409 "already assigned" to our node means the bind happened
        c.bind(pod, node)
        other = f"{node}-other"
        create_node(admin, other)
        try:
            with pytest.raises(BindError) as ei:
                c.bind(pod, other)
            assert ei.value.gone and "already assigned" in str(ei.value), str(ei.value)
        finally:
            admin.request("DELETE", f"/api/v1/nodes/{other}")
        # deleted pod
        raw2 = create_pod(admin, ns, "b2")
        admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/b2", body={"gracePeriodSeconds": 0})
        with pytest.raises(BindError) as ei:
            c.bind(Pod.from_dict(raw2), node)
        assert ei.value.gone
        # recreated with the same name: the old UID must not bind the new pod
        create_pod(admin, ns, "b2")
        with pytest.raises(BindError) as ei:
            c.bind(Pod.from_dict(raw2), node)
        assert ei.value.gone
        assert not get_pod(admin, ns, "b2")["spec"].get("nodeName")
    finally:
        admin.request("DELETE", f"/api/v1/nodes/{node}")


def test_events_are_events_k8s_io_v1(started: tuple[KubeCluster, Recorder], admin: KubeClient, ns: str) -> None:
    c, _ = started
    pod = Pod.from_dict(create_pod(admin, ns, "e1"))
    c.record_event(pod, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available: 3 Insufficient cpu.",
                   reporting_controller="my-scheduler")
    c.record_event(pod, "Normal", "Scheduled", "Binding", "x" * 2000, reporting_controller="my-scheduler")
    assert c.flush(10)
    items = admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
    assert len(items) == 2, items
    by = {e["reason"]: e for e in items}
    e = by["FailedScheduling"]
    assert e["type"] == "Warning" and e["action"] == "Scheduling"
    assert e["note"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert e["reportingController"] == "my-scheduler"
    assert e["reportingInstance"] == f"my-scheduler-{c.hostname}"
    assert e["regarding"]["kind"] == "Pod" and e["regarding"]["name"] == "e1"
    assert e["regarding"]["uid"] == pod.uid and e["regarding"]["namespace"] == ns
    assert e["regarding"]["apiVersion"] == "v1" and e["regarding"]["resourceVersion"] == pod.resource_version
    assert MICRO.match(e["eventTime"]), e["eventTime"]
    assert re.match(r"^e1\.[0-9a-f]+$", e["metadata"]["name"])
    long = by["Scheduled"]["note"]
    assert len(long) == 1024 and long.endswith(" ...")
    # the core/v1 view of the same events (what `kubectl describe pod` shows)
    core = admin.call("GET", f"/api/v1/namespaces/{ns}/events")["items"]
    assert {x["reason"] for x in core} == {"FailedScheduling", "Scheduled"}


def test_event_queue_drops_oldest_when_full(control_plane: Any, admin: KubeClient, ns: str) -> None:
    c = new_cluster(control_plane, event_queue=5)
    try:
        pod = Pod.from_dict(create_pod(admin, ns, "eq"))
        c.event_client.limiter.qps, c.event_client.limiter.burst = 1.0, 1  # slow writer: the queue fills
        t0 = time.monotonic()
        for i in range(50):
            c.record_event(pod, "Normal", f"R{i}", "A", f"n{i}")
        assert time.monotonic() - t0 < 0.5, "record_event never waits on the API"
        assert c.events_dropped >= 40
    finally:
        c.stop()


def test_status_patch_and_annotations(started: tuple[KubeCluster, Recorder], admin: KubeClient, ns: str) -> None:
    c, _ = started
    pod = Pod.from_dict(create_pod(admin, ns, "s1"))
    msg = "0/3 nodes are available: 3 Insufficient cpu."
    c.patch_pod_status(pod, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                             "message": msg}, "node-x")
    c.annotate_pod(pod, {"ksched.io/result": "r1", "other": "v"})
    assert c.flush(10)
    got = get_pod(admin, ns, "s1")
    cond = [cd for cd in got["status"]["conditions"] if cd["type"] == "PodScheduled"][0]
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable" and cond["message"] == msg
    assert cond.get("lastTransitionTime")
    assert got["status"]["nominatedNodeName"] == "node-x"
    assert got["metadata"]["annotations"]["ksched.io/result"] == "r1"
    # clearing the nomination, removing an annotation
    pod2 = Pod.from_dict(got)
    c.patch_pod_status(pod2, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": msg}, "")
    c.annotate_pod(pod2, {"other": None})
    assert c.flush(10)
    got2 = get_pod(admin, ns, "s1")
    assert not got2["status"].get("nominatedNodeName")
    assert "other" not in got2["metadata"]["annotations"]
    cond2 = [cd for cd in got2["status"]["conditions"] if cd["type"] == "PodScheduled"][0]
    assert cond2["lastTransitionTime"] == cond["lastTransitionTime"]  # same status: time kept
    # a pod replaced by another with the same name is not patched
    admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/s1", body={"gracePeriodSeconds": 0})
    create_pod(admin, ns, "s1")
    c.patch_pod_status(pod2, {"type": "PodScheduled", "status": "False", "reason": "SchedulerError",
                              "message": "boom"}, None)
    assert c.flush(10)
    got3 = get_pod(admin, ns, "s1")
    assert not any(cd.get("reason") == "SchedulerError" for cd in (got3.get("status") or {}).get("conditions") or ())


def test_status_and_annotations_in_one_strategic_merge_patch(started: tuple[KubeCluster, Recorder],
                                                             admin: KubeClient, ns: str) -> None:
    """The pod writer's merged write (a failure's status and result annotation, both queued): the API server
    takes metadata.annotations from a strategic merge patch of pods/status, a null removing a key."""
    from scheduler_runtime.cluster.kube.status import write_status_and_annotations

    c, _ = started
    pod = Pod.from_dict(create_pod(admin, ns, "sm1"))
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no fit"}
    assert write_status_and_annotations(c, pod, cond, "node-y", pod, {"ksched.io/result": "r1", "gone": "x"}) \
        == (True, True)
    got = get_pod(admin, ns, "sm1")
    assert got["metadata"]["annotations"] == {"ksched.io/result": "r1", "gone": "x"}
    assert got["status"]["nominatedNodeName"] == "node-y"
    assert [cd["reason"] for cd in got["status"]["conditions"] if cd["type"] == "PodScheduled"] == ["Unschedulable"]
    again = Pod.from_dict(got)
    cond2 = {**cond, "message": "still no fit"}
    assert write_status_and_annotations(c, again, cond2, "", again, {"ksched.io/result": "r2", "gone": None}) \
        == (True, True)
    got2 = get_pod(admin, ns, "sm1")
    assert got2["metadata"]["annotations"] == {"ksched.io/result": "r2"}
    assert not got2["status"].get("nominatedNodeName")
    assert [cd["message"] for cd in got2["status"]["conditions"] if cd["type"] == "PodScheduled"] == ["still no fit"]


def test_a_failure_status_still_queued_does_not_land_after_the_binding(
        started: tuple[KubeCluster, Recorder], admin: KubeClient, ns: str) -> None:
    """A pod's PodScheduled=False from an earlier attempt, queued when the pod is bound, is dropped: sent after
    the binding it would mark a bound pod unschedulable (kube writes it before the next attempt)."""
    c, _ = started
    node = f"settle-node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node)
    try:
        pod = Pod.from_dict(create_pod(admin, ns, "late"))
        writer = c._writer()  # noqa: SLF001 - hold its workers so the write is still queued at the binding
        with writer._cv:  # noqa: SLF001
            c.patch_pod_status(pod, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": "0/1 nodes are available: 1 Insufficient cpu."}, "")
            c.bind(pod, node)
        assert c.flush(10)
        got = get_pod(admin, ns, "late")
        cond = [cd for cd in got["status"]["conditions"] if cd["type"] == "PodScheduled"][0]
        assert got["spec"]["nodeName"] == node and cond["status"] == "True", cond
        assert writer.superseded == 1
    finally:
        admin.request("DELETE", f"/api/v1/nodes/{node}")


def test_delete_pod_marks_disruption_target(started: tuple[KubeCluster, Recorder], admin: KubeClient,
                                            ns: str) -> None:
    c, _ = started
    node = f"del-node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node)
    try:
        raw = create_pod(admin, ns, "victim", nodeName=node, terminationGracePeriodSeconds=45)
        pod = Pod.from_dict(raw)
        c.delete_pod(pod, reason="preempted", by="gpu-scheduler")
        got = get_pod(admin, ns, "victim")  # bound pod with grace period: no kubelet, so it stays terminating
        assert got is not None and got["metadata"].get("deletionTimestamp")
        assert got["metadata"].get("deletionGracePeriodSeconds") == 45  # empty options: the pod's own period
        dt = [cd for cd in got["status"]["conditions"] if cd["type"] == "DisruptionTarget"]
        assert dt and dt[0]["reason"] == "PreemptionByScheduler"
        # the preemptor's scheduler, not the victim's (kube: preemptor.SchedulerName())
        assert dt[0]["message"] == "gpu-scheduler: preempting to accommodate a higher priority pod"
        # unbound pod: deleted at once; deleting again is not an error
        p2 = Pod.from_dict(create_pod(admin, ns, "victim2"))
        c.delete_pod(p2)
        assert get_pod(admin, ns, "victim2") is None
        c.delete_pod(p2)
    finally:
        admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/victim", body={"gracePeriodSeconds": 0})
        admin.request("DELETE", f"/api/v1/nodes/{node}")


# ------------------------------------------------------------------------------------ rate limiting


def test_token_bucket_limits_request_rate(control_plane: Any) -> None:
    c = new_cluster(control_plane, qps=20, burst=1)
    try:
        n = 21
        t0 = time.monotonic()
        for _ in range(n):
            assert c.client.request("GET", "/version").ok
        elapsed = time.monotonic() - t0
        assert elapsed >= (n - 1) / 20 - 0.02, elapsed  # lower bound only
    finally:
        c.stop()


def test_bind_throughput(control_plane: Any, admin: KubeClient, ns: str) -> None:
    """Measures binds/s with 16 workers and no client-side limit (printed; run with -s to see)."""
    node = f"tp-node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node)
    c = new_cluster(control_plane, qps=0, resources=("namespaces", "nodes"))
    try:
        n = 400
        with ThreadPoolExecutor(16) as ex:
            pods = [Pod.from_dict(p) for p in ex.map(lambda i: create_pod(admin, ns, f"t{i:04d}"), range(n))]
        lat: list[float] = []

        def one(p: Pod) -> None:
            t = time.perf_counter()
            c.bind(p, node)
            lat.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(one, pods))
        wall = time.perf_counter() - t0
        lat.sort()
        print(f"\nbind: {n} pods, 16 workers: {n / wall:.0f} binds/s, p50 {lat[n // 2] * 1e3:.1f} ms, "
              f"p99 {lat[int(n * 0.99)] * 1e3:.1f} ms")
        seq = [Pod.from_dict(create_pod(admin, ns, f"s{i:03d}")) for i in range(50)]
        t0 = time.perf_counter()
        for p in seq:
            c.bind(p, node)
        print(f"bind: sequential {50 / (time.perf_counter() - t0):.0f} binds/s")
        assert c.stats["binds"] == n + 50
    finally:
        c.stop()
        admin.request("DELETE", f"/api/v1/nodes/{node}")


# ------------------------------------------------------------------------------------------- errors


def test_rbac_denial_names_the_verb_and_resource(control_plane: Any, admin: KubeClient) -> None:
    c = new_cluster(control_plane, headers={"Impersonate-User": "nobody"})
    try:
        with pytest.raises(ApiForbiddenError) as ei:
            c.preflight()
        msg = str(ei.value)
        assert "\n" not in msg
        assert 'user "nobody"' in msg and "list pods" in msg and "create pods/binding" in msg
        # a raw 403 from a real request
        r = c.client.request("GET", "/api/v1/pods")
        assert r.status == 403
        err = c.client.error(r, "GET", "/api/v1/pods")
        assert isinstance(err, ApiForbiddenError)
        assert 'grant verb "list" on resource "pods"' in str(err) and "nobody" in str(err)
        # reflectors keep retrying and report why in health()
        c.check_permissions = False
        with pytest.raises(Exception) as ei2:
            c.start(Recorder(), timeout=3)
        assert "forbidden" in str(ei2.value).lower()
        ok, why = c.health()
        assert not ok and "forbidden" in why.lower()
        b = c.client.request("POST", "/api/v1/namespaces/default/pods/x/binding", body={})
        assert 'grant verb "create" on resource "pods/binding"' in str(c.client.error(b, "POST",
                                                                                      "/api/v1/namespaces/default/"
                                                                                      "pods/x/binding"))
    finally:
        c.stop()


def test_unauthorized_unreachable_and_missing_kubeconfig(control_plane: Any, tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    conn = load_connection(str(control_plane.kubeconfig_path))
    bad = dataclasses.replace(conn, cert_file=None, key_file=None, auth=lambda force=False: "Bearer not-a-token")
    c = KubeCluster(connection=bad, qps=0)
    try:
        with pytest.raises(ApiUnauthorizedError) as ei:
            c.preflight()
        assert "401" in str(ei.value) and "expired" in str(ei.value)
    finally:
        c.stop()
    nowhere = Connection(host="https://127.0.0.1:1")
    c2 = KubeCluster(connection=nowhere, qps=0)
    try:
        with pytest.raises(ApiUnreachableError) as ei:
            c2.preflight()
        assert "connection refused" in str(ei.value) and "127.0.0.1:1" in str(ei.value)
    finally:
        c2.stop()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError) as ei:
        load_connection()
    assert "no kubeconfig found" in str(ei.value)
    with pytest.raises(KubeConfigError) as ei:
        load_connection(str(tmp_path / "nope.yaml"))
    assert "nope.yaml" in str(ei.value)
    (tmp_path / "broken.yaml").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(KubeConfigError) as ei:
        load_connection(str(tmp_path / "broken.yaml"))
    assert "\n" not in str(ei.value)

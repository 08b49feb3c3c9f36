"""Leadership and binding on the real API server: a replica whose lease is taken sends no binding request
afterwards, and a 409 on a binding is a success only when the pod sits on the node we chose."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.base import BindError
from scheduler_runtime.cluster.kube import KubeClient, KubeCluster, load_connection, micro_time
from scheduler_runtime.config.loader import build
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing import config_for
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


def _pod(admin: KubeClient, ns: str, name: str, scheduler: str = "default-scheduler",
         node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": scheduler, "nodeSelector": node_selector or {},
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}]}})


def test_a_conflict_is_a_success_only_on_our_own_node(admin: KubeClient, control_plane: Any,
                                                      namespace: str) -> None:
    ns = namespace
    for n in ("a", "b"):
        create_node(admin, f"{ns}-{n}")
    cluster = KubeCluster(str(control_plane.kubeconfig_path), resources=(), check_permissions=False)
    try:
        raw = _pod(admin, ns, "p")
        pod = Pod.from_dict(raw)
        admin.call("POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-a"}})
        # already on our node (an earlier try whose answer was lost): success
        cluster.bind(pod, f"{ns}-a")
        assert cluster.stats["binds"] == 1
        # on another node: a failure, the pod is gone for us
        with pytest.raises(BindError) as err:
            cluster.bind(pod, f"{ns}-b")
        assert err.value.gone and cluster.stats["binds"] == 1

        # the pod was replaced by another with the same name, bound to our node: not ours, not a success
        admin.call("DELETE", f"/api/v1/namespaces/{ns}/pods/p", query={"gracePeriodSeconds": "0"})
        wait_for(lambda: admin.request("GET", f"/api/v1/namespaces/{ns}/pods/p").status == 404, what="deletion")
        _pod(admin, ns, "p")
        admin.call("POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-a"}})
        with pytest.raises(BindError) as err:
            cluster.bind(pod, f"{ns}-a")
        assert err.value.gone and cluster.stats["binds"] == 1
    finally:
        cluster.stop()


class _HoldPreBind(Plugin):
    """Holds every binding cycle in PreBind until released, so bindings are queued when the lease goes."""

    name = "HoldPreBind"
    release = threading.Event()
    entered = threading.Event()

    def pre_bind(self, state: Any, pod: Any, node_name: str) -> None:
        type(self).entered.set()
        type(self).release.wait(60)


def test_a_replica_that_lost_its_lease_sends_no_binding(admin: KubeClient, control_plane: Any,
                                                        namespace: str) -> None:
    ns = namespace
    scheduler = f"ksched-lb-{uuid.uuid4().hex[:6]}"
    lease = scheduler
    create_node(admin, f"{ns}-n0", labels={"test-group": ns})
    _HoldPreBind.release = threading.Event()
    _HoldPreBind.entered = threading.Event()
    reg = build_registry([])
    reg.register(_HoldPreBind, "test")
    doc = config_for(_HoldPreBind, scheduler_name=scheduler)
    doc["leaderElection"] = {"leaderElect": True, "leaseDuration": "6s", "renewDeadline": "4s",
                             "retryPeriod": "500ms", "resourceName": lease, "resourceNamespace": ns}
    cfg = build(doc, reg)
    # two binding workers, both held in PreBind; the other binding cycles wait in the pool's queue
    r = Runner(cfg, reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path),
                                    keep_results=True, secure_port=0, seed=1,
                                    bind_workers=2))

    # count every binding request this replica sends, on its real client
    sent: list[tuple[float, str]] = []
    real = r.cluster.client.request

    def counting(method: str, path: str, **kw: Any) -> Any:
        if method == "POST" and path.endswith("/binding"):
            sent.append((time.monotonic(), path))
        return real(method, path, **kw)

    r.cluster.client.request = counting  # type: ignore[method-assign]
    code: list[int] = []
    t = threading.Thread(target=lambda: code.append(r.run()), daemon=True)
    t.start()
    try:
        wait_for(lambda: r._booted.is_set() and r._started, timeout=60, what="the replica to lead")
        names = [f"p{i}" for i in range(6)]
        for n in names:
            _pod(admin, ns, n, scheduler, {"test-group": ns})
        wait_for(lambda: r.scheduler._inflight_bindings == len(names), what="every pod in its binding cycle")
        wait_for(_HoldPreBind.entered.is_set, what="the binding workers to be held in PreBind")

        # another holder takes the Lease object (retried when the replica's renewal wrote in between)
        path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{lease}"

        def take() -> bool:
            obj = admin.call("GET", path)
            obj["spec"].update({"holderIdentity": "another-replica", "leaseDurationSeconds": 60,
                                "acquireTime": micro_time(), "renewTime": micro_time(),
                                "leaseTransitions": int(obj["spec"].get("leaseTransitions") or 0) + 1})
            resp = admin.request("PUT", path, body=obj)
            assert resp.ok or resp.status == 409, resp.message()
            return resp.ok

        wait_for(take, what="another holder to take the lease")
        wait_for(lambda: r._lost, timeout=30, what="the replica to notice it lost the lease")
        lost_at = time.monotonic()
        assert not r._may_lead()

        _HoldPreBind.release.set()  # the held and queued binding cycles go on now
        t.join(90)
        assert not t.is_alive()
        assert code == [1], "a lost lease is an error exit"
        assert [p for at, p in sent if at >= lost_at] == [], "a binding request was sent after the lease was lost"
        assert sent == [], "every binding cycle was held until after the loss"
        pods = admin.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods} == {n: None for n in names}
        assert r.scheduler.binds_abandoned == len(names)
        assert r.cluster.stats["binds"] == 0
        events = admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
        assert not [e for e in events if e["reason"] in ("Scheduled", "FailedScheduling")], events
        assert not any(r.scheduler.cache.is_assumed(p["metadata"]["uid"]) for p in pods)
    finally:
        _HoldPreBind.release.set()
        r.stop()
        t.join(60)


def test_a_pod_bound_elsewhere_meanwhile_is_a_failed_bind_not_a_success(admin: KubeClient, control_plane: Any,
                                                                         namespace: str) -> None:
    """ksched holds the pod in PreBind for node n0; someone else binds it to n1; ksched's binding gets 409:
    not a success (no Scheduled event, no scheduled count), the assumed pod is forgotten."""
    ns = namespace
    scheduler = f"ksched-409-{uuid.uuid4().hex[:6]}"
    create_node(admin, f"{ns}-n0", labels={"test-group": ns})
    create_node(admin, f"{ns}-n1", labels={"test-group": f"{ns}-other"})
    _HoldPreBind.release = threading.Event()
    _HoldPreBind.entered = threading.Event()
    reg = build_registry([])
    reg.register(_HoldPreBind, "test")
    cfg = build(config_for(_HoldPreBind, scheduler_name=scheduler), reg)
    r = Runner(cfg, reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path),
                                    keep_results=True, secure_port=0, seed=1))
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: r._booted.is_set() and r._started, timeout=60, what="the scheduler to start")
        uid = _pod(admin, ns, "p", scheduler, {"test-group": ns})["metadata"]["uid"]
        wait_for(_HoldPreBind.entered.is_set, what="the binding cycle to be held in PreBind")
        assert r.scheduler.cache.is_assumed(uid)
        admin.call("POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-n1"}})
        _HoldPreBind.release.set()
        wait_for(lambda: r.cluster.stats["bind_gone"] == 1, what="the 409 to be handled")
        wait_for(lambda: not r.scheduler.cache.is_assumed(uid), what="the assumed pod to be forgotten")
        assert r.cluster.stats["binds"] == 0 and r.scheduler.scheduled == 0
        result = wait_for(lambda: r.scheduler.results.get(f"{ns}/p"), what="the attempt's result")
        assert result.outcome == "error"
        # the informer then shows the pod where the other binder put it
        wait_for(lambda: r.scheduler.cache.pod_node(uid) == f"{ns}-n1", what="the cache to follow the API server")
        events = admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
        assert not [e for e in events if e["reason"] == "Scheduled"], events
    finally:
        _HoldPreBind.release.set()
        r.stop()
        t.join(60)


def test_a_bind_waiting_for_the_rate_limiter_is_not_sent_once_the_gate_closes(
        admin: KubeClient, control_plane: Any, namespace: str) -> None:
    ns = namespace
    create_node(admin, f"{ns}-a")
    pod = Pod.from_dict(_pod(admin, ns, "p"))
    leading = threading.Event()
    leading.set()
    cluster = KubeCluster(str(control_plane.kubeconfig_path), resources=(), check_permissions=False, qps=0.5,
                          burst=1)
    cluster.leader_gate = leading.is_set
    sent: list[str] = []
    real = cluster.client.request

    def counting(method: str, path: str, **kw: Any) -> Any:
        sent.append(f"{method} {path}")
        return real(method, path, **kw)

    cluster.client.request = counting  # type: ignore[method-assign]
    try:
        cluster.client.limiter.acquire()  # the bucket is empty: the next write waits about 2 s for a token
        failed: list[BaseException] = []

        def bind() -> None:
            try:
                cluster.bind(pod, f"{ns}-a")
            except BindError as exc:
                failed.append(exc)

        t = threading.Thread(target=bind)
        t.start()
        time.sleep(0.2)  # the bind is waiting for its token (ordering only, nothing is asserted on time)
        leading.clear()
        t.join(30)
        assert not t.is_alive()
        assert sent == [], "sent after the lease was lost"
        assert failed and "leader lease" in str(failed[0])
        assert cluster.stats["binds_dropped_not_leader"] == 1
        assert not admin.call("GET", f"/api/v1/namespaces/{ns}/pods/p")["spec"].get("nodeName")
    finally:
        cluster.stop()

"""The second scheduler's generated RBAC and admission policy, on the real API server.

The scheduler's ServiceAccount gets exactly the built-in system:kube-scheduler and system:volume-scheduler
roles (read from this API server, not from memory), and the generated ValidatingAdmissionPolicy narrows what
those roles let it write on a pod to the pod's status and ksched's own annotations."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ksched_cli.deploy import secondsched
from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import REQUIRED_PERMISSIONS, KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration

CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
JSON = "application/json"
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


@pytest.fixture
def deployed(admin: KubeClient, namespace: str, tmp_path: Path) -> Iterator[secondsched.SecondScheduler]:
    """The generated ServiceAccount, RBAC and policy of a 2-replica second scheduler (leader election on, its
    own lease), applied as `ksched deploy --second-scheduler --apply` would; no Deployment (no kubelet here)."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    name = f"ks-{uuid.uuid4().hex[:6]}"
    s = secondsched.prepare(name, namespace, "registry.example.com/ksched:v1", cfg, 2, build_registry([]))
    objs = [o for o in s.objects if o["kind"] not in ("ConfigMap", "Deployment")]
    secondsched.apply_objects(admin, objs)
    try:
        _wait_enforced(admin, s)
        yield s
    finally:
        secondsched.delete_objects(admin, list(reversed(objs)))


def _wait_enforced(admin: KubeClient, s: secondsched.SecondScheduler) -> None:
    """The API server loads a new admission policy asynchronously: probe (dry run) until it denies."""
    probe = f"/api/v1/namespaces/{s.namespace}/pods/policy-probe"
    admin.call("POST", f"/api/v1/namespaces/{s.namespace}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "policy-probe"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    me = _as_scheduler(admin, s)
    wait_for(lambda: me.request("PATCH", probe + "/status", query={"dryRun": "All"}, content_type=MERGE,
                                body={"metadata": {"labels": {"probe": "1"}}}).status == 403,
             timeout=30, what="the admission policy to be enforced")
    admin.call("DELETE", probe, query={"gracePeriodSeconds": "0"})


def _user(s: secondsched.SecondScheduler) -> str:
    return f"system:serviceaccount:{s.namespace}:{s.name}"


def _as_scheduler(admin: KubeClient, s: secondsched.SecondScheduler) -> KubeClient:
    return admin.clone(headers={"Impersonate-User": _user(s), "Impersonate-Group": "system:serviceaccounts"})


def _allowed(admin: KubeClient, user: str, verb: str, group: str, resource: str, sub: str = "",
             namespace: str = "default", name: str = "") -> bool:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                     "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                            "subresource": sub, "namespace": namespace, "name": name}}}
    return bool(admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
                ["status"].get("allowed"))


def _split(resource: str) -> tuple[str, str]:
    base, _, sub = resource.partition("/")
    return base, sub


def test_the_scheduler_gets_exactly_the_built_in_scheduler_roles(
        admin: KubeClient, deployed: secondsched.SecondScheduler) -> None:
    s = deployed
    user = _user(s)
    bindings = [o for o in s.objects if o["kind"] == "ClusterRoleBinding"]
    assert sorted(b["roleRef"]["name"] for b in bindings) == ["system:kube-scheduler", "system:volume-scheduler"]
    assert not [o for o in s.objects if o["kind"] == "ClusterRole"], "no rule beyond the built-in roles"
    assert [r["resourceNames"] for o in s.objects if o["kind"] == "Role" for r in o["rules"]
            if "resourceNames" in r] == [[s.name]], "only its own lease"

    # every verb the built-in roles grant (as this API server defines them) is granted, nothing on pods more
    granted: set[tuple[str, str, str]] = set()
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        live = admin.call("GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")
        for rule in live["rules"]:
            if rule.get("resourceNames"):
                continue
            for group in rule.get("apiGroups") or [""]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((verb, group, resource))
    for verb, group, resource in sorted(granted):
        assert _allowed(admin, user, verb, group, *_split(resource)), (verb, group, resource)
    pod_verbs = {(v, r) for v, g, r in granted if g == "" and r.startswith("pods")}
    assert ("patch", "pods") not in pod_verbs and ("update", "pods") not in pod_verbs
    for verb in ("patch", "update", "create", "deletecollection"):
        assert not _allowed(admin, user, verb, "", "pods"), verb
    # the secure port's delegated authentication reads the client CAs as system:kube-scheduler may
    assert _allowed(admin, user, "get", "", "configmaps", namespace="kube-system",
                    name="extension-apiserver-authentication")
    assert not _allowed(admin, user, "get", "", "configmaps", namespace="kube-system", name="other")
    assert not _allowed(admin, user, "list", "scheduling.k8s.io", "priorityclasses")

    # the runtime's preflight asks for nothing the roles do not grant
    for verb, group, resource, sub in REQUIRED_PERMISSIONS:
        assert (verb, group, resource + ("/" + sub if sub else "")) in granted or \
            (verb, group, resource) in granted, (verb, group, resource, sub)
        assert _allowed(admin, user, verb, group, resource, sub), (verb, group, resource, sub)


def test_the_scheduler_may_bind_and_record_but_not_rewrite_a_pod(
        admin: KubeClient, namespace: str, deployed: secondsched.SecondScheduler) -> None:
    ns = namespace
    node = f"{ns}-n1"
    create_node(admin, node)
    admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    me = _as_scheduler(admin, deployed)
    path = f"/api/v1/namespaces/{ns}/pods/p"

    def refused(method: str, sub: str, body: Any, content_type: str = MERGE) -> str:
        r = me.request(method, path + sub, body=body, content_type=content_type)
        assert r.status == 403, (sub, body, r.status, r.message())
        return r.message()

    # the pod itself: RBAC gives no write at all
    assert "cannot patch resource \"pods\"" in refused("PATCH", "", {"spec": {"containers": [
        {"name": "c", "image": "evil:1"}]}})
    assert "cannot patch resource \"pods\"" in refused("PATCH", "", {"metadata": {"labels": {"app": "evil"}}})
    assert "cannot update resource \"pods\"" in refused("PUT", "", admin.call("GET", path), JSON)
    # pods/status (system:kube-scheduler may patch it, and the API server would take labels through it):
    # the policy refuses everything but status and ksched's annotations
    policy = f"ValidatingAdmissionPolicy '{deployed.name}-pod-writes'"
    msg = refused("PATCH", "/status", {"metadata": {"labels": {"app": "evil"}}})
    assert policy in msg and "may not change a pod's labels" in msg
    msg = refused("PATCH", "/status", {"metadata": {"annotations": {"team": "b"}}})
    assert "annotations other than ksched's own" in msg
    refused("PATCH", "/status", {"metadata": {"annotations": {"team": None}}})
    refused("PATCH", "/status", {"metadata": {"annotations": {"new": "x"}}})
    assert "finalizers" in refused("PATCH", "/status", {"metadata": {"finalizers": ["example.com/hold"]}})
    # a Binding copies its annotations onto the pod: only ksched's own may ride on it
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"evil": "1"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    assert "on a binding" in refused("POST", "/binding", binding, JSON)
    r = me.request("POST", f"/api/v1/namespaces/{ns}/bindings", body=binding)
    assert r.status == 403 and "on a binding" in r.message(), r.message()
    # a spec change through pods/status is dropped by the API server (the status strategy keeps the spec)
    me.call("PATCH", path + "/status", body={"spec": {"containers": [{"name": "c", "image": "evil:1"}]}},
            content_type=MERGE)

    # what a scheduler does works
    me.call("PATCH", path + "/status", content_type="application/strategic-merge-patch+json", body={
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "0/1 nodes are available"}]}})
    me.call("PATCH", path + "/status", content_type=MERGE,
            body={"metadata": {"annotations": {RESULT_ANNOTATION: '{"outcome":"unschedulable"}'}}})
    me.call("POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", body={
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": deployed.name,
        "reportingInstance": f"{deployed.name}-x", "action": "Scheduling", "reason": "FailedScheduling",
        "type": "Warning", "note": "0/1 nodes are available", "regarding": {"kind": "Pod", "namespace": ns,
                                                                           "name": "p"}})
    ok = {**binding, "metadata": {"name": "p", "annotations": {RESULT_ANNOTATION: '{"outcome":"scheduled"}'}}}
    me.call("POST", path + "/binding", body=ok)

    pod = admin.call("GET", path)
    assert pod["spec"]["nodeName"] == node
    assert pod["spec"]["containers"][0]["image"] == "nginx:1"
    assert pod["metadata"]["labels"] == {"app": "web"}
    assert pod["metadata"]["annotations"] == {"team": "a", RESULT_ANNOTATION: '{"outcome":"scheduled"}'}
    assert not pod["metadata"].get("finalizers")
    # why the policy exists: for an identity it does not confine, a pods/status write does change labels
    admin.call("PATCH", path + "/status", body={"metadata": {"labels": {"app": "via-status"}}}, content_type=MERGE)
    assert admin.call("GET", path)["metadata"]["labels"] == {"app": "via-status"}


def _token_kubeconfig(admin: KubeClient, control_plane: Any, s: secondsched.SecondScheduler, path: Path) -> str:
    """A kubeconfig holding a real ServiceAccount token (TokenRequest), as the Deployment's pod would have."""
    tr = admin.call("POST", f"/api/v1/namespaces/{s.namespace}/serviceaccounts/{s.name}/token", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{control_plane.server_url}", certificate-authority: "{control_plane.pki / 'ca.crt'}"}}
users:
- name: u
  user: {{token: "{tr['status']['token']}"}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
""")
    path.chmod(0o600)
    return str(path)


def test_ksched_runs_as_its_service_account_and_records_results(
        admin: KubeClient, control_plane: Any, namespace: str, deployed: secondsched.SecondScheduler,
        tmp_path: Path) -> None:
    s = deployed
    ns = namespace
    node = f"{ns}-n1"
    create_node(admin, node, labels={"test-group": ns})
    kubeconfig = _token_kubeconfig(admin, control_plane, s, tmp_path / "sa.kubeconfig")
    who = KubeClient(load_connection(kubeconfig)).call(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert who["status"]["userInfo"]["username"] == _user(s)
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(s.config_text)  # the ConfigMap's config: leader election on its own lease
    reg = build_registry([])
    cfg = load_config(str(cfg_file), reg)
    assert cfg.leader_election.leader_elect and cfg.leader_election.resource_name == s.name
    r = Runner(cfg, reg, RunOptions(kubeconfig=kubeconfig, secure_port=0, seed=1, results="ksched"))
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: r._booted.is_set() and r._started, timeout=60, what="ksched to pass its preflight and lead")
        for name, selector in (("fits", {"test-group": ns}), ("nowhere", {"test-group": "none"})):
            admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
                "spec": {"schedulerName": s.name, "nodeSelector": selector,
                         "containers": [{"name": "c", "image": "pause"}]}})

        def pod(name: str) -> dict[str, Any]:
            return admin.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")

        wait_for(lambda: pod("fits")["spec"].get("nodeName") == node, what="the pod to be bound")
        result = wait_for(lambda: (pod("nowhere")["metadata"].get("annotations") or {}).get(RESULT_ANNOTATION),
                          what="the pending pod's result annotation")
        assert orjson.loads(result)["outcome"] == "unschedulable"
        fits = pod("fits")
        assert orjson.loads(fits["metadata"]["annotations"][RESULT_ANNOTATION])["outcome"] == "scheduled"
        conds = {c["type"]: c for c in pod("nowhere")["status"].get("conditions") or []}
        assert conds["PodScheduled"]["reason"] == "Unschedulable"
        # events are written in the background, on two worker shards, so one may arrive after the other
        wait_for(lambda: {e["reason"] for e in admin.call(
            "GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]} >= {"Scheduled", "FailedScheduling"},
            what="the Scheduled and FailedScheduling events")
        assert r.cluster._pod_writer is not None and r.cluster._pod_writer.failed == 0
        assert r.cluster._event_writer is not None and r.cluster._event_writer.failed == 0
        lease = admin.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{s.name}")
        assert lease["spec"]["holderIdentity"] == r.elector.identity
    finally:
        r.stop()
        t.join(60)
    assert not t.is_alive()

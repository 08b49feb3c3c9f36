"""`ksched deploy` against the real kube-apiserver of the test control plane.

Static pod: every patched fixture manifest is accepted as a Pod by the API server (server-side dry run).
Second scheduler: the objects are applied, checked, re-applied without change, and removed by undeploy;
the ServiceAccount is then allowed every verb the ksched runtime checks at start-up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched_cli.deploy import secondsched, staticpod
from ksched_cli.inputs import registry as _registry
from scheduler_runtime.cluster.kube import REQUIRED_PERMISSIONS, KubeClient, load_connection

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "tests" / "data" / "manifests"
IMAGE = "registry.example.com/team/ksched:v1.2.3"

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
"""


@pytest.fixture(scope="module")
def client(control_plane: Any) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


@pytest.fixture(scope="module")
def registry() -> Any:
    return _registry(None)


def _ksched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ksched_cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})


def _server_dry_run_pod(client: KubeClient, manifest_text: str) -> dict[str, Any]:
    pod = yaml.safe_load(manifest_text)
    resp = client.request("POST", "/api/v1/namespaces/kube-system/pods", body=pod, query={"dryRun": "All"})
    assert resp.ok, f"API server rejected the patched manifest: {resp.status} {resp.message()}"
    return resp.json()


@pytest.mark.parametrize("fixture", sorted(p.name for p in MANIFESTS.glob("*.yaml")))
def test_patched_manifest_is_a_valid_pod(fixture: str, client: KubeClient, registry: Any, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    m = manifests / "kube-scheduler.yaml"
    shutil.copyfile(MANIFESTS / fixture, m)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    dest = Path("/etc/kubernetes/ksched-config.yaml")
    _server_dry_run_pod(client, m.read_text())  # the fixture itself is a valid pod
    p = staticpod.plan(m, cfg, IMAGE, dest, registry)
    assert p.manifest_changed
    created = _server_dry_run_pod(client, p.new_manifest)
    c = next(x for x in created["spec"]["containers"] if x["name"] == "kube-scheduler")
    assert c["image"] == IMAGE
    assert f"--config={dest}" in c["command"]
    assert {"mountPath": str(dest), "name": "ksched-config", "readOnly": True} in c["volumeMounts"] or \
        any(v["mountPath"] == str(dest) and v.get("readOnly") for v in c["volumeMounts"])
    vol = next(v for v in created["spec"]["volumes"] if v.get("hostPath", {}).get("path") == str(dest))
    assert vol["hostPath"]["type"] == "File"
    # nothing was stored: it was a dry run
    assert client.request("GET", "/api/v1/namespaces/kube-system/pods/kube-scheduler").status == 404


# ------------------------------------------------------------------------------------------ second scheduler


SECOND_CONFIG = """\
# the team's gang scheduler
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      - name: NodeCRDResourceFit
      disabled:
      - name: PrioritySort
"""


def _get(client: KubeClient, obj: dict[str, Any]) -> dict[str, Any] | None:
    resp = client.request("GET", secondsched.object_path(obj))
    return resp.json() if resp.ok else None


def _allowed(client: KubeClient, user: str, verb: str, group: str, resource: str, sub: str = "",
             namespace: str = "", name: str = "") -> bool:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                     "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "subresource": sub,
                                            "namespace": namespace, "name": name}}}
    r = client.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
    return bool((r.get("status") or {}).get("allowed"))


def test_second_scheduler_apply_check_reapply_undeploy(control_plane: Any, client: KubeClient,
                                                       tmp_path: Path) -> None:
    kubeconfig = str(control_plane.kubeconfig_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(SECOND_CONFIG)
    name, ns = "gang-scheduler", "kube-system"
    args = ["deploy", "--second-scheduler", "--name", name, "--namespace", ns, "--image", IMAGE, "--config", str(cfg),
            "--replicas", "2", "--kubeconfig", kubeconfig]

    r = _ksched(*args, "--apply", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "server dry run" in r.stdout
    assert client.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}").status == 404

    r = _ksched(*args, "--apply", "--no-wait")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "schedulerName: gang-scheduler" in r.stdout
    s = secondsched.prepare(name, ns, IMAGE, cfg, 2, _registry(None))
    kinds = [o["kind"] for o in s.objects]
    assert kinds == ["ServiceAccount", "ClusterRoleBinding", "ClusterRoleBinding", "RoleBinding", "ClusterRole",
                     "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy",
                     "ValidatingAdmissionPolicyBinding", "ConfigMap", "Deployment"]
    live = {secondsched.describe(o): _get(client, o) for o in s.objects}
    assert all(v is not None for v in live.values()), [k for k, v in live.items() if v is None]
    for o in s.objects:
        got = live[secondsched.describe(o)]
        assert got["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "ksched"
        assert any(f.get("manager") == "ksched" and f.get("operation") == "Apply"
                   for f in got["metadata"]["managedFields"])

    # the ConfigMap holds a config with its own schedulerName and lease, leader election on (2 replicas)
    cm = live[f"ConfigMap/{name}-config -n {ns}"]
    installed = yaml.safe_load(cm["data"]["config.yaml"])
    assert cm["data"]["config.yaml"].startswith("# the team's gang scheduler")
    assert installed["profiles"][0]["schedulerName"] == name
    assert installed["leaderElection"] == {"leaderElect": True, "resourceName": name, "resourceNamespace": ns}
    assert "clientConnection" not in installed

    dep = live[f"Deployment/{name} -n {ns}"]
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    c = pod["containers"][0]
    assert c["image"] == IMAGE and c["command"][0] == "kube-scheduler"
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 10259, "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 10259, "scheme": "HTTPS"}
    assert pod["volumes"][0]["configMap"]["name"] == f"{name}-config"

    crbs = {o["metadata"]["name"]: live[secondsched.describe(o)] for o in s.objects
            if o["kind"] == "ClusterRoleBinding"}
    assert {b["roleRef"]["name"] for b in crbs.values()} == {"system:kube-scheduler", "system:volume-scheduler",
                                                             f"{name}-extras"}
    extras = live[f"ClusterRole/{name}-extras"]["rules"]
    assert {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]} \
        in extras

    # RBAC works: the ServiceAccount may do everything the ksched runtime checks before it starts
    sa = f"system:serviceaccount:{ns}:{name}"
    for verb, group, resource, sub in REQUIRED_PERMISSIONS:
        assert _allowed(client, sa, verb, group, resource, sub), (verb, group, resource, sub)
    assert not _allowed(client, sa, "patch", "", "pods", namespace="default"), "no pod write: it could change images"
    assert _allowed(client, sa, "patch", "", "pods", "status", namespace="default")
    assert _allowed(client, sa, "list", "scheduling.x-k8s.io", "podgroups")
    assert _allowed(client, sa, "update", "coordination.k8s.io", "leases", namespace=ns, name=name)
    assert not _allowed(client, sa, "update", "coordination.k8s.io", "leases", namespace=ns, name="kube-scheduler-x")

    # re-apply: nothing changes
    versions = {k: v["metadata"]["resourceVersion"] for k, v in live.items()}
    r = _ksched(*args, "--apply", "--no-wait")
    assert r.returncode == 0, r.stderr
    assert "nothing changed" in r.stdout and "configured" not in r.stdout and "created" not in r.stdout
    again = {secondsched.describe(o): _get(client, o)["metadata"]["resourceVersion"] for o in s.objects}
    assert again == versions

    # undeploy removes every object (background propagation: the garbage collector removes ReplicaSets later)
    r = _ksched("undeploy", "--second-scheduler", "--name", name, "--namespace", ns, "--kubeconfig", kubeconfig)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" deleted") == len(s.objects)
    import time

    deadline = time.monotonic() + 30
    left = [o for o in s.objects if _get(client, o) is not None]
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = [o for o in s.objects if _get(client, o) is not None]
    assert not left, [secondsched.describe(o) for o in left]
    r = _ksched("undeploy", "--second-scheduler", "--name", name, "--namespace", ns, "--kubeconfig", kubeconfig)
    assert r.returncode == 0 and "nothing to remove" in r.stdout


def test_second_scheduler_refuses_default_names(client: KubeClient, tmp_path: Path, control_plane: Any) -> None:
    cfg = tmp_path / "cfg.yaml"
    kubeconfig = str(control_plane.kubeconfig_path)
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "profiles:\n- schedulerName: default-scheduler\n")
    r = _ksched("deploy", "--second-scheduler", "--image", IMAGE, "--config", str(cfg), "--apply",
                "--kubeconfig", kubeconfig)
    assert r.returncode == 1 and "profiles[0].schedulerName" in r.stderr and "cfg.yaml" in r.stderr
    r = _ksched("deploy", "--second-scheduler", "--image", IMAGE, "--config", str(cfg), "--apply", "-n", "nope",
                "--kubeconfig", kubeconfig)
    assert r.returncode == 1
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    r = _ksched("deploy", "--second-scheduler", "--image", IMAGE, "--config", str(cfg), "--apply", "-n", "nope",
                "--no-wait", "--kubeconfig", kubeconfig)
    assert r.returncode == 1 and "namespace 'nope' does not exist" in r.stderr
    assert client.request("GET", "/apis/apps/v1/namespaces/kube-system/deployments/ksched-scheduler").status == 404


def _patch_status(client: KubeClient, path: str, status: dict[str, Any]) -> None:
    client.call("PATCH", path + "/status", body={"status": status}, content_type="application/merge-patch+json")


def test_rollout_wait_reads_deployment_and_pod_status(control_plane: Any, client: KubeClient, namespace: str,
                                                      tmp_path: Path) -> None:
    """No kubelet or controllers here: the test writes the status they would write, and the CLI's wait
    must finish on success, fail fast on a crash-looping pod, and time out otherwise (exit 3)."""
    kubeconfig = str(control_plane.kubeconfig_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    name = "roll-sched"
    args = ["deploy", "--second-scheduler", "--name", name, "--namespace", namespace, "--image", IMAGE, "--config",
            str(cfg), "--apply", "--kubeconfig", kubeconfig]
    r = _ksched(*args, "--no-wait")
    assert r.returncode == 0, r.stderr
    dep_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    gen = client.call("GET", dep_path)["metadata"]["generation"]

    r = _ksched(*args, "--timeout", "3")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "not finished after 3s" in r.stderr and "0/1 available" in r.stderr

    pod = client.call("POST", f"/api/v1/namespaces/{namespace}/pods", body={
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-abc", "labels": secondsched.selector_for(name)},
        "spec": {"containers": [{"name": "scheduler", "image": IMAGE}]}})
    _patch_status(client, f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}", {
        "phase": "Running",
        "containerStatuses": [{"name": "scheduler", "image": IMAGE, "imageID": "", "ready": False, "restartCount": 4,
                               "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                     "message": "back-off 40s restarting failed container"}},
                               "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]})
    r = _ksched(*args, "--timeout", "60")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "CrashLoopBackOff" in r.stderr and f"{name}-abc" in r.stderr and "logs" in r.stderr

    client.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}-abc", query={"gracePeriodSeconds": "0"})
    _patch_status(client, dep_path, {"observedGeneration": gen, "replicas": 1, "updatedReplicas": 1,
                                     "readyReplicas": 1, "availableReplicas": 1})
    r = _ksched(*args, "--timeout", "30")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "1/1 available" in r.stdout and f"schedulerName: {name}" in r.stdout
    r = _ksched("undeploy", "--second-scheduler", "--name", name, "--namespace", namespace, "--kubeconfig", kubeconfig)
    assert r.returncode == 0 and "removed" in r.stdout


def test_static_pod_rbac_lets_kube_scheduler_user_run_ksched(client: KubeClient, registry: Any,
                                                             tmp_path: Path) -> None:
    """`--print-rbac` output, applied, gives user system:kube-scheduler every permission ksched checks at start."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    r = _ksched("deploy", "--static-pod", "--config", str(cfg), "--print-rbac")
    assert r.returncode == 0, r.stderr
    objs = list(yaml.safe_load_all(r.stdout))
    user = "system:kube-scheduler"

    def allowed(verb: str, group: str, resource: str, sub: str = "") -> bool:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user, "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                                              "subresource": sub}}}
        return bool(client.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
                    ["status"].get("allowed"))

    assert not allowed("list", "scheduling.x-k8s.io", "podgroups"), "the built-in role alone is not enough"
    secondsched.apply_objects(client, objs)
    try:
        for verb, group, resource, sub in REQUIRED_PERMISSIONS:
            assert allowed(verb, group, resource, sub), (verb, group, resource, sub)
        assert not allowed("patch", "", "pods") and allowed("watch", "scheduling.x-k8s.io", "podgroups")
    finally:
        secondsched.delete_objects(client, objs)

"""`ksched deploy --second-scheduler` rendering: names and lease kept apart from the default scheduler,
leader election with replicas, RBAC from the enabled plugins, and the CLI's -o yaml and refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched_cli.deploy import secondsched
from ksched_cli.inputs import registry as _registry
from scheduler_runtime.errors import InputError

REPO = Path(__file__).resolve().parents[3]
IMAGE = "registry.example.com/ksched:v1"
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
GANG = HEAD + """\
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      - name: NodeCRDResourceFit
      disabled:
      - name: PrioritySort
"""


@pytest.fixture(scope="module")
def registry() -> Any:
    return _registry(None)


def _prep(tmp_path: Path, registry: Any, text: str, replicas: int = 1, name: str = "my-sched",
          namespace: str = "kube-system") -> secondsched.SecondScheduler:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(text)
    return secondsched.prepare(name, namespace, IMAGE, cfg, replicas, registry)


def _by_kind(s: secondsched.SecondScheduler, kind: str) -> list[dict[str, Any]]:
    return [o for o in s.objects if o["kind"] == kind]


def test_one_replica_no_leader_election_recreate(tmp_path: Path, registry: Any) -> None:
    s = _prep(tmp_path, registry, HEAD)
    cfg = yaml.safe_load(s.config_text)
    assert cfg["profiles"] == [{"schedulerName": "my-sched"}]
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert s.scheduler_names == ["my-sched"] and not s.leader_elect
    dep = _by_kind(s, "Deployment")[0]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not _by_kind(s, "Role")
    # the delegated authentication of the secure port reads kube-system/extension-apiserver-authentication
    [reader] = _by_kind(s, "RoleBinding")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert reader["subjects"] == [{"kind": "ServiceAccount", "name": "my-sched", "namespace": "kube-system"}]
    # the default profile needs exactly system:kube-scheduler + system:volume-scheduler: no -extras role
    assert [o["kind"] for o in s.objects] == ["ServiceAccount", "ClusterRoleBinding", "ClusterRoleBinding",
                                              "RoleBinding", "ValidatingAdmissionPolicy",
                                              "ValidatingAdmissionPolicyBinding", "ConfigMap", "Deployment"]
    policy = _by_kind(s, "ValidatingAdmissionPolicy")[0]
    assert policy["spec"]["matchConditions"][0]["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:kube-system:my-sched'"
    assert _by_kind(s, "ValidatingAdmissionPolicyBinding")[0]["spec"] == {
        "policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_replicas_turn_on_leader_election_with_own_lease(tmp_path: Path, registry: Any) -> None:
    s = _prep(tmp_path, registry, GANG, replicas=3, namespace="sched")
    cfg = yaml.safe_load(s.config_text)
    assert cfg["leaderElection"] == {"leaderElect": True, "resourceName": "my-sched", "resourceNamespace": "sched"}
    dep = _by_kind(s, "Deployment")[0]
    assert dep["spec"]["replicas"] == 3 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    role = _by_kind(s, "Role")[0]
    assert role["metadata"]["namespace"] == "sched"
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["my-sched"],
            "verbs": ["get", "list", "watch", "update", "patch"]} in role["rules"]
    rb = next(b for b in _by_kind(s, "RoleBinding") if b["roleRef"]["name"] == role["metadata"]["name"])
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "my-sched", "namespace": "sched"}]


def test_plugin_rbac_and_system_roles(tmp_path: Path, registry: Any) -> None:
    s = _prep(tmp_path, registry, GANG)
    crbs = {b["roleRef"]["name"]: b for b in _by_kind(s, "ClusterRoleBinding")}
    assert set(crbs) == {"system:kube-scheduler", "system:volume-scheduler", "my-sched-extras"}
    rules = _by_kind(s, "ClusterRole")[0]["rules"]
    groups = {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in rules}
    assert (("scheduling.x-k8s.io",), ("podgroups",)) in groups
    assert any("scheduling.sigs.k8s.io" in r["apiGroups"] for r in rules), "NodeCRDResourceFit's CRD"
    assert not any("pods" in r["resources"] for r in rules), "no pod write beyond system:kube-scheduler"
    why = _by_kind(s, "ClusterRole")[0]["metadata"]["annotations"]["ksched.io/why"]
    assert "Coscheduling" in why and "NodeCRDResourceFit" in why
    # the default profile needs nothing beyond the built-in roles
    plain = _prep(tmp_path, registry, HEAD)
    assert not _by_kind(plain, "ClusterRole")
    assert {b["roleRef"]["name"] for b in _by_kind(plain, "ClusterRoleBinding")} == {
        "system:kube-scheduler", "system:volume-scheduler"}


def test_config_changes_roll_the_pods(tmp_path: Path, registry: Any) -> None:
    a = _by_kind(_prep(tmp_path, registry, HEAD), "Deployment")[0]
    b = _by_kind(_prep(tmp_path, registry, HEAD + "percentageOfNodesToScore: 50\n"), "Deployment")[0]
    key = "ksched.io/config-sha256"
    assert a["spec"]["template"]["metadata"]["annotations"][key] != \
        b["spec"]["template"]["metadata"]["annotations"][key]


def test_kubeconfig_dropped_and_comments_kept(tmp_path: Path, registry: Any) -> None:
    s = _prep(tmp_path, registry, "# ours\n" + HEAD + "clientConnection:\n  kubeconfig: /etc/kubernetes/a.conf\n"
                                                      "  qps: 80\n")
    assert s.config_text.startswith("# ours\n")
    cfg = yaml.safe_load(s.config_text)
    assert cfg["clientConnection"] == {"qps": 80}
    assert any("clientConnection.kubeconfig" in n for n in s.notes)
    cm = _by_kind(s, "ConfigMap")[0]
    assert cm["data"]["config.yaml"] == s.config_text


@pytest.mark.parametrize(("text", "replicas", "field"), [
    (HEAD + "profiles:\n- schedulerName: default-scheduler\n", 1, "profiles[0].schedulerName"),
    (HEAD + "profiles:\n- schedulerName: a\n- schedulerName: default-scheduler\n", 1, "profiles[1].schedulerName"),
    (HEAD + "leaderElection:\n  leaderElect: true\n  resourceName: kube-scheduler\n", 1,
     "leaderElection.resourceName"),
    (HEAD + "leaderElection:\n  leaderElect: false\n", 2, "leaderElection.leaderElect"),
])
def test_refuses_to_collide_with_the_default_scheduler(tmp_path: Path, registry: Any, text: str, replicas: int,
                                                       field: str) -> None:
    with pytest.raises(InputError) as e:
        _prep(tmp_path, registry, text, replicas=replicas)
    assert e.value.field == field and e.value.file and e.value.file.endswith("cfg.yaml")


@pytest.mark.parametrize(("kw", "field"), [({"name": "My_Sched"}, "--name"), ({"namespace": "a b"}, "--namespace"),
                                           ({"replicas": 0}, "--replicas")])
def test_refuses_bad_flags(tmp_path: Path, registry: Any, kw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        _prep(tmp_path, registry, HEAD, **kw)
    assert e.value.field == field


def _ksched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ksched_cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})


def test_cli_yaml_is_what_kubectl_applies(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(GANG)
    r = _ksched("deploy", "--second-scheduler", "--name", "gang", "--image", IMAGE, "--config", str(cfg),
                "--replicas", "2", "-o", "yaml")
    assert r.returncode == 0, r.stderr
    objs = list(yaml.safe_load_all(r.stdout))
    assert [o["kind"] for o in objs][-2:] == ["ConfigMap", "Deployment"]
    assert "config.yaml: |" in r.stdout
    assert "schedulerName set to 'gang'" in r.stderr


@pytest.mark.parametrize(("args", "words"), [
    ([], ["--apply", "-o yaml|json"]),
    (["--apply", "-o", "yaml"], ["--apply", "-o yaml|json"]),
    (["-o", "wide"], ["unsupported output format", "yaml, json"]),
    (["-o", "yaml", "--rollback"], ["--rollback"]),
])
def test_cli_usage_errors(tmp_path: Path, args: list[str], words: list[str]) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(HEAD)
    r = _ksched("deploy", "--second-scheduler", "--image", IMAGE, "--config", str(cfg), *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and all(w in r.stderr for w in words)


def test_cli_undeploy_needs_the_mode() -> None:
    r = _ksched("undeploy")
    assert r.returncode == 2 and "--second-scheduler" in r.stderr and "--rollback" in r.stderr

"""`ksched deploy --static-pod`: four kubeadm-style manifests patched and checked field by field, re-run
idempotently, rolled back byte for byte; every bad input refused with nothing written."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched_cli.deploy import files, staticpod
from ksched_cli.inputs import registry as _registry

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "tests" / "data" / "manifests"
IMAGE = "registry.example.com/team/ksched:v1.2.3"
KC = "/etc/kubernetes/scheduler.conf"

CONFIG_LE = """\
# replace the default scheduler, keep leader election on (HA control plane)
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 40s   # longer than the flag it replaces
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
"""
CONFIG_PLAIN = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""


@pytest.fixture(scope="module")
def registry() -> Any:
    return _registry(None)


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    """A fake control-plane node: manifests folder, /etc/kubernetes-like dest, backup folder."""
    etc = tmp_path / "etc-kubernetes"
    (etc / "manifests").mkdir(parents=True)
    return {"etc": etc, "manifests": etc / "manifests", "dest": etc / "ksched-config.yaml",
            "backups": etc / "ksched-backups", "cfg": tmp_path / "cfg.yaml"}


def _install(node: dict[str, Path], fixture: str, config: str = CONFIG_LE) -> Path:
    m = node["manifests"] / "kube-scheduler.yaml"
    shutil.copyfile(MANIFESTS / fixture, m)
    m.chmod(0o600)  # what kubeadm writes
    node["cfg"].write_text(config)
    return m


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["spec"]["containers"] if c["name"] == "kube-scheduler")


def _expected(orig: dict[str, Any], dest: str, *, drop: list[str], config_flag: str | None,
              config_flag_at: int | None, volume_name: str = "ksched-config") -> dict[str, Any]:
    """The original object with exactly the changes ksched promises, nothing else."""
    exp = copy.deepcopy(orig)
    c = _container(exp)
    c["image"] = IMAGE
    cmd = [a for a in c["command"] if a not in drop]
    if config_flag is not None:
        cmd = [f"--config={dest}" if a == config_flag else a for a in cmd]
    if config_flag_at is not None:
        cmd.insert(config_flag_at, f"--config={dest}")
    c["command"] = cmd
    c["volumeMounts"].append({"mountPath": dest, "name": volume_name, "readOnly": True})
    exp["spec"]["volumes"].append({"hostPath": {"path": dest, "type": "File"}, "name": volume_name})
    return exp


CASES = {
    # fixture: (flags removed, flag replaced by --config, index where --config is inserted)
    "kubeadm-1.25.yaml": ([f"--kubeconfig={KC}", "--leader-elect=true"], None, 4),
    "kubeadm-1.32.yaml": ([f"--kubeconfig={KC}", "--leader-elect=true"], None, 4),
    "kubeadm-extra-args.yaml": ([f"--kubeconfig={KC}", "--leader-elect=true", "--leader-elect-lease-duration=30s"],
                                None, 4),
    "hand-patched-sp.yaml": ([], "--config=/etc/kubernetes/sched-cc.yaml", None),
}


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_patch_field_by_field_idempotent_and_rollback(fixture: str, node: dict[str, Path], registry: Any) -> None:
    m = _install(node, fixture)
    original = m.read_bytes()
    dest = str(node["dest"])
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    assert p.changed and p.manifest_changed and p.config_changed
    assert m.read_bytes() == original and not node["dest"].exists(), "plan() must not write"

    drop, replaced, at = CASES[fixture]
    new = yaml.safe_load(p.new_manifest)
    orig = yaml.safe_load(original)
    assert new == _expected(orig, dest, drop=drop, config_flag=replaced, config_flag_at=at)
    c = _container(new)
    # field by field, the promises that matter to the kubelet
    assert c["image"] == IMAGE
    assert c["command"][0] == "kube-scheduler"
    assert sum(a.startswith("--config=") for a in c["command"]) == 1 and f"--config={dest}" in c["command"]
    assert not any(a.startswith("--kubeconfig") for a in c["command"])
    assert not any(a.startswith("--leader-elect=") for a in c["command"])
    assert c["livenessProbe"] == _container(orig)["livenessProbe"]
    assert c.get("readinessProbe") == _container(orig).get("readinessProbe")
    assert c["resources"] == _container(orig)["resources"]
    mount = next(v for v in c["volumeMounts"] if v["mountPath"] == dest)
    assert mount["readOnly"] is True
    vol = next(v for v in new["spec"]["volumes"] if v["name"] == mount["name"])
    assert vol["hostPath"] == {"path": dest, "type": "File"}
    # comments survive
    for line in original.decode().splitlines():
        if line.strip().startswith("#") and "--leader-elect-lease-duration" not in line:
            assert line in p.new_manifest
    # the installed config: the user's file plus the kubeconfig the manifest used
    installed = yaml.safe_load(p.new_config)
    assert installed["clientConnection"]["kubeconfig"] == KC
    assert installed["leaderElection"] == {"leaderElect": True, "leaseDuration": "40s"}
    assert p.new_config.decode().startswith("# replace the default scheduler")
    assert any("added clientConnection.kubeconfig" in n for n in p.notes)

    w = staticpod.apply(p, node["backups"])
    assert w.wrote_manifest and w.wrote_config and w.backup is not None
    assert m.read_text() == p.new_manifest
    assert m.stat().st_mode & 0o777 == 0o600, "the manifest keeps its mode"
    assert node["dest"].read_bytes() == p.new_config and node["dest"].stat().st_mode & 0o777 == 0o644
    assert w.backup.read_bytes() == original and w.backup.parent == node["backups"]
    assert not files.is_inside(w.backup, node["manifests"])
    assert sorted(x.name for x in node["manifests"].iterdir()) == ["kube-scheduler.yaml"], "no stray files"

    again = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    assert not again.changed and again.changes == []
    assert staticpod.apply(again, node["backups"]).backup is None
    assert len(files.backups_of(m, node["backups"])) == 1

    r = staticpod.plan_rollback(m, node["backups"], node["dest"])
    assert r.changed and r.backup == w.backup
    staticpod.apply_rollback(r)
    assert m.read_bytes() == original
    assert m.stat().st_mode & 0o777 == 0o600


def test_extra_args_keeps_what_the_config_does_not_set(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "kubeadm-extra-args.yaml")
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    c = _container(yaml.safe_load(p.new_manifest))
    # the config sets leaderElect and leaseDuration, not renewDeadline: that flag still applies
    assert "--leader-elect-renew-deadline=20s" in c["command"]
    assert any("kept --leader-elect-renew-deadline=20s" in n for n in p.notes)
    assert any("removed --leader-elect-lease-duration=30s" in ch for ch in p.changes)
    assert ["--profiling=false", "--v=4"] == c["command"][-2:]
    assert c["env"][0] == {"name": "HTTPS_PROXY", "value": "http://proxy.example.internal:3128"}
    assert p.new_manifest.startswith("# kube-scheduler static pod, generated by kubeadm 1.30")


def test_config_without_leader_election_keeps_the_flags(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "kubeadm-1.32.yaml", CONFIG_PLAIN)
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    c = _container(yaml.safe_load(p.new_manifest))
    assert "--leader-elect=true" in c["command"]
    assert not any(a.startswith("--kubeconfig") for a in c["command"])
    assert yaml.safe_load(p.new_config)["clientConnection"] == {"kubeconfig": KC}


def test_hand_patched_reuses_nothing_silently(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "hand-patched-sp.yaml")
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    assert any("replaced --config=/etc/kubernetes/sched-cc.yaml" in ch for ch in p.changes)
    assert any("'sched-cc'" in n and "no longer reads it" in n for n in p.notes)
    # no --kubeconfig flag: the kubeconfig comes from --authentication-kubeconfig
    assert p.kubeconfig == KC and any("--authentication-kubeconfig" in n for n in p.notes)


def test_hand_patched_same_dest_fixes_type_in_place(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "hand-patched-sp.yaml")
    dest = Path("/etc/kubernetes/sched-cc.yaml")
    p = staticpod.plan(m, node["cfg"], IMAGE, dest, registry)
    new = yaml.safe_load(p.new_manifest)
    vols = {v["name"]: v for v in new["spec"]["volumes"]}
    assert set(vols) == {"kubeconfig", "sched-cc"}, "reuses the volume that already mounts the file"
    assert vols["sched-cc"]["hostPath"] == {"path": str(dest), "type": "File"}
    assert any("FileOrCreate → File" in ch for ch in p.changes)
    assert "--config=/etc/kubernetes/sched-cc.yaml" in _container(new)["command"]


def test_second_image_makes_a_second_backup_and_rollback_undoes_only_that(node: dict[str, Path],
                                                                         registry: Any) -> None:
    m = _install(node, "kubeadm-1.32.yaml")
    original = m.read_bytes()
    staticpod.apply(staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry), node["backups"])
    first = m.read_bytes()
    first_config = node["dest"].read_bytes()
    node["cfg"].write_text(CONFIG_PLAIN)
    p2 = staticpod.plan(m, node["cfg"], IMAGE + "-2", node["dest"], registry)
    assert p2.changes and p2.changes[0].endswith(f"{IMAGE} → {IMAGE}-2")
    w2 = staticpod.apply(p2, node["backups"])
    assert w2.config_backup is not None and w2.config_backup.read_bytes() == first_config
    assert len(files.backups_of(m, node["backups"])) == 2
    r = staticpod.plan_rollback(m, node["backups"], node["dest"])
    assert r.earlier == 1 and r.backup == w2.backup and not r.edited_since
    staticpod.apply_rollback(r)
    assert m.read_bytes() == first and node["dest"].read_bytes() == first_config
    # a second rollback goes one step further: back to the manifest before ksched first changed it
    r = staticpod.plan_rollback(m, node["backups"], node["dest"])
    assert r.earlier == 0 and r.changed
    staticpod.apply_rollback(r)
    assert m.read_bytes() == original and m.stat().st_mode & 0o777 == 0o600
    r = staticpod.plan_rollback(m, node["backups"], node["dest"])
    assert r.entry is None, "nothing left to roll back"


def test_unexact_layout_is_reported(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "kubeadm-1.32.yaml")
    m.write_text(m.read_text().replace("  name: kube-scheduler\n  namespace", "  name:   kube-scheduler\n  namespace"))
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    assert any("cannot be reproduced exactly" in n for n in p.notes)


# ------------------------------------------------------------------------------------------ CLI + refusals


def _ksched(*args: str, user: int | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ksched_cli", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))}


def _args(node: dict[str, Path], manifest: Path, *extra: str, image: str = IMAGE) -> list[str]:
    return ["deploy", "--static-pod", "--manifest", str(manifest), "--config", str(node["cfg"]), "--image", image,
            "--config-dest", str(node["dest"]), "--backup-dir", str(node["backups"]), *extra]


def test_cli_dry_run_writes_nothing_and_yes_writes(node: dict[str, Path], tmp_path: Path) -> None:
    m = _install(node, "kubeadm-1.25.yaml")
    before = _snapshot(tmp_path)
    r = _ksched(*_args(node, m, "--dry-run"))
    assert r.returncode == 0, r.stderr
    assert "dry run: nothing written" in r.stdout and f"+    - --config={node['dest']}" in r.stdout
    assert "-    - --kubeconfig=/etc/kubernetes/scheduler.conf" in r.stdout
    assert _snapshot(tmp_path) == before
    r = _ksched(*_args(node, m))  # no terminal, no --yes: refuse
    assert r.returncode == 2 and "pass --yes" in r.stderr and _snapshot(tmp_path) == before
    r = _ksched(*_args(node, m, "--yes"))
    assert r.returncode == 0, r.stderr
    assert "patched" in r.stdout and "backup:" in r.stdout
    r = _ksched(*_args(node, m, "--yes"))
    assert r.returncode == 0 and "nothing to change" in r.stdout
    r = _ksched("deploy", "--static-pod", "--rollback", "--yes", "--manifest", str(m), "--backup-dir",
                str(node["backups"]), "--config-dest", str(node["dest"]))
    assert r.returncode == 0, r.stderr
    assert m.read_bytes() == (MANIFESTS / "kubeadm-1.25.yaml").read_bytes()
    r = _ksched("deploy", "--static-pod", "--rollback", "--yes", "--manifest", str(m), "--backup-dir",
                str(node["backups"]), "--config-dest", str(node["dest"]))
    assert r.returncode == 0 and "nothing to roll back" in r.stdout


def test_cli_print_rbac(node: dict[str, Path]) -> None:
    node["cfg"].write_text(CONFIG_LE)
    r = _ksched("deploy", "--static-pod", "--config", str(node["cfg"]), "--print-rbac")
    assert r.returncode == 0, r.stderr
    objs = list(yaml.safe_load_all(r.stdout))
    assert [o["kind"] for o in objs] == ["ClusterRole", "ClusterRoleBinding"]
    rules = objs[0]["rules"]
    assert {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]} \
        in rules
    assert not any("pods" in r["resources"] or "priorityclasses" in r["resources"] for r in rules)
    assert objs[1]["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": "system:kube-scheduler"}]


NOT_A_POD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: kube-scheduler}
spec: {}
"""


def _bad_cases(node: dict[str, Path]) -> dict[str, tuple[list[str], int, list[str]]]:
    m = node["manifests"] / "kube-scheduler.yaml"
    return {
        "missing manifest": (_args(node, node["manifests"] / "nope.yaml"), 2, ["nope.yaml", "no such file"]),
        "manifest is a folder": (_args(node, node["manifests"]), 2, ["manifests", "Is a directory"]),
        "not a Pod": (_args(node, m), 1, ["kube-scheduler.yaml", "kind", "'Deployment'", "--manifest"]),
        "no scheduler container": (_args(node, m), 1, ["spec.containers", "no kube-scheduler container",
                                                        "--manifest"]),
        "invalid YAML": (_args(node, m), 2, ["kube-scheduler.yaml", "invalid YAML"]),
        "invalid config": (_args(node, m), 1, ["cfg.yaml", "profiles[0].plugins.multiPoint.enabled[", "NoSuchPlugin",
                                               "ksched config validate"]),
        "empty image": (_args(node, m, image=""), 2, ["--image", "non-empty"]),
        "image with spaces": (_args(node, m, image="a b"), 2, ["--image"]),
        "config dest in manifests": (_args(node, m)[:-4] + ["--config-dest", str(node["manifests"] / "c.yaml"),
                                                            "--backup-dir", str(node["backups"])], 2,
                                     ["--config-dest", "inside the manifests folder"]),
        "backup dir in manifests": (_args(node, m)[:-2] + ["--backup-dir", str(node["manifests"] / "bak")], 2,
                                    ["--backup-dir", "inside the manifests folder"]),
        "relative config dest": (_args(node, m)[:-4] + ["--config-dest", "ksched.yaml", "--backup-dir",
                                                        str(node["backups"])], 2, ["--config-dest", "absolute"]),
        "kubeconfig not mounted": (_args(node, m), 1, ["cfg.yaml", "clientConnection.kubeconfig", "not mounted",
                                                       KC]),
        "rollback without backup": (["deploy", "--static-pod", "--rollback", "--manifest", str(m), "--backup-dir",
                                     str(node["backups"]), "--config-dest", str(node["dest"])], 1,
                                    ["--rollback", "no backup"]),
        "both modes": (_args(node, m) + ["--second-scheduler"], 2, ["choose one"]),
    }


@pytest.mark.parametrize("case", ["missing manifest", "manifest is a folder", "not a Pod", "no scheduler container",
                                  "invalid YAML", "invalid config", "empty image", "image with spaces",
                                  "config dest in manifests", "backup dir in manifests", "relative config dest",
                                  "kubeconfig not mounted", "rollback without backup", "both modes"])
def test_refusals_name_file_field_fix_and_write_nothing(case: str, node: dict[str, Path], tmp_path: Path) -> None:
    m = _install(node, "kubeadm-1.32.yaml")
    if case == "not a Pod":
        m.write_text(NOT_A_POD)
    elif case == "no scheduler container":
        m.write_text(m.read_text().replace("- command:\n    - kube-scheduler", "- command:\n    - etcd")
                     .replace("name: kube-scheduler\n    readinessProbe", "name: etcd\n    readinessProbe"))
    elif case == "invalid YAML":
        m.write_text(m.read_text() + "  - {unclosed\n")
    elif case == "invalid config":
        node["cfg"].write_text(CONFIG_PLAIN + "  plugins:\n    multiPoint:\n      enabled:\n"
                               "      - name: NoSuchPlugin\n")
    elif case == "kubeconfig not mounted":
        node["cfg"].write_text(CONFIG_PLAIN + "clientConnection:\n  kubeconfig: /root/.kube/config\n")
    args, code, words = _bad_cases(node)[case]
    before = _snapshot(tmp_path)
    r = _ksched(*args)
    assert r.returncode == code, (r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert _snapshot(tmp_path) == before, "a refusal must write nothing"


def test_unreadable_manifest_is_refused(registry: Any) -> None:
    """Root reads everything, so as root ksched runs as uid 65534 to meet a manifest it may not read."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ksched-unreadable-"))
    try:
        root.chmod(0o755)
        node = {"etc": root, "manifests": root / "manifests", "dest": root / "ksched-config.yaml",
                "backups": root / "ksched-backups", "cfg": root / "cfg.yaml"}
        node["manifests"].mkdir(mode=0o755)
        m = _install(node, "kubeadm-1.32.yaml")  # mode 0600, owned by us
        node["cfg"].chmod(0o644)
        user = None
        if os.geteuid() == 0:
            assert shutil.which("setpriv"), "setpriv (util-linux) is needed to drop root in this test"
            user = 65534
        else:
            m.chmod(0o000)
        before = _snapshot(root)
        r = _ksched(*_args(node, m, "--dry-run"), user=user)
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "kube-scheduler.yaml" in r.stderr and "Permission denied" in r.stderr and "sudo" in r.stderr
        assert _snapshot(root) == before
    finally:
        shutil.rmtree(root)


def test_warns_when_no_profile_serves_default_scheduler(node: dict[str, Path], registry: Any) -> None:
    m = _install(node, "kubeadm-1.32.yaml", CONFIG_PLAIN.replace("default-scheduler", "gang"))
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    assert any("no profile is named default-scheduler (profiles: gang)" in w for w in p.warnings)
    assert not any("default-scheduler" in w for w in staticpod.plan(
        _install(node, "kubeadm-1.32.yaml"), node["cfg"].with_name("cfg.yaml"), IMAGE, node["dest"],
        registry).warnings)


ARGS_STYLE = """\
apiVersion: v1
kind: Pod
metadata: {name: kube-scheduler, namespace: kube-system}
spec:
  containers:
  - name: scheduler
    image: registry.k8s.io/kube-scheduler:v1.36.0
    command: [/usr/local/bin/kube-scheduler]
    args:
    - --kubeconfig
    - /etc/kubernetes/scheduler.conf
    - --leader-elect=false
    - --v=2
"""


def test_flags_in_args_with_separate_values(node: dict[str, Path], registry: Any) -> None:
    """Not kubeadm's layout: flags under args, `--kubeconfig PATH` as two items, no volumes yet."""
    m = node["manifests"] / "kube-scheduler.yaml"
    m.write_text(ARGS_STYLE)
    node["cfg"].write_text(CONFIG_PLAIN)
    dest = str(node["dest"])
    p = staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry)
    new = yaml.safe_load(p.new_manifest)
    c = new["spec"]["containers"][0]
    assert c["command"] == ["/usr/local/bin/kube-scheduler"]
    assert c["args"] == ["--leader-elect=false", "--v=2", f"--config={dest}"]
    assert c["volumeMounts"] == [{"mountPath": dest, "name": "ksched-config", "readOnly": True}]
    assert new["spec"]["volumes"] == [{"hostPath": {"path": dest, "type": "File"}, "name": "ksched-config"}]
    assert "command: [/usr/local/bin/kube-scheduler]" in p.new_manifest, "flow style kept"
    assert yaml.safe_load(p.new_config)["clientConnection"]["kubeconfig"] == KC
    staticpod.apply(p, node["backups"])
    assert not staticpod.plan(m, node["cfg"], IMAGE, node["dest"], registry).changed

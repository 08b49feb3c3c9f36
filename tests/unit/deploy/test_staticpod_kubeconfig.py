"""`deploy --static-pod` and the kubeconfig the ksched container reads: kubeadm's scheduler.conf is 0600 root, the
image runs as uid 65532. ksched installs a private, self-contained copy owned by that uid, never widens the
original's mode, and `--rollback` removes the copy with the rest of the change."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ksched_cli.deploy import kubeconfig, staticpod
from ksched_cli.inputs import registry as _registry
from scheduler_runtime.errors import InputError

REPO = Path(__file__).resolve().parents[3]
KC = "/etc/kubernetes/scheduler.conf"
IMAGE = "localhost/ksched:v1"
CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n" \
         "- schedulerName: default-scheduler\n"
ROOT = os.geteuid() == 0


def _kubeconfig(user: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443",
                                                                   "certificate-authority-data": "Q0E="}}],
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                           "users": [{"name": "u", "user": user}]})


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    etc = tmp_path / "etc-kubernetes"
    (etc / "manifests").mkdir(parents=True)
    kc = etc / "scheduler.conf"
    kc.write_text(_kubeconfig({"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}))
    kc.chmod(0o600)
    m = etc / "manifests" / "kube-scheduler.yaml"
    m.write_text((REPO / "tests/data/manifests/kubeadm-1.32.yaml").read_text().replace(KC, str(kc)))
    m.chmod(0o600)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    return {"etc": etc, "kc": kc, "manifest": m, "cfg": cfg, "dest": etc / "ksched-config.yaml",
            "backups": etc / "ksched-backups", "private": etc / kubeconfig.PRIVATE_NAME}


def _container(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)["spec"]["containers"][0]


@pytest.mark.skipif(not ROOT, reason="a file only root can read needs root to make and to read back")
def test_root_only_kubeconfig_gets_a_private_copy_and_rollback_removes_it(node: dict[str, Path]) -> None:
    os.chown(node["kc"], 0, 0)
    original_kc = node["kc"].read_bytes()
    original = node["manifest"].read_bytes()
    p = staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], _registry(None))
    private = str(node["private"])
    assert p.kubeconfig_copy == node["private"] and p.kubeconfig == private
    assert any("mode 0600 owned by 0:0 and the ksched image runs as uid 65532" in ch for ch in p.changes)
    assert not node["private"].exists(), "plan() must not write"
    c = _container(p.new_manifest)
    assert f"--authentication-kubeconfig={private}" in c["command"]
    assert f"--authorization-kubeconfig={private}" in c["command"]
    assert {"mountPath": private, "name": kubeconfig.VOLUME_NAME, "readOnly": True} in c["volumeMounts"]
    assert yaml.safe_load(p.new_config)["clientConnection"]["kubeconfig"] == private

    w = staticpod.apply(p, node["backups"])
    assert w.wrote_kubeconfig
    st = node["private"].stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65532, 65532, 0o600)
    assert node["private"].read_bytes() == original_kc  # self-contained already: copied byte for byte
    assert node["kc"].read_bytes() == original_kc and node["kc"].stat().st_mode & 0o777 == 0o600
    # again: the manifest now points at the copy, which the image's user can read: nothing to do
    assert not staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], _registry(None)).changed

    r = staticpod.plan_rollback(node["manifest"], node["backups"], node["dest"])
    assert r.kubeconfig_remove
    staticpod.apply_rollback(r)
    assert node["manifest"].read_bytes() == original
    assert not node["private"].exists()


def test_kubeconfig_naming_unmounted_files_is_made_self_contained(node: dict[str, Path], tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    (pki / "client.crt").write_bytes(b"CERT")
    (pki / "client.key").write_bytes(b"KEY")
    node["kc"].write_text(_kubeconfig({"client-certificate": str(pki / "client.crt"),
                                       "client-key": "../pki/client.key"}))
    # the key's relative path is relative to the kubeconfig's folder (etc-kubernetes/../pki = pki)
    if ROOT:
        os.chown(node["kc"], 65532, 65532)  # readable by the image's user: only the files are the problem
    p = staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], _registry(None))
    assert p.kubeconfig_copy == node["private"]
    assert any("which is not mounted into the container" in ch for ch in p.changes)
    user = yaml.safe_load(p.new_kubeconfig_copy)["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == b"CERT"
    assert base64.b64decode(user["client-key-data"]) == b"KEY"
    assert "client-certificate" not in user and "client-key" not in user


def test_world_readable_kubeconfig_is_warned_about_with_chmod_not_chown(node: dict[str, Path]) -> None:
    node["kc"].chmod(0o644)
    p = staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], _registry(None))
    assert p.kubeconfig_copy is None
    assert len(p.warnings) == 1 and "every user on this node can read" in p.warnings[0]
    assert f"chmod 0600 {node['kc']}" in p.warnings[0] and "chown" not in p.warnings[0]


@pytest.mark.skipif(not ROOT, reason="needs a file the image's user cannot read")
def test_exec_plugin_kubeconfig_the_user_cannot_read_is_refused(node: dict[str, Path]) -> None:
    node["kc"].write_text(_kubeconfig({"exec": {"command": "get-token", "apiVersion": "v1"}}))
    os.chown(node["kc"], 0, 0)
    node["kc"].chmod(0o600)
    with pytest.raises(InputError) as e:
        staticpod.plan(node["manifest"], node["cfg"], IMAGE, node["dest"], _registry(None))
    assert e.value.exit_code == 1 and e.value.field == "users[0].user.exec"
    assert not node["private"].exists() and not node["dest"].exists()

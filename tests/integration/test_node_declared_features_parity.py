"""NodeDeclaredFeatures against the real kube-scheduler v1.37.2 on the same kube-apiserver: a node declaring
RestartAllContainersOnContainerExits and one that does not; a pod whose restart rule needs the feature goes to
the declaring node under both schedulers, and one held to the other node stays pending with the same
FailedScheduling message. The API server (gate on by default in 1.36) keeps status.declaredFeatures, and
ksched reads it through its kube backend."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, kube_scheduler, wait_for

pytestmark = pytest.mark.integration
FEATURE = "RestartAllContainersOnContainerExits"
CONFIG = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{client}"
          "leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {name}\n")


def _pods(ns: str, group: str, scheduler: str, prefix: str) -> list[dict[str, Any]]:
    def pod(name: str, needs: bool, selector: dict[str, str]) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
        if needs:
            c["restartPolicy"] = "Never"
            c["restartPolicyRules"] = [{"action": "RestartAllContainers",
                                        "exitCodes": {"operator": "In", "values": [42]}}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{prefix}-{name}", "namespace": ns},
                "spec": {"schedulerName": scheduler, "nodeSelector": {"test-group": group, **selector},
                         "containers": [c]}}

    return [pod("needs", True, {}), pod("needs-on-other", True, {"kubernetes.io/hostname": f"{group}-plain"}),
            pod("plain-on-other", False, {"kubernetes.io/hostname": f"{group}-plain"})]


def _outcome(admin: KubeClient, ns: str, name: str) -> tuple[str, str] | None:
    got = admin.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    if got["spec"].get("nodeName"):
        return ("bound", got["spec"]["nodeName"])
    for cond in (got.get("status") or {}).get("conditions") or []:
        if cond["type"] == "PodScheduled" and cond["status"] == "False" and cond.get("message"):
            return ("pending", cond["message"])
    return None


def _schedule(admin: KubeClient, ns: str, pods: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    out = {}
    for p in pods:  # one at a time, so each decision sees the same cluster under both schedulers
        admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body=p)
        name = p["metadata"]["name"]
        out[name.split("-", 1)[1]] = wait_for(lambda name=name: _outcome(admin, ns, name), timeout=60,
                                              what=f"a decision for {name}")
    return out


def test_placement_and_message_match_kube_scheduler(control_plane: Any, namespace: str, tmp_path: Path) -> None:
    admin = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    group = namespace
    create_node(admin, f"{group}-feat", cpu="4", labels={"test-group": group})
    create_node(admin, f"{group}-plain", cpu="4", labels={"test-group": group})
    admin.call("PATCH", f"/api/v1/nodes/{group}-feat/status", body={"status": {"declaredFeatures": [FEATURE]}},
               content_type="application/merge-patch+json")
    node = admin.call("GET", f"/api/v1/nodes/{group}-feat")
    assert node["status"].get("declaredFeatures") == [FEATURE], "the API server dropped status.declaredFeatures"

    cfg = tmp_path / "kube.yaml"
    cfg.write_text(CONFIG.format(client=f"clientConnection: {{kubeconfig: {control_plane.kubeconfig_path}}}\n",
                                 name="ndf-kube"))
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
        kube = _schedule(admin, namespace, _pods(namespace, group, "ndf-kube", "kube"))

    ours_cfg = tmp_path / "ksched.yaml"
    ours_cfg.write_text(CONFIG.format(client="", name="ndf-ksched"))
    reg = build_registry([])
    runner = Runner(load_config(ours_cfg, reg), reg,
                    RunOptions(kubeconfig=str(control_plane.kubeconfig_path), secure_port=0,
                               leader_overrides={"leader_elect": False}, seed=1))
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    try:
        ours = _schedule(admin, namespace, _pods(namespace, group, "ndf-ksched", "ours"))
    finally:
        runner.stop()
        t.join(30)

    assert kube["needs"] == ("bound", f"{group}-feat")
    assert kube["plain-on-other"] == ("bound", f"{group}-plain")
    assert kube["needs-on-other"][0] == "pending"
    assert "1 node(s) didn't match Pod's required features" in kube["needs-on-other"][1]
    assert ours == kube

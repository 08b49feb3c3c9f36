"""kube-scheduler 1.37's default-on behaviour against the real kube-scheduler v1.37.2 on a v1.37.2 API server:
DeviceTaintRules (DRADeviceTaintRules, GA and on in 1.37; `resource.k8s.io/v1`, which a 1.36 API server does not
serve) keep the devices they taint from claims that do not tolerate them, and StorageCapacityScoring (beta and
on in 1.37) places a claim's pod by storage utilisation, with no flag given to kube-scheduler.

ksched is run with no feature gates given either, so the test proves ksched's own 1.37 defaults. The suite's
control plane is reused when it is 1.37; otherwise one is started from the 1.37.2 binaries.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable
from scheduler_runtime.errors import KschedError
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import (
    create_capacity_storage_class,
    create_node,
    kube_scheduler,
    scheduler_config,
    wait_decision,
    wait_for,
)

pytestmark = pytest.mark.integration
KUBE, OURS = "v137-kube-scheduler", "v137-ksched"
RES = "/apis/resource.k8s.io/v1"
BIN_137 = Path.home() / ".cache" / "ksched" / "controlplane" / "1.37.2" / "bin"


@pytest.fixture(scope="module")
def cp137(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    if str(c.call("GET", "/version").get("gitVersion", "")).startswith("v1.37."):
        yield control_plane
        return
    cp = ControlPlane(bin_dir=BIN_137)
    try:
        if not (BIN_137 / "kube-apiserver").exists():
            raise ControlPlaneUnavailable(f"no Kubernetes v1.37.2 binaries in {BIN_137}")
        cp.start()  # a ControlPlane that predates 1.37 cannot start its API server (loopback advertise address)
    except KschedError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"needs a v1.37 control plane: {exc}")
        pytest.skip(f"needs a v1.37 control plane: {exc}")
    try:
        yield cp
    finally:
        cp.stop()


def _ours(cp: ControlPlane, cfg: Path) -> tuple[Runner, threading.Thread]:
    reg = build_registry([])
    runner = Runner(load_config(cfg, reg), reg, RunOptions(  # no gates given: 1.37's defaults
        kubeconfig=str(cp.kubeconfig_path), secure_port=0, leader_overrides={"leader_elect": False}, seed=1))
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    return runner, t


def _dra_setup(c: KubeClient, who: str, group: str, ns: str) -> dict[str, Any]:
    """Two nodes of this scheduler's own: n0 with gpu-0 and gpu-1, n1 with gpu-0; a rule taints every gpu-0
    (NoSchedule), another every device of n1's pool (None: informational only)."""
    driver, cls = f"{who}-{group}.example.com", f"gpu-{who}-{group}"
    nodes = [f"v137-{who}-{group}-{i}" for i in range(2)]
    for n in nodes:
        create_node(c, n, labels={"v137-group": f"{who}-{group}"})
    c.call("POST", f"{RES}/deviceclasses", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    for node, devs in ((nodes[0], ["gpu-0", "gpu-1"]), (nodes[1], ["gpu-0"])):
        c.call("POST", f"{RES}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devs]}})
    for name, selector, effect in (("gpu0", {"driver": driver, "device": "gpu-0"}, "NoSchedule"),
                                   ("info", {"driver": driver, "pool": nodes[1]}, "None")):
        c.call("POST", f"{RES}/devicetaintrules", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": f"{who}-{group}-{name}"},
            "spec": {"deviceSelector": selector, "taint": {"key": "maintenance", "value": name, "effect": effect}}})
    for claim, tolerate in (("first", False), ("second", False), ("tolerant", True)):
        exactly: dict[str, Any] = {"deviceClassName": cls}
        if tolerate:
            exactly["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
        c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{claim}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    return {"driver": driver, "nodes": nodes, "group": f"{who}-{group}"}


def _without_dra_postfilter(msg: str) -> str:
    """A FailedScheduling message without DynamicResources' PostFilter part, whose wording 1.37 changed (it no
    longer says "no new claims to deallocate" / "still not schedulable"; not what these tests are about)."""
    for part in ("no new claims to deallocate, ", "still not schedulable, "):
        msg = msg.replace(part, "")
    return msg


def _devices(c: KubeClient, ns: str, claim: str, ctx: dict[str, Any]) -> list[tuple[str, str]]:
    got = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{claim}")
    alloc = (got.get("status") or {}).get("allocation") or {}
    index = {n: f"node-{i}" for i, n in enumerate(ctx["nodes"])}
    return sorted((index.get(r["pool"], r["pool"]), r["device"]) for r in (alloc.get("devices") or {}).get(
        "results") or [])


def test_device_taint_rules_match_kube_scheduler_137(cp137: ControlPlane, tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(cp137.kubeconfig_path)))
    ns, group = f"t-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:6]
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    ctx = {who: _dra_setup(c, who, group, ns) for who in ("kube", "ours")}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, cp137.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    runner, t = _ours(cp137, ours_cfg)
    got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
    try:
        with kube_scheduler(cp137.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            for pod in ("first", "second", "tolerant"):
                for who, sched in (("kube", KUBE), ("ours", OURS)):
                    name = f"{who}-{pod}"
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": {"schedulerName": sched, "nodeSelector": {"v137-group": ctx[who]["group"]},
                                 "containers": [{"name": "c", "image": "pause"}],
                                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
                    d = wait_decision(c, ns, name, need_message=True)
                    if d[0] == "bound":
                        d = ("bound", f"node-{ctx[who]['nodes'].index(d[1])}")
                    got[who][pod] = (d, _devices(c, ns, name, ctx[who]))
    finally:
        runner.stop()
        t.join(30)
    def view(g: dict[str, Any]) -> dict[str, Any]:
        return {p: ((d[0], _without_dra_postfilter(d[1])), devs) for p, (d, devs) in g.items()}

    assert view(got["ours"]) == view(got["kube"])
    k = got["kube"]
    # gpu-1 of n0 is the only untainted device; the None-effect rule does not keep n1's gpu-0 away
    assert k["first"] == (("bound", "node-0"), [("node-0", "gpu-1")])
    assert k["second"][0][0] == "pending" and "cannot allocate all claims" in k["second"][0][1]
    assert k["tolerant"][0][0] == "bound" and k["tolerant"][1][0][1] == "gpu-0"


def test_storage_capacity_scoring_is_on_in_kube_scheduler_137(cp137: ControlPlane, tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(cp137.kubeconfig_path)))
    ns, group = f"t-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    driver, sc = f"cap-{group}.csi.example.com", f"cap-{group}"
    create_capacity_storage_class(c, driver, sc)
    nodes: dict[str, dict[str, str]] = {}
    for who in ("kube", "ours"):
        nodes[who] = {f"cap-{who}-{group}-{k}": size for k, size in (("big", "100Gi"), ("half", "50Gi"))}
        for n, size in nodes[who].items():
            create_node(c, n, labels={"cap-group": f"{who}-{group}", "cap-node": n})
            c.call("POST", f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities", body={
                "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": n},
                "storageClassName": sc, "capacity": size, "nodeTopology": {"matchLabels": {"cap-node": n}}})
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    # the claims are never provisioned here: PreBind's wait is cut short so neither scheduler holds a worker
    args = ("profiles:\n- schedulerName: {}\n  pluginConfig:\n  - name: VolumeBinding\n"
            "    args: {{bindTimeoutSeconds: 1}}\n")
    cfg.write_text(scheduler_config(KUBE, cp137.kubeconfig_path).split("profiles:")[0] + args.format(KUBE))
    ours_cfg.write_text(scheduler_config(OURS).split("profiles:")[0] + args.format(OURS))
    runner, t = _ours(cp137, ours_cfg)
    selected: dict[str, str] = {}
    try:
        with kube_scheduler(cp137.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            for who, sched in (("kube", KUBE), ("ours", OURS)):
                name = f"{who}-data"
                c.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                             "resources": {"requests": {"storage": "10Gi"}}}})
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"schedulerName": sched, "nodeSelector": {"cap-group": f"{who}-{group}"},
                             "containers": [{"name": "c", "image": "pause"}],
                             "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": name}}]}})
                def node_of(claim: str = name) -> str | None:
                    got = c.call("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
                    return ((got.get("metadata") or {}).get("annotations") or {}).get(
                        "volume.kubernetes.io/selected-node")

                selected[who] = wait_for(node_of, 60.0, f"a selected node for {name}")
    finally:
        runner.stop()
        t.join(30)
    # 10Gi of 100Gi (score 90) beats 10Gi of 50Gi (80): the emptier node, for both
    assert selected == {"kube": f"cap-kube-{group}-big", "ours": f"cap-ours-{group}-big"}


def test_volume_limit_scaling_is_on_in_kube_scheduler_137(cp137: ControlPlane, tmp_path: Path) -> None:
    """A CSIDriver with preventPodSchedulingIfMissing keeps the pod off nodes whose CSINode lacks the driver."""
    c = KubeClient(load_connection(str(cp137.kubeconfig_path)))
    ns, group = f"t-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    driver = f"vls-{group}.csi.example.com"
    c.call("POST", "/apis/storage.k8s.io/v1/csidrivers", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver},
        "spec": {"attachRequired": False, "preventPodSchedulingIfMissing": True}})
    for who in ("kube", "ours"):
        for i, has_driver in enumerate((False, True)):
            n = f"vls-{who}-{group}-{i}"
            create_node(c, n, labels={"vls-group": f"{who}-{group}"})
            c.call("POST", "/apis/storage.k8s.io/v1/csinodes", body={
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n},
                "spec": {"drivers": [{"name": driver, "nodeID": n, "allocatable": {"count": 10}}] if has_driver
                         else []}})
        for vol in ("any", "only-0"):
            pv = f"vls-{who}-{vol}-{group}"
            c.call("POST", "/api/v1/persistentvolumes", body={
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                         "csi": {"driver": driver, "volumeHandle": pv},
                         "claimRef": {"namespace": ns, "name": f"{who}-{vol}"}}})
            c.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"{who}-{vol}", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                         "resources": {"requests": {"storage": "1Gi"}}}})
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(KUBE, cp137.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(OURS))
    reg = build_registry([])
    runner = Runner(load_config(ours_cfg, reg), reg, RunOptions(  # VolumeLimitScaling on by default in 1.37
        kubeconfig=str(cp137.kubeconfig_path), secure_port=0, leader_overrides={"leader_elect": False}, seed=1))
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    got: dict[str, Any] = {}
    try:
        with kube_scheduler(cp137.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            for vol, selector in (("any", {}), ("only-0", {"kubernetes.io/hostname": "vls-{who}-{group}-0"})):
                for who, sched in (("kube", KUBE), ("ours", OURS)):
                    name = f"{who}-{vol}"
                    sel = {k: v.format(who=who, group=group) for k, v in selector.items()}
                    c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": {"schedulerName": sched, "nodeSelector": {"vls-group": f"{who}-{group}", **sel},
                                 "containers": [{"name": "c", "image": "pause"}],
                                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": name}}]}})
                    d = wait_decision(c, ns, name, need_message=True)
                    got[name] = (d[0], _without_dra_postfilter(d[1].replace(f"-{who}-", "-X-")))
    finally:
        runner.stop()
        t.join(30)
    assert got["kube-any"] == ("bound", f"vls-X-{group}-1")
    assert got["ours-any"] == got["kube-any"]
    assert got["kube-only-0"][0] == "pending"
    assert f"1 {driver} CSI driver is not installed on the node" in got["kube-only-0"][1]
    assert got["ours-only-0"] == got["kube-only-0"]

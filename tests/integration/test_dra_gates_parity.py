"""DRA feature gates switched, ksched against the real kube-scheduler v1.37.2 with the same `--feature-gates`.

The API server keeps its default gates, so it stores devices with binding conditions, counters and taints
(those gates are on there) while the schedulers have the gate off. DRAFractionalCapacityRange is off in the API
server (its default), which still stores a range of 200m steps (its integer check reads them as 1), while the
schedulers have it on. In each case, on one API server, each scheduler gets its own nodes, DeviceClass and driver
with identical slices, then the same pods in the same order, and the placements, allocated devices, consumed
capacity, allocation timestamps and FailedScheduling messages must match. The timeouts' gates are compared
through `--write-config-to` (what a gate-off timeout means for the search cannot be observed from outside) and
the refusal of a timeout the gate forbids.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.testing.kube import (
    DUMMY_KUBECONFIG,
    create_dra_nodes_and_class,
    ksched_runner,
    kube_scheduler,
    scheduler_config,
    wait_decision,
)

pytestmark = pytest.mark.integration
KSCHED = Path(sys.executable).parent / "ksched"
RES = "/apis/resource.k8s.io/v1"
TAINT = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def _slices(driver: str, node: str, gate: str) -> list[dict[str, Any]]:
    """The devices of `node` (one pool named after it) that make the gate's setting show in the placements."""
    def sl(name: str, count: int, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{name}"},
                "spec": {"driver": driver, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": count}, **spec}}

    if gate == "DRADeviceTaints":  # on: nothing fits; off: the tainted device is allocated
        return [sl("gpus", 1, devices=[{"name": "gpu-0", "taints": [TAINT]}])]
    if gate == "DRADeviceBindingConditions":  # on: bc-0 first (then PreBind waits); off: plain-0, then nothing
        return [sl("gpus", 1, devices=[
            {"name": "bc-0", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"],
             "bindsToNode": True}, {"name": "plain-0"}])]
    if gate == "DRAFractionalCapacityRange":  # off: 250m rounds to 1, the whole device; on: to 300m, twice
        return [sl("gpus", 1, devices=[{"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {
            "value": "1", "requestPolicy": {"default": "200m",
                                            "validRange": {"min": "200m", "step": "100m", "max": "1"}}}}}])]
    assert gate == "DRAPartitionableDevices"  # on: part-0, then whole; off: whole, then nothing
    uses = [{"counterSet": "gpu", "counters": {"memory": {"value": "30Gi"}}}]
    return [sl("counters", 2, sharedCounters=[{"name": "gpu", "counters": {"memory": {"value": "40Gi"}}}]),
            sl("devices", 2, devices=[{"name": "part-0", "consumesCounters": uses},
                                      {"name": "part-1", "consumesCounters": uses}, {"name": "whole"}])]


#: the beta gates on by default switched off, and the one off by default (DRAFractionalCapacityRange) on
GATES = {"DRADeviceTaints": "DRADeviceTaints=false,DRADeviceTaintRules=false",
         "DRADeviceBindingConditions": "DRADeviceBindingConditions=false",
         "DRAPartitionableDevices": "DRAPartitionableDevices=false",
         "DRAFractionalCapacityRange": "DRAFractionalCapacityRange=true"}
#: what kube-scheduler does with that setting, so the scenario is known to mean something
EXPECTED = {"DRADeviceTaints": {"a": ["gpu-0"], "b": None},
            "DRADeviceBindingConditions": {"a": ["plain-0"], "b": None},
            "DRAPartitionableDevices": {"a": ["whole"], "b": None},
            "DRAFractionalCapacityRange": {"a": ["gpu-0"], "b": ["gpu-0"]}}


@pytest.mark.parametrize("gate", sorted(GATES))
def test_allocation_with_a_gate_switched_matches_kube_scheduler(gate: str, control_plane: Any, namespace: str,
                                                           tmp_path: Path) -> None:
    c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    ns, group = namespace, uuid.uuid4().hex[:6]
    ctx: dict[str, dict[str, Any]] = {}
    for who in ("kube", "ours"):
        driver, cls, nodes = create_dra_nodes_and_class(c, "dragate", who, group)
        for s in _slices(driver, nodes[0], gate):
            c.call("POST", f"{RES}/resourceslices", body=s)
        request: dict[str, Any] = {"deviceClassName": cls}
        if gate == "DRAFractionalCapacityRange":
            request["capacity"] = {"requests": {"memory": "250m"}}
        for name in ("a", "b"):
            c.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{who}-{name}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}})
        ctx[who] = {"driver": driver, "nodes": nodes, "group": f"{who}-{group}"}
    flag = GATES[gate]
    names = {"kube": f"dragate-kube-{group}", "ours": f"dragate-ours-{group}"}
    cfg, ours_cfg = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    cfg.write_text(scheduler_config(names["kube"], control_plane.kubeconfig_path))
    ours_cfg.write_text(scheduler_config(names["ours"]))
    got: dict[str, dict[str, Any]] = {"kube": {}, "ours": {}}
    with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log",
                        args=(f"--feature-gates={flag}",)), \
            ksched_runner(ours_cfg, control_plane.kubeconfig_path, feature_gates=parse_feature_gates([flag])):
        for pod in ("a", "b"):
            for who in ("kube", "ours"):
                name = f"{who}-{pod}"
                c.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                    "spec": {"schedulerName": names[who], "nodeSelector": {"dra-group": ctx[who]["group"]},
                             "containers": [{"name": "c", "image": "pause"}],
                             "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
                d = wait_decision(c, ns, name, need_message=True)
                if d[0] == "bound":
                    d = ("bound", ctx[who]["nodes"].index(d[1]))
                else:
                    d = ("pending", d[1].replace(ctx[who]["group"], "G").replace(name, "CLAIM"))
                claim = c.call("GET", f"{RES}/namespaces/{ns}/resourceclaims/{name}")
                alloc = (claim.get("status") or {}).get("allocation")
                view = None if alloc is None else {
                    "devices": [r["device"] for r in alloc["devices"]["results"]],
                    "bindingConditions": [r.get("bindingConditions") for r in alloc["devices"]["results"]],
                    "consumed": [r.get("consumedCapacity") for r in alloc["devices"]["results"]],
                    "timestamp": bool(alloc.get("allocationTimestamp"))}
                got[who][pod] = (d, view)
    print(f"\nkube-scheduler: {got['kube']}\nksched:         {got['ours']}")
    assert got["ours"] == got["kube"]
    for pod, devices in EXPECTED[gate].items():
        (d, view) = got["kube"][pod]
        if devices is None:
            assert d[0] == "pending" and "cannot allocate all claims" in d[1] and view is None
        else:
            assert d == ("bound", 0) and view is not None and view["devices"] == devices
            assert view["timestamp"] is (gate != "DRADeviceBindingConditions")
    if gate == "DRAFractionalCapacityRange":
        assert got["kube"]["a"][1]["consumed"] == [{"memory": "300m"}]


def test_timeouts_with_their_gates_off_are_written_and_refused_as_kube_does(control_plane: Any,
                                                                            tmp_path: Path) -> None:
    """`--write-config-to` with DRASchedulerFilterTimeout / DRADeviceBindingConditions off: the same bytes
    (filterTimeout: null, no bindingTimeout); a configuration setting them is refused with kube's field errors."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    flag = "--feature-gates=DRASchedulerFilterTimeout=false,DRADeviceBindingConditions=false"
    head = f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" \
           f"clientConnection: {{kubeconfig: {kc}}}\n"
    plain, timed = tmp_path / "plain.yaml", tmp_path / "timed.yaml"
    plain.write_text(head)
    timed.write_text(head + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n"
                            "    args: {filterTimeout: 5s, bindingTimeout: 1m}\n")
    kube_bin = str(control_plane.bin_dir / "kube-scheduler")
    kube_out, ours_out = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    r = subprocess.run([kube_bin, f"--config={plain}", flag, f"--write-config-to={kube_out}", "--secure-port=0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and kube_out.exists(), r.stderr[-2000:]
    r = subprocess.run([str(KSCHED), "run", f"--config={plain}", flag, f"--write-config-to={ours_out}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ours_out.read_text() == kube_out.read_text()
    assert "filterTimeout: null" in kube_out.read_text() and "bindingTimeout" not in kube_out.read_text()
    errors = ["profiles[0].pluginConfig[0].args.filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate "
              "is disabled",
              "profiles[0].pluginConfig[0].args.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
              "DRAResourceClaimDeviceStatus feature gate is disabled"]
    r = subprocess.run([kube_bin, f"--config={timed}", flag, f"--write-config-to={kube_out}", "--secure-port=0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and all(e in r.stderr for e in errors), r.stderr[-2000:]
    # ksched's drop-in path names the first error and counts the others
    r = subprocess.run([str(KSCHED), "run", f"--config={timed}", flag, f"--write-config-to={ours_out}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and errors[0] in r.stderr and "and 1 more error" in r.stderr, r.stderr

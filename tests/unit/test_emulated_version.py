"""`--emulated-version` / `--min-compatibility-version`: kube's versioned feature specs decide each gate's default,
stage and lock at the emulated minor, and ksched switches that minor's configuration rules (Plugins fields,
default plugin order) with them. Facts from k8s.io/kubernetes v1.37.2 pkg/features and
pkg/scheduler/apis/config (v1.35.4, v1.36.3 for the earlier minors' rules)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_runtime.config import ConfigError
from scheduler_runtime.config.loader import build
from scheduler_runtime.config.writeout import written_document, written_points
from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import (
    DATA,
    default_gates,
    gate_specs,
    help_table,
    parse_feature_gates,
    resolve_versions,
)
from scheduler_runtime.options.flags import parse
from scheduler_runtime.plugins import default_multipoint
from scheduler_runtime.plugins.registry import build_registry

ROOT = Path(__file__).resolve().parents[2]
HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def test_emulated_version_switches_gate_defaults_and_default_plugins() -> None:
    for minor, on in (("1.35", False), ("1.36", False), ("1.37", True)):
        assert parse_feature_gates([], minor)["StorageCapacityScoring"] is on  # beta-on in 1.37
    # NodeDeclaredFeatures: alpha (off) in 1.35, beta in 1.36, GA and locked in 1.37
    assert [gate_specs(m)["NodeDeclaredFeatures"].describe() for m in ("1.35", "1.36", "1.37")] == \
        ["ALPHA - default=false", "BETA - default=true", "GA - default=true, locked"]
    assert [n for n, _ in default_multipoint(default_gates("1.37"))][2:4] == ["NodeName", "NodeUnschedulable"]
    assert [n for n, _ in default_multipoint(default_gates("1.36"))][2:4] == ["NodeUnschedulable", "NodeName"]
    assert "NodeDeclaredFeatures" not in [n for n, _ in default_multipoint(default_gates("1.35"))]
    assert "NodeDeclaredFeatures" in [n for n, _ in default_multipoint(None)]  # the pinned minor: 1.37
    # the flags reach the gates: --emulated-version=1.36 makes NodeDeclaredFeatures settable again
    with pytest.raises(UsageError, match="cannot set feature gate NodeDeclaredFeatures to false, feature is locked "
                                         "to true"):
        parse_feature_gates(["NodeDeclaredFeatures=false,ExtendWebSocketsToKubelet=false,"
                             "InPlacePodLevelResourcesVerticalScaling=false,RestartAllContainersOnContainerExits=false"])
    gates = parse_feature_gates(["NodeDeclaredFeatures=false,ExtendWebSocketsToKubelet=false,"
                                 "InPlacePodLevelResourcesVerticalScaling=false,"
                                 "RestartAllContainersOnContainerExits=false,InPlacePodVerticalScalingInitContainers="
                                 "false"], *resolve_versions(["kube=1.36"]))
    assert gates.emulated == "1.36" and gates.min_compat == "1.35" and gates["NodeDeclaredFeatures"] is False
    # /flagz and /statusz are alpha, off, in 1.35: ksched's z-pages follow
    assert default_gates("1.35")["ComponentFlagz"] is False and default_gates("1.37")["ComponentStatusz"] is True


def test_dra_switches_follow_the_emulated_minor() -> None:
    """DynamicResources is built with the gates the configuration was built with (through its handle): 1.35 has
    partitionable devices, device taints, binding conditions and consumable capacity off (alpha there)."""
    from types import SimpleNamespace

    from scheduler_runtime.config import load_config
    from scheduler_runtime.plugins.dynamicresources.allocator import Features
    from scheduler_runtime.plugins.dynamicresources.plugin import DynamicResources
    from scheduler_runtime.scheduler import build_frameworks

    old = DynamicResources(handle=SimpleNamespace(feature_gates=default_gates("1.35"), cluster=None)).features
    assert old == Features(admin_access=True, prioritized_list=True, partitionable_devices=False,
                           device_taints=False, device_binding_and_status=False, consumable_capacity=False,
                           runtime_error_detail=False,  # 1.35's CEL runtime errors name no device
                           distinct_every_device=False,  # nor does it keep every device's distinctAttribute value
                           kube_137_allocator=False)  # nor v0.37's other allocator rules
    assert DynamicResources(handle=SimpleNamespace(feature_gates=default_gates("1.37"), cluster=None)).features == \
        Features()
    reg = build_registry([])
    cfg = load_config(None, reg, feature_gates=default_gates("1.35"))
    fw = build_frameworks(cfg, reg, None, None, __import__("random").Random(0))["default-scheduler"]
    assert fw.handle.feature_gates is cfg.feature_gates
    dra = next(c.plugin for c in fw.filter if c.name == "DynamicResources")
    assert dra.features == old


def test_kube_errors_for_unknown_locked_and_not_yet_available_gates() -> None:
    with pytest.raises(UsageError, match="unrecognized feature gate: GangScheduling$"):
        parse_feature_gates(["GangScheduling=true"])  # removed in 1.37 (GenericWorkload gates the plugin)
    with pytest.raises(UsageError, match=r"\[cannot set feature gate DRAExtendedResource to false, feature is locked "
                                         r"to true, cannot set feature gate NodeDeclaredFeatures to false"):
        parse_feature_gates(["NodeDeclaredFeatures=false,DRAExtendedResource=false"])
    parse_feature_gates(["DRAExtendedResource=true"])  # a GA gate set to its locked value: accepted, as kube does
    with pytest.raises(UsageError, match="cannot set feature gate CompositePodGroup to true, feature is PreAlpha at "
                                         "emulated version 1.36, min compatibility version 1.35"):
        parse_feature_gates(["CompositePodGroup=true"], "1.36")  # added in 1.37
    with pytest.raises(UsageError, match="HPAScaleToZero=true is not supported by ksched: it implements "
                                         r"kube-scheduler 1.36's default \(HPAScaleToZero=false, ALPHA"):
        parse_feature_gates(["HPAScaleToZero=true"], "1.36")  # alpha in 1.36, beta-on in 1.37
    parse_feature_gates(["HPAScaleToZero=true"], "1.37")  # the 1.37 default
    with pytest.raises(UsageError, match="component not registered: wardle"):
        parse_feature_gates(["wardle:Foo=true"])


def test_min_compatibility_version_decides_specs_that_need_it() -> None:
    # DRAFractionalCapacityRange: beta in 1.37, on only with --min-compatibility-version>=1.37
    assert gate_specs("1.37")["DRAFractionalCapacityRange"].default is False
    assert gate_specs("1.37", "1.37")["DRAFractionalCapacityRange"].default is True
    flags = parse(["--emulated-version=1.37", "--min-compatibility-version=1.37"])
    on = parse_feature_gates([], *resolve_versions(flags.list("emulated-version", []),
                                                   flags.list("min-compatibility-version", [])))
    assert on["DRAFractionalCapacityRange"] is True  # honoured: ksched implements both settings
    gates = parse_feature_gates(["DRAFractionalCapacityRange=false"], *resolve_versions([], ["1.37"]))
    assert gates.min_compat == "1.37"
    with pytest.raises(UsageError, match="patch version not allowed, got: kube=1.36.1"):
        resolve_versions(["1.36.1"])
    with pytest.raises(UsageError, match="duplicate version flag, kube=1.36 and kube=1.35"):
        resolve_versions(["1.36", "kube=1.35"])


def test_help_table_of_1_36_is_the_real_1_36_3_help() -> None:
    """kube-scheduler 1.37.2's specs taken at 1.36 list what kube-scheduler 1.36.3's own --help lists, but for
    the gates 1.37 removed (GangScheduling, WorkloadAwarePreemption: GenericWorkload now; and a kubelet gate)."""
    text = (ROOT / "tests/data/kube-scheduler-1.36.3-help.txt").read_text()
    listed = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("kube:") and "=true|false (" in line:
            name, rest = line[5:].split("=true|false (", 1)
            stage, default = rest.rstrip(")").split(" - default=")
            listed[name] = (default == "true", stage)
    table = help_table("1.36")
    assert {k: v for k, v in listed.items() if k in table} == table
    assert sorted(set(listed) - set(table)) == ["GangScheduling", "PreventStaticPodAPIReferences",
                                                 "WorkloadAwarePreemption"]


def test_plugins_fields_and_written_points_follow_the_minor() -> None:
    reg = build_registry([])
    pg = {**HEAD, "profiles": [{"schedulerName": "default-scheduler",
                                "plugins": {"podGroupPostFilter": {"disabled": [{"name": "*"}]}}}]}
    cfg = build(pg, reg, feature_gates=default_gates("1.37"))  # 1.37's field, nothing enabled: accepted
    assert written_document(cfg.raw, cfg.kube_minor)["profiles"][0]["plugins"]["podGroupPostFilter"] == \
        {"disabled": [{"name": "*", "weight": 0}]}
    with pytest.raises(ConfigError, match=r'profiles\[0\].plugins.podGroupPostFilter: unknown field '
                                          r'"podGroupPostFilter"'):
        build(pg, reg, feature_gates=default_gates("1.36"))
    enabled = {**HEAD, "profiles": [{"schedulerName": "default-scheduler",
                                     "plugins": {"podGroupPostFilter": {"enabled": [{"name": "DefaultPreemption"}]}}}]}
    with pytest.raises(ConfigError, match="does not run the podGroupPostFilter extension point"):
        build(enabled, reg)
    assert "placementScore" in written_points("1.36") and "podGroupPostFilter" not in written_points("1.36")
    assert "placementScore" not in written_points("1.35")
    cfg36 = build(dict(HEAD), reg, feature_gates=default_gates("1.36"))
    assert cfg36.kube_minor == "1.36"
    assert [e["name"] for e in cfg36.raw["profiles"][0]["plugins"]["multiPoint"]["enabled"]][2:4] == \
        ["NodeUnschedulable", "NodeName"]


def test_config_validate_kubernetes_version_applies_that_minors_rules(tmp_path: Path) -> None:
    f = tmp_path / "pg.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                 "- schedulerName: default-scheduler\n  plugins:\n    podGroupPostFilter:\n"
                 "      disabled: [{name: '*'}]\n")
    ksched = [sys.executable, "-m", "ksched_cli.main"]
    ok = subprocess.run([*ksched, "config", "validate", str(f), "--kubernetes-version", "1.37"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*ksched, "config", "validate", str(f), "--kubernetes-version", "1.36"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and 'unknown field "podGroupPostFilter"' in bad.stderr


def test_gate_data_is_what_the_go_source_says() -> None:
    """data/kube-feature-gates.json is hack/featuregates/harvest.py's reading of the pinned release's source."""
    if shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("go is not installed (hack/build-controlplane.sh needs it too)")
        pytest.skip("needs go to find the module cache")
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    version = json.loads(DATA.read_text())["kubernetes"]
    if not (Path(gomodcache) / f"k8s.io/kubernetes@v{version}/pkg/features").is_dir():
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            f"k8s.io/kubernetes@v{version} is not in the Go module cache (hack/build-controlplane.sh downloads it)")
    out = subprocess.run([sys.executable, str(ROOT / "hack/featuregates/harvest.py"), version],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out == DATA.read_text()


@pytest.mark.parametrize("minor", ["1.36", "1.37"])
def test_a_preempting_pods_message_follows_the_emulated_minor(minor: str) -> None:
    """kube 1.37's DefaultPreemption says where it preempts, and the FailedScheduling message carries it; 1.36
    says nothing on success."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.config import load_config
    from scheduler_runtime.scheduler import Scheduler
    from scheduler_runtime.testing import make_node, make_pod

    m = MemoryCluster()
    m.create(make_node("only").capacity(cpu="2").build(), emit=False)
    m.create(make_pod("low").req(cpu="2").priority(0).on_node("only").build(), emit=False)
    gates = default_gates(minor)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg, feature_gates=gates), reg, seed=1, feature_gates=gates)
    s.start()
    vip = make_pod("vip").req(cpu="2").priority(1000).build()
    m.create(vip)
    s.run(until_idle=True)
    ns = vip["metadata"].get("namespace") or "default"
    failed = [e.note for e in m.events_for(ns, "vip") if e.reason == "FailedScheduling"]
    tail = " preemption: found a potential placement for pod on node only, preempting 1 victims"
    assert failed[0] == "0/1 nodes are available: 1 Insufficient cpu." + (tail if minor == "1.37" else "")

"""`ksched config default` against the real `kube-scheduler --write-config-to` of the built control plane:
byte-identical text for every in-tree config of the corpus (test_config_default_text_is_byte_identical), and
the same defaulted values once ksched-only differences are set aside (the older comparison below).

Known, documented differences are normalised away before comparing: kube-scheduler also writes empty
extension points (`filter: {}`) and `weight: 0`, which mean the same as leaving them out; in-tree plugins
ksched does not run (UNSUPPORTED_IN_TREE) are set aside. The volume plugins, DynamicResources and
NodeDeclaredFeatures are compared.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.plugins import UNSUPPORTED_IN_TREE
from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
NOT_RUN_BY_KSCHED = set(UNSUPPORTED_IN_TREE)
CONFIGS = sorted(p for p in (ROOT / "tests/data/configs").glob("valid-*.yaml") if "prefilter" not in p.name) + [
    ROOT / "examples/configs/least-allocated.yaml", ROOT / "examples/configs/most-allocated.yaml"]



def _normalise(doc: dict[str, Any]) -> dict[str, Any]:
    for prof in doc.get("profiles") or []:
        plugins = prof.get("plugins") or {}
        for point in list(plugins):
            ps = plugins[point] or {}
            for key in ("enabled", "disabled"):
                entries = [dict(e) for e in ps.get(key) or [] if e.get("name") not in NOT_RUN_BY_KSCHED]
                for e in entries:
                    if e.get("weight") in (0, None):
                        e.pop("weight", None)
                if entries:
                    ps[key] = entries
                else:
                    ps.pop(key, None)
            if ps:
                plugins[point] = ps
            else:
                del plugins[point]
        prof["pluginConfig"] = {pc["name"]: pc.get("args") for pc in prof.get("pluginConfig") or []
                                if pc["name"] not in NOT_RUN_BY_KSCHED}
    return doc


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_config_default_matches_kube_scheduler_write_config_to(config: Path, control_plane: Any,
                                                               tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    doc = yaml.safe_load(config.read_text())
    doc.setdefault("clientConnection", {})["kubeconfig"] = str(kc)  # kube-scheduler stats the file
    cfg = tmp_path / config.name
    cfg.write_text(yaml.safe_dump(doc))
    out = tmp_path / "kube.yaml"
    r = subprocess.run([str(control_plane.bin_dir / "kube-scheduler"), f"--config={cfg}",
                        f"--write-config-to={out}", "--secure-port=0"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and out.exists(), r.stderr[-2000:]
    ours = subprocess.run([str(KSCHED), "config", "default", str(cfg)], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    want = _normalise(yaml.safe_load(out.read_text()))
    got = _normalise(yaml.safe_load(ours.stdout))
    assert _diff(want, got) == []


def _diff(kube: Any, ours: Any, path: str = "") -> list[str]:
    if isinstance(kube, dict) and isinstance(ours, dict):
        out: list[str] = []
        for k in sorted(set(kube) | set(ours)):
            if k not in ours:
                out.append(f"{path}.{k}: only kube-scheduler writes {kube[k]!r}")
            elif k not in kube:
                out.append(f"{path}.{k}: only ksched writes {ours[k]!r}")
            else:
                out += _diff(kube[k], ours[k], f"{path}.{k}")
        return out
    if isinstance(kube, list) and isinstance(ours, list) and len(kube) == len(ours):
        return [d for i, (a, b) in enumerate(zip(kube, ours, strict=True)) for d in _diff(a, b, f"{path}[{i}]")]
    return [] if kube == ours else [f"{path}: kube-scheduler {kube!r} != ksched {ours!r}"]


MULTI_PROFILE = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: packer
  plugins:
    multiPoint:
      enabled: [{name: ImageLocality}]
      disabled: [{name: NodeResourcesBalancedAllocation}]
    score:
      enabled: [{name: TaintToleration, weight: 5}]
      disabled: [{name: "*"}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: minimal
  plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled: [{name: PrioritySort}, {name: DefaultBinder}]
"""


def _write_config_to(control_plane: Any, tmp_path: Path, text: str, name: str) -> tuple[Path, str]:
    """(the config given to both, what kube-scheduler wrote for it)."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    doc = yaml.safe_load(text)
    doc.setdefault("clientConnection", {})["kubeconfig"] = str(kc)  # kube-scheduler stats the file
    cfg = tmp_path / name
    cfg.write_text(yaml.safe_dump(doc))
    out = tmp_path / "kube.yaml"
    r = subprocess.run([str(control_plane.bin_dir / "kube-scheduler"), f"--config={cfg}",
                        f"--write-config-to={out}", "--secure-port=0"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and out.exists(), r.stderr[-2000:]
    return cfg, out.read_text()


@pytest.mark.parametrize("config", [*CONFIGS, None, "multi-profile"],
                         ids=lambda p: p.name if isinstance(p, Path) else str(p))
def test_config_default_text_is_byte_identical(config: Path | str | None, control_plane: Any,
                                               tmp_path: Path) -> None:
    """What `ksched config default` prints is the file kube-scheduler v1.37.2 writes, byte for byte; the
    `ksched run ... --write-config-to` drop-in path writes the same bytes."""
    text = (config.read_text() if isinstance(config, Path) else MULTI_PROFILE if config == "multi-profile"
            else "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    cfg, kube_text = _write_config_to(control_plane, tmp_path, text, "cfg.yaml")
    ours = subprocess.run([str(KSCHED), "config", "default", str(cfg)], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == kube_text
    dropin = tmp_path / "ours.yaml"
    r = subprocess.run([str(KSCHED), "run", f"--config={cfg}", f"--write-config-to={dropin}"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert dropin.read_text() == kube_text


NDF_OFF = ("NodeDeclaredFeatures=false,ExtendWebSocketsToKubelet=false,InPlacePodLevelResourcesVerticalScaling=false,"
           "InPlacePodVerticalScalingInitContainers=false,RestartAllContainersOnContainerExits=false")


EXPLICIT_NDF = "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeDeclaredFeatures}]\n"


@pytest.mark.parametrize("body", ["", EXPLICIT_NDF], ids=["default", "explicit"])
def test_node_declared_features_gate_off_writes_what_kube_writes(body: str, prev_kube_scheduler: Path,
                                                                  tmp_path: Path) -> None:
    """With the gate (and the gates that depend on it) off, kube leaves NodeDeclaredFeatures out of the default
    profile but keeps an explicit entry; ksched writes the same bytes. The gate is GA and locked in 1.37, so this
    is kube-scheduler 1.36.3 against ksched emulating 1.36."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   f"clientConnection: {{kubeconfig: {kc}}}\n" + body)
    kube, ours = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    r = subprocess.run([str(prev_kube_scheduler), f"--config={cfg}", f"--feature-gates={NDF_OFF}",
                        f"--write-config-to={kube}", "--secure-port=0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and kube.exists(), r.stderr[-2000:]
    r = subprocess.run([str(KSCHED), "run", f"--config={cfg}", f"--feature-gates={NDF_OFF}", "--emulated-version=1.36",
                        f"--write-config-to={ours}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ours.read_text() == kube.read_text()
    assert ("NodeDeclaredFeatures" in kube.read_text()) == bool(body)

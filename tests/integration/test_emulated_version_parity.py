"""ksched against the real kube-scheduler of two minors: the pinned release (hack/controlplane/VERSION, 1.37.2) and
the previous minor's (hack/controlplane-prev/VERSION, 1.36.3).

- `ksched run --emulated-version 1.36 --write-config-to` writes what kube-scheduler 1.36.3 writes, byte for byte
  (1.36's Plugins struct and default plugin order, 1.36's gate defaults: no VolumeBinding shape).
- `--feature-gates` at each emulated minor: where the real binary refuses a setting, ksched refuses it with the
  same message; where it accepts one, ksched accepts it or refuses it as one it does not implement (never
  accepts and ignores).

kube-scheduler 1.37.2 run with `--emulated-version=1.36` switches only the gates (its Plugins struct and default
order stay 1.37's); ksched's `--emulated-version` also switches the configuration rules, so its 1.36 output is
compared with the 1.36.3 binary's, and its 1.36 gate handling with both binaries.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import gate_specs, parse_feature_gates
from scheduler_runtime.options.flags import emulated_and_min_compat, parse
from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
MULTI_PROFILE = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: packer
  plugins:
    multiPoint:
      enabled: [{name: ImageLocality}]
      disabled: [{name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: minimal
  plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled: [{name: PrioritySort}, {name: DefaultBinder}]
"""
NDF_OFF = ("NodeDeclaredFeatures=false,ExtendWebSocketsToKubelet=false,InPlacePodLevelResourcesVerticalScaling=false,"
           "InPlacePodVerticalScalingInitContainers=false,RestartAllContainersOnContainerExits=false")
#: gate settings both are given; the interesting ones differ between 1.36 and 1.37
GATE_CASES = [
    "", "Nope=true", "NodeDeclaredFeatures=false", NDF_OFF, "NodeDeclaredFeatures=false,DRAExtendedResource=false",
    "DRAExtendedResource=true", "StorageCapacityScoring=true", "StorageCapacityScoring=false",
    "CompositePodGroup=true", "GenericWorkload=true", "ComponentFlagz=false,ComponentStatusz=false",
    "OpportunisticBatching=false", "SchedulerAsyncPreemption=false", "kube:ComponentFlagz=false",
    "wardle:Foo=true", "ComponentFlagz=maybe", "HostnameOverride=false", "AllAlpha=false",
]
_KUBE_ERR = re.compile(r'"command failed" err="(.*)"$')


def _cfg(tmp_path: Path, text: str) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text(DUMMY_KUBECONFIG)
    doc = yaml.safe_load(text)
    doc.setdefault("clientConnection", {})["kubeconfig"] = str(kc)  # kube-scheduler stats the file
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    return cfg


def _kube(binary: Path, cfg: Path, out: Path, *flags: str) -> tuple[int, str]:
    """(exit code, kube's error text) of `binary --write-config-to`."""
    r = subprocess.run([str(binary), f"--config={cfg}", f"--write-config-to={out}", "--secure-port=0", *flags],
                       capture_output=True, text=True, timeout=60)
    errs = [m.group(1).replace('\\"', '"') for ln in r.stderr.splitlines() if (m := _KUBE_ERR.search(ln))]
    return r.returncode, errs[-1] if errs else ""


def _ksched(cfg: Path, out: Path, *flags: str) -> tuple[int, str]:
    r = subprocess.run([str(KSCHED), "run", f"--config={cfg}", f"--write-config-to={out}", *flags],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr.strip()


@pytest.mark.parametrize("config", ["default", "multi-profile", "ndf-off"])
def test_emulated_1_36_writes_what_kube_scheduler_1_36_writes(config: str, prev_kube_scheduler: Path,
                                                              tmp_path: Path) -> None:
    text = MULTI_PROFILE if config == "multi-profile" else \
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    flags = [f"--feature-gates={NDF_OFF}"] if config == "ndf-off" else []
    cfg = _cfg(tmp_path, text)
    kube, ours = tmp_path / "kube.yaml", tmp_path / "ours.yaml"
    rc, err = _kube(prev_kube_scheduler, cfg, kube, *flags)
    assert rc == 0, err
    rc, err = _ksched(cfg, ours, "--emulated-version=1.36", *flags)
    assert rc == 0, err
    assert ours.read_text() == kube.read_text()
    assert "podGroupPostFilter" not in ours.read_text() and "shape:" not in ours.read_text()


def _errors(text: str) -> list[str]:
    """The errors of utilerrors.NewAggregate's text ("[a, b]" for several, nested brackets kept), sorted."""
    if not (text.startswith("[") and text.endswith("]")):
        return [text]
    out, depth, cur = [], 0, ""
    body = text[1:-1]
    i = 0
    while i < len(body):
        c = body[i]
        depth += (c == "[") - (c == "]")
        if depth == 0 and body.startswith(", ", i):
            out.append(cur)
            cur, i = "", i + 2
            continue
        cur += c
        i += 1
    return sorted([*out, cur])


def _ksched_gates(argv: list[str]) -> tuple[int, str]:
    """What `ksched run` decides for these flags (the same code, in-process: the flags, then the gates)."""
    try:
        flags = parse(argv)
        parse_feature_gates([flags.get("feature-gates")] if flags.get("feature-gates") else [],
                            *emulated_and_min_compat(flags))
    except UsageError as exc:
        return 2, str(exc)
    return 0, ""


def _compare_gates(kube_run: Any, ksched_flags: list[str], cases: list[str], tmp_path: Path,
                   known_to: set[str] | None = None) -> list[str]:
    """Each case given to both; returns the disagreements (empty when ksched behaves as the rules say)."""
    cfg = _cfg(tmp_path, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    bad = []
    for case in cases:
        extra = [f"--feature-gates={case}"] if case else []
        krc, kerr = kube_run(cfg, tmp_path / "kube.yaml", *extra)
        orc, oerr = _ksched_gates([*ksched_flags, *extra])
        if krc != 0:
            # the same refusal (a Go map's order aside: an aggregate's errors are compared as a set)
            got = oerr.removeprefix("error: ").removeprefix("--feature-gates: ")
            added_later = re.fullmatch(r"unrecognized feature gate: (\w+)", kerr)
            if added_later and known_to is not None and added_later.group(1) not in known_to:
                # an older binary does not know a gate added since; ksched (1.37's specs) calls it PreAlpha
                if orc == 0:
                    bad.append(f"{case!r}: kube refuses ({kerr}), ksched accepts")
                continue
            if orc == 0 or _errors(got) != _errors(kerr):
                bad.append(f"{case!r}: kube refuses ({kerr}), ksched: rc={orc} {oerr}")
        elif orc != 0 and "not supported by ksched" not in oerr:
            bad.append(f"{case!r}: kube accepts, ksched refuses without saying it is ksched's limit: {oerr}")
    return bad


@pytest.mark.parametrize("emulated", ["1.37", "1.36", "1.35"])
def test_feature_gates_at_each_emulated_minor_match_the_pinned_binary(emulated: str, control_plane: Any,
                                                                       tmp_path: Path) -> None:
    binary = control_plane.bin_dir / "kube-scheduler"
    flags = [f"--emulated-version={emulated}"]

    def kube_run(cfg: Path, out: Path, *extra: str) -> tuple[int, str]:
        return _kube(binary, cfg, out, *flags, *extra)

    assert _compare_gates(kube_run, flags, GATE_CASES, tmp_path) == []


def test_feature_gates_at_1_36_match_the_previous_minors_binary(prev_kube_scheduler: Path, tmp_path: Path) -> None:
    """The 1.36.3 binary knows gates 1.37 removed (GangScheduling, WorkloadAwarePreemption, folded into
    GenericWorkload; PreventStaticPodAPIReferences): ksched, following 1.37.2's specs as kube does, calls them
    unrecognized, so they are left out here."""

    def kube_run(cfg: Path, out: Path, *extra: str) -> tuple[int, str]:
        return _kube(prev_kube_scheduler, cfg, out, *extra)

    known_to_1_36 = set(gate_specs("1.36"))
    assert _compare_gates(kube_run, ["--emulated-version=1.36"], GATE_CASES, tmp_path, known_to_1_36) == []
    # and the removed gates, the known difference, are refused by ksched rather than accepted
    rc, err = _ksched(_cfg(tmp_path, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"),
                      tmp_path / "o.yaml", "--emulated-version=1.36", "--feature-gates=GangScheduling=true")
    assert rc != 0 and "unrecognized feature gate: GangScheduling" in err

"""kube-scheduler's `--feature-gates`, `--emulated-version` and `--min-compatibility-version`, and which gates
ksched honours.

The gates are the ones the pinned kube-scheduler binary registers, each with kube's versioned specs (a list of
{version, default, stage, locked to default, min compatibility version}); `hack/featuregates/harvest.py` reads
them from the Go source into data/kube-feature-gates.json. As in kube (component-base featuregate), the spec in
force is the last one whose version is at most the emulated version and whose min compatibility version (if
any) is at most `--min-compatibility-version`; a gate with no such spec is PreAlpha (not settable).

kube's rules are followed for the syntax and the errors: `Name=bool` pairs separated by commas, an optional
`kube:` prefix used consistently, repeated flags merged, `unrecognized feature gate: X` for an unknown name,
`cannot set feature gate X to false, feature is locked to true` for a locked one, strconv.ParseBool's error for
a bad value, the dependency check after setting. A drop-in must not accept a gate and ignore it, so a gate
whose effective value differs from the default of the emulated minor is refused unless ksched implements both
settings (`HONOURED`) or the value describes what ksched does anyway (`MATCHES_KSCHED`): the scheduling gates
change behaviour ksched does not switch, and the others (kubelet, API server) have no effect on a scheduler,
but ksched cannot tell the two apart for every gate and refuses rather than guess.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .kubeversion import KUBE_MINOR

DATA = Path(__file__).resolve().parent / "data" / "kube-feature-gates.json"
#: the minors `--emulated-version` takes in ksched (kube-scheduler 1.37 takes 1.34..1.37; ksched carries the
#: configuration rules of these three)
EMULATABLE = ("1.35", "1.36", "1.37")
#: kube-scheduler's floor for both versions: binary minor - 3
FLOOR = f"1.{int(KUBE_MINOR.split('.')[1]) - 3}"
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}
_SPECIAL = {"AllAlpha": "ALPHA", "AllBeta": "BETA"}


@dataclass(frozen=True)
class GateSpec:
    """A gate's spec in force at one emulated version: stage is ALPHA, BETA, "" (GA) or DEPRECATED."""

    default: bool
    stage: str
    locked: bool

    def describe(self) -> str:
        return f"{self.stage or 'GA'} - default={str(self.default).lower()}" + (", locked" if self.locked else "")


def _v(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def prev_minor(version: str) -> str:
    major, minor = _v(version)
    return f"{major}.{minor - 1}"


@functools.cache
def _data() -> dict[str, object]:
    return json.loads(DATA.read_text())  # type: ignore[no-any-return]


def _spec(specs: list[list[object]], emulated: str, min_compat: str) -> GateSpec | None:
    """kube's featureSpecAtEmulationAndMinCompatVersion; None is PreAlpha (not available)."""
    for version, default, stage, locked, mcv in reversed(specs):
        if _v(str(version)) > _v(emulated):
            continue
        if mcv is not None and _v(min_compat) < _v(str(mcv)):
            continue
        return GateSpec(bool(default), str(stage), bool(locked))
    return None


@functools.cache
def gate_specs(emulated: str = KUBE_MINOR, min_compat: str | None = None) -> Mapping[str, GateSpec]:
    """Every gate the pinned binary knows that is available (not PreAlpha) at `emulated`."""
    mc = min_compat or _default_min_compat(emulated)
    gates: dict[str, list[list[object]]] = _data()["gates"]  # type: ignore[assignment]
    out = {}
    for name, specs in gates.items():
        s = _spec(specs, emulated, mc)
        if s is not None:
            out[name] = s
    return out


def known_gates() -> set[str]:
    """Every gate name the pinned binary registers (at any version)."""
    return set(_data()["gates"])  # type: ignore[call-overload]


def help_table(emulated: str = KUBE_MINOR) -> dict[str, tuple[bool, str]]:
    """name -> (default, stage) as `kube-scheduler --help` lists them at `emulated` (alpha and beta only)."""
    return {n: (s.default, s.stage) for n, s in gate_specs(emulated).items() if s.stage in ("ALPHA", "BETA")}


def dependencies() -> dict[str, tuple[str, ...]]:
    """kube's feature dependencies (pkg/features defaultKubernetesFeatureGateDependencies): gate -> gates it
    needs enabled."""
    deps: dict[str, list[str]] = _data()["dependencies"]  # type: ignore[assignment]
    return {k: tuple(v) for k, v in deps.items()}


DEPENDENCIES = dependencies()
#: gates whose both settings ksched implements
HONOURED = {"ComponentFlagz", "ComponentStatusz", "DRADeviceTaintRules", "NodeDeclaredFeatures",
            "OpportunisticBatching", "StorageCapacityScoring", "VolumeLimitScaling", "DRAExtendedResource",
            "DRAConsumableCapacity", "SchedulerAsyncPreemption", "NominatedNodeNameForExpectation",
            "DRASchedulerFilterTimeout", "DRADeviceBindingConditions", "DRAPartitionableDevices", "DRADeviceTaints",
            "DRAFractionalCapacityRange", "DRAListTypeAttributes", "DRAOptionalNodeOperations",
            "DRADeviceCompatibilityGroups", "DRADerivedAttributes", "DRANodeAllocatableResources"}
#: honoured gates whose other setting ksched implements only from an emulated minor on: DRAListTypeAttributes
#: follows kube 1.37's experimental allocator (1.36's kept no intersection per device when backtracking);
#: DRANodeAllocatableResources (alpha since 1.36) follows kube 1.37.2's plugin, whose checks 1.36.3 did not all have
HONOURED_FROM = {"DRAListTypeAttributes": "1.37", "DRANodeAllocatableResources": "1.37"}
#: non-default values that describe what ksched does anyway: it sizes
#: pod-level resources from the spec alone, as kube does with InPlacePodLevelResourcesVerticalScaling off;
#: the other three change nothing in kube-scheduler 1.36.3 (no code path reads them there), they only have to
#: go off with NodeDeclaredFeatures, which they depend on; DRAResourcePoolStatus and DRAPartitionableDevicesType
#: are read by the API server alone (kube 1.37.2: pkg/registry/resource, no scheduler or allocator code path)
MATCHES_KSCHED = {("InPlacePodLevelResourcesVerticalScaling", False),
                  ("ExtendWebSocketsToKubelet", False), ("InPlacePodVerticalScalingInitContainers", False),
                  ("RestartAllContainersOnContainerExits", False), ("DRAResourcePoolStatus", True),
                  ("DRAPartitionableDevicesType", True)}


class FeatureGates(dict[str, bool]):
    """Effective gate values, with the emulated minor and min compatibility version they were decided at
    (configuration defaults and rules follow `emulated`)."""

    def __init__(self, values: Mapping[str, bool], emulated: str = KUBE_MINOR, min_compat: str | None = None):
        super().__init__(values)
        self.emulated = emulated
        self.min_compat = min_compat or _default_min_compat(emulated)


def emulated_minor(gates: Mapping[str, bool] | None) -> str:
    """The minor whose configuration rules apply: the gates' emulated version, the pinned minor otherwise."""
    return getattr(gates, "emulated", KUBE_MINOR)


def _default_min_compat(emulated: str) -> str:
    """kube's default: one minor before the emulated version, never below the floor."""
    mc = prev_minor(emulated)
    return FLOOR if _v(mc) < _v(FLOOR) else mc


def _version_map(flag: str, values: Iterable[str]) -> str | None:
    """component-base's toVersionMap for kube-scheduler (whose one component is `kube`): the kube version."""
    seen: str | None = None
    for item in values:
        item = item.strip()
        if not item:
            continue
        comp, eq, ver = item.partition("=")
        comp, ver = (comp.strip(), ver.strip()) if eq else ("kube", item)
        parts = ver.lstrip("v").split(".")
        if not (2 <= len(parts) <= 3) or not all(p.isdigit() for p in parts):
            raise UsageError(f'--{flag}: could not parse "{ver}" as version')
        if len(parts) == 3 and int(parts[2]) != 0:
            raise UsageError(f"--{flag}: patch version not allowed, got: {comp}={'.'.join(str(int(p)) for p in parts)}")
        mm = f"{int(parts[0])}.{int(parts[1])}"
        if seen is not None and comp == "kube":
            raise UsageError(f"--{flag}: duplicate version flag, kube={seen} and kube={mm}")
        if comp != "kube":
            raise UsageError(f"--{flag}: component not registered: {comp}")
        seen = mm
    return seen


def resolve_versions(emulated_flag: Iterable[str] = (), min_compat_flag: Iterable[str] = ()) -> tuple[str, str]:
    """(emulated minor, min compatibility minor) from the two flags' values, checked as kube-scheduler checks
    them, then against what ksched carries (EMULATABLE)."""
    emulated = _version_map("emulated-version", emulated_flag) or KUBE_MINOR
    min_compat = _version_map("min-compatibility-version", min_compat_flag) or _default_min_compat(emulated)
    errs = []
    binary = f"{KUBE_MINOR}.0"
    if _v(emulated) > _v(KUBE_MINOR) or _v(emulated) < _v(FLOOR):
        errs.append(f"emulation version {emulated} is not between [{FLOOR}, {binary}]")
    if _v(min_compat) > _v(emulated) or _v(min_compat) < _v(FLOOR):
        errs.append(f"minCompatibilityVersion version {min_compat} is not between [{FLOOR}, {emulated}]")
    if errs:
        raise UsageError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    if emulated not in EMULATABLE:
        raise UsageError(f"--emulated-version={emulated}: not supported by ksched: it carries the rules of kube "
                         f"{', '.join(EMULATABLE)} only")
    return emulated, min_compat


def default_gates(emulated: str = KUBE_MINOR, min_compat: str | None = None) -> FeatureGates:
    """Every available gate at its default at `emulated` (and `min_compat`)."""
    return FeatureGates({n: s.default for n, s in gate_specs(emulated, min_compat).items()}, emulated, min_compat)


def parse_feature_gates(values: list[str], emulated: str = KUBE_MINOR,
                        min_compat: str | None = None) -> FeatureGates:
    """The effective gate values (defaults at the emulated version overlaid with `--feature-gates` occurrences)."""
    mc = min_compat or _default_min_compat(emulated)
    specs = gate_specs(emulated, mc)
    raw: dict[str, bool] = {}
    prefixed: set[bool] = set()
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            key, eq, val = item.partition("=")
            key = key.strip()
            comp, colon, name = key.partition(":")
            if colon:
                if comp != "kube":
                    raise UsageError(f"--feature-gates: component not registered: {comp}")
                prefixed.add(True)
            else:
                name = key
                prefixed.add(False)
            if len(prefixed) > 1:
                raise UsageError("--feature-gates: set kube feature gates with default empty prefix or kube: prefix "
                                 "consistently, do not mix use")
            if not eq:
                raise UsageError(f"--feature-gates: missing bool value for {name}")
            val = val.strip()
            if val in _TRUE:
                raw[name] = True
            elif val in _FALSE:
                raw[name] = False
            else:
                raise UsageError(f'--feature-gates: invalid value of {name}={val}, err: strconv.ParseBool: parsing '
                                 f'"{val}": invalid syntax')
    out = _apply(raw, specs, emulated, mc)
    _check_dependencies(out)
    _check_honoured(out, emulated)
    return FeatureGates(out, emulated, mc)


def _apply(raw: dict[str, bool], specs: Mapping[str, GateSpec], emulated: str, mc: str) -> dict[str, bool]:
    """kube's unsafeSetFromMap: an unknown gate ends it at once; locks and PreAlpha gates are errors (all of
    them, sorted: kube walks a Go map); AllAlpha/AllBeta set every alpha/beta gate not set by name."""
    known = known_gates()
    for name in sorted(raw):
        if name not in known:
            raise UsageError(f"--feature-gates: unrecognized feature gate: {name}")
    errs = []
    out = {n: s.default for n, s in specs.items()}
    for name in sorted(raw):
        v = raw[name]
        s = specs.get(name)
        if s is not None and s.locked and s.default != v:
            errs.append(f"cannot set feature gate {name} to {str(v).lower()}, feature is locked to "
                        f"{str(s.default).lower()}")
        elif s is None:
            errs.append(f"cannot set feature gate {name} to {str(v).lower()}, feature is PreAlpha at emulated "
                        f"version {emulated}, min compatibility version {mc}")
    if errs:
        raise UsageError("--feature-gates: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))
    for special, stage in _SPECIAL.items():
        if special in raw:
            for n, s in specs.items():
                if s.stage == stage and n not in raw and n not in _SPECIAL:
                    out[n] = raw[special]
    out.update(raw)
    return out


#: kube-scheduler 1.36's and 1.37's --help gate lists (compatibility names; derived from the versioned specs)
KUBE_1_36 = help_table("1.36")
KUBE_1_37 = help_table("1.37")


def _check_dependencies(gates: dict[str, bool]) -> None:
    """kube's check after setting gates: an enabled gate whose dependencies are off is an error (kube lists
    them in map order; ksched sorts them so the message is stable)."""
    errs = []
    for name in sorted(DEPENDENCIES):
        if gates.get(name, False):
            off = [d for d in DEPENDENCIES[name] if not gates.get(d, False)]
            if off:
                errs.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    if errs:
        raise UsageError("--feature-gates: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))


def honoured(name: str, emulated: str) -> bool:
    """Whether ksched implements both settings of the gate when emulating `emulated`."""
    return name in HONOURED and _v(emulated) >= _v(HONOURED_FROM.get(name, "0.0"))


def _check_honoured(gates: dict[str, bool], emulated: str) -> None:
    """Refuse a value ksched would ignore: one that differs from the emulated minor's default (taken at the
    usual min compatibility version, so a `--min-compatibility-version` that flips a default counts too)."""
    base = gate_specs(emulated, _default_min_compat(emulated))
    for name in sorted(gates):
        if name in _SPECIAL or honoured(name, emulated):
            continue
        b = gates[name]
        s = base.get(name)
        default = s.default if s is not None else False
        if b != default and (name, b) not in MATCHES_KSCHED:
            desc = s.describe() if s is not None else "not available"
            raise UsageError(f"--feature-gates: {name}={str(b).lower()} is not supported by ksched: it implements "
                             f"kube-scheduler {emulated}'s default ({name}={str(default).lower()}, {desc}); only "
                             f"{', '.join(sorted(n for n in HONOURED if honoured(n, emulated)))} can be changed")

"""KubeSchedulerConfiguration v1: load, default, validate and expand into per-profile plugin plans."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import goduration, yamlio
from ..errors import KschedError
from ..framework.plugin import EXTENSION_POINTS, implements
from ..framework.registry import Registry
from .fielderrors import go_value, translate

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
REMOVED_VERSIONS = {"v1beta1": "1.23", "v1beta2": "1.28", "v1beta3": "1.29", "v1alpha1": "1.21", "v1alpha2": "1.22"}
POINTS = list(EXTENSION_POINTS)  # preEnqueue ... postBind
ALL_POINTS = [*POINTS, "multiPoint"]

#: v1's fields (healthzBindAddress/metricsBindAddress are gone since v1beta3: kube's strict decoding refuses them)
TOP_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
              "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
              "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
LE_FIELDS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
             "resourceNamespace"}
CC_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
PLUGINS_FIELDS = set(ALL_POINTS) | {"placementGenerate", "placementScore"}


class ConfigError(KschedError):
    """All validation errors of one file; str() is one line."""

    def __init__(self, errors: list[str], file: str | None = None) -> None:
        # a key or value echoed from the file may hold a newline; each error must stay one line
        errors = [e.replace("\r", "\\r").replace("\n", "\\n") for e in errors]
        self.errors = errors
        self.file = file
        prefix = f"{file}: " if file else ""
        if len(errors) == 1:
            msg = prefix + errors[0]
        else:
            msg = prefix + errors[0] + f" (and {len(errors) - 1} more error(s): run `ksched config validate`)"
        super().__init__(msg)


def parse_duration(value: Any) -> float:
    """A metav1.Duration field in seconds: a Go duration string ("15s", "1m30s"); a bare number is refused
    as kube-scheduler's decoder refuses it (see `goduration`)."""
    return goduration.decode_field(value)


def _zero_duration(value: Any) -> bool:
    """Absent or zero: Go's metav1.Duration cannot tell them apart, so defaulting fills both."""
    if value is None:
        return True
    try:
        return parse_duration(value) == 0
    except ValueError:
        return False


def format_duration(seconds: float) -> str:
    s = int(seconds)
    if s != seconds:
        return f"{seconds}s"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{sec}s"
    return out


@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass
class ClientConnection:
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = 100
    content_type: str = "application/vnd.kubernetes.protobuf"
    accept_content_types: str = ""


@dataclass
class Profile:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    plan: dict[str, list[tuple[str, int]]]
    args: dict[str, object]


@dataclass
class SchedulerConfiguration:
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    profiles: list[Profile] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    #: scheduler_runtime.extenders.ExtenderConfig, in file order
    extenders: list[Any] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- reading


def read_document(path: Path, what: str = "a KubeSchedulerConfiguration") -> dict[str, Any]:
    """The one YAML mapping in `path`; every refusal is an I/O or parse problem (exit 2) naming the file."""
    return yamlio.load_file_one(path, what=f"{what} mapping")


def check_kind(doc: dict[str, Any]) -> list[str]:
    api = doc.get("apiVersion")
    kind = doc.get("kind")
    errs: list[str] = []
    if kind == "Policy":
        return ['kind: Invalid value: "Policy": the scheduler Policy API was removed in Kubernetes 1.23; '
                'write a KubeSchedulerConfiguration (see `ksched config render --help`)']
    if kind != KIND:
        return [f'kind: Invalid value: {go_value(kind)}: this is not a KubeSchedulerConfiguration'
                + (" (a Kubernetes object; ksched config takes a scheduler configuration file)" if kind else "")]
    if isinstance(api, str) and api.startswith("kubescheduler.config.k8s.io/"):
        ver = api.split("/", 1)[1]
        if ver in REMOVED_VERSIONS:
            return [f'apiVersion: Invalid value: "{api}": {ver} was removed in Kubernetes {REMOVED_VERSIONS[ver]}; '
                    f'convert the file with `ksched config migrate` to {API_VERSION}']
    if api != API_VERSION:
        errs.append(f'apiVersion: Unsupported value: {go_value(api)}: supported values: "{API_VERSION}"')
    if isinstance(doc.get("metadata"), dict):
        errs.append('metadata: Forbidden: a KubeSchedulerConfiguration is a file passed to kube-scheduler '
                    '--config, not an API object to kubectl apply; remove metadata')
    return errs


def _unknown(obj: Any, allowed: set[str], path: str, errs: list[str]) -> None:
    if not isinstance(obj, dict):
        return
    for k in obj:
        if k not in allowed and not (path == "" and k == "metadata"):
            shown = k if isinstance(k, str) and k.isprintable() else go_value(k)  # no raw newline in a path
            errs.append(f'{path + "." if path else ""}{shown}: unknown field {go_value(k)}')


# ------------------------------------------------------------------------------------------- defaults


def _default_plugins(feature_gates: dict[str, bool] | None = None) -> dict[str, Any]:
    from ..plugins import default_multipoint

    enabled = []
    for name, weight in default_multipoint(feature_gates):
        e: dict[str, Any] = {"name": name}
        if weight is not None:
            e["weight"] = weight
        enabled.append(e)
    return {"multiPoint": {"enabled": enabled}}


def _merge_set(default: dict[str, Any] | None, custom: dict[str, Any] | None) -> dict[str, Any]:
    """kube's mergePluginSet: user-enabled replaces a default in place; the rest is appended."""
    default = default or {}
    custom = custom or {}
    disabled = [d.get("name") for d in custom.get("disabled") or []]
    out_enabled = []
    custom_enabled = list(custom.get("enabled") or [])
    replaced = set()
    if "*" not in disabled:
        for d in default.get("enabled") or []:
            if d["name"] in disabled:
                continue
            match = next((i for i, c in enumerate(custom_enabled) if c.get("name") == d["name"]), None)
            if match is not None:
                out_enabled.append(custom_enabled[match])
                replaced.add(match)
            else:
                out_enabled.append(d)
    out_enabled += [c for i, c in enumerate(custom_enabled) if i not in replaced]
    out: dict[str, Any] = {"enabled": out_enabled}
    if custom.get("disabled"):
        out["disabled"] = custom["disabled"]
    return out


def default_document(doc: dict[str, Any], registry: Registry,
                     feature_gates: dict[str, bool] | None = None) -> dict[str, Any]:
    """The defaulted v1 document, as `kube-scheduler --write-config-to` writes it (gated default plugins
    follow `feature_gates`, kube 1.36's gate defaults when None)."""
    d = copy.deepcopy(doc)
    d.setdefault("apiVersion", API_VERSION)
    d.setdefault("kind", KIND)
    d.setdefault("parallelism", 16)
    le = d["leaderElection"] = d.get("leaderElection") or {}
    le.setdefault("leaderElect", True)
    for k, dflt in (("leaseDuration", "15s"), ("renewDeadline", "10s"), ("retryPeriod", "2s")):
        if _zero_duration(le.get(k)):  # metav1.Duration is not a pointer: zero means unset
            le[k] = dflt
    le.setdefault("resourceLock", "leases")
    le.setdefault("resourceName", "kube-scheduler")
    le.setdefault("resourceNamespace", "kube-system")
    cc = d["clientConnection"] = d.get("clientConnection") or {}
    cc.setdefault("kubeconfig", "")
    cc.setdefault("acceptContentTypes", "")
    cc.setdefault("contentType", "application/vnd.kubernetes.protobuf")
    cc.setdefault("qps", 50)
    cc.setdefault("burst", 100)
    d.setdefault("enableProfiling", True)
    if d["enableProfiling"]:
        d.setdefault("enableContentionProfiling", True)
    d.setdefault("percentageOfNodesToScore", 0)
    d.setdefault("podInitialBackoffSeconds", 1)
    d.setdefault("podMaxBackoffSeconds", 10)
    if "extenders" in d:
        from ..extenders.config import render_raw

        d["extenders"] = render_raw(d["extenders"])
        if not d["extenders"]:
            del d["extenders"]  # omitempty
    profiles = d.get("profiles")
    if not profiles:
        profiles = d["profiles"] = [{}]
    if len(profiles) == 1 and isinstance(profiles[0], dict) and profiles[0].get("schedulerName") is None:
        # v1's SchedulerName is a *string: only an absent name is defaulted, an explicit "" stays (and is refused)
        profiles[0]["schedulerName"] = "default-scheduler"
    defaults = _default_plugins(feature_gates)
    for prof in profiles:
        if not isinstance(prof, dict):
            continue
        plugins = prof.get("plugins") or {}
        merged: dict[str, Any] = {}
        for point in ALL_POINTS:
            m = _merge_set(defaults.get(point), plugins.get(point))
            if m.get("enabled") or m.get("disabled") or point == "multiPoint":
                merged[point] = m
        prof["plugins"] = merged
        # one pluginConfig entry per enabled plugin that has args
        pcs = prof.get("pluginConfig") or []
        prof["pluginConfig"] = pcs
        have = {pc.get("name") for pc in pcs if isinstance(pc, dict)}
        for name in _enabled_names(merged):
            spec = registry.get(name)
            if spec is None or spec.args_model is None or name in have:
                continue
            try:
                args = spec.args_model().model_dump(by_alias=True, mode="json", exclude_none=True)
            except ValidationError:
                continue  # required args without defaults: nothing to default
            kind = f"{name}Args"
            pcs.append({"name": name, "args": {"apiVersion": API_VERSION, "kind": kind, **args}})
            have.add(name)
        for pc in pcs:
            if isinstance(pc, dict) and isinstance(pc.get("args"), dict):
                spec = registry.get(pc.get("name", ""))
                if spec is not None and spec.args_model is not None and spec.source == "in-tree":
                    # kube-scheduler runs SetDefaults on args the user gave too (a scoringStrategy with only
                    # a type gets cpu and memory with weight 1)
                    try:
                        full = validate_args(spec.args_model, _drop_nulls(
                            {k: v for k, v in pc["args"].items() if k not in ("apiVersion", "kind")}
                        )).model_dump(by_alias=True, mode="json", exclude_none=True)
                    except ValidationError:
                        full = None  # validate reports it; leave the user's args as they are
                    if full is not None:
                        given = {k: v for k, v in pc["args"].items() if k in ("apiVersion", "kind")}
                        pc["args"] = {"apiVersion": API_VERSION, "kind": f"{pc['name']}Args", **given, **full}
                    pc["args"].setdefault("apiVersion", API_VERSION)
                    pc["args"].setdefault("kind", f"{pc['name']}Args")
                if spec is not None and spec.source == "in-tree":
                    # Go's omitempty: kube-scheduler writes no empty lists or maps in args
                    pc["args"] = {k: v for k, v in pc["args"].items() if v not in ([], {})}
    if d.get("extenders"):
        from ..extenders.config import apply_ignored_resources

        apply_ignored_resources(d)
    return _sorted_keys(d)


def validate_args(model: Any, raw: dict[str, Any]) -> Any:
    """Args as kube's strict decoding reads them: camelCase keys only (a Python field name is an unknown field)."""
    try:
        return model.model_validate(raw, by_alias=True, by_name=False)
    except TypeError:  # a user's model that is not a pydantic v2.11+ BaseModel
        return model.model_validate(raw)


def _drop_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nulls(v) for v in obj]
    return obj


def _sorted_keys(obj: Any) -> Any:
    """Mappings with their keys in alphabetical order at every level, as kube-scheduler's --write-config-to writes
    them (sigs.k8s.io/yaml goes through JSON into a map); lists keep their order."""
    if isinstance(obj, dict):
        return {k: _sorted_keys(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, list):
        return [_sorted_keys(v) for v in obj]
    return obj


def _enabled_names(plugins: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for point in ALL_POINTS:
        for e in (plugins.get(point) or {}).get("enabled") or []:
            n = e.get("name")
            if n and n not in seen:
                seen.append(n)
    return seen


# ------------------------------------------------------------------------------------------- validate


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_top(d: dict[str, Any], errs: list[str]) -> None:
    cc = d.get("clientConnection") or {}
    if _int(cc.get("burst")) and cc["burst"] < 0:
        errs.append(f"clientConnection.burst: Invalid value: {cc['burst']}: must be non-negative")
    le = d.get("leaderElection") or {}
    durs = {}
    for k in ("leaseDuration", "renewDeadline", "retryPeriod"):
        try:  # decoding (metav1.Duration) fails whether or not leader election is on
            durs[k] = parse_duration(le.get(k))
        except ValueError as exc:
            errs.append(f"leaderElection.{k}: Invalid value: {go_value(le.get(k))}: {exc}")
    if le.get("leaderElect"):
        for k in list(durs):
            if durs[k] <= 0:
                errs.append(f"leaderElection.{k}: Invalid value: {go_value(le.get(k))}: must be greater than zero")
        if len(durs) == 3 and durs["leaseDuration"] <= durs["renewDeadline"]:
            errs.append(f'leaderElection.leaseDuration: Invalid value: "{le.get("renewDeadline")}": '
                        f"must be greater than `RenewDeadline`")
        for k in ("resourceLock", "resourceName", "resourceNamespace"):
            if not le.get(k):
                errs.append(f"leaderElection.{k}: Required value")
        if le.get("resourceLock") and le.get("resourceLock") != "leases":
            errs.append(f'leaderElection.resourceLock: Invalid value: "{le["resourceLock"]}": '
                        f'resourceLock value must be "leases"')
    par = d.get("parallelism")
    if not _int(par) or par <= 0:
        errs.append(f"parallelism: Invalid value: {par}: should be an integer value greater than zero")
    elif par != 16:  # accepting it would be ignoring it
        errs.append(f"parallelism: Unsupported value: {par}: ksched runs a scheduling cycle's filters and scores "
                    "vectorised in one thread, so only the default 16 is accepted")
    cc = d.get("clientConnection") or {}
    if cc.get("contentType") not in ("application/vnd.kubernetes.protobuf", "application/json"):
        errs.append(f"clientConnection.contentType: Unsupported value: {go_value(cc.get('contentType'))}: ksched "
                    'talks to the API server in "application/json" (the protobuf default is accepted and means JSON)')
    if cc.get("acceptContentTypes") not in ("", "application/json"):
        errs.append(f"clientConnection.acceptContentTypes: Unsupported value: {go_value(cc.get('acceptContentTypes'))}"
                    ': ksched accepts only "application/json" from the API server')
    pct = d.get("percentageOfNodesToScore")
    if not _int(pct) or not 0 <= pct <= 100:
        errs.append(f"percentageOfNodesToScore: Invalid value: {pct}: not in valid range [0-100]")
    ib, mb = d.get("podInitialBackoffSeconds"), d.get("podMaxBackoffSeconds")
    if not _int(ib) or ib <= 0:
        errs.append(f"podInitialBackoffSeconds: Invalid value: {ib}: must be greater than 0")
    if _int(ib) and _int(mb) and mb < ib:
        errs.append(f"podMaxBackoffSeconds: Invalid value: {mb}: must be greater than or equal to "
                    f"PodInitialBackoffSeconds")


def _plan_for(prof: dict[str, Any], registry: Registry, i: int, errs: list[str]) -> dict[str, list[tuple[str, int]]]:
    """kube's expandMultiPointPlugins: overrides, then multiPoint plugins, then other specific ones."""
    plugins = prof.get("plugins") or {}
    mp = plugins.get("multiPoint") or {}
    plan: dict[str, list[tuple[str, int]]] = {}
    mp_names = [e.get("name") for e in mp.get("enabled") or []]
    seen_mp: set[str] = set()
    for n in mp_names:
        if n in seen_mp:
            errs.append(f"profiles[{i}].plugins.multiPoint.enabled: Duplicate value: {go_value(n)}: plugin "
                        f"{go_value(n)} already registered")
        seen_mp.add(n)
    weights: dict[str, int] = {}
    for e in list((plugins.get("score") or {}).get("enabled") or []) + list(mp.get("enabled") or []):
        n = e.get("name")
        if n not in weights:
            w = e.get("weight") or 0
            weights[n] = w if w else 1
    for point in POINTS:
        ps = plugins.get(point) or {}
        disabled = {x.get("name") for x in ps.get("disabled") or []}
        specific = [e.get("name") for e in ps.get("enabled") or []]
        overrides, mp_part = [], []
        if "*" not in disabled:
            for n in mp_names:
                spec = registry.get(n)
                if spec is None or not implements(spec.cls, point) or n in disabled:
                    continue
                if n in specific:
                    continue  # specific config wins: placed with the overrides below
                mp_part.append(n)
        overrides = [n for n in specific if n in mp_names]
        others = [n for n in specific if n not in mp_names]
        names = [*overrides, *mp_part, *others]
        dup = {n for n in names if names.count(n) > 1}
        for n in sorted(dup):
            errs.append(f"profiles[{i}].plugins.{point}.enabled: Duplicate value: {go_value(n)}: repeated config "
                        f"for plugin {n}")
        out = []
        for n in dict.fromkeys(names):
            spec = registry.get(n)
            if spec is None:
                continue  # reported once below
            if not implements(spec.cls, point):
                errs.append(f"profiles[{i}].plugins.{point}.enabled: Invalid value: {go_value(n)}: plugin "
                            f"{go_value(n)} does not extend {point[0].upper()}{point[1:]}Plugin plugin")
                continue
            out.append((n, weights.get(n, 1) if point == "score" else 0))
        plan[point] = out
    return plan


_INT64_MAX = (1 << 63) - 1
MAX_NODE_SCORE = 100


def _wrap64(v: int) -> int:
    """Go's int64 arithmetic: wraps around on overflow."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _check_score_total(prof: dict[str, Any], registry: Registry, i: int, errs: list[str]) -> None:
    """kube's getScoreWeights: score.enabled then multiPoint.enabled, score plugins only, first weight wins,
    0 means 1; `weight*100 > MaxInt64 - total` (in wrapping int64 arithmetic, so a negative weight followed
    by any other score plugin also fails) is "total score of Score plugins could overflow"."""
    plugins = prof.get("plugins") or {}
    entries = [*((plugins.get("score") or {}).get("enabled") or []),
               *((plugins.get("multiPoint") or {}).get("enabled") or [])]
    seen: set[str] = set()
    total = 0
    for e in entries:
        n = e.get("name") if isinstance(e, dict) else None
        spec = registry.get(n) if isinstance(n, str) else None
        if spec is None or n in seen or not implements(spec.cls, "score"):
            continue
        seen.add(n)
        w = e.get("weight") or 1
        if not _int(w):
            return
        if w * MAX_NODE_SCORE > _wrap64(_INT64_MAX - total):
            errs.append(f"profiles[{i}].plugins: Invalid value: total score of Score plugins could overflow")
            return
        total = _wrap64(total + w * MAX_NODE_SCORE)


_NUM = (int, float)
#: integer fields and their Go width; a number outside it is a decoding error in kube-scheduler
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT_WIDTH = {"parallelism": _INT32, "percentageOfNodesToScore": _INT32, "burst": _INT32, "weight": _INT32,
              "podInitialBackoffSeconds": _INT64, "podMaxBackoffSeconds": _INT64}
_TOP_TYPES: dict[str, tuple[type, ...]] = {
    "parallelism": (int,), "percentageOfNodesToScore": (int,), "podInitialBackoffSeconds": (int,),
    "podMaxBackoffSeconds": (int,), "leaderElection": (dict,), "clientConnection": (dict,), "profiles": (list,),
    "extenders": (list,), "enableProfiling": (bool,), "enableContentionProfiling": (bool,),
    "delayCacheUntilActive": (bool,), "apiVersion": (str,), "kind": (str,)}
_LE_TYPES: dict[str, tuple[type, ...]] = {
    "leaderElect": (bool,), "leaseDuration": (str,), "renewDeadline": (str,), "retryPeriod": (str,),
    "resourceLock": (str,), "resourceName": (str,), "resourceNamespace": (str,)}
_CC_TYPES: dict[str, tuple[type, ...]] = {"kubeconfig": (str,), "acceptContentTypes": (str,), "contentType": (str,),
                                          "qps": _NUM, "burst": (int,)}
_TYPE_NAMES = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "object", list: "array"}


def _expect(value: Any, types: tuple[type, ...], path: str, errs: list[str]) -> bool:
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        want = " or ".join(dict.fromkeys(_TYPE_NAMES.get(t, t.__name__) for t in types))
        errs.append(f"{path}: Invalid value: {go_value(value)}: expected {want}")
        return False
    if isinstance(value, float) and not math.isfinite(value):
        errs.append(f"{path}: Invalid value: {value}: not a finite number")
        return False
    width = _INT_WIDTH.get(path.rsplit(".", 1)[-1]) if isinstance(value, int) and not isinstance(value, bool) \
        else None
    if width is not None and not width[0] <= value <= width[1]:
        bits = 32 if width is _INT32 else 64
        errs.append(f"{path}: Invalid value: {value}: out of range of int{bits} "
                    f"(json: cannot unmarshal number {value} into a field of type int{bits})")
        return False
    return ok


def check_types(doc: dict[str, Any], errs: list[str]) -> None:
    """Strict decoding's type errors, reported with field paths before anything reads the values."""
    for key, types in _TOP_TYPES.items():
        if key in doc and doc[key] is not None:
            _expect(doc[key], types, key, errs)
    for section, table in (("leaderElection", _LE_TYPES), ("clientConnection", _CC_TYPES)):
        sec = doc.get(section)
        if isinstance(sec, dict):
            for key, types in table.items():
                if key in sec and sec[key] is not None:
                    _expect(sec[key], types, f"{section}.{key}", errs)
    profiles = doc.get("profiles")
    if not isinstance(profiles, list):
        return
    for i, prof in enumerate(profiles):
        if not _expect(prof, (dict,), f"profiles[{i}]", errs):
            continue
        if prof.get("schedulerName") is not None:
            _expect(prof["schedulerName"], (str,), f"profiles[{i}].schedulerName", errs)
        if prof.get("percentageOfNodesToScore") is not None:
            _expect(prof["percentageOfNodesToScore"], (int,), f"profiles[{i}].percentageOfNodesToScore", errs)
        plugins = prof.get("plugins")
        if plugins is not None and _expect(plugins, (dict,), f"profiles[{i}].plugins", errs):
            for point, ps in plugins.items():
                path = f"profiles[{i}].plugins.{point}"
                if ps is None or not _expect(ps, (dict,), path, errs):
                    continue
                for lst in ("enabled", "disabled"):
                    items = ps.get(lst)
                    if items is None or not _expect(items, (list,), f"{path}.{lst}", errs):
                        continue
                    for j, e in enumerate(items):
                        if not _expect(e, (dict,), f"{path}.{lst}[{j}]", errs):
                            continue
                        if not isinstance(e.get("name"), str) or not e.get("name"):
                            errs.append(f"{path}.{lst}[{j}].name: Required value")
                        if e.get("weight") is not None:
                            _expect(e["weight"], (int,), f"{path}.{lst}[{j}].weight", errs)
        pcs = prof.get("pluginConfig")
        if pcs is not None and _expect(pcs, (list,), f"profiles[{i}].pluginConfig", errs):
            for j, pc in enumerate(pcs):
                path = f"profiles[{i}].pluginConfig[{j}]"
                if not _expect(pc, (dict,), path, errs):
                    continue
                if not isinstance(pc.get("name"), str) or not pc.get("name"):
                    errs.append(f"{path}.name: Required value")
                if pc.get("args") is not None:
                    _expect(pc["args"], (dict,), f"{path}.args", errs)


def build(doc: dict[str, Any], registry: Registry, file: str | None = None,
          notes: list[str] | None = None, feature_gates: dict[str, bool] | None = None) -> SchedulerConfiguration:
    """Validate a decoded document and build the runtime configuration; raises ConfigError."""
    errs: list[str] = []
    check_types(doc, errs)
    if errs:
        raise ConfigError(errs, file)
    # strip explicit nulls: Go decoding leaves such fields at their zero value, which defaulting then fills
    doc = {k: v for k, v in doc.items() if v is not None}
    for section in ("leaderElection", "clientConnection"):
        if isinstance(doc.get(section), dict):
            doc[section] = {k: v for k, v in doc[section].items() if v is not None}
    return _build(doc, registry, file, feature_gates)


def _build(doc: dict[str, Any], registry: Registry, file: str | None = None,
           feature_gates: dict[str, bool] | None = None) -> SchedulerConfiguration:
    from ..plugins import REMOVED_IN_TREE

    errs = check_kind(doc)
    if errs and (errs[0].startswith("kind") or "removed" in errs[0]):
        raise ConfigError(errs, file)
    _unknown(doc, TOP_FIELDS, "", errs)
    _unknown(doc.get("leaderElection"), LE_FIELDS, "leaderElection", errs)
    _unknown(doc.get("clientConnection"), CC_FIELDS, "clientConnection", errs)
    for i, prof in enumerate(doc.get("profiles") or []):
        if not isinstance(prof, dict):
            errs.append(f"profiles[{i}]: Invalid value: expected a mapping")
            continue
        _unknown(prof, PROFILE_FIELDS, f"profiles[{i}]", errs)
        _unknown(prof.get("plugins"), PLUGINS_FIELDS, f"profiles[{i}].plugins", errs)
        for point, ps in (prof.get("plugins") or {}).items():
            _unknown(ps, {"enabled", "disabled"}, f"profiles[{i}].plugins.{point}", errs)
            if point in ("placementGenerate", "placementScore") and isinstance(ps, dict):
                for j, e in enumerate(ps.get("enabled") or []):  # accepting them would be ignoring them
                    name = e.get("name") if isinstance(e, dict) else e
                    errs.append(f"profiles[{i}].plugins.{point}.enabled[{j}]: Unsupported value: {go_value(name)}: "
                                f"ksched does not run the {point} extension point (PodGroup placement, alpha in 1.36)")
    if errs:
        raise ConfigError(errs, file)
    d = default_document(doc, registry, feature_gates)
    validate_top(d, errs)
    cfg = SchedulerConfiguration(raw=d, file=file)
    names_seen: dict[str, int] = {}
    known = ", ".join(registry.names())
    queue_sorts: list[tuple[int, list[str], Any]] = []
    for i, prof in enumerate(d["profiles"]):
        name = prof.get("schedulerName")
        if not name:
            errs.append(f"profiles[{i}].schedulerName: Required value")
        elif name in names_seen:
            errs.append(f'profiles[{i}].schedulerName: Duplicate value: {go_value(name)}')
        else:
            names_seen[name] = i
        ppct = prof.get("percentageOfNodesToScore")
        if ppct is not None and (not _int(ppct) or not 0 <= ppct <= 100):
            errs.append(f"profiles[{i}].percentageOfNodesToScore: Invalid value: {ppct}: not in valid range [0-100]")
        # names are checked in the lists the user wrote, so the index matches their file (the defaulted
        # multiPoint list starts with the default plugins)
        user_profiles = doc.get("profiles") or []
        user_prof = user_profiles[i] if i < len(user_profiles) and isinstance(user_profiles[i], dict) else {}
        for point, ps in (user_prof.get("plugins") or {}).items():
            for j, e in enumerate((ps or {}).get("enabled") or []):
                n = e.get("name")
                path = f"profiles[{i}].plugins.{point}.enabled[{j}]"
                if n in REMOVED_IN_TREE:
                    errs.append(f'{path}: Invalid value: {go_value(n)}: was invalid in version "v1" '
                                f'(KubeSchedulerConfiguration is version "v1")')
                elif n in registry.unsupported:
                    errs.append(f'{path}: Invalid value: {go_value(n)}: {registry.unsupported[n]}')
                elif registry.get(n) is None:
                    errs.append(f'{path}: Invalid value: {go_value(n)}: plugin {go_value(n)} does not exist '
                                f'(known plugins: {known})')
        plan = _plan_for(prof, registry, i, errs)
        _check_score_total(prof, registry, i, errs)
        if len(plan.get("queueSort", [])) != 1:
            errs.append(f"profiles[{i}].plugins.queueSort: Invalid value: only one queue sort plugin required for "
                        f"profile with scheduler name {go_value(name)}, but got {len(plan.get('queueSort', []))}")
        if not plan.get("bind"):
            errs.append(f"profiles[{i}].plugins.bind: Required value: at least one bind plugin is needed for "
                        f"profile with scheduler name {go_value(name)}")
        args: dict[str, object] = {}
        enabled_any = {n for lst in plan.values() for n, _ in lst}
        seen_pc: set[str] = set()
        for j, pc in enumerate(prof.get("pluginConfig") or []):
            pn = pc.get("name") if isinstance(pc, dict) else None
            path = f"profiles[{i}].pluginConfig[{j}]"
            if pn in seen_pc:
                errs.append(f'{path}: Duplicate value: {go_value(pn)}')
                continue
            seen_pc.add(pn)
            if pn in REMOVED_IN_TREE:
                errs.append(f'{path}: Invalid value: {go_value(pn)}: was invalid in version "v1" '
                            f'(KubeSchedulerConfiguration is version "v1")')
                continue
            spec = registry.get(pn or "")
            if spec is None:
                errs.append(f'{path}.name: Invalid value: {go_value(pn)}: args for unknown plugin '
                            f'(known plugins: {known})')
                continue
            raw_args = dict(pc.get("args") or {})
            kind = raw_args.pop("kind", None)
            raw_args.pop("apiVersion", None)
            if kind is not None and kind != f"{pn}Args":
                errs.append(f"{path}.args: Invalid value: args for plugin {pn} were not of type {pn}Args, "
                            f"got {kind}")
                continue
            if spec.args_model is None:
                if raw_args:
                    errs.append(f"{path}.args: Invalid value: plugin {pn} takes no args")
                continue
            if spec.source == "in-tree":
                raw_args = _drop_nulls(raw_args)  # Go decoding leaves null fields at their zero value
            try:
                args[pn] = validate_args(spec.args_model, raw_args)
            except ValidationError as exc:
                errs.extend(translate(exc, f"{path}.args", raw_args))
        for n in enabled_any:
            spec = registry.get(n)
            if n not in args and spec is not None and spec.args_model is not None:
                try:
                    args[n] = spec.args_model()
                except ValidationError as exc:
                    needs = "; ".join(translate(exc, "", {}))
                    errs.append(f"profiles[{i}].pluginConfig: Required value: plugin {n} needs args ({needs})")
        _gate_off_args(enabled_any, args, feature_gates)
        queue_sorts.append((i, [n for n, _ in plan.get("queueSort", [])],
                            args.get(plan["queueSort"][0][0]) if plan.get("queueSort") else None))
        cfg.profiles.append(Profile(name or "", ppct, plan, args))
    from ..extenders.config import decode_extenders, ignored_resources, validate_extenders

    extenders = decode_extenders(doc.get("extenders"), errs)
    errs.extend(validate_extenders(extenders))
    if not errs:
        from ..extenders.client import tls_errors

        errs.extend(tls_errors(extenders))
    if queue_sorts:
        _, first_qs, first_args = queue_sorts[0]
        for i, qs, a in queue_sorts[1:]:
            if qs != first_qs:
                errs.append(f"profiles[{i}].plugins.queueSort: Invalid value: must be the same for all profiles")
            elif a != first_args:
                errs.append(f"profiles[{i}].pluginConfig.args: Invalid value: queueSort must be the same for "
                            f"all profiles")
    if errs:
        raise ConfigError(errs, file)
    ignored = ignored_resources(extenders)
    for i, prof in enumerate(cfg.profiles):  # buildExtenders: these replace NodeResourcesFit's ignoredResources
        if not ignored:
            break
        fit = prof.args.get("NodeResourcesFit")
        if fit is None:
            raise ConfigError([f"profiles[{i}].pluginConfig: Invalid value: extenders[].managedResources with "
                               f"ignoredByScheduler: can't find NodeResourcesFitArgs in plugin config"], file)
        prof.args["NodeResourcesFit"] = fit.model_copy(update={"ignored_resources": list(ignored)})
    cfg.extenders = extenders
    le = d["leaderElection"]
    cfg.leader_election = LeaderElection(bool(le["leaderElect"]), parse_duration(le["leaseDuration"]),
                                         parse_duration(le["renewDeadline"]), parse_duration(le["retryPeriod"]),
                                         le["resourceLock"], le["resourceName"], le["resourceNamespace"])
    cc = d["clientConnection"]
    cfg.client_connection = ClientConnection(cc.get("kubeconfig") or "", float(cc["qps"]), int(cc["burst"]),
                                             cc.get("contentType") or "", cc.get("acceptContentTypes") or "")
    cfg.parallelism = d["parallelism"]
    cfg.percentage_of_nodes_to_score = d["percentageOfNodesToScore"]
    cfg.pod_initial_backoff_seconds = d["podInitialBackoffSeconds"]
    cfg.pod_max_backoff_seconds = d["podMaxBackoffSeconds"]
    return cfg


def load_config(path: str | Path | None, registry: Registry, kubernetes_version: str | None = None,
                feature_gates: dict[str, bool] | None = None) -> SchedulerConfiguration:
    """The runtime configuration from a file, or ksched's default profile when `path` is None;
    `feature_gates` (featuregates.parse_feature_gates) decides the gated default plugins."""
    if path is None:
        return build({"apiVersion": API_VERSION, "kind": KIND}, registry, feature_gates=feature_gates)
    p = Path(path)
    doc = read_document(p)
    return build(doc, registry, str(p), feature_gates=feature_gates)


def _gate_off_args(enabled: set[str], args: dict[str, object], feature_gates: dict[str, bool] | None) -> None:
    """kube builds a gated plugin that the configuration enables while its gate is off, and that instance
    does nothing; ksched tells the plugin so through its args (it takes none from the file)."""
    from ..plugins import GATED_DEFAULTS

    for name, gate in GATED_DEFAULTS.items():
        if name in enabled and not (feature_gates or {}).get(gate, True):
            from ..plugins.nodedeclaredfeatures import FeatureGate

            args[name] = FeatureGate(enabled=False)


def default_config(registry: Registry) -> SchedulerConfiguration:
    return load_config(None, registry)

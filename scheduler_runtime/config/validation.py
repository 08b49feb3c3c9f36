"""Validation of a KubeSchedulerConfiguration document: kind and apiVersion, unknown fields, JSON types and
integer widths, top-level ranges, each profile's plugin plan and its score-weight total.

Follows kube-scheduler v1.36.3 pkg/scheduler/apis/config/validation/validation.go (messages in apimachinery's
field.Error form, `path: Invalid value: ...`) and the strict decoding of its v1 types (unknown fields, an
int32 that overflows). Every function appends one-line errors to `errs`; nothing raises.
"""

from __future__ import annotations

import math
from typing import Any

from ..fielderrors import go_value
from ..framework.plugin import implements
from ..framework.registry import Registry
from .model import API_VERSION, KIND, POINTS, REMOVED_VERSIONS, parse_duration


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


def unknown_fields(obj: Any, allowed: set[str], path: str, errs: list[str]) -> None:
    if not isinstance(obj, dict):
        return
    for k in obj:
        if k not in allowed and not (path == "" and k == "metadata"):
            shown = k if isinstance(k, str) and k.isprintable() else go_value(k)  # no raw newline in a path
            errs.append(f'{path + "." if path else ""}{shown}: unknown field {go_value(k)}')





def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_top(d: dict[str, Any], errs: list[str]) -> None:
    cc = d.get("clientConnection") or {}
    if is_int(cc.get("burst")) and cc["burst"] < 0:
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
    if not is_int(par) or par <= 0:
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
    if not is_int(pct) or not 0 <= pct <= 100:
        errs.append(f"percentageOfNodesToScore: Invalid value: {pct}: not in valid range [0-100]")
    ib, mb = d.get("podInitialBackoffSeconds"), d.get("podMaxBackoffSeconds")
    if not is_int(ib) or ib <= 0:
        errs.append(f"podInitialBackoffSeconds: Invalid value: {ib}: must be greater than 0")
    if is_int(ib) and is_int(mb) and mb < ib:
        errs.append(f"podMaxBackoffSeconds: Invalid value: {mb}: must be greater than or equal to "
                    f"PodInitialBackoffSeconds")


def plan_for(prof: dict[str, Any], registry: Registry, i: int, errs: list[str]) -> dict[str, list[tuple[str, int]]]:
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


def check_score_total(prof: dict[str, Any], registry: Registry, i: int, errs: list[str]) -> None:
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
        if not is_int(w):
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



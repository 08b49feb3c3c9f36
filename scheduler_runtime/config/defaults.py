"""Defaulting of a KubeSchedulerConfiguration document: the default plugin set merged with the profile's
enabled/disabled lists, multiPoint expansion, pluginConfig args defaulted through their pydantic models.

Follows kube-scheduler v1.37.2 pkg/scheduler/apis/config/v1/defaults.go and default_plugins.go
(mergePlugins: a disabled "*" drops the defaults, enabled plugins are appended or reweighted in place).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from ..framework.registry import Registry
from .model import ALL_POINTS, API_VERSION, KIND, UNRUN_POINTS, zero_duration


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
    """The defaulted v1 document, as `kube-scheduler --write-config-to` writes it."""
    d = copy.deepcopy(doc)
    d.setdefault("apiVersion", API_VERSION)
    d.setdefault("kind", KIND)
    d.setdefault("parallelism", 16)
    le = d["leaderElection"] = d.get("leaderElection") or {}
    le.setdefault("leaderElect", True)
    for k, dflt in (("leaseDuration", "15s"), ("renewDeadline", "10s"), ("retryPeriod", "2s")):
        if zero_duration(le.get(k)):  # metav1.Duration is not a pointer: zero means unset
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
        # the PodGroup points ksched does not run still keep what the user disabled there (kube's mergePlugins)
        for point in [*ALL_POINTS, *(p for p in UNRUN_POINTS if p in plugins)]:
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
                args = _with_nulls(spec.args_model, validate_args(spec.args_model, {}, feature_gates).model_dump(
                    by_alias=True, mode="json", exclude_none=True))
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
                        full = validate_args(spec.args_model, drop_nulls(
                            {k: v for k, v in pc["args"].items() if k not in ("apiVersion", "kind")}
                        ), feature_gates).model_dump(by_alias=True, mode="json", exclude_none=True)
                        full = _with_nulls(spec.args_model, full)
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


def validate_args(model: Any, raw: dict[str, Any], feature_gates: dict[str, bool] | None = None) -> Any:
    """Args as kube's strict decoding reads them: camelCase keys only (a Python field name is an unknown field).
    kube defaults and validates some args by the effective feature gates: the models read them from the
    validation context (plugins.gates.GATES_CONTEXT)."""
    from ..plugins.gates import GATES_CONTEXT

    context = {GATES_CONTEXT: feature_gates} if feature_gates is not None else None
    try:
        return model.model_validate(raw, by_alias=True, by_name=False, context=context)
    except TypeError:  # a user's model that is not a pydantic v2.11+ BaseModel
        return model.model_validate(raw)


def _with_nulls(model: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Args as kube writes them: a pointer field without `omitempty` (the model's WRITTEN_WHEN_NULL) appears as
    null when unset, e.g. DynamicResourcesArgs' filterTimeout with DRASchedulerFilterTimeout off."""
    for key in getattr(model, "WRITTEN_WHEN_NULL", ()):
        args.setdefault(key, None)
    return args


def drop_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [drop_nulls(v) for v in obj]
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



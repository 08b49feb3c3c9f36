"""KubeSchedulerConfiguration v1: read, default (`defaults.py`), validate (`validation.py`) and expand into the
runtime's `SchedulerConfiguration` (`model.py`) with per-profile plugin plans.

Follows kube-scheduler v1.37.2 cmd/kube-scheduler/app/options (loadConfigFromFile: decode, default, validate)
and pkg/scheduler/apis/config/v1; with gates of an earlier minor (`--emulated-version`, `config validate
--kubernetes-version`) that minor's Plugins fields and default plugin order. The names other modules import
from here are re-exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import yamlio
from ..fielderrors import go_value, translate
from ..framework.registry import Registry
from .defaults import default_document, drop_nulls, validate_args
from .model import (
    ALL_POINTS,
    API_VERSION,
    CC_FIELDS,
    KIND,
    LE_FIELDS,
    PLUGINS_FIELDS,
    POINTS,
    PROFILE_FIELDS,
    REMOVED_VERSIONS,
    TOP_FIELDS,
    UNRUN_POINTS,
    ClientConnection,
    ConfigError,
    LeaderElection,
    Profile,
    SchedulerConfiguration,
    format_duration,
    parse_duration,
    plugins_fields,
)
from .validation import check_kind, check_score_total, check_types, is_int, plan_for, unknown_fields, validate_top

__all__ = ["ALL_POINTS", "API_VERSION", "CC_FIELDS", "KIND", "LE_FIELDS", "PLUGINS_FIELDS", "POINTS",
           "PROFILE_FIELDS", "REMOVED_VERSIONS", "TOP_FIELDS", "ClientConnection", "ConfigError", "LeaderElection",
           "Profile", "SchedulerConfiguration", "build", "check_kind", "check_types", "default_config",
           "default_document", "format_duration", "load_config", "parse_duration", "read_document", "validate_args",
           "validate_top"]


def read_document(path: Path, what: str = "a KubeSchedulerConfiguration") -> dict[str, Any]:
    """The one YAML mapping in `path`; every refusal is an I/O or parse problem (exit 2) naming the file."""
    return yamlio.load_file_one(path, what=f"{what} mapping")


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
    from ..featuregates import emulated_minor
    from ..plugins import REMOVED_IN_TREE

    minor = emulated_minor(feature_gates)
    errs = check_kind(doc)
    if errs and (errs[0].startswith("kind") or "removed" in errs[0]):
        raise ConfigError(errs, file)
    unknown_fields(doc, TOP_FIELDS, "", errs)
    unknown_fields(doc.get("leaderElection"), LE_FIELDS, "leaderElection", errs)
    unknown_fields(doc.get("clientConnection"), CC_FIELDS, "clientConnection", errs)
    for i, prof in enumerate(doc.get("profiles") or []):
        if not isinstance(prof, dict):
            errs.append(f"profiles[{i}]: Invalid value: expected a mapping")
            continue
        unknown_fields(prof, PROFILE_FIELDS, f"profiles[{i}]", errs)
        unknown_fields(prof.get("plugins"), plugins_fields(minor), f"profiles[{i}].plugins", errs)
        for point, ps in (prof.get("plugins") or {}).items():
            unknown_fields(ps, {"enabled", "disabled"}, f"profiles[{i}].plugins.{point}", errs)
            if point in UNRUN_POINTS and isinstance(ps, dict):
                for j, e in enumerate(ps.get("enabled") or []):  # accepting them would be ignoring them
                    name = e.get("name") if isinstance(e, dict) else e
                    errs.append(f"profiles[{i}].plugins.{point}.enabled[{j}]: Unsupported value: {go_value(name)}: "
                                f"ksched does not run the {point} extension point (PodGroup scheduling of the "
                                f"GenericWorkload gate, off by default)")
    if errs:
        raise ConfigError(errs, file)
    d = default_document(doc, registry, feature_gates)
    validate_top(d, errs)
    cfg = SchedulerConfiguration(raw=d, file=file, kube_minor=minor, feature_gates=feature_gates)
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
        if ppct is not None and (not is_int(ppct) or not 0 <= ppct <= 100):
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
        plan = plan_for(prof, registry, i, errs)
        check_score_total(prof, registry, i, errs)
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
                raw_args = drop_nulls(raw_args)  # Go decoding leaves null fields at their zero value
            try:
                args[pn] = validate_args(spec.args_model, raw_args, feature_gates)
            except ValidationError as exc:
                errs.extend(translate(exc, f"{path}.args", raw_args))
        for n in enabled_any:
            spec = registry.get(n)
            if n not in args and spec is not None and spec.args_model is not None:
                try:
                    args[n] = validate_args(spec.args_model, {}, feature_gates)
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
    from ..plugins import GATE_READERS, GATED_DEFAULTS

    for name, gate in GATED_DEFAULTS.items():
        if name in enabled and not (feature_gates or {}).get(gate, True):
            from ..plugins.nodedeclaredfeatures import FeatureGate

            args[name] = FeatureGate(enabled=False)
    if feature_gates is not None:
        from ..plugins.gates import PluginFeatures

        for name in GATE_READERS:  # arg-less plugins that read gates: handed them as their args
            if name in enabled and name not in args:
                args[name] = PluginFeatures(dict(feature_gates))


def default_config(registry: Registry) -> SchedulerConfiguration:
    return load_config(None, registry)

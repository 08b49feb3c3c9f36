"""Convert v1beta1/v1beta2/v1beta3 KubeSchedulerConfiguration files to v1, reporting every change."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..fielderrors import go_value
from .loader import API_VERSION, REMOVED_VERSIONS, check_types

#: plugins removed from kube-scheduler before v1, with what replaces them
REMOVED_PLUGINS = {
    "NodeLabel": "use NodeAffinity (required/preferred node affinity)",
    "ServiceAffinity": "use InterPodAffinity",
    "NodePreferAvoidPods": "removed without replacement (the annotation is no longer honoured)",
    "SelectorSpread": "PodTopologySpread's system default constraints replace it",
    "AzureDiskLimits": "use NodeVolumeLimits (CSI)",
    "CinderLimits": "use NodeVolumeLimits (CSI)",
    "EBSLimits": "use NodeVolumeLimits (CSI)",
    "GCEPDLimits": "use NodeVolumeLimits (CSI)",
}
#: v1beta1 score plugins folded into NodeResourcesFit's scoringStrategy
FIT_STRATEGIES = {"NodeResourcesLeastAllocated": "LeastAllocated", "NodeResourcesMostAllocated": "MostAllocated",
                  "RequestedToCapacityRatio": "RequestedToCapacityRatio"}
RENAMED = {"DefaultPodTopologySpread": "PodTopologySpread"}
#: args fields removed across versions: (plugin, field) -> advice
REMOVED_ARGS = {
    ("Coscheduling", "deniedPGExpirationTimeSeconds"): "removed upstream; use podGroupBackoffSeconds to keep a "
                                                       "failed gang from retrying at once",
    ("Coscheduling", "kubeConfigPath"): "removed: the plugin uses the scheduler's own client",
    ("Coscheduling", "kubeMaster"): "removed: the plugin uses the scheduler's own client",
    ("NodeResourcesFit", "ignoredResources"): None,
}


@dataclass
class Migration:
    doc: dict[str, Any]
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _plugin_sets(profile: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(point, ps) for point, ps in (profile.get("plugins") or {}).items() if isinstance(ps, dict)]


def migrate(doc: dict[str, Any]) -> Migration:
    """Raises ValueError when the document is not a KubeSchedulerConfiguration of a known version, or when
    a field has a type no version's decoder accepts (a list where profiles[0].plugins belongs ...)."""
    errs: list[str] = []
    check_types(doc, errs)
    if errs:
        more = f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""
        raise ValueError(errs[0] + more)
    if doc.get("kind") != "KubeSchedulerConfiguration":
        raise ValueError(f"kind: expected KubeSchedulerConfiguration, got {go_value(doc.get('kind'))}")
    api = doc.get("apiVersion") or ""
    ver = api.split("/", 1)[1] if "/" in api else ""
    m = Migration(copy.deepcopy(doc))
    d = m.doc
    if api == API_VERSION:
        return m
    if ver not in REMOVED_VERSIONS:
        raise ValueError(f"apiVersion: unknown version {go_value(api)}")
    d["apiVersion"] = API_VERSION
    m.changes.append(f"apiVersion: {api} -> {API_VERSION} ({ver} was removed in Kubernetes {REMOVED_VERSIONS[ver]})")
    for key in ("healthzBindAddress", "metricsBindAddress"):
        if key in d:
            m.changes.append(f"{key}: removed (v1 serves health and metrics on the secure port 10259)")
            del d[key]
    for i, prof in enumerate(d.get("profiles") or []):
        if not isinstance(prof, dict):
            continue
        fit_moves: dict[str, Any] = {}
        for point, ps in _plugin_sets(prof):
            for lst_name in ("enabled", "disabled"):
                lst = ps.get(lst_name) or []
                out = []
                for j, e in enumerate(lst):
                    name = e.get("name") if isinstance(e, dict) else None
                    path = f"profiles[{i}].plugins.{point}.{lst_name}[{j}]"
                    if name in REMOVED_PLUGINS:
                        m.changes.append(f"{path}: removed plugin {name} ({REMOVED_PLUGINS[name]})")
                        continue
                    if name in RENAMED:
                        m.changes.append(f"{path}: {name} renamed to {RENAMED[name]}")
                        e = {**e, "name": RENAMED[name]}
                    if name in FIT_STRATEGIES:
                        if lst_name == "enabled":
                            fit_moves[name] = e.get("weight")
                            m.changes.append(f"{path}: {name} folded into NodeResourcesFit "
                                             f"scoringStrategy.type={FIT_STRATEGIES[name]}")
                            e = {"name": "NodeResourcesFit", **({"weight": e["weight"]} if e.get("weight") else {})}
                            if any(x.get("name") == "NodeResourcesFit" for x in out):
                                continue
                        else:
                            m.changes.append(f"{path}: {name} no longer exists; dropped from disabled")
                            continue
                    out.append(e)
                if lst:
                    ps[lst_name] = out
        pcs = prof.get("pluginConfig") or []
        new_pcs: list[Any] = []
        fit_args: dict[str, Any] | None = None  # the NodeResourcesFit args the strategy lands in
        for j, pc in enumerate(pcs):
            if not isinstance(pc, dict):
                new_pcs.append(pc)
                continue
            name = pc.get("name")
            path = f"profiles[{i}].pluginConfig[{j}]"
            if name in REMOVED_PLUGINS:
                m.changes.append(f"{path}: args of removed plugin {name} dropped")
                continue
            args = dict(pc.get("args") or {})
            if "apiVersion" in args:
                args["apiVersion"] = API_VERSION
            if name in FIT_STRATEGIES:
                strategy: dict[str, Any] = {"type": FIT_STRATEGIES[name]}
                res = args.get("resources")
                if res:
                    strategy["resources"] = res
                if name == "RequestedToCapacityRatio" and args.get("shape"):
                    strategy["requestedToCapacityRatio"] = {"shape": args["shape"]}
                m.changes.append(f"{path}: {name}Args moved to NodeResourcesFit args.scoringStrategy")
                fit_args = _fit_args(new_pcs, fit_args)
                fit_args["scoringStrategy"] = strategy
                continue
            if name in RENAMED:
                m.changes.append(f"{path}: {name} renamed to {RENAMED[name]}")
                name = RENAMED[name]
            for (plugin, key), advice in REMOVED_ARGS.items():
                if plugin == name and key in args and advice:
                    del args[key]
                    m.warnings.append(f"{path}.args.{key}: {advice}")
            if name == "NodeResourcesFit" and fit_args is not None:  # strategy moved here before: one entry
                fit_args.update({k: v for k, v in args.items() if k != "scoringStrategy" or k not in fit_args})
                continue
            new_pcs.append({**pc, "name": name, "args": args} if "args" in pc else {**pc, "name": name})
            if name == "NodeResourcesFit":
                fit_args = new_pcs[-1].setdefault("args", args)
        _carry_strategy(fit_moves, new_pcs, fit_args, i, m)
        if new_pcs or pcs:
            prof["pluginConfig"] = new_pcs
    return m


def _fit_args(pcs: list[Any], current: dict[str, Any] | None) -> dict[str, Any]:
    """The args mapping of the profile's NodeResourcesFit entry, created (once) when there is none yet."""
    if current is not None:
        return current
    entry: dict[str, Any] = {"name": "NodeResourcesFit", "args": {}}
    pcs.append(entry)
    args: dict[str, Any] = entry["args"]
    return args


def _carry_strategy(fit_moves: dict[str, Any], pcs: list[Any], fit_args: dict[str, Any] | None, i: int,
                    m: Migration) -> None:
    """A v1beta1 score plugin folded into NodeResourcesFit without args of its own still sets the strategy
    type (NodeResourcesMostAllocated enabled alone means MostAllocated, not v1's LeastAllocated default)."""
    if not fit_moves:
        return
    types = [FIT_STRATEGIES[n] for n in fit_moves]
    if len(set(types)) > 1:
        m.warnings.append(f"profiles[{i}].plugins: {' and '.join(fit_moves)} were both enabled; v1 has one "
                          f"NodeResourcesFit scoringStrategy: {types[-1]} is kept")
    args = _fit_args(pcs, fit_args)
    strategy = args.setdefault("scoringStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = types[-1]
        m.changes.append(f"profiles[{i}].pluginConfig: NodeResourcesFit args.scoringStrategy.type set to "
                         f"{types[-1]} (from the enabled {list(fit_moves)[-1]})")

"""In-tree plugins: kube-scheduler's default profile, re-implemented in Python with its formulas."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..framework.plugin import Plugin

# (module, class) in kube-scheduler's default multiPoint order
_IN_TREE: list[tuple[str, str]] = [
    ("schedulinggates", "SchedulingGates"),
    ("queuesort", "PrioritySort"),
    ("nodeunschedulable", "NodeUnschedulable"),
    ("nodename", "NodeName"),
    ("tainttoleration", "TaintToleration"),
    ("nodeaffinity", "NodeAffinity"),
    ("nodeports", "NodePorts"),
    ("noderesources", "NodeResourcesFit"),
    ("volume.volumerestrictions", "VolumeRestrictions"),
    ("volume.nodevolumelimits", "NodeVolumeLimits"),
    ("volume.volumebinding", "VolumeBinding"),
    ("volume.volumezone", "VolumeZone"),
    ("podtopologyspread", "PodTopologySpread"),
    ("interpodaffinity", "InterPodAffinity"),
    ("dynamicresources", "DynamicResources"),
    ("defaultpreemption", "DefaultPreemption"),
    ("noderesources", "NodeResourcesBalancedAllocation"),
    ("imagelocality", "ImageLocality"),
    ("defaultbinder", "DefaultBinder"),
    ("nodedeclaredfeatures", "NodeDeclaredFeatures"),
]

#: kube-scheduler v1.37 default multiPoint plugins with their weights (score plugins only).
#: DynamicResources sits right before DefaultPreemption, as kube's applyFeatureGates puts it;
#: NodeDeclaredFeatures comes last, appended by applyFeatureGates while its gate is on (GATED_DEFAULTS).
#: VolumeBinding implements Score, so the expansion gives it weight 1 as kube's does; it scores only with the
#: StorageCapacityScoring gate on (alpha and off in 1.36, beta and on in 1.37), else its PreScore skips.
DEFAULT_MULTIPOINT: list[tuple[str, int | None]] = [
    ("SchedulingGates", None), ("PrioritySort", None), ("NodeName", None), ("NodeUnschedulable", None),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", None), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None), ("NodeVolumeLimits", None),
    ("VolumeBinding", None), ("VolumeZone", None),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
]
#: kube 1.35 and 1.36 list NodeUnschedulable before NodeName (1.37 swapped them); the rest is the same
_BEFORE_1_37 = {"NodeName": "NodeUnschedulable", "NodeUnschedulable": "NodeName"}

#: default plugins kube-scheduler adds only while a feature gate is on: plugin -> gate
GATED_DEFAULTS: dict[str, str] = {"NodeDeclaredFeatures": "NodeDeclaredFeatures"}
#: in-tree plugins without args that read feature gates (built with a gates.PluginFeatures as their args)
GATE_READERS: frozenset[str] = frozenset({"NodeVolumeLimits"})


def default_multipoint(feature_gates: dict[str, bool] | None = None) -> list[tuple[str, int | None]]:
    """The default multiPoint list of the minor `feature_gates` emulate (featuregates.FeatureGates; plain
    gates or None: the pinned minor), without the plugins whose gate is off there."""
    from ..featuregates import default_gates, emulated_minor

    minor = emulated_minor(feature_gates)
    gates = feature_gates if feature_gates is not None else default_gates(minor)
    out = [(n, w) for n, w in DEFAULT_MULTIPOINT if gates.get(GATED_DEFAULTS.get(n, ""), True)]
    if minor in ("1.35", "1.36"):
        out = [(_BEFORE_1_37.get(n, n), w) for n, w in out]
    return out

UNSUPPORTED_IN_TREE: dict[str, str] = {
    "GangScheduling": "the alpha GangScheduling plugin is not supported by ksched; use Coscheduling",
    "TopologyPlacement": "PodGroup placement plugins are not supported by ksched yet",
    "PodGroupPodsCount": "PodGroup placement plugins are not supported by ksched yet",
}

#: removed from kube-scheduler; configs naming them are invalid in v1
REMOVED_IN_TREE = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")


def in_tree() -> list[type[Plugin]]:
    """Import lazily so a plugin module can be used (and tested) on its own."""
    out = []
    for mod, cls in _IN_TREE:
        module = importlib.import_module(f"{__name__}.{mod}")
        out.append(getattr(module, cls))
    return out


def __getattr__(name: str) -> object:
    if name == "IN_TREE":
        return in_tree()
    raise AttributeError(name)

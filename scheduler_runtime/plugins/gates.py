"""The feature gates in-tree plugins read, as kube hands them to plugin constructors (feature.Features).

Upstream: kube-scheduler v1.37.2, pkg/scheduler/framework/plugins/feature/feature.go.

kube defaults and validates plugin args, and builds plugins, with the effective `--feature-gates`. ksched's
config loader validates args with the effective gates in pydantic's validation context (`GATES_CONTEXT`) and
hands arg-less gated plugins a `PluginFeatures`; args or plugins built without them (tests, a plugin's own
default args) see the binary's defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: key of the effective gates (name -> bool) in pydantic's validation context
GATES_CONTEXT = "feature_gates"


@functools.cache
def _defaults() -> dict[str, bool]:
    from ..featuregates import parse_feature_gates

    return parse_feature_gates([])


def enabled(name: str, gates: Mapping[str, bool] | None = None) -> bool:
    """Whether gate `name` is on in `gates`, else (absent or no gates given) by the binary's default."""
    if gates is not None and name in gates:
        return bool(gates[name])
    return bool(_defaults().get(name, False))


def from_context(name: str, context: Any) -> bool:
    """`enabled` for the gates a pydantic validation context carries (None: the binary's defaults)."""
    gates = context.get(GATES_CONTEXT) if isinstance(context, Mapping) else None
    return enabled(name, gates)


@dataclass(frozen=True)
class PluginFeatures:
    """The gates an in-tree plugin without args of its own is built with (the loader passes them as args)."""

    gates: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        return enabled(name, self.gates)


def features_of(args: Any) -> PluginFeatures:
    """The PluginFeatures a plugin was built with, or the binary's defaults."""
    return args if isinstance(args, PluginFeatures) else PluginFeatures()

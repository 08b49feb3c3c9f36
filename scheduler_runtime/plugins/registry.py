"""The registry a scheduler starts with: the in-tree plugins, then out-of-tree ones (entry points, folders).

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/plugins/registry.go (NewInTreeRegistry) merged with
the out-of-tree registry as cmd/kube-scheduler/app/server.go does (app.WithPlugin: an out-of-tree plugin may
not reuse an in-tree name). Here, not in `framework.registry`, because the framework must not import the
plugins built on it.
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import cast

from ..errors import KschedError
from ..framework.plugin import Plugin
from ..framework.registry import ENTRY_POINT_GROUP, Registry, load_plugin_dir, plugin_classes
from ..framework.signatures import check_plugin_class
from . import IN_TREE, UNSUPPORTED_IN_TREE


def build_registry(plugin_dirs: list[Path] | None = None, entry_points_enabled: bool = True) -> Registry:
    """In-tree plugins first; out-of-tree ones may not reuse an in-tree name."""
    reg = Registry(unsupported=dict(UNSUPPORTED_IN_TREE))
    for cls in cast("list[type[Plugin]]", IN_TREE):  # plugins/__init__ builds it lazily (module __getattr__)
        reg.register(cls, "in-tree")
    if entry_points_enabled:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:
                raise KschedError(f"entry point {ep.name} ({ep.value}): cannot import: {exc}", usage=False) from exc
            classes = [cast(type[Plugin], obj)] if inspect.isclass(obj) else plugin_classes(cast(ModuleType, obj))
            dist = ep.dist.name if ep.dist is not None else "?"
            for cls in classes:
                check_plugin_class(cls)
                reg.register(cls, f"entry-point:{dist}")
    for d in plugin_dirs or []:
        for cls, src in load_plugin_dir(Path(d), reg.warnings):
            reg.register(cls, src)
    return reg

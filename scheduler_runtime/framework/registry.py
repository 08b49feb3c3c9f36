"""Plugin registry: in-tree plugins, the `ksched.plugins` entry-point group, and plugin folders."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from ..errors import KschedError
from .plugin import Plugin, extension_points_of

ENTRY_POINT_GROUP = "ksched.plugins"


@dataclass(slots=True)
class PluginSpec:
    name: str
    cls: type[Plugin]
    source: str  # "in-tree", "entry-point:<dist>", or the plugin folder path

    @property
    def extension_points(self) -> list[str]:
        return extension_points_of(self.cls)

    @property
    def args_model(self):  # noqa: ANN201 - pydantic model class or None
        return self.cls.args_model


@dataclass
class Registry:
    plugins: dict[str, PluginSpec] = field(default_factory=dict)
    #: names of in-tree kube-scheduler plugins ksched does not implement (volume, DRA ...)
    unsupported: dict[str, str] = field(default_factory=dict)

    def register(self, cls: type[Plugin], source: str) -> None:
        name = getattr(cls, "name", "")
        if not name:
            raise KschedError(f"{source}: plugin class {cls.__qualname__} has no `name`")
        existing = self.plugins.get(name)
        if existing is not None and existing.cls is not cls:
            raise KschedError(f"plugin {name!r} from {source} clashes with the one from {existing.source}")
        self.plugins[name] = PluginSpec(name, cls, source)

    def get(self, name: str) -> PluginSpec | None:
        return self.plugins.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.plugins

    def names(self) -> list[str]:
        return sorted(self.plugins)


def _plugin_classes(module: ModuleType) -> list[type[Plugin]]:
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, Plugin) and obj is not Plugin and obj.__module__ == module.__name__
            and getattr(obj, "name", "")]


def load_plugin_dir(directory: Path) -> list[tuple[type[Plugin], str]]:
    """Import every plugin package in `directory` (a sub-folder with __init__.py or plugin.py)."""
    found: list[tuple[type[Plugin], str]] = []
    if not directory.is_dir():
        return found
    for sub in sorted(directory.iterdir()):
        if not sub.is_dir() or sub.name.startswith((".", "_")):
            continue
        init = sub / "__init__.py"
        entry = init if init.exists() else sub / "plugin.py"
        if not entry.exists():
            continue
        mod_name = f"ksched_user_plugins.{sub.name}"
        if mod_name in sys.modules:
            module = sys.modules[mod_name]
        else:
            if "ksched_user_plugins" not in sys.modules:
                pkg = ModuleType("ksched_user_plugins")
                pkg.__path__ = []  # type: ignore[attr-defined]
                sys.modules["ksched_user_plugins"] = pkg
            spec = importlib.util.spec_from_file_location(
                mod_name, entry, submodule_search_locations=[str(sub)] if entry == init else None)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[mod_name]
                raise KschedError(f"{entry}: cannot import plugin: {type(exc).__name__}: {exc}") from exc
        classes = _plugin_classes(module)
        for sub_mod in list(sys.modules.values()):
            if getattr(sub_mod, "__name__", "").startswith(mod_name + "."):
                classes += _plugin_classes(sub_mod)
        found += [(c, str(sub)) for c in classes]
    return found


def build_registry(plugin_dirs: list[Path] | None = None, entry_points_enabled: bool = True) -> Registry:
    """In-tree plugins first; out-of-tree ones may not reuse an in-tree name."""
    from ..plugins import IN_TREE, UNSUPPORTED_IN_TREE

    reg = Registry(unsupported=dict(UNSUPPORTED_IN_TREE))
    for cls in IN_TREE:
        reg.register(cls, "in-tree")
    if entry_points_enabled:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:
                raise KschedError(f"entry point {ep.name} ({ep.value}): cannot import: {exc}") from exc
            classes = [obj] if inspect.isclass(obj) else _plugin_classes(obj)
            dist = ep.dist.name if ep.dist is not None else "?"
            for cls in classes:
                reg.register(cls, f"entry-point:{dist}")
    for d in plugin_dirs or []:
        for cls, src in load_plugin_dir(Path(d)):
            reg.register(cls, src)
    return reg

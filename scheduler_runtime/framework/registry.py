"""Plugin registry: in-tree plugins, the `ksched.plugins` entry-point group, and plugin folders."""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ..errors import KschedError
from .plugin import Plugin, extension_points_of
from .signatures import check_plugin_class

if TYPE_CHECKING:
    from .interface import Handle

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
    def args_model(self) -> type[BaseModel] | None:
        return self.cls.args_model

    def instantiate(self, args: object, handle: Handle | None) -> Plugin:
        """A new instance; a constructor that raises is reported as kube-scheduler does:
        `initializing plugin "Name": <error>`."""
        try:
            return self.cls(args, handle)
        except Exception as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise KschedError(f'initializing plugin "{self.name}": {detail}', usage=False) from exc


@dataclass
class Registry:
    plugins: dict[str, PluginSpec] = field(default_factory=dict)
    #: names of in-tree kube-scheduler plugins ksched does not implement (volume, DRA ...)
    unsupported: dict[str, str] = field(default_factory=dict)
    #: plugin folders that were skipped, with why (the CLI prints each once on stderr)
    warnings: list[str] = field(default_factory=list)

    def register(self, cls: type[Plugin], source: str) -> None:
        name = getattr(cls, "name", "")
        if not name:
            raise KschedError(f"{source}: plugin class {cls.__qualname__} has no `name`", usage=False)
        existing = self.plugins.get(name)
        if existing is not None and existing.cls is not cls:
            raise KschedError(f"plugin {name!r} from {source} clashes with the one from {existing.source}", usage=False)
        self.plugins[name] = PluginSpec(name, cls, source)

    def get(self, name: str) -> PluginSpec | None:
        return self.plugins.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.plugins

    def names(self) -> list[str]:
        return sorted(self.plugins)


def plugin_classes(module: ModuleType) -> list[type[Plugin]]:
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, Plugin) and obj is not Plugin and obj.__module__ == module.__name__
            and bool(getattr(obj, "name", ""))]


def _where_raised(exc: BaseException, folder: Path) -> str | None:
    """`file:line` of the innermost frame inside `folder` (for a SyntaxError, the offending line)."""
    root = folder.resolve()

    def inside(filename: str | None) -> bool:
        if not filename:
            return False
        try:
            return Path(filename).resolve().is_relative_to(root)
        except (OSError, ValueError):
            return False

    if isinstance(exc, SyntaxError) and exc.filename and inside(exc.filename) and exc.lineno:
        return f"{_shown(exc.filename, folder)}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if inside(f.filename)]
    if frames:
        return f"{_shown(frames[-1].filename, folder)}:{frames[-1].lineno}"
    return None


def _shown(filename: str, folder: Path) -> str:
    """The file as the user named the folder (relative stays relative)."""
    try:
        return str(folder / Path(filename).resolve().relative_to(folder.resolve()))
    except ValueError:
        return filename


def load_plugin_dir(directory: Path, warnings: list[str] | None = None,
                    on_import_error: Callable[[KschedError], None] | None = None) -> list[tuple[type[Plugin], str]]:
    """Import every plugin package in `directory` (a sub-folder with __init__.py or plugin.py) and check
    its plugin classes' extension-point signatures.

    A sub-folder with Python files that yields no plugin is skipped with a note in `warnings`. A package
    that fails to import raises, or, with `on_import_error`, is reported to it and skipped (`ksched build`:
    a requirement may exist only in the image)."""
    found: list[tuple[type[Plugin], str]] = []
    if not directory.is_dir():
        return found
    for sub in sorted(directory.iterdir()):
        if not sub.is_dir() or sub.name.startswith((".", "_")):
            continue
        init = sub / "__init__.py"
        entry = init if init.exists() else sub / "plugin.py"
        if not entry.exists():
            if warnings is not None and any(sub.glob("*.py")):
                warnings.append(f"{sub}: has Python files but neither __init__.py nor plugin.py; skipped")
            continue
        mod_name = f"ksched_user_plugins.{sub.name}"
        if mod_name in sys.modules:
            module = sys.modules[mod_name]
        else:
            if "ksched_user_plugins" not in sys.modules:
                # a namespace for the folders' packages: a package spec with no search path of its own
                pkg = importlib.util.module_from_spec(
                    importlib.machinery.ModuleSpec("ksched_user_plugins", None, is_package=True))
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
                for name in [m for m in sys.modules if m.startswith(mod_name + ".")]:
                    del sys.modules[name]
                where = _where_raised(exc, sub) or str(entry)
                detail = " ".join(str(exc).split())
                err = KschedError(f"{where}: cannot import plugin {sub.name}: {type(exc).__name__}"
                                  + (f": {detail}" if detail else ""), usage=False)
                if on_import_error is None:
                    raise err from exc
                err.__cause__ = exc
                on_import_error(err)
                continue
        classes = plugin_classes(module)
        for sub_mod in list(sys.modules.values()):
            if getattr(sub_mod, "__name__", "").startswith(mod_name + "."):
                classes += plugin_classes(sub_mod)
        if not classes and warnings is not None:
            unnamed = [obj.__qualname__ for _, obj in inspect.getmembers(module, inspect.isclass)
                       if issubclass(obj, Plugin) and obj is not Plugin and obj.__module__ == module.__name__]
            why = (f"Plugin subclass {', '.join(unnamed)} has no `name`" if unnamed
                   else f"{entry.name} defines no Plugin subclass")
            warnings.append(f"{sub}: {why}; skipped")
        for c in classes:  # a method the framework could not call is refused now, not when a pod reaches it
            check_plugin_class(c, functools.partial(_shown, folder=sub))
        found += [(c, str(sub)) for c in classes]
    return found

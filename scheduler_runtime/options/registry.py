"""The plugin registry for --plugin-dir, chosen the same way by every command and the drop-in binary."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..framework.registry import Registry
from ..plugins.registry import build_registry

#: the seed plugins shipped beside the runtime (a source checkout or the image's /app)
BUNDLED_PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
#: used when no --plugin-dir is given and the folder exists in the working directory
DEFAULT_PLUGIN_DIR = Path("plugins")


def load_registry(plugin_dirs: list[Path] | None) -> Registry:
    """In-tree plugins, the given folders (default ./plugins when it exists), the bundled seed plugins and
    entry points. A folder that is missing or not a directory is a usage error."""
    dirs = list(plugin_dirs) if plugin_dirs else ([DEFAULT_PLUGIN_DIR] if DEFAULT_PLUGIN_DIR.is_dir() else [])
    for d in dirs:
        if not d.exists():
            raise InputError("plugin folder does not exist", file=str(d), usage=True)
        if not d.is_dir():
            raise InputError("not a directory: --plugin-dir names a folder of plugin packages", file=str(d),
                             usage=True)
    if BUNDLED_PLUGINS.is_dir() and all(d.resolve() != BUNDLED_PLUGINS.resolve() for d in dirs):
        dirs.append(BUNDLED_PLUGINS)
    return build_registry(dirs)

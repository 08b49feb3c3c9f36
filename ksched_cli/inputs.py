"""What several commands read, loaded the same way everywhere: the plugin registry, a config file, input
paths, and the options they share (--plugin-dir, --plugin-deadline)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scheduler_runtime.errors import InputError, UsageError
from scheduler_runtime.yamlio import STDIN

from .guard import warn

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
DEFAULT_PLUGIN_DIR = Path("plugins")

PluginDeadlineOpt = Annotated[str, typer.Option(
    "--plugin-deadline", help="How long a plugin may run in one cycle before it is named in the log "
                              "(Go duration); a binding cycle past it no longer holds up other pods. 0 disables.")]
PluginDirOpt = Annotated[list[Path] | None, typer.Option(
    "--plugin-dir", help="Folder of plugin packages (repeatable). Default: ./plugins when it exists.")]

_WARNED: set[str] = set()


def registry(plugin_dirs: list[Path] | None) -> Any:
    """The plugin registry for --plugin-dir (scheduler_runtime.options.registry); each loader warning is
    printed once per process."""
    from scheduler_runtime.options.registry import load_registry

    reg = load_registry(plugin_dirs)
    for w in reg.warnings:
        if w not in _WARNED:
            _WARNED.add(w)
            warn(w)
    return reg


def config(path: Path | None, reg: Any) -> Any:
    from scheduler_runtime.config import load_config

    if path is not None and str(path) != STDIN and not path.exists():
        raise InputError("no such file or directory", file=str(path), usage=True)
    return load_config(path, reg)


def warn_no_default_profile(cfg: Any, where: str | None) -> None:
    """One line when no profile serves `default-scheduler` (pods that name no scheduler would stay Pending)."""
    from scheduler_runtime.config.profiles import no_default_profile_warning

    msg = no_default_profile_warning(cfg)
    if msg:
        warn(f"{where}: {msg}" if where else msg)


def deadline(text: str) -> float:
    from scheduler_runtime.options.flags import parse_go_duration

    return parse_go_duration(text, "plugin-deadline")


def check_paths(paths: list[Path]) -> None:
    """Every input path exists; `-` (standard input) may appear once."""
    if sum(str(p) == STDIN for p in paths) > 1:
        raise UsageError("`-` (standard input) can be given only once per command")
    for p in paths:
        if str(p) != STDIN and not p.exists():
            raise InputError("no such file or directory", file=str(p), usage=True)


def warn_if_empty(cluster: list[Path], pods: list[Path], n_nodes: int, n_pods: int) -> None:
    """Inputs that parse but hold nothing are almost always a mistake: say so (the command still succeeds)."""
    if n_nodes == 0 and cluster:
        warn(f"no nodes in {', '.join(map(str, cluster))}: every pod stays Pending")
    if n_pods == 0 and pods:
        warn(f"no pods in {', '.join(map(str, pods))}: nothing to schedule")

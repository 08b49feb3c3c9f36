"""`ksched`: build, test and deploy Kubernetes scheduler variants with plugins written in Python.

This module only assembles the app: each command lives in ksched_cli/commands/<command>.py and registers
itself; the root group adds `--debug` after any subcommand and wraps every command in the one error
boundary (ksched_cli.guard.error_boundary), so exit codes come from exception classes in one place."""

from __future__ import annotations

import copy
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from scheduler_runtime import __version__

from .commands import (
    build,
    config,
    deploy,
    describe_pod,
    dev_cluster,
    new_plugin,
    plugins,
    run,
    simulate,
    snapshot,
    undeploy,
)
from .guard import DEBUG, error_boundary


def _debug_after_subcommand(ctx: Any, param: Any, value: bool) -> None:
    if value:
        DEBUG["on"] = True


class _KschedGroup(TyperGroup):
    """The root group: `--debug` is accepted after any subcommand too (`ksched config validate --debug F`),
    with the same effect as `ksched --debug ...`."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        root = next((p for p in self.params if p.name == "debug"), None)
        if root is not None:
            self._add_debug(self.commands.values(), root)

    @classmethod
    def _add_debug(cls, commands: Any, root: Any) -> None:
        for cmd in commands:
            if not any(p.name == "debug" for p in cmd.params):
                opt = copy.copy(root)
                opt.callback = _debug_after_subcommand
                opt.expose_value = False
                opt.is_eager = True
                cmd.params.append(opt)
            sub = getattr(cmd, "commands", None)
            if sub:
                cls._add_debug(sub.values(), root)

    def invoke(self, ctx: Any) -> Any:
        """Every subcommand (and nested group) runs inside this call: the one error boundary."""
        with error_boundary():
            return super().invoke(ctx)


app = typer.Typer(
    name="ksched", cls=_KschedGroup, no_args_is_help=True, rich_markup_mode="rich", add_completion=False,
    help="Build, test and deploy Kubernetes scheduler variants whose plugins are written in Python.\n\n"
         "Start with [bold]ksched run[/] (schedules the bundled example cluster in memory) or "
         "[bold]ksched simulate --help[/].")
#: registration order is the order `ksched --help` lists them (commands first, then groups)
for command in (deploy, undeploy, build, run, snapshot, simulate, describe_pod, new_plugin, plugins, dev_cluster,
                config):
    command.register(app)


def _version(value: bool) -> None:
    if value:
        print(f"ksched {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show Python tracebacks on errors.")] = False,
) -> None:
    DEBUG["on"] = debug


def entry() -> None:  # pragma: no cover
    app(prog_name="ksched")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

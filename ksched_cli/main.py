"""`ksched`: build, test and deploy Kubernetes scheduler variants with plugins written in Python.

This module only assembles the app: each command lives in ksched_cli/commands/<command>.py and registers
itself; the root group adds `--debug` after any subcommand and wraps every command in the one error
boundary (ksched_cli.guard.error_boundary), so exit codes come from exception classes in one place."""

from __future__ import annotations

import copy
import errno
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from scheduler_runtime import __version__

from .commands import (
    build,
    completion,
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
    version,
)
from .guard import DEBUG, error_boundary, route_runtime_warnings


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

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """A bad flag or argument is one line on stderr naming the command, exit 2, as kubectl does
        (`error: unknown flag: --foo`), instead of click's usage box."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        from typer._click import exceptions as click_exc

        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click_exc.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_exc.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "ksched"
            print(f"error: {where}: {exc.format_message()} (see '{where} --help')", file=sys.stderr)
            sys.exit(exc.exit_code)
        except click_exc.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        except OSError as exc:  # `ksched ... | head`: the reader left; end quietly like a filter
            if exc.errno != errno.EPIPE:
                raise
            _silence_stdout()
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        """Every subcommand (and nested group) runs inside this call: the one error boundary. stdout is
        flushed here so a closed pipe shows up while typer's handler can still end the process quietly."""
        try:
            with error_boundary():
                return super().invoke(ctx)
        finally:
            sys.stdout.flush()


#: the variables typer's completion scripts set for `ksched` and for the kubectl plugin
COMPLETE_VARS = ("_KSCHED_COMPLETE", "_KUBECTL_KSCHED_COMPLETE")


class _KschedApp(typer.Typer):
    """`ksched ... | head` ends quietly: a closed stdout is exit 1 with nothing on stderr, as with any
    well-behaved filter (click's own handler covers the command; this covers help and version text)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(os.environ.get(v) for v in COMPLETE_VARS):  # a shell asks for completions (`ksched completion`)
            from typer.completion import completion_init

            completion_init()
        try:
            try:
                return super().__call__(*args, **kwargs)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(1)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _silence_stdout()
            sys.exit(1)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not report the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


app = _KschedApp(
    name="ksched", cls=_KschedGroup, no_args_is_help=True, rich_markup_mode="rich", add_completion=False,
    help="Build, test and deploy Kubernetes scheduler variants whose plugins are written in Python.\n\n"
         "Start with [bold]ksched run[/] (schedules the bundled example cluster in memory) or "
         "[bold]ksched simulate --help[/].")
#: registration order is the order `ksched --help` lists them (commands first, then groups)
for command in (deploy, undeploy, build, run, snapshot, simulate, describe_pod, new_plugin, plugins, dev_cluster,
                config, version, completion):
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
    route_runtime_warnings()


def entry() -> None:  # pragma: no cover
    app(prog_name="ksched")


def kubectl_plugin() -> None:
    """The `kubectl-ksched` executable: `kubectl ksched describe-pod ...` runs it as a kubectl plugin."""
    app(prog_name="kubectl ksched", complete_var="_KUBECTL_KSCHED_COMPLETE")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

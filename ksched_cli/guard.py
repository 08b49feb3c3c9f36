"""Turn user errors into one-line messages and exit codes; tracebacks only with --debug."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.console import Console

from scheduler_runtime.errors import InputError, KschedError

T = TypeVar("T")
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

DEBUG = {"on": False}

EXIT_INVALID = 1  # the input was read but is invalid, or the scheduling job failed
EXIT_USAGE = 2  # usage or I/O errors (missing file, unreadable, wrong flags)


def fail(message: str, code: int = EXIT_INVALID) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", markup=True, emoji=False) if sys.stderr.isatty() \
        else print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def guarded(fn: Callable[[], T]) -> T:
    """Run `fn`; KschedError becomes `error: <one line>` and a non-zero exit unless --debug."""
    try:
        return fn()
    except typer.Exit:
        raise
    except KschedError as exc:
        if DEBUG["on"]:
            raise
        io = isinstance(exc, InputError) and exc.detail in ("no such file or directory",) or \
            "Permission denied" in str(exc) or "Is a directory" in str(exc)
        raise fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                   EXIT_USAGE if io else EXIT_INVALID) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except Exception as exc:  # unexpected: still one line unless --debug
        if DEBUG["on"]:
            raise
        raise fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for a traceback)") from None

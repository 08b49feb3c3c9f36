"""Turn user errors into one-line messages and exit codes; tracebacks only with --debug."""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from typer.exceptions import Abort as TyperAbort
from typer.exceptions import TyperException

from scheduler_runtime.errors import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_USAGE, KschedError

err_console = Console(stderr=True, highlight=False, soft_wrap=True)

DEBUG = {"on": False}

__all__ = ["DEBUG", "EXIT_INVALID", "EXIT_USAGE", "error_boundary", "fail", "os_error_exit_code", "os_error_message",
           "route_runtime_warnings",
           "warn"]

#: errnos that say a path the user gave cannot be used as given (missing, wrong type, not allowed): exit 2.
#: Any other errno on a file (disk full, I/O error, quota) is a failed job: exit 1.
_PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.ELOOP,
                          errno.ENAMETOOLONG, errno.EROFS, errno.EEXIST, errno.ENOTEMPTY, errno.ENXIO,
                          errno.ENODEV})


def fail(message: str, code: int = EXIT_INVALID) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", markup=True, emoji=False) if sys.stderr.isatty() \
        else print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def warn(message: str) -> None:
    """One `warning:` line on stderr (never read as rich markup)."""
    if sys.stderr.isatty():
        err_console.print("[yellow]warning:[/] ", end="", markup=True)
        err_console.print(message, markup=False, emoji=False)
    else:
        print(f"warning: {message}", file=sys.stderr)


def os_error_message(exc: OSError) -> str | None:
    """`PATH: what` for an OSError about a file, or None when it names none.

    A rename onto a directory names the target (filename2); a temporary file in a missing folder names
    the folder."""
    name = exc.filename2 if exc.filename2 is not None and exc.errno in (errno.EISDIR, errno.ENOTDIR) \
        else exc.filename
    if name is None:
        return None
    path = os.fsdecode(name) if isinstance(name, (bytes, os.PathLike)) else str(name)
    if exc.errno == errno.ENOENT:
        parent = os.path.dirname(path)
        if parent and not os.path.isdir(parent):
            return f"{parent}: no such directory"
        return f"{path}: no such file or directory"
    what = exc.strerror or type(exc).__name__
    return f"{path}: {what}"


def os_error_exit_code(exc: OSError) -> int:
    """2 when the errno says the named path is unusable as given, else 1; the message text never decides."""
    return EXIT_USAGE if exc.errno in _PATH_ERRNOS else EXIT_INVALID


@contextmanager
def error_boundary() -> Iterator[None]:
    """The one place where a command's failure becomes an exit code (applied to every command by
    ksched_cli.main's root group): KschedError gives `error: <first line>` and the class's exit code,
    an OSError about a file one line naming it, anything else `internal error: ...`; --debug re-raises
    for a traceback. Click/typer's own exits and usage errors pass through untouched."""
    try:
        yield
    except (typer.Exit, TyperAbort, TyperException):
        raise
    except KschedError as exc:
        if DEBUG["on"]:
            raise
        raise fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, exc.exit_code) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except OSError as exc:  # a file the command reads or writes: one line naming it, a usage/I-O error
        if DEBUG["on"] or exc.errno == errno.EPIPE:
            raise  # a closed stdout (`ksched ... | head`): ksched_cli.main ends quietly
        msg = os_error_message(exc)
        if msg is None:
            raise fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for a traceback)") from None
        raise fail(msg, os_error_exit_code(exc)) from None
    except Exception as exc:  # unexpected: still one line unless --debug
        if DEBUG["on"]:
            raise
        raise fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for a traceback)") from None


class _WarnHandler(logging.Handler):
    """Runtime warnings meant for the person at the terminal (unknown fields in their files), printed as
    `warning:` lines; the same line is printed once per process (a file read twice warns once)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg not in self.seen:
            self.seen.add(msg)
            warn(msg)


#: runtime loggers whose warnings are about the user's input, not the running scheduler
USER_INPUT_LOGGERS = ("ksched.fields",)


def route_runtime_warnings() -> None:
    """Send warnings of USER_INPUT_LOGGERS to stderr as `warning:` lines; called once per command (each
    call starts a fresh once-per-message memory)."""
    for name in USER_INPUT_LOGGERS:
        logger = logging.getLogger(name)
        for h in [h for h in logger.handlers if isinstance(h, _WarnHandler)]:
            logger.removeHandler(h)
        logger.addHandler(_WarnHandler())
        logger.propagate = False
        logger.setLevel(logging.WARNING)

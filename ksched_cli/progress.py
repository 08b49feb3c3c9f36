"""Progress for long work (a rollout, a large replay): a live bar on stderr when stderr is a terminal,
nothing at all otherwise, so logs and pipes carry only the results."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Bar(Protocol):
    def update(self, *, completed: int | None = None, total: int | None = None,
               description: str | None = None) -> None: ...


class _Silent:
    def update(self, *, completed: int | None = None, total: int | None = None,
               description: str | None = None) -> None:
        return None


class _Live:
    def __init__(self, prog: Any, task: Any) -> None:
        self.prog, self.task = prog, task

    def update(self, *, completed: int | None = None, total: int | None = None,
               description: str | None = None) -> None:
        kw: dict[str, Any] = {k: v for k, v in (("completed", completed), ("total", total),
                                                ("description", description)) if v is not None}
        self.prog.update(self.task, **kw)


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress(description: str, total: int | None, unit: str = "done") -> Iterator[Bar]:
    """A bar for `total` steps (None: a spinner) shown only while stderr is a terminal; it disappears when
    the work ends, so only the command's own result lines remain."""
    if not stderr_is_terminal():
        yield _Silent()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cols = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn()]
    if total is not None:
        cols.append(TextColumn("{task.completed}/{task.total} " + unit))
    with Progress(*cols, TimeElapsedColumn(), console=Console(stderr=True), transient=True) as prog:
        yield _Live(prog, prog.add_task(description, total=total))

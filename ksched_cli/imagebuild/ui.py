"""What `ksched build` shows while it works: notes, the build log under a step bar, layer transfer bars.

Everything goes to stderr so stdout carries only the result (image reference, ID, size) for scripts.
On a terminal the bars are live; elsewhere (CI logs) rich prints the log lines alone.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from .engine import BuildEvent


class Display:
    """Rich output for one `ksched build` run."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._layers: dict[str, tuple[int, int]] = {}

    def note(self, message: str) -> None:
        self.console.print(f"[bold cyan]»[/] {escape(message)}")

    # -- build log -------------------------------------------------------------------------------------------
    def build_started(self, steps: int) -> None:
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=30),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=self.console,
                                  transient=True)
        self._progress.start()
        self._task = self._progress.add_task("building", total=steps)

    def build_event(self, event: BuildEvent) -> None:
        p = self._progress
        if event.step is not None and p is not None and self._task is not None:
            p.advance(self._task)
            p.update(self._task, description=escape(event.step[:60]))
        style = "bold" if event.step is not None else "dim"
        (p.console if p else self.console).print(event.line, style=style, markup=False, highlight=False)

    def build_finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # -- pull / push: one bar summing every layer's bytes ----------------------------------------------------
    def transfer_started(self, label: str) -> None:
        self._layers = {}
        self._progress = Progress(SpinnerColumn(), TextColumn(escape(label)), BarColumn(bar_width=30),
                                  DownloadColumn(), TimeElapsedColumn(), console=self.console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(label, total=None)

    def transfer_event(self, event: dict[str, Any], label: str = "transferring") -> None:
        """One pull/push stream message; starts the bar on the first one (a pull may never happen)."""
        if self._progress is None:
            self.transfer_started(label)
        p = self._progress
        layer = event.get("id")
        detail = event.get("progressDetail") or {}
        if p is not None and self._task is not None and layer and detail.get("total"):
            self._layers[str(layer)] = (int(detail.get("current") or 0), int(detail["total"]))
            p.update(self._task, completed=sum(c for c, _ in self._layers.values()),
                     total=sum(t for _, t in self._layers.values()))
            return
        status = event.get("status") or event.get("stream")
        if status and not detail:
            line = f"{layer}: {status}" if layer else str(status)
            (p.console if p else self.console).print(line.rstrip(), style="dim", markup=False, highlight=False)

    def transfer_finished(self) -> None:
        self.build_finished()

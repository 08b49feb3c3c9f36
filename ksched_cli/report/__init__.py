"""The what-if report of `ksched simulate --report`: one self-contained HTML file (see html.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .compare import differs, keys

__all__ = ["differs", "keys", "write_report"]


def write_report(path: Path, results: list[Any]) -> None:
    """Render and write atomically (plotly is imported only when a report is asked for)."""
    from scheduler_runtime.atomicfile import write_output

    from .html import render

    write_output(path, render(results))

"""`-o/--output FORMAT` as kubectl means it, the same in every command: always an output format, never a file.

`output_option(allowed)` builds the option; a value outside `allowed` is a usage error naming the allowed
values, and a value that looks like a file (the old `-o FILE` of `config migrate/render`) says which named
flag writes files now. `emit(data, fmt)` prints json/yaml the same way everywhere."""

from __future__ import annotations

import json
from typing import Any

import typer
import yaml

#: every format a ksched command may offer, in kubectl's order
FORMATS = ("table", "wide", "json", "yaml", "name")


def _checker(allowed: tuple[str, ...], file_flag: str | None) -> Any:
    def check(ctx: typer.Context, value: str | None) -> str | None:
        if value is None or value in allowed or ctx.resilient_parsing:
            return value
        hint = ""
        if file_flag and ("/" in value or "." in value):
            hint = f"; -o is an output format now: write a file with {file_flag} {value}"
        raise typer.BadParameter(f"unsupported output format {value!r} (allowed: {', '.join(allowed)}){hint}")
    return check


def output_option(allowed: tuple[str, ...], *, file_flag: str | None = None, what: str = "") -> Any:
    """The `-o/--output` option of a command offering `allowed` (a subset of FORMATS)."""
    unknown = set(allowed) - set(FORMATS)
    if unknown:
        raise ValueError(f"not output formats: {sorted(unknown)}")
    return typer.Option("-o", "--output", metavar="|".join(allowed), callback=_checker(allowed, file_flag),
                        help=f"Output format: {', '.join(allowed)}.{' ' + what if what else ''}")


def render(data: Any, fmt: str) -> str:
    """`data` as JSON (2-space indent, like kubectl) or YAML (keys in the given order)."""
    if fmt == "json":
        return json.dumps(data, indent=2, default=str) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    raise ValueError(f"render: {fmt!r} is not json or yaml")


def emit(data: Any, fmt: str) -> None:
    print(render(data, fmt), end="")

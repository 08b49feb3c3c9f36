"""`ksched plugins`: inspect the plugins ksched can run."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..inputs import PluginDirOpt, registry
from ..output import emit, output_option

console = Console(highlight=False, soft_wrap=True)

app = typer.Typer(no_args_is_help=True, help="Inspect the plugins ksched can run.")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="plugins")


@app.command("list", epilog="Examples:\n\n  ksched plugins list\n\n  ksched plugins list -o json")
def plugins_list(
    output: Annotated[str, output_option(("table", "json", "yaml", "name"))] = "table",
    plugin_dir: PluginDirOpt = None,
) -> None:
    """List every plugin: name, extension points, where it comes from, and its args with defaults."""

    reg = registry(plugin_dir)
    rows = []
    for name in reg.names():
        spec = reg.plugins[name]
        args: dict[str, Any] = {}
        model = spec.args_model
        if model is not None:
            try:
                args = model().model_dump(by_alias=True, mode="json")
            except Exception:  # args with required fields have no full default
                args = {f.alias or k: "<required>" if f.is_required()
                        else f.get_default(call_default_factory=True) for k, f in model.model_fields.items()}
        rows.append({"name": name, "extensionPoints": spec.extension_points, "source": spec.source,
                     "args": args})
    if output == "name":
        for r in rows:
            print(r["name"])
        return
    if output != "table":
        emit(json.loads(json.dumps(rows, default=str)), output)
        return
    t = Table(title="plugins", title_justify="left")
    for col in ("name", "extension points", "source", "args (defaults)"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["name"], ", ".join(r["extensionPoints"]), r["source"],
                  json.dumps(r["args"], default=str) if r["args"] else "")
    console.print(t)
    if reg.unsupported:
        console.print("[dim]not supported yet: " + ", ".join(sorted(reg.unsupported)) + "[/]")

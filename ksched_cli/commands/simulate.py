"""`ksched simulate`: replay pods onto a cluster snapshot offline, one variant or two side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..inputs import PluginDeadlineOpt, PluginDirOpt, check_paths, registry, warn_if_empty, warn_no_default_profile
from ..inputs import config as load_config
from ..inputs import deadline as parse_deadline
from ..output import output_option

console = Console(highlight=False, soft_wrap=True)

EPILOG = ("Examples:\n\n  ksched simulate --cluster examples/cluster --pods examples/pods.yaml --seed 1\n\n"
          "  ksched simulate --cluster examples/cluster --pods examples/pods.yaml "
          "--config examples/configs/least-allocated.yaml --compare examples/configs/most-allocated.yaml\n\n"
          "  ksched simulate --cluster examples/cluster --pods examples/pods.yaml -o json")


def register(app: typer.Typer) -> None:
    app.command("simulate", epilog=EPILOG)(simulate)


def simulate(
    cluster: Annotated[list[Path], typer.Option("--cluster", help="Snapshot: YAML files or folders of nodes, "
                                                                  "bound pods, PDBs, services.")],
    pods: Annotated[list[Path], typer.Option("--pods", help="Pods to schedule, in order.")],
    config: Annotated[Path | None, typer.Option("--config", help="Config of variant A (default profile).")] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Config of variant B, shown side by side.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for tie-breaking; same seed, same placements.")] = 0,
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    plugin_dir: PluginDirOpt = None,
    plugin_deadline: PluginDeadlineOpt = "30s",
) -> None:
    """Replay pods onto a cluster snapshot offline and print where each lands, why the rest are pending,
    and per-node utilisation; with --compare, two scheduler variants side by side."""

    from scheduler_runtime.simulate import simulate as run_sim

    check_paths([*cluster, *pods])
    reg = registry(plugin_dir)
    cfg_a = load_config(config, reg)
    cfg_b = load_config(compare, reg) if compare is not None else None
    warn_no_default_profile(cfg_a, str(config) if config else None)
    if cfg_b is not None:
        warn_no_default_profile(cfg_b, str(compare))
    deadline = parse_deadline(plugin_deadline)
    results = [run_sim(cluster, pods, cfg_a, reg, seed=seed, label=str(config or "default"),
                       plugin_deadline=deadline)]
    warn_if_empty(list(cluster), list(pods), len(results[0].usage), len(results[0].pods))
    if compare is not None:
        results.append(run_sim(cluster, pods, cfg_b, reg, seed=seed, label=str(compare),
                               plugin_deadline=deadline))
    if output == "json":
        print(json.dumps([r.to_dict() for r in results] if compare else results[0].to_dict(), indent=2))
    elif output == "yaml":
        print(yaml.safe_dump([r.to_dict() for r in results] if compare else results[0].to_dict(),
                             sort_keys=False), end="")
    elif compare is None:
        _print_simulation(results[0])
    else:
        _print_comparison(results[0], results[1])


def _print_simulation(r: Any) -> None:
    t = Table(title=escape(f"placements ({r.label})"), title_justify="left")
    t.add_column("pod")
    t.add_column("node")
    for key in r.pods:
        node = r.placements.get(key)
        t.add_row(key, node or ("[red]preempted[/]" if key in r.preempted else "[yellow]Pending[/]"))
    console.print(t)
    for key in r.pending:
        res = r.results.get(key)
        if key in r.preempted:
            console.print(f"[yellow]{key}[/]: preempted (deleted to make room for a higher-priority pod)")
        elif res is not None:
            console.print(f"[yellow]{key}[/]: {escape(res.message)}")
    with_ext = [(key, res) for key in r.pods if (res := r.results.get(key)) is not None and res.extenders]
    if with_ext:
        from scheduler_runtime.describe import extender_rows

        t = Table(title="extender verdicts (last attempt per pod)", title_justify="left")
        for col in ("pod", "extender", "filter", "prioritize (score 0-10)", "preempt", "bind"):
            t.add_column(col, overflow="fold")
        for key, res in with_ext:
            for row in extender_rows({"extenders": res.extenders}):
                t.add_row(key, *(escape(c) for c in row))
        console.print(t)
    _print_usage([r])


def _print_usage(results: list[Any]) -> None:
    t = Table(title="node utilisation after scheduling (requested / allocatable)", title_justify="left")
    t.add_column("node")
    for i in range(len(results)):
        suffix = f" ({'AB'[i]})" if len(results) > 1 else ""
        t.add_column("pods" + suffix, justify="right")
        t.add_column("cpu" + suffix, justify="right")
        t.add_column("memory" + suffix, justify="right")
    for i, u in enumerate(results[0].usage):
        row = [u.name]
        for r in results:
            x = r.usage[i]
            row += [str(x.pods), f"{x.percent('cpu'):.0f}%", f"{x.percent('memory'):.0f}%"]
        t.add_row(*row)
    console.print(t)


def _print_comparison(a: Any, b: Any) -> None:
    t = Table(title="placements", title_justify="left")
    t.add_column("pod")
    t.add_column(escape(f"A: {a.label}"))
    t.add_column(escape(f"B: {b.label}"))
    t.add_column("")
    differ = 0
    for key in a.pods:
        na, nb = a.placements.get(key), b.placements.get(key)
        mark = "" if na == nb else "[bold magenta]differs[/]"
        differ += na != nb
        t.add_row(key, na or "[yellow]Pending[/]", nb or "[yellow]Pending[/]", mark)
    console.print(t)
    console.print(f"{differ} of {len(a.pods)} placements differ; pending: A {len(a.pending)}, B {len(b.pending)}")
    _print_usage([a, b])

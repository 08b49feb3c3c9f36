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
          "  ksched simulate --cluster examples/cluster --pods examples/pods.yaml -o json\n\n"
          "  ksched snapshot --write-to snap.yaml && ksched simulate --snapshot snap.yaml "
          "--compare my-config.yaml --report report.html")


def register(app: typer.Typer) -> None:
    app.command("simulate", epilog=EPILOG)(simulate)


def simulate(
    cluster: Annotated[list[Path], typer.Option("--snapshot", "--cluster", help=(
        "Snapshot: YAML files or folders of nodes, pods, PDBs, volumes, DRA objects (`ksched snapshot` or "
        "`kubectl get nodes,pods -o yaml` output). Bound pods stay; unbound ones are scheduled."))],
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="More pods to schedule, in order.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Config of variant A (default profile).")] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Config of variant B, shown side by side.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for tie-breaking; same seed, same placements.")] = 0,
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    report: Annotated[Path | None, typer.Option("--report", help=(
        "Write a self-contained HTML what-if report (charts embedded, opens offline) to this file."))] = None,
    plugin_dir: PluginDirOpt = None,
    plugin_deadline: PluginDeadlineOpt = "30s",
) -> None:
    """Replay pods onto a cluster snapshot offline and say what happened to each (the node it lands on, why
    it stays pending, who preempted it, or that it is for another scheduler) and per-node utilisation; with
    --compare, two scheduler variants side by side; with --report, the same as one offline HTML page."""

    from scheduler_runtime.simulate import simulate as run_sim

    pods = list(pods or [])
    check_paths([*cluster, *pods])
    if report is not None:
        from scheduler_runtime.atomicfile import check_output_path

        check_output_path(report)
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
    if not pods and not results[0].pods:
        from ..guard import warn

        warn(f"nothing to schedule: {', '.join(map(str, cluster))} has no pod without a node and no --pods "
             "were given")
    if compare is not None:
        results.append(run_sim(cluster, pods, cfg_b, reg, seed=seed, label=str(compare),
                               plugin_deadline=deadline))
    if report is not None:
        from ..report import write_report

        write_report(report, results)
    if output == "json":
        print(json.dumps([r.to_dict() for r in results] if compare else results[0].to_dict(), indent=2))
    elif output == "yaml":
        print(yaml.safe_dump([r.to_dict() for r in results] if compare else results[0].to_dict(),
                             sort_keys=False), end="")
    elif compare is None:
        _print_simulation(results[0])
    else:
        _print_comparison(results[0], results[1])


def _cell(r: Any, key: str) -> str:
    """A placement cell: the node, or the pod's status coloured (Pending, preempted, skipped)."""
    oc = r.outcome(key)
    if oc.status == "Scheduled":
        return escape(oc.node or "")
    if oc.status == "Preempted":
        return "[red]preempted[/]" + (escape(f" by {oc.by}") if oc.by else "")
    if oc.status == "Skipped":
        return "[dim]not for this scheduler[/]" if "schedulerName=" in oc.detail else "[dim]skipped[/]"
    return "[yellow]Pending[/]"


def _victims(results: list[Any]) -> list[str]:
    """Preempted pods that were bound in the snapshot (not among the pods to schedule), in order seen."""
    seen: list[str] = []
    for r in results:
        for v in r.preempted:
            if v not in r.pods and v not in seen:
                seen.append(v)
    return seen


def _snapshot_note(r: Any) -> None:
    if r.from_snapshot:
        console.print(f"{len(r.from_snapshot)} pod(s) unbound in the snapshot were scheduled too "
                      f"(marked [cyan]*[/]); pods bound there stayed where they are.")


def _print_simulation(r: Any) -> None:
    t = Table(title=escape(f"placements ({r.label})"), title_justify="left")
    t.add_column("pod")
    t.add_column("node")
    for key in [*r.pods, *_victims([r])]:
        mark = " [cyan]*[/]" if key in r.from_snapshot else ""
        t.add_row(escape(key) + mark, _cell(r, key))
    console.print(t)
    _snapshot_note(r)
    for key in [*(k for k in r.pods if not r.placements.get(k)), *_victims([r])]:
        oc = r.outcome(key)
        if oc.status == "Preempted":
            console.print(f"[red]{escape(key)}[/]: {escape(oc.detail)}")
        elif oc.detail:
            console.print(f"[yellow]{escape(key)}[/]: {escape(oc.detail)}")
        for line in r.explanations.get(key, ()):
            console.print(f"  [dim]why:[/] {escape(line)}")
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
    from .. import report as rep

    t = Table(title="placements", title_justify="left")
    t.add_column("pod")
    t.add_column(escape(f"A: {a.label}"))
    t.add_column(escape(f"B: {b.label}"))
    t.add_column("")
    keys = rep.keys(a, b)
    for key in keys:
        mark = "[bold magenta]differs[/]" if rep.differs(a, b, key) else ""
        t.add_row(escape(key) + (" [cyan]*[/]" if key in a.from_snapshot else ""), _cell(a, key), _cell(b, key),
                  mark)
    console.print(t)
    _snapshot_note(a)
    differ = sum(rep.differs(a, b, k) for k in keys)
    console.print(f"{differ} of {len(keys)} placements differ; pending: A {len(a.pending)}, B {len(b.pending)}; "
                  f"preempted: A {len(a.preempted)}, B {len(b.preempted)}")
    for key in keys:
        oa, ob = a.outcome(key), b.outcome(key)
        if oa.status == ob.status == "Scheduled":
            continue
        console.print(f"[yellow]{escape(key)}[/]:")
        console.print(f"  A: {escape(oa.detail or 'scheduled to ' + str(oa.node))}")
        console.print(f"  B: {escape(ob.detail or 'scheduled to ' + str(ob.node))}")
    _print_usage([a, b])

"""`ksched run`: the embedded demo cluster, or a real API server with kube-scheduler's flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from scheduler_runtime import __version__
from scheduler_runtime.errors import InputError
from scheduler_runtime.options.flags import parse
from scheduler_runtime.options.resolve import run_on_cluster

from ..guard import EXIT_USAGE, fail, warn
from ..inputs import (
    EXAMPLES,
    PluginDeadlineOpt,
    PluginDirOpt,
    check_paths,
    registry,
    warn_if_empty,
    warn_no_default_profile,
)
from ..inputs import config as load_config
from ..inputs import deadline as parse_deadline

console = Console(highlight=False, soft_wrap=True)

EPILOG = ("Examples:\n\n  ksched run\n\n  ksched run --config examples/configs/least-allocated.yaml\n\n"
          "  ksched run --cluster examples/cluster --pods examples/pods.yaml --watch\n\n"
          "  ksched run --kubeconfig ~/.kube/config --leader-elect=false --secure-port=10269\n\n"
          "Against a real cluster `run` takes kube-scheduler's flags (--config, --kubeconfig, "
          "--bind-address, --secure-port, --leader-elect*, --authentication-kubeconfig, "
          "--authorization-kubeconfig, -v) with kube-scheduler's precedence, plus "
          "--results=ksched|simulator|off and --plugin-deadline=30s "
          "(a plugin stuck longer is named in the log and /readyz).\n\n"
          "Which cluster: the embedded one, unless --kubeconfig, a kube-scheduler flag, or a --config "
          "whose clientConnection.kubeconfig is set is given; $KUBECONFIG never selects a real cluster "
          "(so `ksched run` is the demo even where KUBECONFIG is set). Which kubeconfig, as in "
          "kube-scheduler: with --config, its clientConnection.kubeconfig (--kubeconfig is then "
          "ignored); without --config, --kubeconfig; when that is empty, the pod's service account. "
          "$KUBECONFIG and ~/.kube/config are never read. The first log line says which was used "
          "and why.")
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def register(app: typer.Typer) -> None:
    app.command("run", context_settings=CONTEXT, epilog=EPILOG)(run)


def run(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", help="KubeSchedulerConfiguration file.")] = None,
    cluster: Annotated[list[Path] | None, typer.Option(
        "--cluster", help="Embedded cluster: YAML files or folders of nodes and bound pods.")] = None,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Pods to create after the cluster.")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Keep running after the queue is drained.")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for tie-breaking (deterministic runs).")] = None,
    plugin_dir: PluginDirOpt = None,
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", help="Run against the API server of this "
                                                   "kubeconfig instead of the embedded cluster.")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Kubeconfig context to use (default: its "
                                                "current-context).")] = None,
    plugin_deadline: PluginDeadlineOpt = "30s",
) -> None:
    """Run the scheduler. Without a kubeconfig it runs on the embedded in-memory cluster and shows
    each decision live; it exits when nothing is left to schedule (--watch keeps it running)."""
    if kubeconfig is not None or context is not None or ctx.args or _config_names_kubeconfig(config):
        if cluster or pods:
            raise fail("--cluster/--pods are for the embedded cluster; drop them with --kubeconfig", EXIT_USAGE)
        argv = list(ctx.args)
        if kubeconfig is not None:
            argv.append(f"--kubeconfig={kubeconfig}")
        if context is not None:
            argv.append(f"--context={context}")
        if config is not None:
            argv.append(f"--config={config}")
        for d in plugin_dir or []:
            argv.append(f"--plugin-dir={d}")
        if seed is not None:
            argv.append(f"--seed={seed}")
        argv.append(f"--plugin-deadline={plugin_deadline}")
        flags = parse(argv)
        _no_kubeconfig_for_flags(list(ctx.args), flags, config)
        raise typer.Exit(run_on_cluster(flags, warn))
    _run_embedded(config, cluster, pods, watch, seed, plugin_dir, plugin_deadline)


def _run_embedded(config: Path | None, cluster: list[Path] | None, pods: list[Path] | None, watch: bool,
                  seed: int | None, plugin_dir: list[Path] | None, plugin_deadline: str) -> None:
    """The demo: the embedded in-memory cluster, each decision shown as it is made."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.scheduler import Scheduler
    from scheduler_runtime.simulate import explain_devices, load_pods_in_order, never_attempted

    cluster_paths = cluster or [EXAMPLES / "cluster"]
    pod_paths = pods if pods is not None else ([] if cluster else [EXAMPLES / "pods.yaml"])
    check_paths([*cluster_paths, *pod_paths])
    reg = registry(plugin_dir)
    cfg = load_config(config, reg)
    warn_no_default_profile(cfg, str(config) if config else None)
    mem = MemoryCluster.from_paths(cluster_paths)
    pending = load_pods_in_order(pod_paths)
    _validate_pods(mem, pending)
    deadline = parse_deadline(plugin_deadline)
    n_nodes = len(mem.list("nodes"))
    warn_if_empty(list(cluster_paths), list(pod_paths), n_nodes, len(pending))

    attempted: set[str] = set()

    def show(d: Any) -> None:
        r = d.result
        attempted.add(r.pod)
        if r.outcome == "scheduled":
            console.print(f"  [green]✓[/] {r.pod:<28} → [bold]{r.node}[/]"
                          f"  [dim](attempt {r.attempt}, {r.feasible or 1} feasible)[/]")
        else:
            console.print(f"  [yellow]✗[/] {r.pod:<28} {escape(r.message)}")

    watchdog = _embedded_watchdog(deadline)
    # built before the banner: a plugin whose constructor fails is reported before anything is shown
    sched = Scheduler(mem, cfg, reg, seed=seed, observer=show, watchdog=watchdog, bind_deadline=deadline)
    console.print(f"[bold]ksched {__version__}[/] embedded cluster: {n_nodes} nodes, "
                  f"{len(mem.list('pods'))} pods already present, {len(pending)} to schedule; "
                  f"profiles: {', '.join(p.scheduler_name for p in cfg.profiles)}")
    sched.start()
    for raw, _ in pending:  # checked by _validate_pods
        mem.create(raw)
    if watch:
        console.print("[dim]watching; Ctrl-C to stop[/]")
        try:
            sched.run(until_idle=False)
        except KeyboardInterrupt:
            sched.stop()
    else:
        sched.run(until_idle=True)
    all_pods = mem.list("pods")
    bound = sum(1 for p in all_pods if (p.get("spec") or {}).get("nodeName"))
    watchdog.stop()
    unbound = [f"{(p.get('metadata') or {}).get('namespace') or 'default'}/{p['metadata']['name']}"
               for p in all_pods if not (p.get("spec") or {}).get("nodeName")]
    for key in unbound:  # never attempted (gates, a PreEnqueue plugin), so the live view had nothing to say
        raw = mem.get_pod(*key.split("/", 1))
        why = never_attempted(sched, raw) if raw is not None and key not in attempted else ""
        if why:
            console.print(f"  [dim]⏸[/] {key:<28} {escape(why)}")
    for key, lines in explain_devices(mem, unbound).items():  # what describe-pod says of a claim's devices
        for line in lines:
            console.print(f"  [dim]why {escape(key)}:[/] {escape(line)}")
    console.print(f"done: {sched.scheduled} scheduled in {sched.attempts} attempts; "
                  f"{len(all_pods) - bound} pending; {len(mem.deleted)} preempted")
    for key, where in sorted(sched.detached_bindings.items()):
        console.print(f"[red]still binding:[/] {key} has been in {escape(where)} past the deadline")


def _embedded_watchdog(deadline: float) -> Any:
    """Names a plugin stuck past the deadline on stderr, as `ksched run --kubeconfig` does in its log."""
    import logging

    from scheduler_runtime.watchdog import CycleWatchdog

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s] %(message)s")
    wd = CycleWatchdog(deadline)
    wd.start()
    return wd


def _config_names_kubeconfig(path: Path | None) -> bool:
    """A config whose clientConnection names a kubeconfig is meant for a real cluster, as with kube-scheduler."""
    if path is None or not path.is_file():
        return False
    from scheduler_runtime import yamlio

    try:
        doc = yamlio.load_file_one(path)
    except InputError:
        return False  # the loader reports it properly
    cc = doc.get("clientConnection") if isinstance(doc, dict) else None
    return isinstance(cc, dict) and bool(cc.get("kubeconfig"))


def _validate_pods(mem: Any, pending: list[tuple[dict[str, Any], str]]) -> None:
    """Every pod to create is checked (fields, duplicates) before anything runs or is printed."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.simulate import create_pods

    keys = create_pods(MemoryCluster(), pending, emit=False)  # fields, and duplicates among themselves
    for key, (_, where) in zip(keys, pending, strict=True):
        if mem.get_pod(*key.split("/", 1)) is not None:
            raise InputError(f'Duplicate value: "{key}": the cluster already holds a pod with this namespace/name',
                             file=where, field="metadata.name", usage=False)


def _no_kubeconfig_for_flags(args: list[str], flags: Any, config: Path | None) -> None:
    """kube-scheduler flags mean a real API server; without a kubeconfig kube-scheduler would use (it never
    reads $KUBECONFIG or ~/.kube/config), say what to do instead."""
    from scheduler_runtime.cluster.kube import in_cluster
    from scheduler_runtime.kubeconfig_source import NOT_READ_NOTE

    if not args or flags.get("kubeconfig") or flags.get("master") or flags.get("write-config-to") \
            or _config_names_kubeconfig(config) or in_cluster():
        return
    hint = f"; {NOT_READ_NOTE}: pass --kubeconfig \"$KUBECONFIG\"" if os.environ.get("KUBECONFIG") else ""
    raise fail(f"kube-scheduler flags ({' '.join(args)}) run against an API server and no kubeconfig was given "
               f"(--kubeconfig, clientConnection.kubeconfig in --config, or in-cluster){hint}; drop them to "
               "run on the embedded cluster", EXIT_USAGE)

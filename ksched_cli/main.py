"""`ksched`: build, test and deploy Kubernetes scheduler variants with plugins written in Python."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from scheduler_runtime import __version__
from scheduler_runtime.errors import InputError

from .build_cmd import BUILD_EPILOG, build
from .config_cmd import app as config_app
from .deploy_cmd import DEPLOY_EPILOG, deploy, undeploy
from .devcluster import app as devcluster_app
from .guard import DEBUG, EXIT_USAGE, fail, guarded, warn

console = Console(highlight=False, soft_wrap=True)


def _debug_after_subcommand(ctx: Any, param: Any, value: bool) -> None:
    if value:
        DEBUG["on"] = True


class _KschedGroup(TyperGroup):
    """The root group: `--debug` is accepted after any subcommand too (`ksched config validate --debug F`),
    with the same effect as `ksched --debug ...`."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        root = next((p for p in self.params if p.name == "debug"), None)
        if root is not None:
            self._add_debug(self.commands.values(), root)

    @classmethod
    def _add_debug(cls, commands: Any, root: Any) -> None:
        for cmd in commands:
            if not any(p.name == "debug" for p in cmd.params):
                opt = copy.copy(root)
                opt.callback = _debug_after_subcommand
                opt.expose_value = False
                opt.is_eager = True
                cmd.params.append(opt)
            sub = getattr(cmd, "commands", None)
            if sub:
                cls._add_debug(sub.values(), root)


app = typer.Typer(
    name="ksched", cls=_KschedGroup, no_args_is_help=True, rich_markup_mode="rich", add_completion=False,
    help="Build, test and deploy Kubernetes scheduler variants whose plugins are written in Python.\n\n"
         "Start with [bold]ksched run[/] (schedules the bundled example cluster in memory) or "
         "[bold]ksched simulate --help[/].")
plugins_app = typer.Typer(no_args_is_help=True, help="Inspect the plugins ksched can run.")
app.add_typer(plugins_app, name="plugins")
app.add_typer(devcluster_app, name="dev-cluster")
app.command("deploy", epilog=DEPLOY_EPILOG)(deploy)
app.command("undeploy")(undeploy)
app.command("build", epilog=BUILD_EPILOG)(build)

app.add_typer(config_app, name="config", help="Validate, default, explain, migrate and render "
                                              "KubeSchedulerConfiguration files.")

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
DEFAULT_PLUGIN_DIR = Path("plugins")


def _version(value: bool) -> None:
    if value:
        print(f"ksched {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show Python tracebacks on errors.")] = False,
) -> None:
    DEBUG["on"] = debug


# ---------------------------------------------------------------------------- shared helpers

def _deadline(text: str) -> float:
    from .kube_flags import parse_go_duration

    return parse_go_duration(text, "plugin-deadline")


def _embedded_watchdog(deadline: float) -> Any:
    """Names a plugin stuck past the deadline on stderr, as `ksched run --kubeconfig` does in its log."""
    import logging

    from scheduler_runtime.watchdog import CycleWatchdog

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s] %(message)s")
    wd = CycleWatchdog(deadline)
    wd.start()
    return wd


def _registry(plugin_dirs: list[Path] | None) -> Any:
    from scheduler_runtime.framework.registry import build_registry

    dirs = list(plugin_dirs) if plugin_dirs else ([DEFAULT_PLUGIN_DIR] if DEFAULT_PLUGIN_DIR.is_dir() else [])
    for d in dirs:
        if not d.exists():
            raise InputError("plugin folder does not exist", file=str(d), usage=True)
        if not d.is_dir():
            raise InputError("not a directory: --plugin-dir names a folder of plugin packages", file=str(d),
                             usage=True)
    bundled = REPO_ROOT / "plugins"
    if bundled.is_dir() and all(d.resolve() != bundled.resolve() for d in dirs):
        dirs.append(bundled)
    reg = build_registry(dirs)
    for w in reg.warnings:
        if w not in _WARNED:
            _WARNED.add(w)
            warn(w)
    return reg


_WARNED: set[str] = set()


def _config(path: Path | None, registry: Any) -> Any:
    from scheduler_runtime.config import load_config

    if path is not None and not path.exists():
        raise InputError("no such file or directory", file=str(path), usage=True)
    return load_config(path, registry)


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


def _check_paths(paths: list[Path]) -> None:
    for p in paths:
        if not p.exists():
            raise InputError("no such file or directory", file=str(p), usage=True)


def _warn_if_empty(cluster: list[Path], pods: list[Path], n_nodes: int, n_pods: int) -> None:
    """Inputs that parse but hold nothing are almost always a mistake: say so (the command still succeeds)."""
    if n_nodes == 0 and cluster:
        warn(f"no nodes in {', '.join(map(str, cluster))}: every pod stays Pending")
    if n_pods == 0 and pods:
        warn(f"no pods in {', '.join(map(str, pods))}: nothing to schedule")


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


PluginDeadlineOpt = Annotated[str, typer.Option(
    "--plugin-deadline", help="How long a plugin may run in one cycle before it is named in the log "
                              "(Go duration); a binding cycle past it no longer holds up other pods. 0 disables.")]
PluginDirOpt = Annotated[list[Path] | None, typer.Option(
    "--plugin-dir", help="Folder of plugin packages (repeatable). Default: ./plugins when it exists.")]


# ---------------------------------------------------------------------------- run

@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             epilog="Examples:\n\n  ksched run\n\n  ksched run --config examples/configs/least-allocated.yaml\n\n"
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
    plugin_deadline: PluginDeadlineOpt = "30s",
) -> None:
    """Run the scheduler. Without a kubeconfig it runs on the embedded in-memory cluster and shows
    each decision live; it exits when nothing is left to schedule (--watch keeps it running)."""
    if kubeconfig is not None or ctx.args or _config_names_kubeconfig(config):
        def real() -> None:
            from .kube_flags import parse
            from .realrun import run_on_cluster

            argv = list(ctx.args)
            if kubeconfig is not None:
                argv.append(f"--kubeconfig={kubeconfig}")
            if config is not None:
                argv.append(f"--config={config}")
            for d in plugin_dir or []:
                argv.append(f"--plugin-dir={d}")
            if seed is not None:
                argv.append(f"--seed={seed}")
            argv.append(f"--plugin-deadline={plugin_deadline}")
            if cluster or pods:
                raise fail("--cluster/--pods are for the embedded cluster; drop them with --kubeconfig", EXIT_USAGE)
            flags = parse(argv)
            _no_kubeconfig_for_flags(list(ctx.args), flags, config)
            raise typer.Exit(run_on_cluster(flags, _registry))

        guarded(real)
        return

    def go() -> None:
        from scheduler_runtime.cluster.memory import MemoryCluster
        from scheduler_runtime.scheduler import Scheduler
        from scheduler_runtime.simulate import load_pods_in_order

        cluster_paths = cluster or [EXAMPLES / "cluster"]
        pod_paths = pods if pods is not None else ([] if cluster else [EXAMPLES / "pods.yaml"])
        _check_paths([*cluster_paths, *pod_paths])
        reg = _registry(plugin_dir)
        cfg = _config(config, reg)
        mem = MemoryCluster.from_paths(cluster_paths)
        pending = load_pods_in_order(pod_paths)
        _validate_pods(mem, pending)
        deadline = _deadline(plugin_deadline)
        n_nodes = len(mem.list("nodes"))
        _warn_if_empty(list(cluster_paths), list(pod_paths), n_nodes, len(pending))

        def show(d: Any) -> None:
            r = d.result
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
        for p in all_pods:  # never attempted, so the live view had nothing to say about them
            spec = p.get("spec") or {}
            gates = [g.get("name", "") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
            if gates and not spec.get("nodeName"):
                meta = p.get("metadata") or {}
                console.print(f"  [dim]⏸[/] {meta.get('namespace', 'default') + '/' + meta.get('name', ''):<28} "
                              f"Scheduling is blocked due to non-empty scheduling gates: {escape(', '.join(gates))}")
        console.print(f"done: {sched.scheduled} scheduled in {sched.attempts} attempts; "
                      f"{len(all_pods) - bound} pending; {len(mem.deleted)} preempted")
        for key, where in sorted(sched.detached_bindings.items()):
            console.print(f"[red]still binding:[/] {key} has been in {escape(where)} past the deadline")

    guarded(go)


# ---------------------------------------------------------------------------- simulate

@app.command(epilog="Examples:\n\n  ksched simulate --cluster examples/cluster --pods examples/pods.yaml --seed 1\n\n"
                    "  ksched simulate --cluster examples/cluster --pods examples/pods.yaml "
                    "--config examples/configs/least-allocated.yaml --compare examples/configs/most-allocated.yaml\n\n"
                    "  ksched simulate --cluster examples/cluster --pods examples/pods.yaml -o json")
def simulate(
    cluster: Annotated[list[Path], typer.Option("--cluster", help="Snapshot: YAML files or folders of nodes, "
                                                                  "bound pods, PDBs, services.")],
    pods: Annotated[list[Path], typer.Option("--pods", help="Pods to schedule, in order.")],
    config: Annotated[Path | None, typer.Option("--config", help="Config of variant A (default profile).")] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Config of variant B, shown side by side.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for tie-breaking; same seed, same placements.")] = 0,
    output: Annotated[str, typer.Option("-o", "--output", help="table, json or yaml.")] = "table",
    plugin_dir: PluginDirOpt = None,
    plugin_deadline: PluginDeadlineOpt = "30s",
) -> None:
    """Replay pods onto a cluster snapshot offline and print where each lands, why the rest are pending,
    and per-node utilisation; with --compare, two scheduler variants side by side."""

    def go() -> None:
        from scheduler_runtime.simulate import simulate as run_sim

        if output not in ("table", "json", "yaml"):
            raise fail(f"-o: unsupported output {output!r} (use table, json or yaml)", EXIT_USAGE)
        _check_paths([*cluster, *pods])
        reg = _registry(plugin_dir)
        cfg_a = _config(config, reg)
        cfg_b = _config(compare, reg) if compare is not None else None
        deadline = _deadline(plugin_deadline)
        results = [run_sim(cluster, pods, cfg_a, reg, seed=seed, label=str(config or "default"),
                           plugin_deadline=deadline)]
        _warn_if_empty(list(cluster), list(pods), len(results[0].usage), len(results[0].pods))
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

    guarded(go)


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


# ---------------------------------------------------------------------------- describe-pod

@app.command("describe-pod", epilog="Examples:\n\n  ksched describe-pod web-1 -n shop --kubeconfig ~/.kube/config\n\n"
                                   "  ksched describe-pod huge -n shop --cluster examples/cluster "
                                   "--pods examples/pods.yaml")
def describe_pod(
    name: Annotated[str, typer.Argument(help="Pod name.")],
    namespace: Annotated[str, typer.Option("-n", "--namespace", help="Pod namespace.")] = "default",
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", help="Read from this cluster.")] = None,
    cluster: Annotated[list[Path] | None, typer.Option(
        "--cluster", help="Embedded cluster to replay instead of a real one.")] = None,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Pods to schedule in the replay.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Config for the replay.")] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Why a pod landed where it did, or why it is pending: conditions, events, and per-plugin results
    recorded by ksched (filter verdicts by reason, score breakdown of the best nodes)."""

    def go() -> None:
        from scheduler_runtime.describe import describe
        from scheduler_runtime.objects import Node

        if output not in ("table", "json"):
            raise fail(f"-o: unsupported output {output!r} (use table or json)", EXIT_USAGE)
        if cluster:
            from scheduler_runtime.simulate import simulate as run_sim

            _check_paths([*cluster, *(pods or [])])
            reg = _registry(plugin_dir)
            res = run_sim(cluster, pods or [], _config(config, reg), reg, seed=0, keep_cluster=True)
            mem = res.cluster
            raw = mem.get_pod(namespace, name)
            if raw is None:
                raise InputError(f'pods "{name}" not found in namespace {namespace!r}', usage=False)
            events = [{"type": e.type, "reason": e.reason, "note": e.note, "reportingController":
                       e.reporting_controller, "eventTime": e.time} for e in mem.events_for(namespace, name)]
            nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in mem.list("nodes")}
            list_objects = mem.list
        else:
            from scheduler_runtime.cluster.kube import KubeClient, load_connection

            c = KubeClient(load_connection(kubeconfig))
            resp = c.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
            if resp.status == 404:
                raise InputError(f'pods "{name}" not found in namespace {namespace!r}', usage=False)
            if not resp.ok:
                raise c.error(resp, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
            raw = resp.json()
            ev = c.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                        query={"fieldSelector": f"regarding.name={name},regarding.kind=Pod"})
            events = sorted(({"type": e.get("type"), "reason": e.get("reason"), "note": e.get("note"),
                              "reportingController": e.get("reportingController"),
                              "eventTime": e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")}
                             for e in ev.get("items") or []), key=lambda e: e["eventTime"] or "")
            nodes = {n["metadata"]["name"]: Node.from_dict(n)
                     for n in c.call("GET", "/api/v1/nodes").get("items") or []}

            def list_objects(plural: str) -> list[dict[str, Any]]:
                r = c.request("GET", f"/apis/resource.k8s.io/v1/{plural}")
                return (r.json().get("items") or []) if r.ok else []
        d = describe(raw, events, nodes, list_objects)
        if output == "json":
            print(json.dumps(d.to_dict(), indent=2, default=str))
            return
        _print_description(d)

    guarded(go)


def _event_age(e: dict[str, Any]) -> str:
    """kubectl's AGE column: `2m (x5 over 10m)` for an EventSeries, `40s` for a single event."""
    from datetime import UTC, datetime

    def ago(ts: Any) -> str:
        if not ts:
            return "<unknown>"
        try:
            t = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        except ValueError:
            return "<unknown>"
        secs = max(0, int((datetime.now(UTC) - t).total_seconds()))
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if secs >= size:
                return f"{secs // size}{unit}"
        return f"{secs}s"

    first = e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")
    series = e.get("series") or {}
    count = int(series.get("count") or e.get("deprecatedCount") or 1)
    if count > 1:
        return f"{ago(series.get('lastObservedTime') or e.get('deprecatedLastTimestamp'))} (x{count} over {ago(first)})"
    return ago(first)


def _print_description(d: Any) -> None:
    console.print(f"[bold]Name:[/] {d.namespace}/{d.name}   [bold]Phase:[/] {d.phase}   "
                  f"[bold]Node:[/] {d.node or '<none>'}   [bold]Scheduler:[/] {d.scheduler}   "
                  f"[bold]Priority:[/] {d.priority}")
    if d.conditions:
        t = Table(title="Conditions", title_justify="left")
        for col in ("type", "status", "reason", "message"):
            t.add_column(col, overflow="fold")
        for c in d.conditions:
            t.add_row(str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "") or ""),
                      escape(str(c.get("message", "") or "")))
        console.print(t)
    if d.events:
        t = Table(title="Events", title_justify="left")
        for col in ("type", "reason", "age", "from", "message"):
            t.add_column(col, overflow="fold")
        for e in d.events:
            t.add_row(str(e.get("type", "")), str(e.get("reason", "")), _event_age(e),
                      str(e.get("reportingController", "")), escape(str(e.get("note", "") or "")))
        console.print(t)
    r = d.result
    if r:
        from scheduler_runtime.describe import filtering_completed

        error = r.get("outcome") == "error"
        # an error before a node was chosen leaves no feasible count worth showing (filtering did not finish)
        counts = (f" ({r.get('feasible', 0)} feasible of {r.get('num_nodes', 0)} nodes)" if filtering_completed(r)
                  else f" ({r.get('num_nodes', 0)} nodes)")
        # a retry with the same result does not rewrite the annotation (the pod keeps its resourceVersion,
        # so its events aggregate): the number is the first attempt that gave this result
        label = "Result of attempt" if r.get("outcome") == "scheduled" else "Result since attempt"
        console.print(f"[bold]{label}[/] #{r.get('attempt')} by profile {r.get('profile')}: "
                      f"{r.get('outcome')}" + (f" in plugin {escape(r['plugin'])}" if error and r.get("plugin") else "")
                      + (f" on {r['node']}" if r.get("node") else "") + counts)
        if error and r.get("message"):
            console.print(f"  [bold]Error:[/] {escape(r['message'])}")
        reasons = r.get("filter_reasons") or {}
        if reasons:
            t = Table(title="Filtered out", title_justify="left")
            for col in ("nodes", "plugin", "reason", "examples"):
                t.add_column(col, overflow="fold")
            for reason, info in sorted(reasons.items(), key=lambda kv: -kv[1].get("count", 0)):
                t.add_row(str(info.get("count", 0)), str(info.get("plugin", "")), escape(reason),
                          ", ".join(info.get("nodes", [])[:5]))
            console.print(t)
        scores = r.get("scores") or []
        if scores:
            from scheduler_runtime.describe import short_plugin_names

            plugin_names = sorted({p for s in scores for p in s.get("plugins", {})})
            headers = {p: p for p in plugin_names}
            cells = [max(len(s["node"]) for s in scores), 5] + [max(len(p), 7) for p in plugin_names]
            compact = sum(w + 3 for w in cells) + 1 > console.width
            if compact:  # full names would be cut to look-alikes: distinct short headers, a legend, less padding
                from rich import box

                headers = short_plugin_names(plugin_names)
                t = Table(title="Scores of the best nodes (normalized x weight)", title_justify="left",
                          box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
            else:
                t = Table(title="Scores of the best nodes (normalized x weight)", title_justify="left")
            t.add_column("node", overflow="fold")
            t.add_column("total", justify="right")
            for p in plugin_names:  # never split a header: the node column gives way instead
                t.add_column(escape(headers[p]), justify="right", overflow="fold",
                             min_width=len(headers[p]) if compact else None)
            for s in scores:
                row = [s["node"], str(s["total"])]
                for p in plugin_names:
                    v = s["plugins"].get(p)
                    row.append(f"{v['normalized']}x{v['weight']}" if v else "-")
                t.add_row(*row)
            console.print(t)
            line = ""
            for entry in (f"{headers[p]} = {p}" for p in plugin_names if headers[p] != p):
                if line and len(line) + len(entry) + 2 > console.width:
                    console.print(escape(line), soft_wrap=True)
                    line = ""
                line = f"{line}, {entry}" if line else f"  {entry}"
            if line:
                console.print(escape(line), soft_wrap=True)
        if r.get("extenders"):
            from scheduler_runtime.describe import extender_rows

            t = Table(title="Extenders", title_justify="left")
            for col in ("extender", "filter", "prioritize (score 0-10)", "preempt", "bind"):
                t.add_column(col, overflow="fold")
            for row in extender_rows(r):
                t.add_row(*(escape(c) for c in row))
            console.print(t)
    if d.summary:
        console.print("[bold]Why pending / what would help:[/]")
        for line in d.summary:
            console.print(f"  • {escape(line)}")


# ---------------------------------------------------------------------------- new-plugin

@app.command("new-plugin", epilog="Examples:\n\n  ksched new-plugin NetworkCost --points prefilter,filter,score\n\n"
                                  "  ksched new-plugin ZoneQuota --points filter --args maxPods:int=10 "
                                  "--args zones:list=a;b --dir plugins/")
def new_plugin(
    name: Annotated[str, typer.Argument(help="PascalCase plugin name, e.g. NetworkCost.")],
    points: Annotated[str, typer.Option("--points", help="Extension points, comma-separated: preEnqueue, "
                                        "queueSort, preFilter, filter, postFilter, preScore, score, reserve, "
                                        "permit, preBind, bind, postBind.")] = "filter,score",
    args: Annotated[list[str] | None, typer.Option("--args", help="An args field key:type=default "
                                                   "(types str, int, float, bool, list with ';' between items); "
                                                   "repeat for more.")] = None,
    directory: Annotated[Path, typer.Option("--dir", help="Plugin folder to create it in.")] = DEFAULT_PLUGIN_DIR,
    description: Annotated[str, typer.Option("--description", help="One line: what the plugin does.")] = "",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing folder of that name.")] = False,
) -> None:
    """Scaffold a plugin: code with every chosen extension point, an args model, README, a unit test that
    passes out of the box, and an example config. It is listed by `ksched plugins list` at once."""
    def go() -> None:
        from .newplugin import parse_arg, parse_points, scaffold

        pts = parse_points(points)
        parsed = [parse_arg(a) for a in args or []]
        reg = _registry([directory] if directory.is_dir() else None)
        known = set(reg.plugins) | set(reg.unsupported)
        done = scaffold(name, pts, parsed, directory, known, force=force, description=description)
        folder = done.folder
        console.print(f"[green]{'wrote' if done.kept else 'created'}[/] {escape(str(folder))}/ "
                      f"({', '.join(sorted(done.written))})", highlight=False)
        if done.kept:
            console.print(f"left alone (not generated by new-plugin): {escape(', '.join(done.kept))}")
        console.print("next:\n"
                      f"  pytest {folder}/test_{folder.name}.py\n"
                      f"  ksched config validate --plugin-dir {directory} {folder}/example-config.yaml\n"
                      f"  ksched simulate --plugin-dir {directory} --cluster examples/cluster --pods "
                      f"examples/pods.yaml --config {folder}/example-config.yaml")

    guarded(go)


# ---------------------------------------------------------------------------- plugins

@plugins_app.command("list", epilog="Examples:\n\n  ksched plugins list\n\n  ksched plugins list -o json")
def plugins_list(
    output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    plugin_dir: PluginDirOpt = None,
) -> None:
    """List every plugin: name, extension points, where it comes from, and its args with defaults."""

    def go() -> None:
        reg = _registry(plugin_dir)
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
        if output == "json":
            print(json.dumps(rows, indent=2, default=str))
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

    guarded(go)


def entry() -> None:  # pragma: no cover
    app(prog_name="ksched")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

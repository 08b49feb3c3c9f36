"""`ksched describe-pod`: why a pod landed where it did or why it is pending, from a real cluster or a replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scheduler_runtime.errors import InputError

from ..cluster_opts import ContextOpt, KubeconfigOpt, default_namespace, kube_client
from ..guard import EXIT_USAGE, fail
from ..inputs import PluginDirOpt, check_paths, registry
from ..inputs import config as load_config
from ..output import emit, output_option

console = Console(highlight=False, soft_wrap=True)

EPILOG = ("Examples:\n\n  ksched describe-pod web-1 -n shop --kubeconfig ~/.kube/config\n\n"
          "  ksched describe-pod huge -n shop --cluster examples/cluster "
          "--pods examples/pods.yaml")


def register(app: typer.Typer) -> None:
    app.command("describe-pod", epilog=EPILOG)(describe_pod)


def describe_pod(
    name: Annotated[str, typer.Argument(help="Pod name.")],
    namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="Pod namespace (default: the "
                                                  "kubeconfig context's namespace, else default).")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster: Annotated[list[Path] | None, typer.Option(
        "--cluster", help="Embedded cluster to replay instead of a real one.")] = None,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Pods to schedule in the replay.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Config for the replay.")] = None,
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Why a pod landed where it did, or why it is pending: conditions, events, and per-plugin results
    recorded by ksched (filter verdicts by reason, score breakdown of the best nodes)."""

    from scheduler_runtime.describe import describe
    from scheduler_runtime.objects import Node

    if cluster and (kubeconfig is not None or context is not None):
        raise fail("--cluster replays offline; drop --kubeconfig/--context (or --cluster to read the cluster)",
                   EXIT_USAGE)
    if namespace is None:
        namespace = "default" if cluster else default_namespace(kubeconfig, context)
    if cluster:
        from scheduler_runtime.simulate import simulate as run_sim

        check_paths([*cluster, *(pods or [])])
        reg = registry(plugin_dir)
        res = run_sim(cluster, pods or [], load_config(config, reg), reg, seed=0, keep_cluster=True)
        mem = res.cluster
        raw = mem.get_pod(namespace, name)
        if raw is None:
            raise InputError(f'pods "{name}" not found in namespace {namespace!r}', usage=False)
        events = [{"type": e.type, "reason": e.reason, "note": e.note, "reportingController":
                   e.reporting_controller, "eventTime": e.time} for e in mem.events_for(namespace, name)]
        nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in mem.list("nodes")}
        list_objects = mem.list
    else:
        c = kube_client(kubeconfig, context)
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
    if output != "table":
        emit(json.loads(json.dumps(d.to_dict(), default=str)), output)
        return
    _print_description(d)


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

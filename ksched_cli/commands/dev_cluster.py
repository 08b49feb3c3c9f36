"""`ksched dev-cluster`: a real local etcd + kube-apiserver for users without a cluster at hand."""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..guard import fail, warn

if TYPE_CHECKING:
    from scheduler_runtime.devcluster import Source

app = typer.Typer(no_args_is_help=True, help="A local control plane (etcd + kube-apiserver) to run ksched "
                                             "against, with KWOK nodes that stay Ready and run bound pods: up, "
                                             "down, kubeconfig, status.")



def register(root: typer.Typer) -> None:
    root.add_typer(app, name="dev-cluster")


def _dir() -> Path:
    return Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched")) / "dev-cluster"


StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where certificates, etcd data and logs live.")]


NodesOpt = Annotated[str | None, typer.Option(
    "--nodes", metavar="N|FILE",
    help="KWOK nodes kept Ready by the kwok controller: a count (N nodes of 8 CPU / 32Gi over zones a-c) or a "
         "YAML file or folder whose Node objects are registered (other objects in it, such as bound pods, are "
         "created too); - reads standard input.")]
FilenameOpt = Annotated[list[str] | None, typer.Option(
    "-f", "--filename", metavar="FILE",
    help="Objects to create once the nodes are Ready (pods, namespaces, PriorityClasses, PDBs...); "
         "repeatable; - reads standard input.")]
TimeoutOpt = Annotated[str, typer.Option("--timeout", help="How long to wait for the nodes to become Ready (a Go "
                                                              "duration, as kubectl wait's --timeout).")]


@app.command(epilog="Examples:\n\n  ksched dev-cluster up --nodes 3\n\n"
                    "  ksched dev-cluster up --nodes examples/cluster -f examples/pods.yaml\n\n"
                    "  ksched run --kubeconfig $(ksched dev-cluster kubeconfig) --leader-elect=false "
                    "--secure-port=0")
def up(state_dir: StateOpt = None, nodes: NodesOpt = None, filename: FilenameOpt = None,
       timeout: TimeoutOpt = "2m") -> None:
    """Start etcd and kube-apiserver on free loopback ports; prints the kubeconfig path.

    With --nodes, kube-controller-manager's node lifecycle controller and the kwok controller run too: the
    nodes turn Ready (heartbeats and leases) and pods bound to them turn Running. What was done goes to
    stderr, one line per refused object with the API server's reason; exit 1 when any was refused or a node
    did not become Ready (the cluster stays up: `ksched dev-cluster down` stops it)."""

    from scheduler_runtime import devcluster, kwok
    from scheduler_runtime.controlplane import ControlPlane
    from scheduler_runtime.errors import UsageError
    from scheduler_runtime.goduration import parse_seconds

    try:
        wait = parse_seconds(timeout)
    except ValueError as exc:
        raise UsageError(f"--timeout {timeout}: {exc}") from None
    if wait <= 0:
        raise UsageError(f"--timeout {timeout}: must be positive")
    source = devcluster.load_source(nodes, filename or []) if nodes is not None or filename else None
    if source is not None and source.nodes:
        kwok.find_kwok()  # before anything starts: no half-made cluster when kwok is not built
    d = state_dir or _dir()
    st = ControlPlane.load_state(d)
    if st is None or not _ready(d):
        if st is not None:  # a cluster that is not ready: stop what is left of it (only if still ours)
            for r in ControlPlane.stop_detached(d) or []:
                print(f"previous dev cluster: {r.line()}", file=sys.stderr)
        d.mkdir(parents=True, exist_ok=True)
        cp = ControlPlane(state_dir=d, detached=True)
        cp.start()
        cp.save_state()
    kubeconfig_path = d / "admin.kubeconfig"
    if source is None:
        print(kubeconfig_path)
        return
    _load(d, source, wait)
    print(kubeconfig_path)


def _load(d: Path, source: Source, timeout: float) -> None:
    """Start the node agents if needed, register nodes, wait for Ready, create the objects, say what happened."""
    from scheduler_runtime import devcluster
    from scheduler_runtime.cluster.kube import KubeClient, load_connection
    from scheduler_runtime.controlplane import ControlPlane

    client = KubeClient(load_connection(str(d / "admin.kubeconfig"), fallbacks=False))
    node_outcomes: list[devcluster.Outcome] = []
    ready: list[str] = []
    not_ready: list[str] = []
    if source.nodes:
        st = ControlPlane.load_state(d) or {}
        started = devcluster.start_node_agents(d, st)
        if started:
            devcluster.add_processes(d, started)
            for name, pid in started:
                print(f"started {name} (pid {pid}, log {d / name}.log)", file=sys.stderr)
        node_outcomes = devcluster.register_nodes(client, source.nodes)
        names = [o.name for o in node_outcomes if o.result != "refused"]
        ready, not_ready = devcluster.wait_nodes_ready(client, names, timeout,
                                                       devcluster.agents_alive(d, dict(started)))
    objects = devcluster.create_all(client, source.objects)
    summary = devcluster.Summary(node_outcomes, ready, not_ready, objects)
    for line in summary.lines():
        print(line, file=sys.stderr)
    for line in devcluster.unknown_bindings(client, objects):
        warn(line)
    problems = []
    if not_ready:
        problems.append(f"{len(not_ready)} node(s) not Ready after {timeout:g} s (see {d / 'kwok.log'} and "
                        f"{d / 'kube-controller-manager.log'})")
    if summary.refused:
        problems.append(f"{len(summary.refused)} object(s) refused by the API server (listed above)")
    if problems:
        print(d / "admin.kubeconfig")
        raise fail("; ".join(problems) + "; the dev cluster is up (`ksched dev-cluster down` stops it)", 1)


@app.command()
def down(state_dir: StateOpt = None,
         grace_period: Annotated[float, typer.Option("--grace-period", min=0, help="Seconds to wait after SIGTERM "
                                                     "before sending SIGKILL.")] = 15.0) -> None:
    """Stop the dev cluster (its data stays in the state dir; `up` reuses it).

    Signals only processes that still match what `up` recorded (pid, start time, command line), so a
    stale state file never kills an unrelated process; one line per process says how it ended."""

    from scheduler_runtime.controlplane import ControlPlane

    report = ControlPlane.stop_detached(state_dir or _dir(), grace=grace_period)
    if report is None:
        raise fail("no dev cluster is running", 1)
    for r in report:
        print(r.line())
    left = [r for r in report if not r.gone]
    if left:
        raise fail(f"{', '.join(r.name for r in left)} may still be running; the state file "
                   f"{(state_dir or _dir()) / 'state.json'} is kept", 1)
    print("stopped")


@app.command()
def kubeconfig(state_dir: StateOpt = None) -> None:
    """Print the admin kubeconfig path of the running dev cluster."""
    d = state_dir or _dir()
    if not (d / "admin.kubeconfig").exists():
        raise fail("no dev cluster: run `ksched dev-cluster up`", 1)
    print(d / "admin.kubeconfig")


def _ready(d: Path) -> bool:
    from scheduler_runtime.controlplane import ControlPlane

    st = ControlPlane.load_state(d)
    if st is None:
        return False
    try:
        ctx = ssl.create_default_context(cafile=str(d / "pki" / "ca.crt"))
        ctx.load_cert_chain(str(d / "pki" / "admin.crt"), str(d / "pki" / "admin.key"))
        with urllib.request.urlopen(f"https://127.0.0.1:{st['api_port']}/readyz", timeout=3,  # noqa: S310
                                    context=ctx) as r:
            return r.status == 200
    except Exception:
        return False


@app.command()
def status(state_dir: StateOpt = None) -> None:
    """Say whether the dev cluster is up and ready, which of its processes run, and its nodes and pods."""
    from scheduler_runtime import devcluster
    from scheduler_runtime.controlplane import ControlPlane

    d = state_dir or _dir()
    st = ControlPlane.load_state(d)
    if st is None:
        raise fail("dev cluster is not running", 1)
    procs = [(name, ident, devcluster.running(ident)) for name, ident in devcluster.recorded(st)]
    if not _ready(d):
        for name, ident, alive in procs:
            print(f"{name} pid {ident.pid if ident else '?'}: {'running' if alive else 'not running'}")
        raise fail(f"dev cluster at https://127.0.0.1:{st['api_port']} is not ready (logs in {d})", 1)
    print(f"ready: https://127.0.0.1:{st['api_port']} (kubeconfig {d / 'admin.kubeconfig'})")
    for name, ident, alive in procs:
        print(f"{name} pid {ident.pid if ident else '?'}: {'running' if alive else 'not running'} "
              f"(log {d / name}.log)")
    from scheduler_runtime.cluster.kube import KubeClient, load_connection

    client = KubeClient(load_connection(str(d / "admin.kubeconfig"), fallbacks=False))
    for line in devcluster.node_and_pod_counts(client):
        print(line)
    if not any(name == "kwok" for name, _, _ in procs):
        print("no kwok controller: nodes stay NotReady (`ksched dev-cluster up --nodes N|FILE` starts it)")
    dead = [name for name, _, alive in procs if not alive]
    if dead:
        raise fail(f"{', '.join(dead)} not running (logs in {d})", 1)

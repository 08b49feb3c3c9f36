"""`ksched dev-cluster`: a real local etcd + kube-apiserver for users without a cluster at hand."""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Annotated

import typer

from ..guard import fail

app = typer.Typer(no_args_is_help=True, help="A local control plane (etcd + kube-apiserver, no kubelet) to run "
                                             "ksched against: up, down, kubeconfig, status.")



def register(root: typer.Typer) -> None:
    root.add_typer(app, name="dev-cluster")


def _dir() -> Path:
    return Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched")) / "dev-cluster"


StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where certificates, etcd data and logs live.")]


@app.command(epilog="Example:\n\n  ksched dev-cluster up && ksched run --kubeconfig $(ksched dev-cluster kubeconfig) "
                    "--leader-elect=false")
def up(state_dir: StateOpt = None) -> None:
    """Start etcd and kube-apiserver on free loopback ports; prints the kubeconfig path."""

    from scheduler_runtime.controlplane import ControlPlane

    d = state_dir or _dir()
    st = ControlPlane.load_state(d)
    if st is not None and _ready(d):
        print(d / "admin.kubeconfig")
        return
    if st is not None:  # a cluster that is not ready: stop what is left of it (only if still ours)
        for r in ControlPlane.stop_detached(d) or []:
            print(f"previous dev cluster: {r.line()}", file=sys.stderr)
    d.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane(state_dir=d)
    cp.start()
    cp.save_state()
    print(cp.kubeconfig_path)


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
    """Say whether the dev cluster is up and ready."""
    from scheduler_runtime.controlplane import ControlPlane

    d = state_dir or _dir()
    st = ControlPlane.load_state(d)
    if st is None:
        raise fail("dev cluster is not running", 1)
    if _ready(d):
        print(f"ready: https://127.0.0.1:{st['api_port']} (kubeconfig {d / 'admin.kubeconfig'})")
    else:
        raise fail(f"dev cluster at https://127.0.0.1:{st['api_port']} is not ready (logs in {d})", 1)

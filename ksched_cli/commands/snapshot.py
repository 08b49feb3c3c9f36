"""`ksched snapshot`: capture a live cluster's scheduling state (secrets stripped) for `ksched simulate`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from ..cluster_opts import ContextOpt, KubeconfigOpt
from ..guard import warn
from ..output import output_option

EPILOG = ("Examples:\n\n  ksched snapshot --kubeconfig ~/.kube/config --context prod --write-to snap.yaml\n\n"
          "  ksched simulate --snapshot snap.yaml --config current.yaml --compare candidate.yaml "
          "--report whatif.html\n\n"
          "  ksched snapshot -n shop -o json | jq '.items | length'")
FORMATS = ("yaml", "json")


def register(app: typer.Typer) -> None:
    app.command("snapshot", epilog=EPILOG)(snapshot)


def snapshot(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: Annotated[str | None, typer.Option("-n", "--namespace", help=(
        "Only this namespace's pods, claims, PVCs, PDBs... (cluster-scoped objects are always captured). "
        "Default: all namespaces."))] = None,
    write_to: Annotated[Path | None, typer.Option("--write-to", help=(
        "Write the snapshot to this file (replaced atomically) instead of standard output."))] = None,
    output: Annotated[str, output_option(FORMATS)] = "yaml",
) -> None:
    """Capture what scheduling depends on from a live cluster: nodes, pods, volumes (PVs, PVCs,
    StorageClasses, CSINodes, CSIDrivers), PDBs, PriorityClasses, namespaces and DRA objects, as one
    v1 List for `ksched simulate --snapshot`. Secrets and env values are stripped."""
    from scheduler_runtime.atomicfile import check_output_path, write_output
    from scheduler_runtime.snapshot import take_from_kubeconfig

    if write_to is not None:
        check_output_path(write_to)
    snap = take_from_kubeconfig(kubeconfig, context, namespace)
    if output == "json":
        text = json.dumps(snap.to_list(), indent=2) + "\n"
    else:
        text = snap.header() + yaml.safe_dump(snap.to_list(), sort_keys=False, allow_unicode=True)
    for missing in snap.not_served:
        warn(f"{missing} is not served by {snap.server}: not captured")
    counts = snap.counts()
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    summary = f"{summary or 'no objects'} ({snap.unbound_pods()} pod(s) without a node)"
    if write_to is None:
        sys.stdout.write(text)
        print(f"snapshot of {snap.server}: {summary}", file=sys.stderr)
        return
    write_output(write_to, text)
    print(f"wrote {write_to}: {summary}")

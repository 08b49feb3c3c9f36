"""The options every command that reaches a cluster takes, with kubectl's meaning: `--kubeconfig` (else
$KUBECONFIG, else ~/.kube/config, else the pod's service account), `--context` (else the kubeconfig's
current-context) and `-n/--namespace`. `ksched run` is the exception for `--kubeconfig`: it keeps
kube-scheduler's rule (scheduler_runtime.kubeconfig_source)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

KubeconfigOpt = Annotated[str | None, typer.Option(
    "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's service "
                         "account).")]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="Kubeconfig context to use (default: its current-context).")]


def kube_client(kubeconfig: str | None, context: str | None = None) -> Any:
    """A client for the cluster these options name (kubectl's lookup order)."""
    from scheduler_runtime.cluster.kube import KubeClient, load_connection

    return KubeClient(load_connection(kubeconfig, context))

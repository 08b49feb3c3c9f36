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


def default_namespace(kubeconfig: str | None, context: str | None = None) -> str:
    """kubectl's namespace when -n is not given: the context's `namespace`, in a pod its own namespace,
    else `default`. A kubeconfig that cannot be read gives `default` here; the connection names the problem."""
    from pathlib import Path

    from scheduler_runtime.cluster.kube import find_kubeconfig

    path = find_kubeconfig(kubeconfig)
    if path is None:
        return "default"
    if path == "in-cluster":
        ns = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        return (ns.read_text().strip() if ns.is_file() else "") or "default"
    try:
        from kubernetes.config.kube_config import list_kube_config_contexts

        contexts, current = list_kube_config_contexts(path)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    except Exception:  # noqa: BLE001 - reported properly when the connection is made
        return "default"

"""`ksched version`: this client's version, the Kubernetes release whose scheduler it follows, and the
server's version when a cluster is named (like `kubectl version`)."""

from __future__ import annotations

import platform
from typing import Annotated, Any

import typer

from scheduler_runtime import __version__
from scheduler_runtime.featuregates import EMULATABLE
from scheduler_runtime.kubeversion import KUBE_VERSION

from ..cluster_opts import ContextOpt, KubeconfigOpt, kube_client
from ..output import emit, output_option

KUBERNETES_VERSION = f"v{KUBE_VERSION}"


def register(app: typer.Typer) -> None:
    app.command("version", epilog="Examples:\n\n  ksched version\n\n  ksched version -o json\n\n"
                                  "  ksched version --kubeconfig ~/.kube/config --context prod")(version)


def version(
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Print the client version, the Kubernetes version whose kube-scheduler ksched behaves like, and the
    API server's version when --kubeconfig or --context is given."""
    info: dict[str, Any] = {
        "clientVersion": {"ksched": __version__, "python": platform.python_version()},
        "kubernetesVersion": KUBERNETES_VERSION,
        "emulatableVersions": list(EMULATABLE),
    }
    if kubeconfig is not None or context is not None:
        client = kube_client(kubeconfig, context)
        try:
            info["serverVersion"] = client.call("GET", "/version")
        finally:
            client.close()
    if output != "table":
        emit(info, output)
        return
    print(f"Client Version: ksched {__version__} (Python {info['clientVersion']['python']})")
    print(f"Kubernetes Version: {KUBERNETES_VERSION} (the kube-scheduler release ksched follows; "
          f"--emulated-version {'|'.join(EMULATABLE)})")
    if "serverVersion" in info:
        print(f"Server Version: {info['serverVersion'].get('gitVersion', '?')}")

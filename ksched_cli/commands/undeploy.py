"""`ksched undeploy`: remove a second scheduler that `ksched deploy --second-scheduler` created."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from ..cluster_opts import ContextOpt, KubeconfigOpt
from ..guard import EXIT_USAGE, fail
from .deploy import console, kube_client, say


def register(app: typer.Typer) -> None:
    app.command("undeploy")(undeploy)


def undeploy(
    second_scheduler: Annotated[bool, typer.Option("--second-scheduler", help="Remove a second scheduler "
                                                   "deployed by `ksched deploy --second-scheduler`.")] = False,
    name: Annotated[str, typer.Option("--name", help="Its --name.")] = "ksched-scheduler",
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Its --namespace.")] = "kube-system",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Remove a second scheduler: its Deployment, ConfigMap, RBAC and ServiceAccount (found by label).
    A static-pod deployment is undone with `ksched deploy --static-pod --rollback`."""

    from ..deploy import secondsched

    if not second_scheduler:
        raise fail("pass --second-scheduler (a static pod is undone with `ksched deploy --static-pod --rollback`)",
                   EXIT_USAGE)
    secondsched.check_name(name)
    secondsched.check_namespace_name(namespace)
    client = kube_client(kubeconfig, context)
    found = secondsched.find_deployed(client, name, namespace)
    if not found:
        say(f"nothing to remove: no objects labelled {secondsched.label_selector(name)} "
            f"(namespace {namespace} and cluster-wide)")
        return

    def report(obj: dict[str, Any], outcome: str) -> None:
        console.print(f"  {escape(secondsched.describe(obj))} {outcome}")

    secondsched.delete_objects(client, found, report)
    say(f"removed {len(found)} object(s) of {name}; pods whose spec.schedulerName named it now stay "
        f"Pending until another scheduler serves that name")

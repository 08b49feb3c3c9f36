"""Which kubeconfig the scheduler uses, decided exactly as kube-scheduler 1.36 decides it.

kube-scheduler (cmd/kube-scheduler/app/options: `ApplyTo`, `createKubeConfig`) calls client-go's
`BuildConfigFromFlags(--master, kubeconfig)` where `kubeconfig` is `clientConnection.kubeconfig` of the
`--config` file when one is given (the deprecated `--kubeconfig` flag is then ignored), else `--kubeconfig`.
With neither a kubeconfig nor `--master` it uses the in-cluster service account. It never reads
`$KUBECONFIG` or `~/.kube/config`. `choose` returns that decision with the reason, for one log line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import KschedError, UsageError

NOT_READ_NOTE = "$KUBECONFIG is not read, as in kube-scheduler"
IGNORED_NOTE = "--kubeconfig is ignored when --config is given, as in kube-scheduler"


@dataclass(frozen=True)
class KubeconfigSource:
    """`path` is the kubeconfig to read, or None for the in-cluster service account (or `master` alone);
    `context` the kubeconfig context to use instead of its current-context (ksched's --context)."""

    path: str | None
    why: str
    notes: tuple[str, ...] = ()
    master: str | None = None
    context: str | None = None

    def describe(self) -> str:
        """The start-up log line: which kubeconfig and why."""
        if self.path is not None:
            head = f"using kubeconfig {self.path} {self.why}"
        elif self.master:
            head = f"using no kubeconfig, only --master {self.master} {self.why}"
        else:
            head = f"using the in-cluster service account {self.why}"
        if self.context and self.path is not None:
            head += f", context {self.context}"
        if self.master and self.path is not None:
            head += f", with the server overridden by --master {self.master}"
        return head + (f" ({'; '.join(self.notes)})" if self.notes else "")


def choose(*, config_file: str | None, config_kubeconfig: str | None, flag_kubeconfig: str | None,
           master: str | None = None, environ: Mapping[str, str] | None = None,
           context: str | None = None) -> KubeconfigSource:
    """kube-scheduler's choice for these flags and config (see the module docstring). `context` (ksched's
    --context; kube-scheduler has none) picks a context of the chosen kubeconfig: without one it is a
    usage error, since the in-cluster account has no contexts."""
    env = os.environ if environ is None else environ
    notes: list[str] = []
    if config_file is not None:
        if flag_kubeconfig:
            notes.append(IGNORED_NOTE)
        path = config_kubeconfig or None
        why = "from --config clientConnection.kubeconfig" if path else \
            f"because clientConnection.kubeconfig in {config_file} is empty"
    else:
        path = flag_kubeconfig or None
        why = "from --kubeconfig" if path else "because neither --kubeconfig nor --config was given"
    if env.get("KUBECONFIG") and env.get("KUBECONFIG") != path:
        notes.append(NOT_READ_NOTE)
    if context and path is None:
        raise UsageError(f"--context {context}: no kubeconfig to take it from ({why}); give --kubeconfig"
                         + (" or clientConnection.kubeconfig in --config" if config_file is not None else ""))
    return KubeconfigSource(path=path, why=why, notes=tuple(notes), master=master or None, context=context or None)


def require_usable(source: KubeconfigSource, in_cluster: bool, *, config_file: str | None,
                   flag_kubeconfig: str | None) -> None:
    """Refuse, with what to do, a choice of the in-cluster account outside a pod (kube-scheduler fails too,
    with "no configuration has been provided")."""
    if source.path is not None or source.master or in_cluster:
        return
    if config_file is not None and flag_kubeconfig:
        fix = (f"--kubeconfig is ignored when --config is given (as in kube-scheduler): set "
               f"clientConnection.kubeconfig: {flag_kubeconfig} in {config_file}")
    elif config_file is not None:
        fix = f"set clientConnection.kubeconfig in {config_file}"
    else:
        fix = "pass --kubeconfig"
    if os.environ.get("KUBECONFIG"):
        fix += f" ({NOT_READ_NOTE}: pass it explicitly)"
    raise KschedError(f"no kubeconfig: {source.why}, so the in-cluster service account would be used, but this is "
                      f"not a pod (KUBERNETES_SERVICE_HOST and the service account token are missing): {fix}",
                      usage=True)

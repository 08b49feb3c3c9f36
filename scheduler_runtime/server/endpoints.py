"""What the secure port answers once a request is authorized: kube-scheduler's health and metrics paths.

Follows k8s.io/apiserver's healthz package as kube-scheduler installs it: `/healthz`, `/livez`, `/readyz`
answer `ok` (or the `[+]`/`[-]` list and `<root> check passed|failed` with `?verbose`, or when something
failed; unlike kube, failure reasons are shown rather than withheld), `/<root>/<check>` runs a
single check, `/metrics` is the Prometheus text format, anything else is `404 page not found`. A kubeadm
static pod probes https://127.0.0.1:10259/livez and /readyz, so a patched manifest's probes keep working.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .serving import Request, Response

#: a check returns None when fine, or the reason it is not
Check = Callable[[], str | None]

_ROOTS = ("/healthz", "/livez", "/readyz")


class Endpoints:
    """Routes an authorized request; `checks` feed /readyz, `live_checks` feed /healthz and /livez."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry
        self.checks: dict[str, Check] = {}
        self.live_checks: dict[str, Check] = {}

    def __call__(self, req: Request) -> Response:
        path = req.path  # like Go's handlers, any method is answered (authorization saw the verb)
        for root in _ROOTS:
            checks = self.checks if root == "/readyz" else self.live_checks
            if path == root:
                verbose = "verbose" in parse_qs(req.query, keep_blank_values=True)
                code, body = evaluate(checks, verbose, root[1:])
                return Response(code, body.encode())
            if path.startswith(root + "/") and path[len(root) + 1:] in checks:
                name = path[len(root) + 1:]
                code, body = evaluate({name: checks[name]}, False, root[1:])
                return Response(code, body.encode())
        if path == "/metrics" and self.registry is not None:
            return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
        return Response(404, b"404 page not found\n")


def evaluate(checks: dict[str, Check], verbose: bool, root: str = "healthz") -> tuple[int, str]:
    lines, failed = [], []
    for name, fn in checks.items():
        try:
            reason = fn()
        except Exception as exc:  # a broken check is a failed check
            reason = f"{type(exc).__name__}: {exc}"
        if reason:
            failed.append(name)
            lines.append(f"[-]{name} failed: {reason}")
        else:
            lines.append(f"[+]{name} ok")
    if failed:
        return 500, "\n".join(lines) + f"\n{root} check failed\n"
    return 200, ("\n".join(lines) + f"\n{root} check passed\n") if verbose else "ok"

"""What the secure port answers once a request is authorized: kube-scheduler's health and metrics paths.

Follows k8s.io/apiserver's healthz package as kube-scheduler installs it: `/healthz`, `/livez`, `/readyz`
answer `ok` (or the `[+]`/`[-]` list and `<root> check passed|failed` with `?verbose`, or when something
failed; unlike kube, failure reasons are shown rather than withheld), `/<root>/<check>` runs a
single check, `/metrics` is the Prometheus text format, `/metrics/resources` and `/metrics/slis` the pod
resource and health-check SLI metrics (resource_metrics), `/configz`, `/flagz`, `/statusz` the z-pages
(zpages) and `/debug/...` the profiles when profiling is on (profiling); anything else is
`404 page not found`. A kubeadm static pod probes https://127.0.0.1:10259/livez and /readyz, so a patched
manifest's probes keep working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .serving import Request, Response

if TYPE_CHECKING:
    from .profiling import Profiling
    from .resource_metrics import HealthSLIs
    from .zpages import ZPages

#: a check returns None when fine, or the reason it is not
Check = Callable[[], str | None]

_ROOTS = ("/healthz", "/livez", "/readyz")


class Endpoints:
    """Routes an authorized request; `checks` feed /readyz, `live_checks` feed /healthz and /livez."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry
        self.checks: dict[str, Check] = {}
        self.live_checks: dict[str, Check] = {}
        #: set by the runner: /metrics/resources, /metrics/slis, the z-pages and the profiling handlers
        self.resources: CollectorRegistry | None = None
        self.slis: HealthSLIs | None = None
        self.zpages: ZPages | None = None
        self.profiling: Profiling | None = None
        #: --disabled-metrics: fully qualified family names left out of every metrics path
        self.disabled_metrics: set[str] = set()

    def _evaluate(self, checks: dict[str, Check], verbose: bool, root: str) -> tuple[int, str]:
        record = self.slis.record if self.slis is not None else None
        return evaluate(checks, verbose, root, record)

    def __call__(self, req: Request) -> Response:
        path = req.path  # like Go's handlers, any method is answered (authorization saw the verb)
        for root in _ROOTS:
            checks = self.checks if root == "/readyz" else self.live_checks
            if path == root:
                verbose = "verbose" in parse_qs(req.query, keep_blank_values=True)
                code, body = self._evaluate(checks, verbose, root[1:])
                return Response(code, body.encode())
            if path.startswith(root + "/") and path[len(root) + 1:] in checks:
                name = path[len(root) + 1:]
                code, body = self._evaluate({name: checks[name]}, False, root[1:])
                return Response(code, body.encode())
        if path == "/metrics" and self.registry is not None:
            return self._metrics(self.registry)
        if path == "/metrics/resources" and self.resources is not None:
            return self._metrics(self.resources)
        if path == "/metrics/slis" and self.slis is not None:
            return self._metrics(self.slis.registry)
        for extra in (self.zpages, self.profiling):
            if extra is not None and (resp := extra.handle(req)) is not None:
                return resp
        return Response(404, b"404 page not found\n")


    def _metrics(self, registry: CollectorRegistry) -> Response:
        source: Any = _Without(registry, self.disabled_metrics) if self.disabled_metrics else registry
        return Response(200, generate_latest(source), CONTENT_TYPE_LATEST)


class _Without:
    """A registry view without the disabled families (a counter's family is named without `_total`)."""

    def __init__(self, registry: CollectorRegistry, disabled: set[str]) -> None:
        self.registry = registry
        self.disabled = disabled

    def collect(self) -> Iterator[Any]:
        for fam in self.registry.collect():
            if fam.name not in self.disabled and f"{fam.name}_total" not in self.disabled:
                yield fam


def evaluate(checks: dict[str, Check], verbose: bool, root: str = "healthz",
             record: Callable[[str, str, bool], None] | None = None) -> tuple[int, str]:
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
        if record is not None:
            record(root, name, not reason)
    if failed:
        return 500, "\n".join(lines) + f"\n{root} check failed\n"
    return 200, ("\n".join(lines) + f"\n{root} check passed\n") if verbose else "ok"

"""kube-scheduler's secure port (default 10259): HTTPS serving, delegated authn/authz, health and metrics.

`serving` holds the listener (TLS per connection, limits), `auth` the kube-style authentication and
authorization filter, `endpoints` the paths. `HealthServer` puts them together in kube's order:
authenticate (401), authorize (403), then route (404).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from .auth import DelegatedAuthOptions, DelegatingAuth
from .endpoints import Check, Endpoints, evaluate
from .serving import SecureServer, ServingError, ServingOptions

__all__ = ["Check", "DelegatedAuthOptions", "HealthServer", "ServingError", "ServingOptions", "evaluate"]


class HealthServer:
    """The secure port on background threads: construct (binds the port), `start()`, `stop()`."""

    def __init__(self, serving: ServingOptions, registry: CollectorRegistry | None = None,
                 auth: DelegatedAuthOptions | None = None, *, authn_client: Any = None,
                 authz_client: Any = None) -> None:
        self.endpoints = Endpoints(registry)
        self.auth: DelegatingAuth | None = None
        self._server = SecureServer(serving, self._handle)
        try:
            self.auth = DelegatingAuth(auth or DelegatedAuthOptions(), on_client_ca=self._server.set_client_ca,
                                       authn_client=authn_client, authz_client=authz_client)
        except BaseException:
            self._server.stop()
            raise
        self._filtered = self.auth.wrap(self.endpoints)
        self.port = self._server.port
        self.scheme = self._server.scheme

    def _handle(self, req: Any) -> Any:
        return self._filtered(req)

    @property
    def checks(self) -> dict[str, Check]:
        return self.endpoints.checks

    @checks.setter
    def checks(self, value: dict[str, Check]) -> None:
        self.endpoints.checks = value

    @property
    def live_checks(self) -> dict[str, Check]:
        return self.endpoints.live_checks

    @live_checks.setter
    def live_checks(self, value: dict[str, Check]) -> None:
        self.endpoints.live_checks = value

    @property
    def serving(self) -> SecureServer:
        return self._server

    def start(self) -> HealthServer:
        assert self.auth is not None
        self.auth.start()
        self._server.start()
        return self

    def stop(self) -> None:
        if self.auth is not None:
            self.auth.stop()
        self._server.stop()

"""Delegated authentication and authorization on the secure port, as kube-scheduler does it.

Follows k8s.io/apiserver's `DelegatingAuthenticationOptions` / `DelegatingAuthorizationOptions` with
kube-scheduler's settings (both kubeconfigs optional, in-cluster lookup failures tolerated):

* authentication, first success wins: front-proxy request headers (client certificate from the
  request-header CA, CN in `--requestheader-allowed-names`), client certificates (`--client-ca-file`, else
  the `client-ca-file` key of ConfigMap kube-system/extension-apiserver-authentication), bearer tokens via
  TokenReview (results cached `--authentication-token-webhook-cache-ttl`, 10s). No credentials =
  `system:anonymous`; credentials that fail = 401.
* authorization, union in order: group `system:masters`, `--authorization-always-allow-paths` (default
  /healthz,/readyz,/livez; exact, or a prefix with a trailing `*`), then SubjectAccessReview for the
  non-resource path and the lower-case HTTP verb (allowed/denied cached 10s each). Nothing allows = 403;
  a review that could not be made = 500.
* without `--authentication-kubeconfig` / `--authorization-kubeconfig` the in-cluster service account is
  used when running in a pod; otherwise token review, the ConfigMap lookup and SubjectAccessReview are off
  (a warning says so) and everything outside the always-allowed paths is forbidden. `--kubeconfig` is not
  a fallback: kube-scheduler does not use it here either.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backoff import BackoffPolicy
from ..errors import KschedError, UsageError
from .serving import Request, Response

log = logging.getLogger("ksched.auth")

CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
ANONYMOUS = "system:anonymous"
_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_BACKOFF = BackoffPolicy(0.5, factor=1.5, jitter=(1.0, 1.2), steps=5)  # kube's webhook retry backoff
_CA_RESYNC = 30.0  # how often the client-CA files and ConfigMap are re-read (kube watches them)


class AuthConfigError(KschedError):
    """The delegated-auth configuration cannot be loaded (with --authentication-tolerate-lookup-failure=false)."""

    usage = False


@dataclass
class DelegatedAuthOptions:
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    client_ca_file: str | None = None
    requestheader_client_ca_file: str | None = None
    requestheader_allowed_names: list[str] = field(default_factory=list)
    requestheader_username_headers: list[str] = field(default_factory=lambda: ["x-remote-user"])
    requestheader_group_headers: list[str] = field(default_factory=lambda: ["x-remote-group"])
    requestheader_extra_headers_prefix: list[str] = field(default_factory=lambda: ["x-remote-extra-"])
    requestheader_uid_headers: list[str] = field(default_factory=list)
    skip_lookup: bool = False
    tolerate_lookup_failure: bool = True  # kube-scheduler's default
    token_cache_ttl: float = 10.0
    authorized_ttl: float = 10.0
    unauthorized_ttl: float = 10.0
    always_allow_paths: list[str] = field(default_factory=lambda: ["/healthz", "/readyz", "/livez"])
    always_allow_groups: list[str] = field(default_factory=lambda: ["system:masters"])


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Unauthenticated(Exception):
    """Credentials were presented and failed (401)."""


class PathAuthorizer:
    """`--authorization-always-allow-paths`: exact paths, or prefixes written with a trailing `*`."""

    def __init__(self, paths: list[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for p in paths:
            p = p.strip().removeprefix("/")
            if not p:
                self.exact.add("")
                continue
            if "*" in p[:-1]:
                raise UsageError(f'--authorization-always-allow-paths: only trailing * allowed in "{p}"')
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def allows(self, path: str) -> bool:
        p = path.removeprefix("/")
        return p in self.exact or any(p.startswith(x) for x in self.prefixes)


class _TTLCache:
    def __init__(self) -> None:
        self._d: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            hit = self._d.get(key)
            if hit is None:
                return None
            if hit[0] < time.monotonic():
                del self._d[key]
                return None
            return hit[1]

    def put(self, key: str, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            if len(self._d) > 10000:  # bound memory under a flood of distinct tokens
                now = time.monotonic()
                self._d = {k: v for k, v in self._d.items() if v[0] >= now}
                if len(self._d) > 10000:
                    self._d.clear()
            self._d[key] = (time.monotonic() + ttl, value)


def _in_cluster_client() -> Any:
    """rest.InClusterConfig(): the pod's service account, or None when not in a pod."""
    from ..cluster.kube import Connection, KubeClient

    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token = _SA_DIR / "token"
    if not host or not port or not token.is_file():
        return None
    lock = threading.Lock()
    cache: dict[str, Any] = {"at": -1e9, "v": None}

    def auth(force: bool = False) -> str | None:
        with lock:
            if force or time.monotonic() - cache["at"] > 60:
                cache["v"], cache["at"] = "Bearer " + token.read_text().strip(), time.monotonic()
            return cache["v"]

    h = f"[{host}]" if ":" in host else host
    ca = _SA_DIR / "ca.crt"
    conn = Connection(host=f"https://{h}:{port}", ca_file=str(ca) if ca.is_file() else None,
                      source="in-cluster service account", auth=auth)
    return KubeClient(conn, qps=200, burst=400, timeout=10.0)


def delegated_client(kubeconfig: str | None, what: str) -> Any:
    """The client for TokenReview/SubjectAccessReview: the given kubeconfig, else in-cluster, else None."""
    from ..cluster.kube import KubeClient, load_connection

    if kubeconfig:
        try:
            conn = load_connection(kubeconfig)
        except KschedError as exc:
            raise KschedError(f"--{what}-kubeconfig: {exc}",
                              usage=exc.usage if exc.usage is not None else True) from None
        return KubeClient(conn, qps=200, burst=400, timeout=10.0)
    client = _in_cluster_client()
    if client is None:
        log.warning("No %s-kubeconfig provided and not running in a cluster: %s", what,
                    "token reviews and the client-CA lookup are off" if what == "authentication"
                    else "SubjectAccessReview is off; only --authorization-always-allow-paths and "
                         "system:masters are allowed")
    return client


def _post_review(client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a review with kube's webhook retry backoff; raises KschedError when no answer came."""
    from ..cluster.kube import ApiError

    steps = _BACKOFF.steps or 1
    for attempt in range(steps):
        try:
            resp = client.request("POST", path, body=body, timeout=10.0)
        except ApiError as exc:
            err: Exception = exc
        else:
            if resp.ok:
                return resp.json()
            err = client.error(resp, "POST", path)
            if resp.status < 500 and resp.status != 429:
                raise err
        if attempt + 1 < steps:
            time.sleep(_BACKOFF.delay(attempt + 1))
    raise err


def _json_list(v: Any) -> list[str]:
    if not v:
        return []
    out = json.loads(v)
    if not isinstance(out, list) or not all(isinstance(x, str) for x in out):
        raise ValueError("not a JSON array of strings")
    return out


def _load_pem_certs(pem: bytes) -> list[Any]:
    from cryptography import x509

    return x509.load_pem_x509_certificates(pem) if pem.strip() else []


class DelegatingAuth:
    """Authenticates and authorizes requests; `wrap(handler)` gives the filtered handler kube installs."""

    def __init__(self, opts: DelegatedAuthOptions, *, on_client_ca: Callable[[bytes | None], None] | None = None,
                 authn_client: Any = None, authz_client: Any = None) -> None:
        self.opts = opts
        self.paths = PathAuthorizer(opts.always_allow_paths)
        self.on_client_ca = on_client_ca
        self.authn = authn_client if authn_client is not None else delegated_client(
            opts.authentication_kubeconfig, "authentication")
        self.authz = authz_client if authz_client is not None else delegated_client(
            opts.authorization_kubeconfig, "authorization")
        self._tokens = _TTLCache()
        self._decisions = _TTLCache()
        self._client_ca: bytes = b""
        self._client_cas: list[Any] = []
        self._rh_ca: bytes = b""
        self._rh_cas: list[Any] = []
        # request-header settings: flags, else the ConfigMap (read once at start, as kube does)
        self._rh_from_configmap = False
        self.rh_allowed = list(opts.requestheader_allowed_names)
        self.rh_user = [h.lower() for h in opts.requestheader_username_headers]
        self.rh_uid = [h.lower() for h in opts.requestheader_uid_headers]
        self.rh_group = [h.lower() for h in opts.requestheader_group_headers]
        self.rh_extra = [h.lower() for h in opts.requestheader_extra_headers_prefix]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file_stamp: dict[str, float] = {}
        self._load_initial()

    # ------------------------------------------------------------------ client CAs
    def _read_file(self, path: str, flag: str) -> bytes:
        try:
            data = Path(path).read_bytes()
            if not _load_pem_certs(data):
                raise ValueError("no certificate in it")
            self._file_stamp[path] = Path(path).stat().st_mtime
            return data
        except FileNotFoundError:
            raise UsageError(f"{flag} {path}: no such file") from None
        except OSError as exc:
            raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"{flag} {path}: not a PEM certificate bundle: {exc}") from None

    def _configmap(self) -> dict[str, str]:
        from ..cluster.kube import ApiError

        try:
            return (self.authn.call("GET", CONFIGMAP) or {}).get("data") or {}
        except ApiError as exc:
            raise AuthConfigError(f"cannot read configmap/extension-apiserver-authentication in kube-system: "
                                  f"{exc}") from None

    def _load_initial(self) -> None:
        o = self.opts
        if o.client_ca_file:
            self._client_ca = self._read_file(o.client_ca_file, "--client-ca-file")
        if o.requestheader_client_ca_file:
            self._rh_ca = self._read_file(o.requestheader_client_ca_file, "--requestheader-client-ca-file")
        need_lookup = not o.skip_lookup and (not o.client_ca_file or not o.requestheader_client_ca_file)
        if need_lookup and self.authn is None:
            log.warning("No authentication-kubeconfig provided in order to lookup client-ca-file and "
                        "requestheader-client-ca-file in configmap/extension-apiserver-authentication in "
                        "kube-system, so client certificate authentication won't work.")
        elif need_lookup:
            try:
                data = self._configmap()
                if not o.requestheader_client_ca_file and data.get("requestheader-client-ca-file"):
                    self._apply_requestheader(data)
                if not o.client_ca_file:
                    self._client_ca = data.get("client-ca-file", "").encode()
            except (AuthConfigError, ValueError) as exc:
                if not o.tolerate_lookup_failure:
                    raise AuthConfigError(f"unable to load configmap based request-header-client-ca-file: {exc} "
                                          "(--authentication-tolerate-lookup-failure=false)") from None
                log.error("Error looking up in-cluster authentication configuration: %s", exc)
                log.error("Continuing without authentication configuration. This may treat all requests as "
                          "anonymous.")
        self._publish_ca()

    def _apply_requestheader(self, data: dict[str, str]) -> None:
        ca = data["requestheader-client-ca-file"].encode()
        _load_pem_certs(ca)
        self.rh_allowed = _json_list(data.get("requestheader-allowed-names"))
        self.rh_user = [h.lower() for h in _json_list(data.get("requestheader-username-headers"))]
        self.rh_uid = [h.lower() for h in _json_list(data.get("requestheader-uid-headers"))]
        self.rh_group = [h.lower() for h in _json_list(data.get("requestheader-group-headers"))]
        self.rh_extra = [h.lower() for h in _json_list(data.get("requestheader-extra-headers-prefix"))]
        self._rh_ca = ca
        self._rh_from_configmap = True

    def _publish_ca(self) -> None:
        try:
            self._client_cas = _load_pem_certs(self._client_ca)
        except ValueError as exc:
            log.error("client CA bundle unusable: %s", exc)
            self._client_cas = []
        try:
            self._rh_cas = _load_pem_certs(self._rh_ca)
        except ValueError as exc:
            log.error("request-header CA bundle unusable: %s", exc)
            self._rh_cas = []
        bundle = b"\n".join(x for x in (self._client_ca.strip(), self._rh_ca.strip()) if x)
        if self.on_client_ca is not None:
            self.on_client_ca(bundle or None)

    def _resync(self) -> None:
        """Re-read changed CA files and the ConfigMap's CAs (kube watches both and swaps them live)."""
        o = self.opts
        changed = False
        for path, attr in ((o.client_ca_file, "_client_ca"), (o.requestheader_client_ca_file, "_rh_ca")):
            if not path:
                continue
            try:
                if Path(path).stat().st_mtime != self._file_stamp.get(path):
                    data = self._read_file(path, "")
                    changed |= data != getattr(self, attr)
                    setattr(self, attr, data)
            except (OSError, UsageError) as exc:
                log.error("re-reading %s: %s", path, exc)
        if self.authn is not None and not o.skip_lookup and (not o.client_ca_file or self._rh_from_configmap):
            try:
                data = self._configmap()
            except AuthConfigError as exc:
                log.warning("%s (keeping the last client CAs)", exc)
            else:
                if not o.client_ca_file:
                    new = data.get("client-ca-file", "").encode()
                    changed |= new != self._client_ca
                    self._client_ca = new
                if self._rh_from_configmap and data.get("requestheader-client-ca-file"):
                    new = data["requestheader-client-ca-file"].encode()
                    changed |= new != self._rh_ca
                    self._rh_ca = new
        if changed:
            log.info("client CA bundle changed")
            self._publish_ca()

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(_CA_RESYNC):
                try:
                    self._resync()
                except Exception:  # the resync must never stop
                    log.exception("client CA resync failed")

        self._thread = threading.Thread(target=loop, name="client-ca-resync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for c in (self.authn, self.authz):
            if c is not None:
                c.close()

    # ------------------------------------------------------------------ authentication
    def authenticate(self, req: Request) -> User | None:
        """The user, None for no credentials (anonymous); raises Unauthenticated when credentials fail."""
        errors: list[str] = []
        if req.peer_cert is not None and req.peer_cert_error:
            errors.append(req.peer_cert_error)  # kube's x509 authenticator: a failed certificate is no identity
        elif req.peer_cert is not None:
            cert = _load_der(req.peer_cert)
            if self._rh_cas:
                try:
                    user = self._requestheader(req, cert)
                    if user is not None:
                        return user
                except Unauthenticated as exc:
                    errors.append(str(exc))
            if self._client_cas:
                if _issued_by(cert, self._client_cas) or not self._rh_cas:
                    return _cert_user(cert)
                errors.append("x509: certificate signed by unknown authority")
        user = self._token(req, errors)
        if user is not None:
            return user
        if errors:
            raise Unauthenticated("; ".join(errors))
        return None

    def _requestheader(self, req: Request, cert: Any) -> User | None:
        from cryptography.x509.oid import NameOID

        if not _issued_by(cert, self._rh_cas):
            raise Unauthenticated("request-header: client certificate not signed by the request-header CA")
        if self.rh_allowed:
            cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
            if not cn or cn[0] not in self.rh_allowed:
                raise Unauthenticated(f"request-header: client certificate CN {cn[0] if cn else ''!r} is not "
                                      "in --requestheader-allowed-names")
        name = next((v for h in self.rh_user for v in req.headers.get(h, []) if v), None)
        if not name:
            return None
        uid = next((v for h in self.rh_uid for v in req.headers.get(h, []) if v), "")
        groups = [v for h in self.rh_group for v in req.headers.get(h, [])]
        extra: dict[str, list[str]] = {}
        for prefix in self.rh_extra:
            for h, vals in req.headers.items():
                if h.startswith(prefix) and len(h) > len(prefix):
                    from urllib.parse import unquote

                    extra.setdefault(unquote(h[len(prefix):]).lower(), []).extend(vals)
        return _with_authenticated(User(name, uid, tuple(groups), _freeze(extra)))

    def _token(self, req: Request, errors: list[str]) -> User | None:
        value = (req.header("authorization") or "").strip()
        parts = value.split(" ", 2)
        if self.authn is None or len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
            return None
        token = parts[1]
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self._tokens.get(key)
        if hit is None:
            try:
                review = _post_review(self.authn, "/apis/authentication.k8s.io/v1/tokenreviews", {
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
            except KschedError as exc:
                errors.append(f"token review failed: {exc}")  # not cached: the next request asks again
                return None
            st = review.get("status") or {}
            if st.get("authenticated"):
                u = st.get("user") or {}
                extra = {k: list(v or []) for k, v in (u.get("extra") or {}).items()}
                hit = ("ok", _with_authenticated(User(u.get("username", ""), u.get("uid", ""),
                                                      tuple(u.get("groups") or ()), _freeze(extra))))
            else:
                hit = ("err", st.get("error") or "invalid bearer token")
            self._tokens.put(key, hit, self.opts.token_cache_ttl)
        if hit[0] == "ok":
            return hit[1]
        errors.append(hit[1])
        return None

    # ------------------------------------------------------------------ authorization
    def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason); raises KschedError when the review could not be made (500)."""
        if set(user.groups) & set(self.opts.always_allow_groups):
            return True, ""
        if self.paths.allows(path):
            return True, ""
        if self.authz is None:
            return False, ""
        spec: dict[str, Any] = {"nonResourceAttributes": {"path": path, "verb": verb}, "user": user.name,
                                "groups": list(user.groups), "extra": {k: list(v) for k, v in user.extra}}
        if user.uid:
            spec["uid"] = user.uid
        key = json.dumps(spec, sort_keys=True)
        hit = self._decisions.get(key)
        if hit is None:
            review = _post_review(self.authz, "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
            st = review.get("status") or {}
            hit = (bool(st.get("allowed")) and not st.get("denied"), st.get("reason") or "")
            self._decisions.put(key, hit, self.opts.authorized_ttl if hit[0] else self.opts.unauthorized_ttl)
        return hit

    # ------------------------------------------------------------------ the filter
    def wrap(self, handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def filtered(req: Request) -> Response:
            try:
                user = self.authenticate(req)
            except Unauthenticated as exc:
                log.debug("Unable to authenticate the request: %s", exc)
                return _status(401, "Unauthorized", "Unauthorized", details=False)
            if user is None:
                user = User(ANONYMOUS, "", ("system:unauthenticated",))
            verb = req.method.lower()
            try:
                allowed, reason = self.authorize(user, verb, req.path)
            except KschedError as exc:
                return _status(500, f"Internal error occurred: {exc}", "InternalError",
                               causes=[{"message": str(exc)}])
            if not allowed:
                msg = f'forbidden: User "{user.name}" cannot {verb} path "{req.path}"'
                return _status(403, f"{msg}: {reason}" if reason else msg, "Forbidden")
            return handler(req)

        return filtered


def _status(code: int, message: str, reason: str, *, details: bool = True,
            causes: list[dict[str, str]] | None = None) -> Response:
    """A metav1.Status body, as kube's responsewriters write it."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if details:
        body["details"] = {"causes": causes} if causes else {}
    body["code"] = code
    return Response(code, json.dumps(body, separators=(",", ":")).encode() + b"\n", "application/json")


def _load_der(der: bytes) -> Any:
    from cryptography import x509

    return x509.load_der_x509_certificate(der)


def _issued_by(cert: Any, cas: list[Any]) -> bool:
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
            return True
        except Exception:  # noqa: BLE001 - InvalidSignature, a key type that cannot sign, ...
            continue
    return False


def _cert_user(cert: Any) -> User:
    from cryptography.x509.oid import NameOID

    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return _with_authenticated(User(str(cn[0].value) if cn else "", "", tuple(str(o.value) for o in orgs)))


def _freeze(extra: dict[str, list[str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((k, tuple(v)) for k, v in extra.items()))


def _with_authenticated(u: User) -> User:
    """kube's AuthenticatedGroupAdder: every authenticated user is in system:authenticated."""
    if u.name == ANONYMOUS or "system:authenticated" in u.groups:
        return u
    return User(u.name, u.uid, (*u.groups, "system:authenticated"), u.extra)

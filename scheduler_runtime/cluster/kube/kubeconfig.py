"""Where the API server is and how to authenticate: kubeconfig files checked and read, or the pod's account.

Follows client-go v0.36.3 tools/clientcmd (loader.go: $KUBECONFIG lists merged, first entry wins;
validation.go: what a usable context needs) and rest/config.go InClusterConfig. The official `kubernetes`
client only turns the file (or the service account) into host, TLS material and credentials; every request
after that goes through `rest.KubeClient`. Problems are one-line `KubeConfigError`s naming the file and field.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import KschedError


class KubeConfigError(KschedError):
    """No usable kubeconfig / in-cluster configuration."""



@dataclass
class Connection:
    """Where the server is and how to authenticate, as read from a kubeconfig or the pod's account."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    source: str = ""
    #: returns the Authorization header value (or None); `force=True` re-reads expiring credentials
    auth: Callable[[bool], str | None] | None = None


def _kubeconfig_candidates(explicit: str | os.PathLike[str] | None) -> str | None:
    if explicit:
        return str(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    return None


_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account (client-go's InClusterConfig inputs)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(_SERVICE_ACCOUNT_TOKEN).is_file()


def find_kubeconfig(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """Where `load_connection` would read from: the kubeconfig path(s), "in-cluster", or None if nowhere."""
    path = _kubeconfig_candidates(explicit)
    if path is not None:
        return path
    if in_cluster():
        return "in-cluster"
    home = Path("~/.kube/config").expanduser()
    return str(home) if home.is_file() else None


def _kc_error(message: str, *, usage: bool) -> KubeConfigError:
    return KubeConfigError(message, usage=usage)


def _read_kubeconfig_file(p: str) -> dict[str, Any]:
    """One kubeconfig file as a mapping; unreadable, empty or malformed files are usage/I-O errors (exit 2)."""
    from ... import yamlio
    from ...errors import InputError
    from .. import apishape

    try:
        doc = yamlio.load_file_one(Path(p).expanduser(), what="a kubeconfig mapping (apiVersion: v1, kind: Config)")
    except InputError as exc:
        raise _kc_error(f"{p}: {exc.detail} (kubeconfig)", usage=True) from None
    try:  # client-go decodes into typed structs: a list where a string belongs is refused there too
        apishape.check(doc, apishape.KUBECONFIG)
    except InputError as exc:
        raise _kc_error(f"{p}: {exc.field}: {exc.detail}", usage=False) from None
    return doc


def _named_entries(doc: dict[str, Any], key: str, inner: str, where: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """`clusters`, `contexts` or `users` by name: name -> (index, the inner mapping)."""
    items = doc.get(key)
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _kc_error(f"{where}: {key}: must be a list, got a {type(items).__name__}", usage=False)
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _kc_error(f"{where}: {key}[{i}]: must be a mapping", usage=False)
        name = item.get("name")
        if not name or not isinstance(name, str):
            raise _kc_error(f"{where}: {key}[{i}].name: Required value", usage=False)
        body = item.get(inner)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise _kc_error(f"{where}: {key}[{i}].{inner}: must be a mapping", usage=False)
        out.setdefault(name, (i, body))  # the first one wins, as when kubeconfig files are merged
    return out


def check_kubeconfig(path: str, context: str | None = None) -> None:
    """Check kubeconfig file(s) (`path` may list several, separated as in $KUBECONFIG) before the client reads
    them, so every problem is one line naming the file and the field: read/parse problems are usage errors
    (exit 2), a parsed file missing what a connection needs is invalid (exit 1)."""
    files = [p for p in path.split(os.pathsep) if p]
    docs = [(p, _read_kubeconfig_file(p)) for p in files]
    if not docs:
        raise _kc_error("no kubeconfig found: KUBECONFIG is empty", usage=True)
    where = docs[0][0] if len(docs) == 1 else path
    merged: dict[str, dict[str, tuple[int, dict[str, Any], str]]] = {"clusters": {}, "contexts": {}, "users": {}}
    current = None
    for p, doc in docs:
        for key, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            for name, (i, body) in _named_entries(doc, key, inner, p).items():
                merged[key].setdefault(name, (i, body, p))
        cc = doc.get("current-context")
        if current is None and cc:
            current = (str(cc), p)
    if context is not None:
        name, src, field_ = context, where, "context"
    elif current is None:
        if not merged["clusters"]:
            raise _kc_error(f"{where}: clusters: Required value: the kubeconfig defines no cluster", usage=False)
        raise _kc_error(f"{where}: current-context: Required value: no context is selected "
                        f"(kubectl config use-context NAME)", usage=False)
    else:
        (name, src), field_ = current, "current-context"
    if name not in merged["contexts"]:
        raise _kc_error(f'{src}: {field_}: Invalid value: "{name}": no such entry in contexts', usage=False)
    i, ctx, src = merged["contexts"][name]
    cluster = ctx.get("cluster")
    if not cluster:
        raise _kc_error(f"{src}: contexts[{i}].context.cluster: Required value", usage=False)
    if not merged["clusters"]:
        raise _kc_error(f"{where}: clusters: Required value: the kubeconfig defines no cluster", usage=False)
    if cluster not in merged["clusters"]:
        raise _kc_error(f'{src}: contexts[{i}].context.cluster: Invalid value: "{cluster}": no such entry in '
                        f'clusters', usage=False)
    user = ctx.get("user")
    if user and user not in merged["users"]:
        raise _kc_error(f'{src}: contexts[{i}].context.user: Invalid value: "{user}": no such entry in users',
                        usage=False)
    j, cl, csrc = merged["clusters"][cluster]
    if not cl.get("server"):
        raise _kc_error(f"{csrc}: clusters[{j}].cluster.server: Required value", usage=False)


def load_connection(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None, *,
                    fallbacks: bool = True, master: str | None = None) -> Connection:
    """Read connection details: an explicit kubeconfig, else $KUBECONFIG, else the in-cluster service
    account, else ~/.kube/config. Raises KubeConfigError with a one-line message.

    `fallbacks=False` is kube-scheduler's rule (client-go's BuildConfigFromFlags): the explicit kubeconfig,
    else the in-cluster account; never $KUBECONFIG or ~/.kube/config. `master` overrides the server, and
    with no kubeconfig is used alone (no credentials), as kube-scheduler's --master."""
    if master and not kubeconfig and not fallbacks:
        return Connection(host=master.rstrip("/"), source=f"--master {master}")
    import yaml  # type: ignore[import-untyped]
    from kubernetes import client as kclient
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    cfg = kclient.Configuration()
    path = _kubeconfig_candidates(kubeconfig) if fallbacks else (str(kubeconfig) if kubeconfig else None)
    source = ""
    try:
        if path is None and (in_cluster() or not fallbacks):
            kconfig.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            source = "in-cluster service account"
        else:
            if path is None:
                home = Path("~/.kube/config").expanduser()
                if not home.is_file():
                    raise _kc_error("no kubeconfig found: pass --kubeconfig, set KUBECONFIG or "
                                    "clientConnection.kubeconfig, or run in a pod with a service account", usage=True)
                path = str(home)
            check_kubeconfig(path, context)
            kconfig.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, client_configuration=cfg, persist_config=False)
            source = f"kubeconfig {path}"
    except KubeConfigError:
        raise
    except ConfigException as exc:
        msg = " ".join(str(exc).split())
        raise KubeConfigError(f"{source or ('kubeconfig ' + str(path)) if path else 'in-cluster config'}: "
                              f"{msg}", usage=False) from None
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeConfigError(f"kubeconfig {path}: {msg}", usage=isinstance(exc, OSError)) from None

    lock = threading.Lock()
    cache: dict[str, Any] = {"at": -1e9, "value": None}  # value: str | None

    def auth(force: bool = False) -> str | None:
        with lock:
            now = time.monotonic()
            if force or now - cache["at"] > 10.0:
                value = None
                if cfg.api_key or cfg.refresh_api_key_hook is not None:
                    value = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
                if not value and (cfg.username or cfg.password):
                    value = cfg.get_basic_auth_token()
                cache["value"], cache["at"] = value, now
            cached: str | None = cache["value"]
            return cached

    host = (master or cfg.host).rstrip("/")
    return Connection(host=host, ca_file=cfg.ssl_ca_cert, cert_file=cfg.cert_file, key_file=cfg.key_file,
                      verify=bool(cfg.verify_ssl), tls_server_name=getattr(cfg, "tls_server_name", None),
                      proxy=getattr(cfg, "proxy", None), source=source, auth=auth)


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


@dataclass
class Selected:
    """What the chosen context names: its cluster and user entries, and the files they came from."""

    cluster: dict[str, Any]
    cluster_file: str
    user: dict[str, Any]
    user_file: str
    single_file: bool


def check_kubeconfig(path: str, context: str | None = None) -> Selected:
    """Check kubeconfig file(s) (`path` may list several, separated as in $KUBECONFIG) before the client reads
    them, so every problem is one line naming the file and the field: read/parse problems are usage errors
    (exit 2), a parsed file missing what a connection needs is invalid (exit 1). Returns the entries the
    context selects."""
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
    _, us, usrc = merged["users"][user] if user else (0, {}, csrc)
    return Selected(cl, csrc, us, usrc, len(docs) == 1)


#: the entries `_direct_connection` reads itself; anything else (exec and auth-provider plugins, token files,
#: basic auth, proxies, impersonation, both a file and its -data) goes through the `kubernetes` client's loader
_DIRECT_CLUSTER = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify",
                   "tls-server-name", "extensions"}
_DIRECT_USER = {"token", "client-certificate", "client-key", "client-certificate-data", "client-key-data",
                "extensions"}
_material_dir: str | None = None


def _material_file(data: str, what: str) -> str:
    """A `*-data` field (base64 PEM) in a private file for the TLS layer, removed when the process ends (the
    `kubernetes` loader writes these to temporary files too)."""
    import atexit
    import base64
    import binascii
    import shutil
    import tempfile

    global _material_dir
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what}: not valid base64") from None
    if _material_dir is None:
        _material_dir = tempfile.mkdtemp(prefix="ksched-kubeconfig-")
        atexit.register(shutil.rmtree, _material_dir, True)
    fd, name = tempfile.mkstemp(dir=_material_dir)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return name


def _direct_connection(sel: Selected, source: str) -> Connection | None:
    """The connection of a kubeconfig that names only a server, TLS files or data and a static token or client
    certificate, read without importing the `kubernetes` client (most of a start's CPU); None otherwise.
    Relative file names are relative to the kubeconfig file that holds them, as client-go resolves them."""
    cl, us = sel.cluster, sel.user
    if not sel.single_file or set(cl) - _DIRECT_CLUSTER or set(us) - _DIRECT_USER:
        return None
    pairs = (("certificate-authority", cl), ("client-certificate", us), ("client-key", us))
    if any(k in d and f"{k}-data" in d for k, d in pairs):
        return None
    if not isinstance(cl.get("insecure-skip-tls-verify", False), bool):
        return None

    def file_or_data(key: str, entry: dict[str, Any], base: str) -> str | None:
        if entry.get(f"{key}-data"):
            return _material_file(str(entry[f"{key}-data"]), f"{source}: {key}-data")
        value = entry.get(key)
        if not value:
            return None
        p = Path(str(value)).expanduser()
        full = str(p if p.is_absolute() else Path(os.path.abspath(Path(base).expanduser().parent)) / p)
        if not os.path.isfile(full):
            raise ValueError(f"File does not exist: {full}")  # the kubernetes loader's check and words
        return full

    ca = file_or_data("certificate-authority", cl, sel.cluster_file)
    cert = file_or_data("client-certificate", us, sel.user_file)
    key = file_or_data("client-key", us, sel.user_file)
    token = us.get("token")
    header = f"Bearer {token}" if token else None

    def auth(force: bool = False) -> str | None:
        return header  # a static token: nothing to re-read
    return Connection(host=str(cl["server"]).rstrip("/"), ca_file=ca, cert_file=cert, key_file=key,
                      verify=not cl.get("insecure-skip-tls-verify", False),
                      tls_server_name=cl.get("tls-server-name") or None, source=source,
                      auth=auth if header else None)


def load_connection(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None, *,
                    fallbacks: bool = True, master: str | None = None) -> Connection:
    """Read connection details: an explicit kubeconfig, else $KUBECONFIG, else the in-cluster service
    account, else ~/.kube/config. Raises KubeConfigError with a one-line message.

    `fallbacks=False` is kube-scheduler's rule (client-go's BuildConfigFromFlags): the explicit kubeconfig,
    else the in-cluster account; never $KUBECONFIG or ~/.kube/config. `master` overrides the server, and
    with no kubeconfig is used alone (no credentials), as kube-scheduler's --master."""
    if master and not kubeconfig and not fallbacks:
        return Connection(host=master.rstrip("/"), source=f"--master {master}")
    path = _kubeconfig_candidates(kubeconfig) if fallbacks else (str(kubeconfig) if kubeconfig else None)
    incluster = path is None and (in_cluster() or not fallbacks)
    if not incluster:
        if path is None:
            home = Path("~/.kube/config").expanduser()
            if not home.is_file():
                raise _kc_error("no kubeconfig found: pass --kubeconfig, set KUBECONFIG or "
                                "clientConnection.kubeconfig, or run in a pod with a service account", usage=True)
            path = str(home)
        selected = check_kubeconfig(path, context)
        try:
            direct = _direct_connection(selected, f"kubeconfig {path}")
        except (OSError, ValueError) as exc:
            raise KubeConfigError(f"kubeconfig {path}: {' '.join(str(exc).split())}",
                                  usage=isinstance(exc, OSError)) from None
        if direct is not None:
            if master:
                direct.host = master.rstrip("/")
            return direct
    import yaml  # type: ignore[import-untyped]
    from kubernetes import client as kclient
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    cfg = kclient.Configuration()
    source = ""
    try:
        if incluster:
            kconfig.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            source = "in-cluster service account"
        else:
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


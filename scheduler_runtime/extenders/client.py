"""One extender over HTTP(S): kube-scheduler's HTTPExtender, its wire format and its error messages.

Requests are `POST <urlPrefix without trailing />/<verb>` with a JSON body whose keys are the Go field
names of k8s.io/kube-scheduler/extender/v1 (no json tags there); responses are read as Go's encoding/json
reads them: keys matched case-insensitively, unknown keys ignored, a wrong type is an error.
"""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
from typing import Any

import orjson
import urllib3

from ..errors import InputError
from ..objects import Node, Pod
from .config import DEFAULT_TIMEOUT, ExtenderConfig

_GO_JSON = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


class ExtenderError(Exception):
    """An extender call failed (transport, status code, response, or the extender's own Error)."""


def field(obj: dict[str, Any], name: str) -> Any:
    """Go's encoding/json key matching: the exact name first, then any case-insensitive match."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


def _want(value: Any, types: tuple[type, ...], struct: str, name: str, gotype: str) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        kind = _GO_JSON.get(type(value), type(value).__name__)
        raise ExtenderError(f"json: cannot unmarshal {kind} into Go struct field {struct}.{name} of type {gotype}")
    return value


def _ssl_context(cfg: ExtenderConfig) -> ssl.SSLContext | None:
    """client-go's TLSConfigFor for the extender's tlsConfig (data wins over files; enableHTTPS without a CA
    means insecure); None when nothing TLS-specific is configured (system roots, as Go's default)."""
    t = cfg.tls_config
    insecure = bool(t and t.insecure)
    ca = (t.ca_data or (t.ca_file and b"x")) if t else b""
    if cfg.enable_https and not ca:
        insecure = True
    if t is None and not insecure:
        return None
    where = f"extenders[{cfg.index}].tlsConfig"
    if ca and insecure:
        raise InputError("specifying a root certificates file with the insecure flag is not allowed",
                         field=where, usage=False)

    def data(blob: bytes, path: str, key: str) -> bytes:
        if blob:
            return blob
        if not path:
            return b""
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise InputError(f"open {path}: {(exc.strerror or str(exc)).lower()}", field=f"{where}.{key}",
                                 usage=False) from None

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # asked for in the config
    if t is not None:
        ca_pem = data(t.ca_data, t.ca_file, "caFile")
        if ca_pem:
            try:
                ctx.load_verify_locations(cadata=ca_pem.decode("utf-8", "replace"))
            except (ssl.SSLError, ValueError) as exc:
                raise InputError(f"unable to load root certificates: {exc}", field=where, usage=False) from None
        elif not insecure:
            ctx.load_default_certs()
        cert = data(t.cert_data, t.cert_file, "certFile")
        key = data(t.key_data, t.key_file, "keyFile")
        if cert and key:  # HasCertAuth: both a certificate and a key, else no client certificate
            # Python loads a client key pair from files only: a private temp dir, removed right after
            with tempfile.TemporaryDirectory(prefix="ksched-ext-") as tmp:
                cp, kp = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
                for p, blob in ((cp, cert), (kp, key)):
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(blob)
                try:
                    ctx.load_cert_chain(cp, kp)
                except ssl.SSLError as exc:
                    raise InputError(f"tls: failed to find any PEM data or key pair mismatch ({exc})",
                                     field=where, usage=False) from None
    else:
        ctx.load_default_certs()
    return ctx


def tls_errors(cfgs: list[ExtenderConfig]) -> list[str]:
    """What kube-scheduler refuses at start-up when it builds each extender's TLS transport (unreadable
    files, bad PEM, a CA with insecure), as `extenders[i].tlsConfig...: reason` lines."""
    errs = []
    for cfg in cfgs:
        try:
            _ssl_context(cfg)
        except InputError as exc:
            errs.append(f"{exc.field}: {exc.detail}")
    return errs


class HTTPExtender:
    """kube-scheduler's HTTPExtender: the verbs it supports, IsInterested, and the calls themselves."""

    def __init__(self, cfg: ExtenderConfig) -> None:
        self.cfg = cfg
        self.name = cfg.url_prefix
        self.weight = cfg.weight
        self.ignorable = cfg.ignorable
        self.node_cache_capable = cfg.node_cache_capable
        self.managed = {r.name for r in cfg.managed_resources}
        timeout = cfg.http_timeout if cfg.http_timeout != 0 else DEFAULT_TIMEOUT
        #: Go's http.Client: a non-positive timeout means none
        self.timeout: float | None = timeout if timeout > 0 else None
        kw: dict[str, Any] = dict(num_pools=4, maxsize=8, block=False, retries=False)
        ctx = _ssl_context(cfg)
        if ctx is not None:
            kw["ssl_context"] = ctx
            if cfg.tls_config is not None and cfg.tls_config.server_name:
                kw["server_hostname"] = cfg.tls_config.server_name
        self._pool = urllib3.PoolManager(**kw)

    # ------------------------------------------------------------------ capabilities
    def is_filter(self) -> bool:
        return bool(self.cfg.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.cfg.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.cfg.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.cfg.preempt_verb)

    def is_interested(self, pod: Pod) -> bool:
        """No managedResources: every pod. Otherwise a container or init container requests or limits one."""
        if not self.managed:
            return True
        spec = pod.raw.get("spec") or {}
        for key in ("containers", "initContainers"):
            for c in spec.get(key) or []:
                res = (c or {}).get("resources") or {}
                for part in ("requests", "limits"):
                    if any(name in self.managed for name in res.get(part) or {}):
                        return True
        return False

    def close(self) -> None:
        self._pool.clear()

    # ------------------------------------------------------------------ transport
    def url(self, verb: str) -> str:
        return self.cfg.url_prefix.rstrip("/") + "/" + verb

    def send(self, verb: str, args: dict[str, Any]) -> Any:
        url = self.url(verb)
        body = orjson.dumps(args)
        try:
            resp = self._pool.request("POST", url, body=body, headers={"Content-Type": "application/json"},
                                      timeout=urllib3.Timeout(total=self.timeout), preload_content=True,
                                      redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise ExtenderError(f'Post "{url}": {_transport_reason(exc, url)}') from exc
        except OSError as exc:
            raise ExtenderError(f'Post "{url}": {exc.strerror or exc}') from exc
        if resp.status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
        try:
            return orjson.loads(resp.data)
        except orjson.JSONDecodeError as exc:
            text = resp.data.decode("utf-8", "replace").lstrip(" \t\r\n")
            if not text:
                raise ExtenderError("EOF") from exc  # what Go's json.Decoder says about an empty body
            if text[0] not in '{["-0123456789tfn':
                raise ExtenderError(f"invalid character '{text[0]}' looking for beginning of value") from exc
            raise ExtenderError(f"invalid JSON from extender: {exc}") from exc

    # ------------------------------------------------------------------ verbs
    def _args(self, pod: Pod, nodes: list[Node]) -> dict[str, Any]:
        if self.node_cache_capable:
            return {"Pod": pod.raw, "Nodes": None, "NodeNames": [n.name for n in nodes]}
        return {"Pod": pod.raw, "Nodes": {"metadata": {}, "items": [n.raw for n in nodes]}, "NodeNames": None}

    def filter(self, pod: Pod, nodes: list[Node]) -> tuple[list[str] | None, dict[str, str], dict[str, str],
                                                           Any, list[dict[str, Any]] | None]:
        """(names that passed, failed, failed-and-unresolvable, the decoded response, the returned Node objects
        or None). Names come from NodeNames when nodeCacheCapable (each must be one of `nodes`), else from the
        returned Node objects."""
        if not self.is_filter():
            return [n.name for n in nodes], {}, {}, None, None
        res = self.send(self.cfg.filter_verb, self._args(pod, nodes))
        if not isinstance(res, dict):
            _want(res, (dict,), "ExtenderFilterResult", "", "extenderv1.ExtenderFilterResult")
            res = {}
        err = _want(field(res, "Error"), (str,), "ExtenderFilterResult", "Error", "string")
        if err:
            raise ExtenderError(err)
        failed = self._failed_map(res, "FailedNodes")
        unresolvable = self._failed_map(res, "FailedAndUnresolvableNodes")
        names: list[str] | None = None
        objects: list[dict[str, Any]] | None = None
        node_names = _want(field(res, "NodeNames"), (list,), "ExtenderFilterResult", "NodeNames", "[]string")
        result_nodes = _want(field(res, "Nodes"), (dict,), "ExtenderFilterResult", "Nodes", "v1.NodeList")
        if self.node_cache_capable and node_names is not None:
            given = {n.name for n in nodes}
            names = []
            for nm in node_names:
                _want(nm, (str,), "ExtenderFilterResult", "NodeNames", "string")
                if nm not in given:
                    raise ExtenderError(f'extender "{self.name}" claims a filtered node "{nm}" which is not found '
                                        f'in the input node list')
                names.append(nm)
        elif result_nodes is not None:
            items = _want(field(result_nodes, "items"), (list,), "NodeList", "items", "[]v1.Node") or []
            objects = [it if isinstance(it, dict) else {} for it in items]
            names = [str((it.get("metadata") or {}).get("name") or "") for it in objects]
        return names, failed, unresolvable, res, objects

    @staticmethod
    def _failed_map(res: dict[str, Any], key: str) -> dict[str, str]:
        m = _want(field(res, key), (dict,), "ExtenderFilterResult", key, "extenderv1.FailedNodesMap") or {}
        for v in m.values():
            _want(v, (str,), "ExtenderFilterResult", key, "string")
        return {str(k): v or "" for k, v in m.items()}

    def prioritize(self, pod: Pod, nodes: list[Node]) -> tuple[list[tuple[str, int]], int, Any]:
        """([(host, score)], weight, response); without a prioritize verb every node scores 0 at weight 0."""
        if not self.is_prioritizer():
            return [(n.name, 0) for n in nodes], 0, None
        res = self.send(self.cfg.prioritize_verb, self._args(pod, nodes))
        items = _want(res, (list,), "HostPriorityList", "", "extenderv1.HostPriorityList") or []
        out = []
        for it in items:
            _want(it, (dict,), "HostPriorityList", "", "extenderv1.HostPriority")
            host = _want(field(it, "Host"), (str,), "HostPriority", "Host", "string") or ""
            score = _want(field(it, "Score"), (int,), "HostPriority", "Score", "int64") or 0
            out.append((host, score))
        return out, self.weight, res

    def bind(self, pod: Pod, node: str) -> Any:
        res = self.send(self.cfg.bind_verb, {"PodName": pod.name, "PodNamespace": pod.namespace,
                                             "PodUID": pod.uid, "Node": node})
        if isinstance(res, dict):
            err = _want(field(res, "Error"), (str,), "ExtenderBindingResult", "Error", "string")
            if err:
                raise ExtenderError(err)
        return res

    def process_preemption(self, pod: Pod, victims: dict[str, tuple[list[Pod], int]], snapshot: Any
                           ) -> tuple[dict[str, tuple[list[Pod], int]], Any]:
        """Victims per node after the extender; it always answers with meta victims (UIDs), which are turned
        back into the pods on that node of the snapshot."""
        if self.node_cache_capable:
            args = {"Pod": pod.raw, "NodeNameToVictims": None, "NodeNameToMetaVictims": {
                n: {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": v} for n, (pods, v) in
                victims.items()}}
        else:
            args = {"Pod": pod.raw, "NodeNameToMetaVictims": None, "NodeNameToVictims": {
                n: {"Pods": [p.raw for p in pods], "NumPDBViolations": v} for n, (pods, v) in victims.items()}}
        res = self.send(self.cfg.preempt_verb, args)
        res = _want(res, (dict,), "ExtenderPreemptionResult", "", "extenderv1.ExtenderPreemptionResult") or {}
        meta = _want(field(res, "NodeNameToMetaVictims"), (dict,), "ExtenderPreemptionResult",
                     "NodeNameToMetaVictims", "map[string]*extenderv1.MetaVictims") or {}
        out: dict[str, tuple[list[Pod], int]] = {}
        for node, mv in meta.items():
            ni = snapshot.get(node)
            if ni is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node}"')
            mv = _want(mv, (dict,), "MetaVictims", "", "extenderv1.MetaVictims") or {}
            pdb = _want(field(mv, "NumPDBViolations"), (int,), "MetaVictims", "NumPDBViolations", "int64") or 0
            pods: list[Pod] = []
            for mp in _want(field(mv, "Pods"), (list,), "MetaVictims", "Pods", "[]*extenderv1.MetaPod") or []:
                uid = _want(field(mp or {}, "UID"), (str,), "MetaPod", "UID", "string") or ""
                found = next((p for p in ni.pods if p.uid == uid), None)
                if found is None:
                    raise ExtenderError(f"extender: {self.name} claims to preempt pod (UID: &{{{uid}}}) on node: "
                                        f"{node}, but the pod is not found on that node")
                pods.append(found)
            out[node] = (pods, pdb)
        return out, res


def _transport_reason(exc: BaseException, url: str) -> str:
    """Go's wording for the usual transport failures (dial refused, client timeout)."""
    host = urllib3.util.parse_url(url)
    port = host.port or (443 if host.scheme == "https" else 80)
    addr = f"{host.host}:{port}"
    inner = exc
    while getattr(inner, "reason", None) is not None and inner is not inner.reason:  # MaxRetryError chain
        inner = inner.reason  # type: ignore[assignment]
    text = str(inner)
    if "Connection refused" in text or isinstance(inner, ConnectionRefusedError):
        return f"dial tcp {addr}: connect: connection refused"
    if isinstance(inner, urllib3.exceptions.TimeoutError | socket.timeout) or "timed out" in text:
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    if isinstance(inner, urllib3.exceptions.SSLError) or "SSL" in text or "certificate" in text:
        return f"tls: {text}"
    if isinstance(inner, urllib3.exceptions.NameResolutionError) or "Name or service not known" in text:
        return f"dial tcp: lookup {host.host}: no such host"
    return text

"""The `extenders:` list of a KubeSchedulerConfiguration: decoding, kube's validation, --write-config-to form.

Field names, types and omitempty rules are kube-scheduler config/v1's `Extender`; validation is
validateExtenders (weight, one binder, extended resource names, duplicates); an unset httpTimeout is
replaced by 5s (DefaultExtenderTimeout) in place when the client is built, before
--write-config-to writes the file, so the rendered form says 5s.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from ..fielderrors import go_value
from ..goduration import decode_field as parse_duration
from ..labelsel import label_key_errors

DEFAULT_TIMEOUT = 5.0  # DefaultExtenderTimeout in pkg/scheduler/extender.go
MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority

_STR, _BOOL, _INT = (str,), (bool,), (int,)
EXTENDER_FIELDS: dict[str, tuple[type, ...]] = {
    "urlPrefix": _STR, "filterVerb": _STR, "preemptVerb": _STR, "prioritizeVerb": _STR, "weight": _INT,
    "bindVerb": _STR, "enableHTTPS": _BOOL, "tlsConfig": (dict,), "httpTimeout": _STR,
    "nodeCacheCapable": _BOOL, "managedResources": (list,), "ignorable": _BOOL}
TLS_FIELDS: dict[str, tuple[type, ...]] = {
    "insecure": _BOOL, "serverName": _STR, "certFile": _STR, "keyFile": _STR, "caFile": _STR,
    "certData": _STR, "keyData": _STR, "caData": _STR}
RESOURCE_FIELDS: dict[str, tuple[type, ...]] = {"name": _STR, "ignoredByScheduler": _BOOL}
_TYPE_NAMES = {int: "integer", str: "string", bool: "boolean", dict: "object", list: "array"}
#: one line per field for `ksched config explain extenders`: (field, type, default, meaning)
FIELD_DOCS: list[tuple[str, str, Any, str]] = [
    ("urlPrefix", "string", "", "extender URL; a verb is called as POST <urlPrefix>/<verb>"),
    ("filterVerb", "string", "", "verb called after the Filter plugins on the feasible nodes; empty: none"),
    ("prioritizeVerb", "string", "", "verb whose 0-10 scores x weight x 10 are added to the plugins' scores"),
    ("weight", "integer", 0, "multiplier of prioritize scores; must be positive with prioritizeVerb"),
    ("preemptVerb", "string", "", "verb that may narrow DefaultPreemption's candidates and victims"),
    ("bindVerb", "string", "", "verb that binds the pod instead of the Bind plugins (one extender at most)"),
    ("enableHTTPS", "boolean", False, "with no CA configured, skip certificate verification"),
    ("tlsConfig", "object", "", "insecure, serverName, certFile/keyFile/caFile, certData/keyData/caData (base64)"),
    ("httpTimeout", "duration", "5s", "timeout of each call; 0 means kube's default of 5s"),
    ("nodeCacheCapable", "boolean", False, "send node names only (the extender caches nodes)"),
    ("managedResources", "list", "", "{name, ignoredByScheduler}: only pods requesting one are sent"),
    ("ignorable", "boolean", False, "errors and timeouts skip this extender instead of failing the attempt"),
]


@dataclass
class TLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


@dataclass
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass
class ExtenderConfig:
    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = False
    tls_config: TLSConfig | None = None
    http_timeout: float = 0.0  # seconds as written; 0 = DEFAULT_TIMEOUT when the client is built
    node_cache_capable: bool = False
    managed_resources: list[ManagedResource] = field(default_factory=list)
    ignorable: bool = False
    index: int = 0  # position in the file, for messages


def _check(obj: dict[str, Any], table: dict[str, tuple[type, ...]], path: str, errs: list[str]) -> dict[str, Any]:
    """Unknown fields and type errors as strict decoding reports them; explicit nulls read as unset."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k not in table:
            errs.append(f'{path}.{k}: unknown field "{k}"')
            continue
        if v is None:
            continue
        types = table[k]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            errs.append(f"{path}.{k}: Invalid value: {go_value(v)}: expected {want}")
            continue
        out[k] = v
    return out


def _b64(value: str, path: str, errs: list[str]) -> bytes:
    """Go's []byte in JSON/YAML: standard base64."""
    try:
        return base64.b64decode(value.encode(), validate=True)
    except (binascii.Error, ValueError):
        errs.append(f"{path}: Invalid value: {go_value(value)}: illegal base64 data")
        return b""


def decode_extenders(raw: Any, errs: list[str]) -> list[ExtenderConfig]:
    """The typed list; problems are appended to `errs` as `extenders[i].field: ...` lines."""
    out: list[ExtenderConfig] = []
    if raw is None:
        return out
    if not isinstance(raw, list):
        errs.append(f"extenders: Invalid value: {go_value(raw)}: expected array")
        return out
    for i, item in enumerate(raw):
        path = f"extenders[{i}]"
        if item is None:
            item = {}
        if not isinstance(item, dict):
            errs.append(f"{path}: Invalid value: {go_value(item)}: expected object")
            continue
        d = _check(item, EXTENDER_FIELDS, path, errs)
        ext = ExtenderConfig(
            url_prefix=d.get("urlPrefix", ""), filter_verb=d.get("filterVerb", ""),
            preempt_verb=d.get("preemptVerb", ""), prioritize_verb=d.get("prioritizeVerb", ""),
            weight=d.get("weight", 0), bind_verb=d.get("bindVerb", ""), enable_https=d.get("enableHTTPS", False),
            node_cache_capable=d.get("nodeCacheCapable", False), ignorable=d.get("ignorable", False), index=i)
        if "httpTimeout" in d:
            try:
                ext.http_timeout = parse_duration(d["httpTimeout"])
            except ValueError as exc:
                errs.append(f"{path}.httpTimeout: Invalid value: {go_value(d['httpTimeout'])}: {exc}")
        if "tlsConfig" in d:
            t = _check(d["tlsConfig"], TLS_FIELDS, f"{path}.tlsConfig", errs)
            ext.tls_config = TLSConfig(
                insecure=t.get("insecure", False), server_name=t.get("serverName", ""),
                cert_file=t.get("certFile", ""), key_file=t.get("keyFile", ""), ca_file=t.get("caFile", ""))
            for key, attr in (("certData", "cert_data"), ("keyData", "key_data"), ("caData", "ca_data")):
                if key in t:
                    setattr(ext.tls_config, attr, _b64(t[key], f"{path}.tlsConfig.{key}", errs))
        for j, r in enumerate(d.get("managedResources") or []):
            rpath = f"{path}.managedResources[{j}]"
            if r is None:
                r = {}
            if not isinstance(r, dict):
                errs.append(f"{rpath}: Invalid value: {go_value(r)}: expected object")
                continue
            rd = _check(r, RESOURCE_FIELDS, rpath, errs)
            ext.managed_resources.append(ManagedResource(rd.get("name", ""), rd.get("ignoredByScheduler", False)))
        out.append(ext)
    return out


def _is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: not native (has a '/', not kubernetes.io/), no `requests.` prefix,
    and a qualified name once quota's `requests.` prefix is added."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not label_key_errors("requests." + name)


def validate_extenders(exts: list[ExtenderConfig]) -> list[str]:
    """kube-scheduler's validateExtenders, in its order and words."""
    errs: list[str] = []
    binders = 0
    seen: set[str] = set()
    for ext in exts:
        path = f"extenders[{ext.index}]"
        if ext.prioritize_verb and ext.weight <= 0:
            errs.append(f"{path}.weight: Invalid value: {ext.weight}: must have a positive weight applied to it")
        if ext.bind_verb:
            binders += 1
        for j, r in enumerate(ext.managed_resources):
            rpath = f"{path}.managedResources[{j}].name"
            problems = label_key_errors(r.name)
            for msg in problems:
                errs.append(f"{rpath}: Invalid value: {go_value(r.name)}: {msg}")
            if not problems and not _is_extended_resource_name(r.name):
                errs.append(f"{rpath}: Invalid value: {go_value(r.name)}: is an invalid extended resource name")
            if r.name in seen:
                errs.append(f"{rpath}: Invalid value: {go_value(r.name)}: duplicate extender managed resource name")
            seen.add(r.name)
    if binders > 1:
        errs.append(f'extenders: Invalid value: "found {binders} extenders implementing bind": '
                    f"only one extender can implement bind")
    return errs


def go_duration(seconds: float) -> str:
    """time.Duration.String(): "0s", "500ms", "1.5s", "1m30s", "2h0m0s"."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _frac(ns, size) + unit
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    s = _frac(rem, 1_000_000_000) + "s"
    if h:
        return f"{sign}{h}h{m}m{s}"
    if m:
        return f"{sign}{m}m{s}"
    return sign + s


def _frac(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def render_extenders(exts: list[ExtenderConfig]) -> list[dict[str, Any]]:
    """The list as `kube-scheduler --write-config-to` writes it: omitempty fields left out, httpTimeout
    always present (a struct; 0 written as the 5s default), []byte fields base64, keys sorted."""
    out = []
    for e in exts:
        # kube-scheduler fills the unset timeout in place while building the extender, so it writes 5s
        d: dict[str, Any] = {"urlPrefix": e.url_prefix,
                             "httpTimeout": go_duration(e.http_timeout or DEFAULT_TIMEOUT)}
        for key, val in (("filterVerb", e.filter_verb), ("preemptVerb", e.preempt_verb),
                         ("prioritizeVerb", e.prioritize_verb), ("weight", e.weight), ("bindVerb", e.bind_verb),
                         ("enableHTTPS", e.enable_https), ("nodeCacheCapable", e.node_cache_capable),
                         ("ignorable", e.ignorable)):
            if val:
                d[key] = val
        if e.tls_config is not None:
            t = e.tls_config
            td: dict[str, Any] = {}
            for key, val in (("insecure", t.insecure), ("serverName", t.server_name), ("certFile", t.cert_file),
                             ("keyFile", t.key_file), ("caFile", t.ca_file)):
                if val:
                    td[key] = val
            for key, data in (("certData", t.cert_data), ("keyData", t.key_data), ("caData", t.ca_data)):
                if data:
                    td[key] = base64.b64encode(data).decode()
            d["tlsConfig"] = dict(sorted(td.items()))
        if e.managed_resources:
            d["managedResources"] = [{"name": r.name, **({"ignoredByScheduler": True} if r.ignored_by_scheduler
                                                          else {})} for r in e.managed_resources]
        out.append(dict(sorted(d.items())))
    return out


def render_raw(raw: Any) -> Any:
    """`render_extenders` of a raw list, or the list unchanged when it does not decode (validation says why)."""
    errs: list[str] = []
    exts = decode_extenders(raw, errs)
    return raw if errs else render_extenders(exts)


def ignored_resources(exts: list[ExtenderConfig]) -> list[str]:
    """Resource names NodeResourcesFit ignores because an extender manages them (buildExtenders)."""
    return [r.name for e in exts for r in e.managed_resources if r.ignored_by_scheduler]


def apply_ignored_resources(doc: dict[str, Any]) -> None:
    """kube-scheduler's buildExtenders, on the defaulted document (it runs before --write-config-to writes):
    the ignoredByScheduler names replace NodeResourcesFit's ignoredResources in every profile."""
    errs: list[str] = []
    names = ignored_resources(decode_extenders(doc.get("extenders"), errs))
    if errs or not names:
        return
    for prof in doc.get("profiles") or []:
        for pc in (prof.get("pluginConfig") or []) if isinstance(prof, dict) else []:
            if isinstance(pc, dict) and pc.get("name") == "NodeResourcesFit" and isinstance(pc.get("args"), dict):
                pc["args"]["ignoredResources"] = list(names)


def explain() -> dict[str, Any]:
    """`ksched config explain extenders`, in the shape the command prints for a plugin."""
    import yaml

    example = {"extenders": [{"urlPrefix": "http://127.0.0.1:8888/scheduler", "filterVerb": "filter",
                              "prioritizeVerb": "prioritize", "weight": 5, "nodeCacheCapable": True,
                              "httpTimeout": "5s", "ignorable": False}]}
    return {"name": "extenders", "source": "KubeSchedulerConfiguration (top level)",
            "argsTitle": "fields of each extenders[] entry",
            "extensionPoints": ["filter (after the Filter plugins)", "score (prioritize)",
                                "postFilter (DefaultPreemption victims)", "bind"],
            "doc": "Scheduler extenders: HTTP(S) webhooks kube-scheduler (and ksched) call at fixed points of "
                   "each scheduling attempt.",
            "args": [{"name": n, "type": t, "required": n == "urlPrefix", **({"default": dflt} if dflt != "" else {}),
                      "description": meaning} for n, t, dflt, meaning in FIELD_DOCS],
            "rbac": [], "example": yaml.safe_dump(example, sort_keys=False)}

"""Unknown fields in Kubernetes objects read from files, found the way kubectl's strict field validation
finds them: against the OpenAPI models of the `kubernetes` package (each model's `openapi_types` and
`attribute_map`), so the list of known fields is Kubernetes' own, not written here.

kube-apiserver (fieldValidation=Warn, kubectl's default) stores such an object and answers with
`unknown field "spec.tolerattions"`; the in-memory cluster does the same: the object loads, and each unknown
field is logged once on the `ksched.fields` logger (the CLI prints those as `warning:` lines)."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

log = logging.getLogger("ksched.fields")

_LIST = re.compile(r"^(?:list|List)\[(.+)\]$")
_DICT = re.compile(r"^(?:dict\(str, (.+)\)|Dict\[str, (.+)\])$")
#: OpenAPI types that hold no further fields to check (scalars, int-or-string, raw extensions)
_LEAF = frozenset({"str", "int", "float", "bool", "object", "datetime", "date", "bytearray", "file"})


@lru_cache(maxsize=256)
def _model(name: str) -> Any:
    from kubernetes.client import models

    return getattr(models, name, None)


def model_name(api_version: str, kind: str) -> str | None:
    """The kubernetes package's model class name for an apiVersion and kind (`v1`, `Pod` -> `V1Pod`;
    `policy/v1`, `PodDisruptionBudget` -> `V1PodDisruptionBudget`), or None when it ships none."""
    if not api_version or not kind:
        return None
    version = api_version.rsplit("/", 1)[-1]
    name = version[:1].upper() + version[1:] + kind
    return name if _model(name) is not None else None


def unknown_fields(obj: Any, type_name: str, path: str = "") -> list[str]:
    """Field paths in `obj` (decoded JSON/YAML) that the model `type_name` does not have, kubectl-style:
    `spec.containers[0].imagePullPolicyy`. Values of the wrong type are left to the shape checks."""
    if type_name in _LEAF:
        return []
    m = _LIST.match(type_name)
    if m:
        if not isinstance(obj, list):
            return []
        return [p for i, item in enumerate(obj) for p in unknown_fields(item, m.group(1), f"{path}[{i}]")]
    m = _DICT.match(type_name)
    if m:
        if not isinstance(obj, dict):
            return []
        inner = m.group(1) or m.group(2)
        return [p for k, v in obj.items() for p in unknown_fields(v, inner, f"{path}[{k}]")]
    cls = _model(type_name)
    if cls is None or not isinstance(obj, dict):
        return []
    by_json = {j: py for py, j in cls.attribute_map.items()}
    out: list[str] = []
    for key, value in obj.items():
        sub = f"{path}.{key}" if path else str(key)
        py = by_json.get(key)
        if py is None:
            out.append(sub)
            continue
        out += unknown_fields(value, cls.openapi_types[py], sub)
    return out


def check_object(raw: dict[str, Any], where: str) -> list[str]:
    """Log (and return) one warning per unknown field of `raw`, an object read from `where`. Kinds the
    kubernetes package has no model for (CRDs) are not checked."""
    kind = raw.get("kind")
    api = raw.get("apiVersion") or ("v1" if kind in ("Pod", "Node") else "")
    name = model_name(str(api), str(kind or "")) if isinstance(kind, str) else None
    if name is None:
        return []
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    who = "/".join(str(x) for x in (meta.get("namespace"), meta.get("name")) if x)
    msgs = [f'{where}: unknown field "{p}" in {kind} {who}'.rstrip() for p in unknown_fields(raw, name)]
    for m in msgs:
        log.warning("%s", m)
    return msgs

"""Field errors worded as k8s.io/apimachinery prints them, and pydantic errors translated into them.

A message is `<path>: <body>`: the path joins field names with "." and list indices as "[0]"; the body is
`Invalid value: <value>: <detail>`, `Required value`, `Unsupported value: <value>: supported values: ...`,
`Duplicate value: <value>` or `Forbidden: <detail>`. Values are rendered as Go does: strings double-quoted,
numbers and booleans bare, null for nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

Segment = str | int
Path = tuple[Segment, ...]


def go_value(v: Any) -> str:
    """A value as kube-scheduler prints it in an error: %q for strings, %v for numbers and booleans."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return json.dumps(str(v), ensure_ascii=False)


def join_path(prefix: str, segments: Iterable[Segment]) -> str:
    out = prefix
    for s in segments:
        if isinstance(s, int):
            out += f"[{s}]"
        else:
            out += f".{s}" if out else str(s)
    return out


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {go_value(value)}: {detail}" if detail else f"Invalid value: {go_value(value)}"


def required(detail: str = "") -> str:
    return f"Required value: {detail}" if detail else "Required value"


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def duplicate(value: Any) -> str:
    return f"Duplicate value: {go_value(value)}"


def not_supported(value: Any, supported: Sequence[Any]) -> str:
    body = f"Unsupported value: {go_value(value)}"
    if supported:
        body += ": supported values: " + ", ".join(go_value(s) for s in supported)
    return body


class FieldErrors(ValueError):
    """Raised by an args model's validator: every problem at its own path (relative to the model)."""

    def __init__(self, items: Sequence[tuple[Path, str]]) -> None:
        self.items = list(items)
        super().__init__("; ".join(f"{join_path('', p)}: {b}" if p else b for p, b in self.items))


class FieldErrorList:
    """Collects (path, body) pairs; `raise_if_any()` raises them together as FieldErrors."""

    def __init__(self) -> None:
        self.items: list[tuple[Path, str]] = []

    def add(self, path: Path, body: str) -> None:
        if (path, body) not in self.items:  # ToAggregate drops repeated messages
            self.items.append((path, body))

    def raise_if_any(self) -> None:
        if self.items:
            raise FieldErrors(self.items)


# ----------------------------------------------------------------------------------- pydantic
_TYPE_WANT = {
    "int_type": "integer", "int_parsing": "integer", "int_from_float": "integer", "int_parsing_size": "integer",
    "float_type": "number", "float_parsing": "number", "decimal_type": "number", "decimal_parsing": "number",
    "string_type": "string", "bool_type": "boolean", "bool_parsing": "boolean",
    "list_type": "array", "tuple_type": "array", "set_type": "array", "frozen_set_type": "array",
    "iterable_type": "array", "dict_type": "object", "mapping_type": "object", "model_type": "object",
    "model_attributes_type": "object", "dataclass_type": "object", "none_required": "null",
}
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|(-?\d+(?:\.\d+)?)|\b(True|False|None)\b")


def _expected_values(expected: str) -> list[Any]:
    out: list[Any] = []
    for m in _QUOTED.finditer(expected):
        if m.group(1) is not None or m.group(2) is not None:
            out.append(m.group(1) if m.group(1) is not None else m.group(2))
        elif m.group(3) is not None:
            num = m.group(3)
            out.append(float(num) if "." in num else int(num))
        else:
            out.append({"True": True, "False": False, "None": None}[m.group(4)])
    return out


def _clean_loc(loc: Sequence[Segment], raw: Any) -> Path:
    """Drop the segments pydantic adds for union members (`int`, `str`, model names): keep only the ones that
    walk the input, plus a last segment naming a missing field."""
    out: list[Segment] = []
    cur: Any = raw
    for i, seg in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(cur, dict) and isinstance(seg, str) and seg in cur:
            out.append(seg)
            cur = cur[seg]
        elif isinstance(cur, list) and isinstance(seg, int) and 0 <= seg < len(cur):
            out.append(seg)
            cur = cur[seg]
        elif isinstance(cur, dict) and last:
            out.append(seg)  # a missing field
            cur = None
        elif isinstance(seg, str) and not isinstance(cur, dict):
            continue  # a union tag under a scalar or a list
        elif isinstance(cur, dict) and isinstance(seg, str):
            continue  # a union tag under a mapping (model | model)
        else:
            out.append(seg)
            cur = None
    return tuple(out)


def _strip_msg(msg: str) -> str:
    for pre in ("Value error, ", "Assertion failed, "):
        if msg.startswith(pre):
            return msg[len(pre):]
    if msg.startswith("Input should be "):
        return "must be " + msg[len("Input should be "):]
    return msg


def translate(exc: ValidationError, prefix: str, raw: Any) -> list[str]:
    """A pydantic ValidationError on `raw` (validated at `prefix`) as apimachinery-style field errors."""
    out: list[str] = []
    types: dict[str, tuple[Any, list[str]]] = {}
    order: list[tuple[str, str | None]] = []  # (kind, key) keeps the reporting order of type errors

    def add(msg: str) -> None:
        if msg not in out:
            out.append(msg)
            order.append(("msg", msg))

    for e in exc.errors(include_url=False):
        segs = _clean_loc(e.get("loc") or (), raw)
        path = join_path(prefix, segs)
        kind = e.get("type", "")
        ctx = e.get("ctx") or {}
        err = ctx.get("error")
        value = e.get("input")
        if isinstance(err, FieldErrors):
            for rel, body in err.items:
                add(f"{join_path(path, rel)}: {body}")
        elif kind == "extra_forbidden":
            add(f'{path}: unknown field "{segs[-1] if segs else ""}"')
        elif kind == "missing":
            add(f"{path}: {required()}")
        elif kind in ("literal_error", "enum"):
            add(f"{path}: {not_supported(value, _expected_values(str(ctx.get('expected', ''))))}")
        elif kind in _TYPE_WANT:
            if path not in types:
                types[path] = (value, [])
                order.append(("type", path))
            want = types[path][1]
            if _TYPE_WANT[kind] not in want:
                want.append(_TYPE_WANT[kind])
        else:
            detail = _strip_msg(str(e.get("msg", "")))
            if isinstance(value, dict | list) and not segs:
                add(f"{path}: Invalid value: {detail}")  # a model-level check: the whole object is no use
            else:
                add(f"{path}: {invalid(value, detail)}")
    result: list[str] = []
    for k, key in order:
        if k == "msg":
            result.append(key or "")
        else:
            value, want = types[key or ""]
            result.append(f"{key}: {invalid(value, 'expected ' + ' or '.join(want))}")
    return result

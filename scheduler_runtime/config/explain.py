"""What a plugin does, in config terms: extension points, args with types/defaults/ranges, RBAC."""

from __future__ import annotations

import sys
from typing import Any

import yaml
from pydantic import ValidationError

from ..framework.registry import Registry


def _type_name(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type_name(s, defs) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if schema.get("type") == "array":
        return f"list[{_type_name(schema.get('items') or {}, defs)}]"
    return str(schema.get("type", "object"))


def explain(name: str, registry: Registry) -> dict[str, Any]:
    spec = registry.get(name)
    if spec is None and name.lower() in ("extenders", "extender"):
        from ..extenders.config import explain as explain_extenders

        return explain_extenders()
    if spec is None:
        if name in registry.unsupported:
            raise KeyError(f"{name}: {registry.unsupported[name]}")
        raise KeyError(f'plugin "{name}" does not exist (known plugins: {", ".join(registry.names())})')
    out: dict[str, Any] = {"name": name, "source": spec.source, "extensionPoints": spec.extension_points,
                           "doc": (spec.cls.__doc__ or getattr(sys.modules.get(spec.cls.__module__), "__doc__", "")
                                   or "").strip(),
                           "args": [], "rbac": list(getattr(spec.cls, "rbac", []) or [])}
    model = spec.args_model
    example_args: dict[str, Any] = {}
    if model is not None:
        schema = model.model_json_schema(by_alias=True)
        defs = schema.get("$defs", {})
        required = set(schema.get("required") or [])
        for key, prop in (schema.get("properties") or {}).items():
            entry = {"name": key, "type": _type_name(prop, defs), "required": key in required}
            if "default" in prop:
                entry["default"] = prop["default"]
            rng = [f"{op} {prop[k]}" for k, op in (("minimum", ">="), ("maximum", "<="),
                                                    ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")) if k in prop]
            if rng:
                entry["range"] = ", ".join(rng)
            out["args"].append(entry)
        try:
            example_args = model().model_dump(by_alias=True, mode="json", exclude_none=True)
        except ValidationError:
            example_args = {a["name"]: f"<{a['type']}>" for a in out["args"] if a["required"]}
    for a in out["args"]:
        if "default" not in a and a["name"] in example_args:
            a["default"] = example_args[a["name"]]
    points = spec.extension_points
    snippet = {"profiles": [{"schedulerName": "my-scheduler",
                             "plugins": {"multiPoint": {"enabled": [{"name": name, **(
                                 {"weight": 1} if "score" in points else {})}]}}}]}
    if example_args:
        snippet["profiles"][0]["pluginConfig"] = [{"name": name, "args": example_args}]
    out["example"] = yaml.safe_dump(snippet, sort_keys=False)
    return out

"""Render the deploy templates (templates/deploy/*.yaml.j2) into API objects.

Values go into the templates through `tojson`, so a name or image can never break the YAML around it;
the result is parsed back, so callers get plain dicts to apply or print.
"""

from __future__ import annotations

from typing import Any

import yaml

from scheduler_runtime.resources import templates_dir

TEMPLATES = templates_dir() / "deploy"


def _env() -> Any:
    import jinja2

    if not TEMPLATES.is_dir():
        from scheduler_runtime.errors import KschedError

        raise KschedError(f"deploy templates not found at {TEMPLATES}: reinstall ksched", usage=False)
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              autoescape=False, keep_trailing_newline=True)


def render(template: str, **values: Any) -> list[dict[str, Any]]:
    """The objects one template produces with `values`."""
    text = _env().get_template(template).render(**values)
    return [d for d in yaml.safe_load_all(text) if d]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the ConfigMap's config) as `|` blocks, so the printed YAML reads like the file."""


def _str(dumper: yaml.SafeDumper, data: str) -> Any:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML that `kubectl apply -f -` takes."""
    return "".join("---\n" + yaml.dump(o, Dumper=_Dumper, sort_keys=False, width=4096) for o in objects)

"""`ksched new-plugin`: render a plugin folder from templates/plugin/, refusing bad names, never clobbering.

Everything is rendered into a temporary folder next to the target and renamed into place at the end, so
an error leaves nothing behind and a reader never sees a half-written plugin. Folders and files get the
usual umask-respecting modes (0755/0644), so `ksched build` and other users can read them. `--force`
replaces only the files new-plugin generates and leaves every other file in the folder alone.

Values reach the generated Python as literals (`py_literal`) and text as escaped docstrings (`doc_text`), so
any description or default either scaffolds code that imports or is refused with a one-line error.
"""

from __future__ import annotations

import builtins
import importlib.util
import keyword
import math
import os
import re
import secrets
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml
from pydantic.alias_generators import to_camel

from scheduler_runtime.errors import InputError
from scheduler_runtime.framework.plugin import PluginArgs
from scheduler_runtime.resources import templates_dir

TEMPLATES = templates_dir() / "plugin"

#: accepted spellings (lower-cased, dashes and underscores dropped) -> (template key, config name)
POINTS: dict[str, tuple[str, str]] = {
    "preenqueue": ("preenqueue", "preEnqueue"), "queuesort": ("queuesort", "queueSort"),
    "prefilter": ("prefilter", "preFilter"), "filter": ("filter", "filter"),
    "postfilter": ("postfilter", "postFilter"), "prescore": ("prescore", "preScore"),
    "score": ("score", "score"), "reserve": ("reserve", "reserve"), "permit": ("permit", "permit"),
    "prebind": ("prebind", "preBind"), "bind": ("bind", "bind"), "postbind": ("postbind", "postBind"),
}
ARG_TYPES = {"str": "str", "string": "str", "int": "int", "float": "float", "bool": "bool",
             "list": "list[str]", "list[str]": "list[str]"}
NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]{1,62}$")
KEY_RE = re.compile(r"^[a-z][A-Za-z0-9]{0,62}$")
#: names the generated plugin.py and test import: a plugin class spelled the same would shadow them there
RESERVED = frozenset({"Any", "ClassVar", "CycleState", "Field", "KschedCluster", "NodeInfo", "NodeList", "NodeScore",
                      "Plugin", "PluginArgs", "Pod", "PostFilterResult", "QueuedPodInfo", "Status", "ValidationError"})


#: what the generated files are called (besides test_<module>.py): the only files --force replaces
GENERATED = ("__init__.py", "plugin.py", "README.md", "example-config.yaml")


def py_literal(value: Any) -> str:
    """Python source that evaluates to `value` (str, bool, int, finite float, list of str); strings are
    double-quoted when that needs no escapes, as the project's style has it."""
    if isinstance(value, str):
        text = repr(value)
        if text.startswith("'") and '"' not in value:
            text = '"' + text[1:-1] + '"'  # no ' in value (repr would have used "), so no \' to undo
        return text
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"no literal for {value!r}")
    return repr(value)


def doc_text(text: str) -> str:
    """`text` escaped for the inside of a triple-quoted docstring: the docstring's value is `text` exactly,
    and nothing in it (quotes, backslashes, newlines, control characters) can end or break the string."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == " " or ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def _utf8(value: str, what: str, field: str) -> str:
    """Refuse text that cannot be written as UTF-8 (lone surrogates from undecodable command-line bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} is not valid UTF-8 text", field=field, usage=True) from None
    return value


@dataclass
class Arg:
    key: str  # camelCase, as in YAML
    field: str  # snake_case attribute
    type: str
    default: Any

    @property
    def default_repr(self) -> str:
        """Python source of the default."""
        return py_literal(self.default)

    @property
    def default_yaml(self) -> str:
        return yaml.safe_dump(self.default, default_flow_style=True).strip().removesuffix("...").strip()


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", name).lower()


def parse_points(text: str) -> list[str]:
    out: list[str] = []
    for raw in [p for p in re.split(r"[,\s]+", text) if p]:
        key = raw.lower().replace("-", "").replace("_", "")
        if key == "normalizescore":
            key = "score"
        if key not in POINTS:
            raise InputError(f"unknown extension point {raw!r}; choose from {', '.join(v[1] for v in POINTS.values())}",
                             field="--points", usage=True)
        if POINTS[key][0] not in out:
            out.append(POINTS[key][0])
    if not out:
        raise InputError("give at least one extension point, e.g. --points prefilter,filter,score", field="--points",
                         usage=True)
    return out


def _convert(value: str, typ: str, spec: str) -> Any:
    try:
        if typ == "int":
            number: int | float = int(value)
        elif typ == "float":
            number = float(value)
            if not math.isfinite(number):
                raise InputError(f"{spec!r}: default {value!r} is not a finite number: plugin args are JSON in "
                                 "kube-scheduler, which has no NaN or Infinity", field="--args", usage=True)
        if typ in ("int", "float"):
            if number < 0:
                raise InputError(f"{spec!r}: default {value!r} fails the generated validator (must be greater "
                                 "than or equal to 0): use a default of 0 or more, or edit the validator after "
                                 "scaffolding", field="--args", usage=True)
            return number
        if typ == "bool":
            if value.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return value.lower() == "true"
        if typ == "list[str]":
            return [_utf8(v.strip(), f"{spec!r}: a list item", "--args") for v in value.split(";") if v.strip()] \
                if value else []
        return _utf8(value, f"{spec!r}: the default", "--args")
    except ValueError as exc:
        raise InputError(f"{spec!r}: default {value!r} is not a valid {typ}: {exc}", field="--args",
                         usage=True) from None


def parse_arg(spec: str) -> Arg:
    """`key:type=default`, e.g. `timeoutSeconds:int=30`, `mode:str=fast`, `zones:list=a;b`."""
    m = re.match(r"^([^:=]+):([^=]+)(?:=(.*))?$", spec)
    if not m:
        raise InputError(f"{spec!r}: expected key:type=default (types: {', '.join(sorted(ARG_TYPES))})",
                         field="--args", usage=True)
    key, typ, default = m.group(1).strip(), m.group(2).strip().lower(), m.group(3)
    if not KEY_RE.match(key):
        raise InputError(f"{spec!r}: the key must be camelCase (as in YAML), e.g. timeoutSeconds", field="--args",
                         usage=True)
    if typ not in ARG_TYPES:
        raise InputError(f"{spec!r}: unknown type {typ!r}; choose from {', '.join(sorted(ARG_TYPES))}",
                         field="--args", usage=True)
    typ = ARG_TYPES[typ]
    if default is None:
        default = {"str": "", "int": "0", "float": "0", "bool": "false", "list[str]": ""}[typ]
    field = snake(key)
    if keyword.iskeyword(field) or field.startswith("model_") or hasattr(PluginArgs, field):
        raise InputError(f"{spec!r}: {key!r} cannot be used as an args key (it names a pydantic attribute or a "
                         "Python keyword)", field="--args", usage=True)
    if to_camel(field) != key:
        raise InputError(f"{spec!r}: {key!r} does not round-trip through the args model's camelCase aliases "
                         f"(the field {field} reads the key {to_camel(field)!r}); use {to_camel(field)!r}",
                         field="--args", usage=True)
    return Arg(key, field, typ, _convert(default, typ, spec))


def _config_snippet(name: str, points: list[str], args: list[Arg]) -> str:
    prof: dict[str, Any] = {"schedulerName": "default-scheduler",
                            "plugins": {"multiPoint": {"enabled": [{"name": name}]}}}
    if "queuesort" in points:
        prof["plugins"]["queueSort"] = {"enabled": [{"name": name}], "disabled": [{"name": "*"}]}
    prof["pluginConfig"] = [{"name": name, "args": {a.key: a.default for a in args}}]
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [prof]}
    return yaml.safe_dump(doc, sort_keys=False)


def _head(line: str) -> str:
    parts = line.split()
    return parts[1].split(".")[0] if len(parts) > 1 and parts[0] in ("from", "import") else ""


def tidy(text: str) -> str:
    """Blank lines as PEP 8 and isort want them, whatever the template's skipped blocks left behind:
    two before top-level definitions, one between methods, none inside one package's imports."""
    lines = text.split("\n")
    out: list[str] = []
    blanks = 0
    for line in lines:
        if not line.strip():
            blanks += 1
            continue
        if out and blanks:
            prev = next((x for x in reversed(out) if x.strip()), "")
            if line.startswith(("class ", "def ", "@")):
                want = 2
            elif _head(prev) and _head(line):
                want = 0 if _head(prev) == _head(line) else 1
            else:
                want = 1
            out.extend([""] * want)
        blanks = 0
        out.append(line)
    return "\n".join(out).rstrip("\n") + "\n"


def _shadowed_module(module: str, folder: Path) -> str | None:
    """The importable module a plugin folder of this name would hide, if any.

    pytest imports a test inside a plugin folder as `<folder>.test_<folder>` with the plugins folder first on
    sys.path, so a folder called `queue` or `numpy` replaces that module for the whole test session."""
    if module in sys.stdlib_module_names:
        return module
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    try:
        Path(spec.origin).resolve().relative_to(folder.resolve())
        return None  # the folder itself (already on sys.path), not something it would hide
    except ValueError:
        return module


def scaffold(name: str, points: list[str], args: list[Arg], plugin_dir: Path, known: set[str],
             force: bool = False, description: str = "") -> Scaffolded:
    """Write the plugin folder. `known` holds plugin names that already exist."""
    if not NAME_RE.match(name):
        raise InputError(f"plugin name {name!r} must be PascalCase letters and digits (2-63), e.g. NetworkCost",
                         field="NAME", usage=False)
    if name in RESERVED:
        raise InputError(f"plugin name {name!r} would shadow scheduler_runtime's {name} in the generated code; "
                         "choose another name", field="NAME", usage=False)
    if keyword.iskeyword(name) or hasattr(builtins, name):
        raise InputError(f"plugin name {name!r} is a Python keyword or built-in name, which the generated code "
                         "uses; choose another name", field="NAME", usage=False)
    module = snake(name)
    if keyword.iskeyword(module):
        raise InputError(f"plugin name {name!r} gives the folder {module}/, a Python keyword that cannot be "
                         "imported; choose another name", field="NAME", usage=False)
    _utf8(description, "the description", "--description")
    folder = plugin_dir / module
    hidden = _shadowed_module(module, folder)
    if hidden:
        raise InputError(f"plugin name {name!r} gives the folder {module}/, which would hide the Python module "
                         f"{hidden!r} when the plugin's test runs; choose another name", field="NAME", usage=False)
    if name in known and not (force and folder.is_dir()):
        raise InputError(f"a plugin named {name} already exists; choose another name", field="NAME", usage=False)
    if len({a.key for a in args}) != len(args) or len({a.field for a in args}) != len(args):
        raise InputError("args keys must be unique", field="--args", usage=True)
    if folder.exists() and not force:
        raise InputError(f"{folder} already exists; pass --force to overwrite it", field="--dir", usage=False)
    if plugin_dir.exists() and not plugin_dir.is_dir():
        raise InputError("not a folder", file=str(plugin_dir), usage=True)
    generated = [*GENERATED, f"test_{module}.py"]
    if folder.exists() or folder.is_symlink():
        if folder.is_symlink() or not folder.is_dir():
            raise InputError("exists and is not a folder: --force only replaces a plugin folder's generated files",
                             file=str(folder), usage=True)
        for f in generated:
            target = folder / f
            if (target.exists() or target.is_symlink()) and (target.is_symlink() or not target.is_file()):
                raise InputError("is not a regular file: --force replaces only regular files; move it away",
                                 file=str(target), usage=True)
    types_imports = sorted(n for n, on in (("NodeScore", "score" in points), ("QueuedPodInfo", "queuesort" in points),
                                           ("NodeInfo", "filter" in points or "score" in points),
                                           ("PostFilterResult", "postfilter" in points)) if on)
    # exactly what the chosen points' tests use, so the generated test is lint-clean
    testing_imports = sorted({"KschedCluster", "assert_scheduled_to", "make_node", "make_pod", "plugin_from_folder",
                              *(["run_cycle"] if set(points) - {"queuesort"} else []),
                              *(["assert_passed"] if "filter" in points else []),
                              *(["assert_score"] if "score" in points else []),
                              *(["assert_unschedulable"] if "postfilter" in points else []),
                              *(["queue_order"] if "queuesort" in points else [])})
    try:
        shown = folder.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = folder
    test_path = f"{shown}/test_{module}.py"
    if len(test_path) > 100:
        test_path = f"{module}/test_{module}.py"
    ctx = {"name": name, "testing_imports": testing_imports, "test_path": test_path,
           "direct_imports": "filter" in points or "postbind" in points,
           "uses_state": bool(set(points) - {"preenqueue", "queuesort"}),
           "uses_status": bool(set(points) - {"queuesort", "postbind"}),
           "uses_pod": bool(set(points) - {"queuesort"}),
           "module": module, "points": points, "args": args, "folder": str(folder),
           "plugin_dir": str(plugin_dir), "points_config": [POINTS[p][1] for p in points],
           "description": description or f"{name} scheduling plugin.",
           "description_doc": doc_text(description or f"{name} scheduling plugin."),
           "config_snippet": _config_snippet(name, points, args), "types_imports": types_imports,
           "generated_line": textwrap.fill("Generated by `ksched new-plugin`; extension points: "
                                           + ", ".join(POINTS[p][1] for p in points) + ".", 110)}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False)
    files = {"__init__.py": "__init__.py.j2", "plugin.py": "plugin.py.j2", "README.md": "README.md.j2",
             f"test_{module}.py": "test_plugin.py.j2", "example-config.yaml": "example-config.yaml.j2"}
    rendered: dict[str, str] = {}
    for out, tpl in files.items():
        text = env.get_template(tpl).render(**ctx)
        if out.endswith(".py"):
            text = tidy(text)
            compile(text, out, "exec")  # a template bug must not reach the user as broken code
        rendered[out] = text
    created_dirs = [d for d in (plugin_dir, *plugin_dir.parents) if not d.exists()]
    plugin_dir.mkdir(parents=True, exist_ok=True)
    tmp = _fresh_dir(plugin_dir, f".{module}-")
    try:
        for out, text in rendered.items():
            (tmp / out).write_text(text, encoding="utf-8")
        if folder.is_dir():
            kept = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if p.name not in rendered)
            for out in rendered:
                os.replace(tmp / out, folder / out)
            tmp.rmdir()
        else:
            kept = []
            tmp.rename(folder)
    except BaseException:
        _remove_tree(tmp)
        for d in created_dirs:  # only the folders this call created, innermost first, and only when empty
            try:
                d.rmdir()
            except OSError:
                break
        raise
    return Scaffolded(folder, list(rendered), kept)


@dataclass
class Scaffolded:
    """What new-plugin wrote: the folder, the files it (over)wrote, and the other files it left alone."""

    folder: Path
    written: list[str]
    kept: list[str]


def _fresh_dir(parent: Path, prefix: str) -> Path:
    """A new, empty folder in `parent`, created with the process umask (mkdtemp's 0700 would make the plugin
    unreadable to `ksched build`'s container and to other users)."""
    for _ in range(100):
        d = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            d.mkdir()
        except FileExistsError:
            continue
        return d
    raise FileExistsError(f"could not create a temporary folder in {parent}")


def _remove_tree(d: Path) -> None:
    """Remove a temporary folder of flat files that this module created."""
    if not d.is_dir():
        return
    for f in d.iterdir():
        f.unlink(missing_ok=True)
    d.rmdir()

"""The import layering the plugin API promises: no circles in the framework, the API imports no runtime
internals, and plugins (seed plugins, the new-plugin templates, the docs) import only `scheduler_runtime.api`
(and `scheduler_runtime.testing` in tests)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "scheduler_runtime"
FRAMEWORK = RUNTIME / "framework"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file (TYPE_CHECKING blocks and functions included:
    a circle through them is still a circle to a reader and to a type checker)."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)  # `from . import x` names a module
    return out


def _graph(files: list[Path]) -> dict[str, set[str]]:
    names = {_module_name(f) for f in files}
    return {_module_name(f): {m for m in _imports(f) if m in names and m != _module_name(f)} for f in files}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return [*stack[stack.index(m):], m]
            if m not in state and (found := visit(m)) is not None:
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def test_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_in_the_framework() -> None:
    files = [*sorted(FRAMEWORK.glob("*.py")), RUNTIME / "api.py"]
    graph = _graph(files)
    assert "scheduler_runtime.framework.handle" in graph["scheduler_runtime.framework.runtime"]  # the graph sees
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_each_framework_module_imports_alone() -> None:
    """In a fresh interpreter, importing any one framework module (or the API) first works."""
    mods = [_module_name(f) for f in sorted(FRAMEWORK.glob("*.py"))] + ["scheduler_runtime.api"]
    script = ("import importlib, subprocess, sys\n"
              "bad = []\n"
              "for m in sys.argv[1:]:\n"
              "    r = subprocess.run([sys.executable, '-c', f'import {m}'], capture_output=True, text=True)\n"
              "    if r.returncode: bad.append(m + ': ' + r.stderr.strip().splitlines()[-1])\n"
              "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", script, *mods], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr


#: what the API may import: the framework's value types and contract, and leaf helpers (the framework package
#: itself is empty: `from .framework import signers` names it)
API_MAY_IMPORT = {"scheduler_runtime.errors", "scheduler_runtime.objects", "scheduler_runtime.quantity",
                  "scheduler_runtime.framework",
                  *(f"scheduler_runtime.framework.{m}" for m in
                    ("cycle_state", "interface", "nodelist", "plugin", "signers", "snapshot", "status", "types"))}


def test_the_api_imports_no_runtime_internals() -> None:
    imported = {m for m in _imports(RUNTIME / "api.py") if m.startswith("scheduler_runtime")}
    modules = {m for m in imported if (ROOT / Path(*m.split("."))).with_suffix(".py").exists()
               or (ROOT / Path(*m.split("."))).is_dir()}
    assert modules <= API_MAY_IMPORT, sorted(modules - API_MAY_IMPORT)
    # and the contract module itself imports only value types
    inner = {m for m in _imports(FRAMEWORK / "interface.py") if m.startswith("scheduler_runtime")
             and (ROOT / Path(*m.split("."))).with_suffix(".py").exists()}
    assert inner <= API_MAY_IMPORT - {"scheduler_runtime.framework.plugin"}, sorted(inner)


_PLUGIN_IMPORT = re.compile(r"^\s*(?:from|import)\s+(scheduler_runtime[\w.]*)", re.M)


def _runtime_imports(text: str) -> set[str]:
    return set(_PLUGIN_IMPORT.findall(text))


def test_seed_plugins_import_only_the_api() -> None:
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        allowed = {"scheduler_runtime.api"} | ({"scheduler_runtime.testing"} if path.name.startswith("test_")
                                               else set())
        assert _runtime_imports(path.read_text()) <= allowed, path


def test_templates_and_docs_import_only_the_api() -> None:
    allowed = {"scheduler_runtime.api", "scheduler_runtime.testing"}
    for path in [*sorted((ROOT / "templates" / "plugin").glob("*.j2")),
                 *(ROOT / "docs" / n for n in ("plugin-api.md", "tutorial.md", "testing-plugins.md"))]:
        assert _runtime_imports(path.read_text()) <= allowed, path

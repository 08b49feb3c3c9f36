"""The import layering of docs/architecture.md, checked on the source tree with `ast` (no imports run).

- the runtime (scheduler_runtime/) never imports the CLI (ksched_cli/); the CLI may import the runtime;
- seed plugins (plugins/) and the new-plugin template import only the public API, `scheduler_runtime.api`
  (their tests also `scheduler_runtime.testing`), and never the CLI;
- no import cycles among the runtime's modules or its packages (scheduler_runtime.<name>), counting every
  import: at module level, inside functions (lazy) and under TYPE_CHECKING (a type-only cycle is still two
  modules that cannot be understood apart; a Protocol in the lower module breaks it);
- every in-tree plugin module names the kube-scheduler file and version it follows.

Every rule is data (`Rule`) tested twice: on a small fixture tree with a violation planted (so the checker
itself is known to catch it) and on the real tree. The public-API rule for plugins is applied to the real
tree once `scheduler_runtime/api.py` (or api/) exists; until then the real seed plugins and template are
held only to "never the CLI", and the public-API rule is checked on the fixture.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Rule:
    name: str
    #: folder (relative to the tree root) whose .py files the rule covers
    under: str
    #: modules (and their submodules) these files may not import
    forbidden: tuple[str, ...] = ()
    #: when set, imports of `guarded` packages must be one of these modules or their submodules
    allowed: tuple[str, ...] | None = None
    #: extra allowed modules for test files (test_*.py, conftest.py)
    allowed_in_tests: tuple[str, ...] = ()
    guarded: tuple[str, ...] = ("scheduler_runtime", "ksched_cli")


RUNTIME_NEVER_IMPORTS_CLI = Rule("the runtime never imports the CLI", "scheduler_runtime", forbidden=("ksched_cli",))
PLUGINS_USE_PUBLIC_API = Rule("seed plugins import only scheduler_runtime.api", "plugins",
                              forbidden=("ksched_cli",), allowed=("scheduler_runtime.api",),
                              allowed_in_tests=("scheduler_runtime.testing",))
PLUGINS_NEVER_IMPORT_CLI = Rule("seed plugins never import the CLI", "plugins", forbidden=("ksched_cli",))
API_EXISTS = (ROOT / "scheduler_runtime" / "api.py").is_file() or (ROOT / "scheduler_runtime" / "api").is_dir()
#: what seed plugins and the template are held to: the public API once it exists (until then the seed
#: plugins still import internal modules, so only the CLI is off limits)
PLUGINS_RULE = PLUGINS_USE_PUBLIC_API if API_EXISTS else PLUGINS_NEVER_IMPORT_CLI
#: rules the real tree must pass
ENFORCED = [RUNTIME_NEVER_IMPORTS_CLI, PLUGINS_RULE]

# ------------------------------------------------------------------------------------------ the checker

def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path, import_time_only: bool = False) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for every import in the file; relative imports are resolved. With
    `import_time_only`, only what runs when the module is imported (not in functions or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    yield from module_level(node.body)
                    yield from module_level(node.orelse)
            elif isinstance(node, ast.Try):
                yield from module_level(node.body)
                yield from module_level(node.orelse)
                for h in node.handlers:
                    yield from module_level(h.body)
            else:
                yield node

    nodes = module_level(tree.body) if import_time_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:  # a name of the module, or a submodule (`from pkg import submodule`)
                yield node.lineno, mod if alias.name == "*" else f"{mod}.{alias.name}"
        elif (not import_time_only and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            yield node.lineno, node.args[0].value


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(root: Path, rule: Rule) -> list[str]:
    out = []
    for path in sorted((root / rule.under).rglob("*.py")):
        is_test = path.name.startswith("test_") or path.name == "conftest.py"
        allowed = None if rule.allowed is None else rule.allowed + (rule.allowed_in_tests if is_test else ())
        for line, mod in imported_modules(path, root):
            where = f"{path.relative_to(root)}:{line}"
            if _within(mod, rule.forbidden):
                out.append(f"{where} imports {mod}")
            elif allowed is not None and _within(mod, rule.guarded) and not _within(mod, allowed):
                out.append(f"{where} imports {mod} (allowed: {', '.join(allowed)})")
    return sorted(set(out))


def import_graph(root: Path, package: str, import_time_only: bool) -> dict[str, set[str]]:
    modules = {module_name(p, root): p for p in (root / package).rglob("*.py")}

    def resolve(name: str) -> str | None:  # `pkg.mod.Name` -> pkg.mod: the module that runs on import
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for m, p in modules.items():
        deps = {resolve(d) for _, d in imported_modules(p, root, import_time_only)}
        graph[m] = {d for d in deps if d is not None and d != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.add(frozenset(comp))
    return found


def package_graph(graph: dict[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    def top(m: str) -> str:
        return ".".join(m.split(".")[:depth])

    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(top(m), set()).update(top(d) for d in deps if top(d) != top(m))
    return out


# ------------------------------------------------------------------------------------------ the checker, checked

def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_checker_catches_the_runtime_importing_the_cli(tmp_path: Path) -> None:
    _write(tmp_path, {
        "scheduler_runtime/__init__.py": "",
        "scheduler_runtime/ok.py": "from .errors import X\nimport yaml\n",
        "scheduler_runtime/bad.py": "def f():\n    from ksched_cli.guard import warn\n",
        "scheduler_runtime/sub/__init__.py": "",
        "scheduler_runtime/sub/bad2.py": "import importlib\nm = importlib.import_module('ksched_cli.main')\n",
    })
    assert violations(tmp_path, RUNTIME_NEVER_IMPORTS_CLI) == [
        "scheduler_runtime/bad.py:2 imports ksched_cli.guard.warn",
        "scheduler_runtime/sub/bad2.py:2 imports ksched_cli.main",
    ]


def test_checker_holds_plugins_to_the_public_api(tmp_path: Path) -> None:
    _write(tmp_path, {
        "plugins/good/__init__.py": "from .plugin import Good\n",
        "plugins/good/plugin.py": "from scheduler_runtime.api import Status, Plugin\n"
                                  "from scheduler_runtime import api\nimport numpy\nfrom . import helpers\n",
        "plugins/good/test_good.py": "from scheduler_runtime.testing import run_cycle\n"
                                     "from scheduler_runtime.api import Status\n",
        "plugins/bad/plugin.py": "from scheduler_runtime.framework.status import Status\n"
                                 "from scheduler_runtime.testing import run_cycle\n",
        "plugins/bad/cli.py": "import ksched_cli.main\n",
    })
    assert violations(tmp_path, PLUGINS_USE_PUBLIC_API) == [
        "plugins/bad/cli.py:1 imports ksched_cli.main",
        "plugins/bad/plugin.py:1 imports scheduler_runtime.framework.status.Status (allowed: scheduler_runtime.api)",
        "plugins/bad/plugin.py:2 imports scheduler_runtime.testing.run_cycle (allowed: scheduler_runtime.api)",
    ]


def test_checker_finds_cycles_and_tells_import_time_from_lazy(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "from .c import x\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n"
                    "def f():\n    from . import a\n",
        "pkg/d.py": "import pkg.e\n",
        "pkg/e.py": "import pkg.d\n",
    })
    assert cycles(import_graph(tmp_path, "pkg", import_time_only=True)) == {frozenset({"pkg.d", "pkg.e"})}
    assert cycles(import_graph(tmp_path, "pkg", import_time_only=False)) == {
        frozenset({"pkg.a", "pkg.b", "pkg.c"}), frozenset({"pkg.d", "pkg.e"})}


# ------------------------------------------------------------------------------------------ the real tree

@pytest.mark.parametrize("rule", ENFORCED, ids=lambda r: r.name)
def test_real_tree_keeps_the_layering(rule: Rule) -> None:
    assert violations(ROOT, rule) == []


def test_cli_and_runtime_are_both_checked() -> None:
    """The rule covers the whole runtime (a typo in `under` would make it vacuous)."""
    assert len(list((ROOT / RUNTIME_NEVER_IMPORTS_CLI.under).rglob("*.py"))) > 50
    assert len(list((ROOT / PLUGINS_USE_PUBLIC_API.under).rglob("*.py"))) > 5


def test_new_plugin_template_uses_only_the_public_api(tmp_path: Path) -> None:
    from ksched_cli.newplugin import parse_arg, parse_points, scaffold

    folder = tmp_path / "plugins"
    folder.mkdir()
    points = parse_points("prefilter,filter,postfilter,prescore,score,reserve,permit,prebind,bind,postbind,"
                          "queuesort,preenqueue")
    scaffold("Everything", points, [parse_arg("maxPods:int=3")], folder, set())
    assert len(list(folder.rglob("*.py"))) >= 2
    assert violations(tmp_path, PLUGINS_RULE) == []


def test_runtime_has_no_import_cycles() -> None:
    """Any cycle fails, lazy and type-only imports included (there is no list of tolerated ones)."""
    found = cycles(import_graph(ROOT, "scheduler_runtime", import_time_only=False))
    assert found == set(), "break the cycle (move the shared piece into a lower module, or type against a " \
        "Protocol): " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_runtime_packages_have_no_import_cycles() -> None:
    """Between packages too: config -> framework and plugins -> framework, never back, even lazily."""
    found = cycles(package_graph(import_graph(ROOT, "scheduler_runtime", import_time_only=False)))
    assert found == set(), "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_checker_finds_package_cycles_made_of_lazy_and_type_only_imports(tmp_path: Path) -> None:
    _write(tmp_path, {
        "rt/__init__.py": "",
        "rt/low/__init__.py": "",
        "rt/low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..high.b import B\n",
        "rt/high/__init__.py": "",
        "rt/high/b.py": "from ..low import a\n",
        "rt/mid/__init__.py": "",
        "rt/mid/c.py": "def f():\n    from ..high import b\n",
    })
    graph = import_graph(tmp_path, "rt", import_time_only=False)
    assert cycles(graph) == {frozenset({"rt.low.a", "rt.high.b"})}
    assert cycles(package_graph(graph)) == {frozenset({"rt.low", "rt.high"})}
    assert cycles(package_graph(import_graph(tmp_path, "rt", import_time_only=True))) == set()


def test_in_tree_plugin_modules_name_the_upstream_file_they_follow() -> None:
    missing = []
    for path in sorted((ROOT / "scheduler_runtime" / "plugins").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if "kube-scheduler v1." not in doc or ".go" not in doc:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == [], "start the module docstring with the kube-scheduler file and version it follows"


def unresolved_imports(root: Path, packages: tuple[str, ...]) -> list[str]:
    """Imports of `packages` whose module is not in this tree. The shared venv's editable install of another
    checkout would otherwise satisfy them silently (a moved module still "imports")."""
    def exists(mod: str) -> bool:
        p = root.joinpath(*mod.split("."))
        return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()

    out = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            name = module_name(path, root)
            pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                    mod = ".".join(base + ([node.module] if node.module else []))
                    # `from pkg import name`: pkg must be a module; name a submodule or an attribute of it
                    candidates = [mod]
                elif isinstance(node, ast.Import):
                    candidates = [a.name for a in node.names]
                else:
                    continue
                for mod in candidates:
                    if mod.split(".")[0] in packages and not exists(mod):
                        out.append(f"{path.relative_to(root)}:{node.lineno} imports {mod}, not in this tree")
    return out


def test_checker_catches_an_import_of_a_moved_module(tmp_path: Path) -> None:
    _write(tmp_path, {
        "ksched_cli/__init__.py": "",
        "ksched_cli/deploy/__init__.py": "",
        "ksched_cli/deploy/staticpod.py": "from ..kube_flags import VALUE_FLAGS\nfrom . import files\n",
        "ksched_cli/deploy/files.py": "from ksched_cli.deploy import staticpod\n",
    })
    assert unresolved_imports(tmp_path, ("ksched_cli",)) == [
        "ksched_cli/deploy/staticpod.py:1 imports ksched_cli.kube_flags, not in this tree"]


def test_every_project_import_resolves_in_this_tree() -> None:
    assert unresolved_imports(ROOT, ("scheduler_runtime", "ksched_cli", "plugins")) == []


def missing_names(root: Path, packages: tuple[str, ...]) -> list[str]:
    """`from <project module> import name` where that module neither defines nor imports `name` (nor has a
    submodule of that name). After a move, such an import can still "work": a module with
    `from __future__ import annotations` has an attribute `annotations`, the __future__ feature."""
    def module_file(mod: str) -> Path | None:
        p = root.joinpath(*mod.split("."))
        for f in (p.with_suffix(".py"), p / "__init__.py"):
            if f.is_file():
                return f
        return None

    def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in body:
            if isinstance(node, ast.If | ast.Try):
                yield from top_level(node.body)
                yield from top_level(node.orelse)
                for h in getattr(node, "handlers", []):
                    yield from top_level(h.body)
            else:
                yield node

    defined: dict[Path, set[str] | None] = {}

    def names_of(f: Path) -> set[str] | None:  # None: the module answers any name (module __getattr__)
        if f not in defined:
            out: set[str] | None = set()
            for node in top_level(ast.parse(f.read_text(encoding="utf-8")).body):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    if node.name == "__getattr__":
                        out = None
                        break
                    out.add(node.name)
                elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
                elif isinstance(node, ast.Import):
                    out.update((a.asname or a.name).split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                    out.update(a.asname or a.name for a in node.names)
            defined[f] = out
        return defined[f]

    out = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                    continue
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                f = module_file(mod) if mod.split(".")[0] in packages else None
                if f is None or (have := names_of(f)) is None:
                    continue
                for a in node.names:
                    if a.name != "*" and a.name not in have and module_file(f"{mod}.{a.name}") is None:
                        out.append(f"{path.relative_to(root)}:{node.lineno} imports {a.name} from {mod}, "
                                   "which does not define it")
    return out


def test_checker_catches_a_name_its_module_no_longer_has(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/util.py": "from __future__ import annotations\nfrom .low import meta\nX = 1\n",
        "pkg/low.py": "def meta(): ...\ndef annotations(): ...\n",
        "pkg/sub/__init__.py": "",
        "pkg/user.py": "from .util import X, meta, annotations\nfrom . import sub\nfrom .low import annotations\n",
    })
    assert missing_names(tmp_path, ("pkg",)) == [
        "pkg/user.py:1 imports annotations from pkg.util, which does not define it"]


def test_every_project_import_names_something_its_module_has() -> None:
    assert missing_names(ROOT, ("scheduler_runtime", "ksched_cli", "plugins")) == []

"""`ksched new-plugin`: refusals write nothing; a generated plugin is listed, validates, schedules, and its own
test passes out of the box."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksched_cli.newplugin import parse_arg, parse_points, snake, tidy
from scheduler_runtime.controlplane import ControlPlaneUnavailable, find_binaries
from scheduler_runtime.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KSCHED = BIN / "ksched"


def ksched(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "COLUMNS": "250"})


def test_parsing_of_points_and_args() -> None:
    assert parse_points("preFilter, filter,NormalizeScore,score") == ["prefilter", "filter", "score"]
    a = parse_arg("timeoutSeconds:int=30")
    assert (a.key, a.field, a.type, a.default) == ("timeoutSeconds", "timeout_seconds", "int", 30)
    assert parse_arg("zones:list=a;b").default == ["a", "b"]
    assert parse_arg("strict:bool=TRUE").default is True
    assert parse_arg("mode:string").default == ""
    for bad in ("noType", "Upper:int=1", "x:int=1.5", "x:dict={}", "flag:bool=yes", "class:int=1"):
        with pytest.raises(InputError):
            parse_arg(bad)
    with pytest.raises(InputError):
        parse_points("filter,nope")
    assert snake("HTTPLatencyScore") == "http_latency_score"
    assert tidy("import a\n\n\n\nclass X:\n    a = 1\n\n\n\n    def f(self):\n        pass\n") == \
        "import a\n\n\nclass X:\n    a = 1\n\n    def f(self):\n        pass\n"


@pytest.mark.parametrize("argv, message", [
    (["new-plugin", "lower_case"], "must be PascalCase"),
    (["new-plugin", "../Evil"], "must be PascalCase"),
    (["new-plugin", "NodeResourcesFit"], "already exists"),
    (["new-plugin", "MyPreFilter"], "already exists"),  # bundled seed plugin
    (["new-plugin", "VolumeBinding"], "already exists"),  # in-tree, unsupported by ksched, still taken
    (["new-plugin", "Queue"], "would hide the Python module 'queue'"),  # stdlib: pytest would import the folder
    (["new-plugin", "Numpy"], "would hide the Python module 'numpy'"),  # installed package
    (["new-plugin", "SchedulerRuntime"], "would hide the Python module 'scheduler_runtime'"),
    (["new-plugin", "Status"], "would shadow scheduler_runtime's Status"),  # plugin.py imports Status
    (["new-plugin", "NodeInfo"], "would shadow scheduler_runtime's NodeInfo"),
    (["new-plugin", "Good", "--points", "filter,teleport"], "unknown extension point 'teleport'"),
    (["new-plugin", "Good", "--points", ","], "at least one extension point"),
    (["new-plugin", "Good", "--args", "Bad-Key:int=1"], "camelCase"),
    (["new-plugin", "Good", "--args", "limit:int=many"], "not a valid int"),
    (["new-plugin", "Good", "--args", "a:int=1", "--args", "a:str=x"], "unique"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path, argv: list[str], message: str) -> None:
    r = ksched(*argv, "--dir", str(tmp_path / "plugins"), cwd=tmp_path)
    bad_option = any(a in ("--points", "--args") for a in argv)  # a bad option value is a usage error
    assert r.returncode == (2 if bad_option else 1), r.stdout
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "plugins").exists() or not any((tmp_path / "plugins").iterdir())


def test_existing_folder_needs_force(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    assert ksched("new-plugin", "Alpha", "--points", "filter", "--dir", str(plugins), cwd=tmp_path).returncode == 0
    mine = plugins / "alpha" / "plugin.py"
    mine.write_text(mine.read_text() + "\n# my edits\n")
    r = ksched("new-plugin", "Alpha", "--points", "score", "--dir", str(plugins), cwd=tmp_path)
    assert r.returncode == 1 and "already exists" in r.stderr
    assert "# my edits" in mine.read_text()
    r = ksched("new-plugin", "Alpha", "--points", "score", "--dir", str(plugins), "--force", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "# my edits" not in mine.read_text() and "def score(" in mine.read_text()
    assert [p.name for p in plugins.iterdir()] == ["alpha"]  # no temporary folder left behind


@pytest.mark.parametrize("points", ["prefilter,filter,score", "queuesort,preenqueue,permit,reserve,prebind,bind,"
                                    "postbind,postfilter,prescore", "queuesort", "postbind"])
def test_generated_plugin_works_end_to_end(tmp_path: Path, points: str) -> None:
    plugins = tmp_path / "plugins"
    r = ksched("new-plugin", "TeamPolicy", "--points", points, "--args", "maxPods:int=7", "--args",
               "zones:list=a;b", "--args", "strict:bool=false", "--dir", str(plugins), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    folder = plugins / "team_policy"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "__init__.py", "example-config.yaml",
                                                       "plugin.py", "test_team_policy.py"]
    # its own test passes out of the box, on the embedded cluster and (binaries permitting) a real API server
    t = subprocess.run([str(BIN / "pytest"), "-q", "-rs", "-p", "no:cacheprovider", str(folder)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert t.returncode == 0, t.stdout + t.stderr
    assert " passed" in t.stdout
    try:
        find_binaries()
        assert "skipped" not in t.stdout, t.stdout  # the [api-server] case really ran
    except ControlPlaneUnavailable:
        pass
    # and it can fail: a Filter that rejects every node breaks the generated scheduling test
    plugin_py = folder / "plugin.py"
    if "def filter(" in plugin_py.read_text():
        original = plugin_py.read_text()
        plugin_py.write_text(original.replace(
            "fails. `node_info.node` is the Node record; `node_info.requested` what its pods request.\n"
            "        \"\"\"\n        return None",
            "fails. `node_info.node` is the Node record; `node_info.requested` what its pods request.\n"
            "        \"\"\"\n        return Status.unschedulable(\"no\")"))
        assert plugin_py.read_text() != original
        broken = subprocess.run([str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", "-k", "embedded or verdict",
                                 str(folder)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert broken.returncode == 1 and "failed" in broken.stdout, broken.stdout
        plugin_py.write_text(original)
    # clean under the project's lint rules, where the user would keep it (first-party = this repo)
    lint = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", str(folder)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert lint.returncode == 0, lint.stdout
    listed = ksched("plugins", "list", "--plugin-dir", str(plugins), "-o", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert '"TeamPolicy"' in listed.stdout
    v = ksched("config", "validate", "--plugin-dir", str(plugins), str(folder / "example-config.yaml"), cwd=tmp_path)
    assert v.returncode == 0, v.stdout + v.stderr
    s = ksched("simulate", "--plugin-dir", str(plugins), "--cluster", str(ROOT / "examples/cluster"), "--pods",
               str(ROOT / "examples/pods.yaml"), "--config", str(folder / "example-config.yaml"), "-o", "json",
               cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert '"scheduled"' in s.stdout or '"node"' in s.stdout
    readme = (folder / "README.md").read_text()
    assert "## Enable it" in readme and "## RBAC" in readme and "TeamPolicy" in readme

"""A plugin method the framework could not call is refused when the class loads, with file and line.

Checked at the three doors a plugin folder comes through: plugin loading (the registry, as `ksched run`
and the test harness use it), `ksched config validate --plugin-dir` and `ksched build` (before any engine
is contacted)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler_runtime.api import Plugin, Status
from scheduler_runtime.errors import EXIT_INVALID, InputError
from scheduler_runtime.framework.interface import METHOD_CONTRACTS
from scheduler_runtime.framework.registry import load_plugin_dir
from scheduler_runtime.framework.signatures import check_plugin_class, signature_errors
from scheduler_runtime.plugins.registry import build_registry

ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"

WRONG = '''\
"""A filter plugin whose filter() forgot the cycle state."""

from scheduler_runtime.api import NodeInfo, Plugin, Pod, Status


class Foo(Plugin):
    name = "Foo"

    def filter(self, pod: Pod, node: NodeInfo) -> Status | None:
        return None
'''
EXPECTED = ("foo/plugin.py:9: Foo.filter(self, pod, node) takes 2 arguments; "
            "the Filter extension point calls filter(state, pod, node_info)")


@pytest.fixture
def wrong_folder(tmp_path: Path) -> Path:
    pkg = tmp_path / "wrongplugins" / "foo"
    pkg.mkdir(parents=True)
    (pkg / "plugin.py").write_text(WRONG)
    (pkg / "__init__.py").write_text("from .plugin import Foo\n")
    return tmp_path / "wrongplugins"


def _forget(name: str) -> None:
    for m in [m for m in sys.modules if m == f"ksched_user_plugins.{name}" or
              m.startswith(f"ksched_user_plugins.{name}.")]:
        del sys.modules[m]


def _ksched(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=env)


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------- the rule
class _Fine(Plugin):
    name = "Fine"

    def filter(self, state: object, pod: object, node_info: object) -> Status | None:  # names are free
        return None

    def score(self, s: object, p: object, n: object, weight: int = 1) -> int:  # an extra with a default
        return 0

    def pre_bind(self, *args: object) -> None:
        return None

    @staticmethod
    def bind(state: object, pod: object, node_name: object) -> None:
        return None

    def less(self, a: object, b: object, /, *, key: str = "") -> bool:
        return False

    def events_to_register(self) -> list[object]:
        return []


class _Wrong(Plugin):
    name = "Wrong"

    def pre_filter(self, state: object, pod: object, nodes: object, extra: object) -> None:
        return None

    def reserve(self, state: object, pod: object, node_name: object, *, why: str) -> None:
        return None

    def permit(self, state: object, pod: object) -> None:
        return None

    def __init__(self, args: object) -> None:
        super().__init__(args, None)

    @classmethod
    def post_bind(cls, state: object, pod: object, node_name: object, x: object = None, y: object = None) -> None:
        return None


def test_calls_that_fit_pass() -> None:
    assert signature_errors(_Fine) == []
    check_plugin_class(_Fine)


def test_each_mismatch_is_named() -> None:
    got = {msg.split("(")[0]: (where, msg) for where, msg in signature_errors(_Wrong)}
    assert set(got) == {"_Wrong.__init__", "_Wrong.pre_filter", "_Wrong.reserve", "_Wrong.permit"}
    assert got["_Wrong.__init__"][1] == ("_Wrong.__init__(self, args) takes 1 argument; the framework constructs "
                                         "plugins as _Wrong(args, handle)")
    assert got["_Wrong.pre_filter"][1] == ("_Wrong.pre_filter(self, state, pod, nodes, extra) takes 4 arguments; "
                                           "the PreFilter extension point calls pre_filter(state, pod, nodes)")
    assert got["_Wrong.reserve"][1].startswith("_Wrong.reserve(self, state, pod, node_name, *, why) has the "
                                               "keyword-only parameter 'why' without a default")
    assert got["_Wrong.permit"][1].endswith("takes 2 arguments; the Permit extension point calls "
                                            "permit(state, pod, node_name)")
    where = got["_Wrong.permit"][0]
    assert where.startswith(__file__ + ":") and int(where.rsplit(":", 1)[1]) > 0
    with pytest.raises(InputError) as e:
        check_plugin_class(_Wrong)
    assert e.value.exit_code == EXIT_INVALID and str(e.value).startswith(__file__ + ":")


def test_every_contract_names_a_protocol_method() -> None:
    """METHOD_CONTRACTS and the Protocols say the same thing: same method, same number of parameters."""
    import inspect

    for name, c in METHOD_CONTRACTS.items():
        if name == "__init__":  # the constructor's contract is Plugin's own
            sig = inspect.signature(Plugin.__init__)
            assert [p for p in sig.parameters][1:] == list(c.params)
            continue
        sig = inspect.signature(getattr(c.protocol, name))
        assert len(sig.parameters) - 1 == len(c.params), name


def test_in_tree_and_seed_plugins_pass() -> None:
    reg = build_registry([ROOT / "plugins"], entry_points_enabled=False)
    assert {"Coscheduling", "MyPreFilter", "NetworkTraffic", "NodeCRDResourceFit"} <= set(reg.plugins)
    assert {n: signature_errors(s.cls) for n, s in reg.plugins.items() if signature_errors(s.cls)} == {}


# ------------------------------------------------------------------------------------------ the doors
def test_plugin_loading_refuses_it(wrong_folder: Path) -> None:
    _forget("foo")
    try:
        with pytest.raises(InputError) as e:
            load_plugin_dir(wrong_folder)
        assert str(e.value) == f"{wrong_folder}/{EXPECTED}"
        with pytest.raises(InputError):
            build_registry([wrong_folder], entry_points_enabled=False)
    finally:
        _forget("foo")


def test_config_validate_refuses_it(wrong_folder: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    r = _ksched("config", "validate", "--plugin-dir", "wrongplugins", str(cfg), cwd=tmp_path)
    assert r.returncode == EXIT_INVALID, r.stderr
    assert _one_error_line(r.stderr).endswith(f"wrongplugins/{EXPECTED}")


def test_build_refuses_it_before_the_engine(wrong_folder: Path, tmp_path: Path) -> None:
    env_engine = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # refused before any engine is contacted
    os.environ.update(env_engine)
    try:
        r = _ksched("build", "--plugin-dir", "wrongplugins", "--tag", "example.test/foo:1", cwd=tmp_path)
    finally:
        for k in env_engine:
            os.environ.pop(k, None)
    assert r.returncode == EXIT_INVALID, r.stderr
    assert _one_error_line(r.stderr).endswith(f"wrongplugins/{EXPECTED}")


def test_build_notes_a_folder_it_cannot_import(tmp_path: Path) -> None:
    """A requirement installed only in the image: the check cannot run on this host, the build goes on."""
    pkg = tmp_path / "p" / "needsdep"
    pkg.mkdir(parents=True)
    (pkg / "plugin.py").write_text(textwrap.dedent('''\
        import not_installed_anywhere_ksched  # noqa: F401
    '''))
    notes: list[str] = []
    _forget("needsdep")
    try:
        assert load_plugin_dir(tmp_path / "p", on_import_error=lambda err: notes.append(str(err))) == []
    finally:
        _forget("needsdep")
    assert len(notes) == 1 and "cannot import plugin needsdep: ModuleNotFoundError" in notes[0]

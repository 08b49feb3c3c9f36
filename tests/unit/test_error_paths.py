"""Exit-code classification, the output-file helper, plugin-folder loading errors and kubeconfig checks."""

from __future__ import annotations

import errno
import textwrap
from pathlib import Path

import pytest
import yaml

from ksched_cli.guard import os_error_message
from scheduler_runtime.atomicfile import write_output
from scheduler_runtime.cluster.kube import KubeConfigError, check_kubeconfig
from scheduler_runtime.errors import InputError, KschedError, UsageError
from scheduler_runtime.framework.registry import PluginSpec, load_plugin_dir


@pytest.mark.parametrize(("err", "code"), [
    (InputError("no such file or directory", file="a.yaml", usage=True), 2),
    (InputError("line 3: invalid YAML: mapping values are not allowed here", file="b.yaml", usage=True), 2),
    (InputError("must be at least 1, got 0", field="--replicas", usage=True), 2),
    (InputError("Invalid value: 101", file="c.yaml", field="percentageOfNodesToScore", usage=False), 1),
    (InputError("namespace 'x' does not exist", field="--namespace", usage=False), 1),
    (InputError("must be an integer", field="spec.priority", usage=False), 1),
    (UsageError("unknown flag: --nope"), 2),
    (KschedError("something failed"), 1),
    (KschedError("cfg.yaml: Permission denied"), 1),  # the text never decides (test_exit_codes.py)
    (KschedError("cfg.yaml: Permission denied", usage=True), 2),
])
def test_exit_codes(err: KschedError, code: int) -> None:
    assert err.exit_code == code


def test_with_file_keeps_the_classification() -> None:
    e = InputError("x", field="--flag", usage=True).with_file("f.yaml")
    assert e.exit_code == 2 and str(e) == "f.yaml: --flag: x"


def test_os_error_message() -> None:
    e = IsADirectoryError(errno.EISDIR, "Is a directory", "/t/.out.abc", None, "/t/out")
    assert os_error_message(e) == "/t/out: Is a directory"
    e = FileNotFoundError(errno.ENOENT, "No such file or directory", "/nonexistent/dir/.x.yaml.abc")
    assert os_error_message(e) == "/nonexistent/dir: no such directory"
    assert os_error_message(OSError(errno.EIO, "I/O error")) is None


def test_write_output(tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    write_output(out, "a: 1\n")
    assert out.read_text() == "a: 1\n" and out.stat().st_mode & 0o777 == 0o644
    out.chmod(0o600)
    write_output(out, "a: 2\n")
    assert out.read_text() == "a: 2\n" and out.stat().st_mode & 0o777 == 0o600
    with pytest.raises(InputError) as ei:
        write_output(tmp_path, "x")
    assert str(ei.value) == f"{tmp_path}: is a directory" and ei.value.exit_code == 2
    with pytest.raises(InputError) as ei:
        write_output(tmp_path / "no" / "x.yaml", "x")
    assert "no such directory" in str(ei.value) and ei.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.yaml"]  # no temporary file left behind


def _pkg(root: Path, name: str, files: dict[str, str]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for f, body in files.items():
        (d / f).write_text(textwrap.dedent(body))
    return d


def test_import_error_names_the_innermost_plugin_frame(tmp_path: Path) -> None:
    d = _pkg(tmp_path, "ut_boom_a", {"__init__.py": "from .inner import X  # noqa\n",
                                     "inner.py": "import json\n\nraise RuntimeError('boom at import')\n"})
    with pytest.raises(KschedError) as ei:
        load_plugin_dir(tmp_path)
    assert str(ei.value) == f"{d / 'inner.py'}:3: cannot import plugin ut_boom_a: RuntimeError: boom at import"
    assert ei.value.exit_code == 1


def test_syntax_error_names_its_line(tmp_path: Path) -> None:
    d = _pkg(tmp_path, "ut_syntax_b", {"__init__.py": "x = 1\ndef broken(:\n    pass\n"})
    with pytest.raises(KschedError) as ei:
        load_plugin_dir(tmp_path)
    assert str(ei.value).startswith(f"{d / '__init__.py'}:2: cannot import plugin ut_syntax_b: SyntaxError")


def test_folders_without_a_plugin_are_reported(tmp_path: Path) -> None:
    _pkg(tmp_path, "ut_helpers_c", {"__init__.py": "def f():\n    return 1\n"})
    _pkg(tmp_path, "ut_loose_d", {"thing.py": "X = 1\n"})
    _pkg(tmp_path, "ut_data_e", {"README.md": "just docs\n"})
    warnings: list[str] = []
    assert load_plugin_dir(tmp_path, warnings) == []
    assert len(warnings) == 2
    assert "ut_helpers_c: __init__.py defines no Plugin subclass" in warnings[0]
    assert "ut_loose_d: has Python files but neither __init__.py nor plugin.py" in warnings[1]


def test_constructor_error_is_kube_schedulers_message() -> None:
    from scheduler_runtime.framework.plugin import Plugin

    class Ctor(Plugin):
        name = "Ctor"

        def __init__(self, args: object = None, handle: object = None) -> None:
            raise RuntimeError("ctor boom")

    with pytest.raises(KschedError) as ei:
        PluginSpec("Ctor", Ctor, "test").instantiate(None, None)
    assert str(ei.value) == 'initializing plugin "Ctor": ctor boom' and ei.value.exit_code == 1


GOOD_KC = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
}


def test_kubeconfig_checks(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(GOOD_KC))
    check_kubeconfig(str(good))
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n- name: a\n  cluster: {server: [x\n")
    with pytest.raises(KubeConfigError) as ei:
        check_kubeconfig(str(bad))
    assert str(ei.value).startswith(f"{bad}: line ") and "invalid YAML" in str(ei.value)
    assert ei.value.exit_code == 2
    with pytest.raises(KubeConfigError) as ei:
        check_kubeconfig(str(tmp_path))
    assert "is a directory" in str(ei.value) and ei.value.exit_code == 2
    with pytest.raises(KubeConfigError) as ei:
        check_kubeconfig(str(good), context="other")
    assert str(ei.value) == f'{good}: context: Invalid value: "other": no such entry in contexts'
    assert ei.value.exit_code == 1


def test_kubeconfig_merge_first_file_wins(tmp_path: Path) -> None:
    import os

    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump({"current-context": "c", "contexts": GOOD_KC["contexts"]}))
    b = tmp_path / "b.yaml"
    b.write_text(yaml.safe_dump({"clusters": GOOD_KC["clusters"], "users": GOOD_KC["users"],
                                 "current-context": "ignored"}))
    check_kubeconfig(f"{a}{os.pathsep}{b}")

"""Exit codes come from the exception class and the `usage=` its raise site passes, never from the message."""

from __future__ import annotations

import ast
import errno
from pathlib import Path

import pytest

from ksched_cli.guard import os_error_exit_code
from scheduler_runtime.errors import EXIT_INVALID, EXIT_USAGE, InputError, KschedError, UsageError

ROOT = Path(__file__).resolve().parents[2]
#: the classes whose meaning depends on the raise site: every call must say `usage=`
AMBIGUOUS = {"KschedError", "InputError", "KubeConfigError", "_kc_error"}


def _sites_without_usage() -> list[str]:
    missing = []
    for pkg in ("scheduler_runtime", "ksched_cli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            src = path.read_text()
            for node in ast.walk(ast.parse(src)):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in AMBIGUOUS and not any(k.arg in ("usage", None) for k in node.keywords):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return missing


def test_every_raise_site_states_its_exit_code() -> None:
    """`usage=True` (unreadable/unparseable input, a bad flag: exit 2) or `usage=False` (parsed but invalid,
    a failed job: exit 1) at every InputError/KschedError; errors.py no longer guesses from the text."""
    assert _sites_without_usage() == []


def test_the_message_never_decides() -> None:
    assert InputError("no such file or directory", file="x.yaml", usage=False).exit_code == EXIT_INVALID
    assert InputError("must be a mapping", field="spec", usage=True).exit_code == EXIT_USAGE
    assert KschedError("permission denied: invalid YAML, is a directory").exit_code == EXIT_INVALID
    assert InputError("bad", field="--replicas").exit_code == EXIT_INVALID  # no usage= given: the class decides
    assert UsageError("no such file").exit_code == EXIT_USAGE
    assert UsageError("x", usage=False).exit_code == EXIT_INVALID


def test_with_file_keeps_the_exit_code() -> None:
    for usage in (True, False):
        err = InputError("line 3: duplicate key 'a'", usage=usage).with_file("c.yaml")
        assert str(err) == "c.yaml: line 3: duplicate key 'a'" and err.usage is usage


def test_errors_py_has_no_text_classifier() -> None:
    import scheduler_runtime.errors as errors

    assert not hasattr(errors, "looks_like_io") and not hasattr(errors, "_IO_PHRASES")


@pytest.mark.parametrize("code,exit_code", [
    (errno.ENOENT, 2), (errno.EACCES, 2), (errno.EISDIR, 2), (errno.ENOTDIR, 2), (errno.EROFS, 2),
    (errno.ENOSPC, 1), (errno.EIO, 1), (errno.EDQUOT, 1), (None, 1),
])
def test_os_errors_are_classified_by_errno(code: int | None, exit_code: int) -> None:
    # the strerror text is deliberately misleading: only the errno counts
    exc = OSError(code, "No such file or directory" if exit_code == 1 else "disk full", "/tmp/x") if code \
        else OSError("No such file or directory")
    assert os_error_exit_code(exc) == exit_code


@pytest.mark.parametrize(("exc", "code"), [(UsageError("bad flag"), EXIT_USAGE),
                                           (InputError("bad field", file="f.yaml", usage=False), EXIT_INVALID),
                                           (KeyboardInterrupt(), 130), (RuntimeError("boom"), EXIT_INVALID)])
def test_the_one_error_boundary(exc: BaseException, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command runs inside guard.error_boundary (the root group applies it): one line, the class's code."""
    import typer

    from ksched_cli.guard import error_boundary

    with pytest.raises(typer.Exit) as caught, error_boundary():
        raise exc
    assert caught.value.exit_code == code
    err = capsys.readouterr().err
    assert err.count("\n") <= 1 and "Traceback" not in err


def test_every_command_runs_inside_the_boundary() -> None:
    """An error raised by any registered command reaches the user as one line: the root group wraps them all."""
    from typer.testing import CliRunner

    from ksched_cli.main import app

    result = CliRunner().invoke(app, ["config", "validate", "/nonexistent/cfg.yaml"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert "Traceback" not in result.output

"""Walks `ksched --help` of every command and subcommand and checks issue 17's conventions:

* `-o/--output` is always an output format (a subset of table|wide|json|yaml|name, listed in its help),
  never a file; a value outside the subset is a usage error (exit 2) naming the allowed values;
* files are written only through named flags (no `-o FILE`, no path-typed --output/--out);
* a command that reaches a cluster (it has `--kubeconfig`) also has `--context` and `-n/--namespace`, except
  where a namespace means nothing (listed below, with the reason).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ksched_cli.main import app
from ksched_cli.output import FORMATS

#: commands that reach a cluster without a namespace to choose, and why
NO_NAMESPACE = {
    ("run",): "a scheduler serves pods of every namespace, as kube-scheduler does",
    ("version",): "the server version is cluster-wide",
}
#: --kubeconfig options that name a file for a config to hold, not a cluster to reach
KUBECONFIG_AS_VALUE = {("config", "render"): "sets clientConnection.kubeconfig in the rendered config"}
#: commands that must reach a cluster (so they must keep --kubeconfig)
MUST_REACH = {("deploy",), ("undeploy",), ("describe-pod",), ("run",), ("version",)}


def _commands(cmd: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    cmd = cmd if cmd is not None else typer.main.get_command(app)
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [(path, cmd)]
    out = [(path, cmd)] if path else []
    for name, sub in sorted(subs.items()):
        out += _commands(sub, (*path, name))
    return out


COMMANDS = [(p, c) for p, c in _commands() if not getattr(c, "commands", None)]
runner = CliRunner()


def _help(path: tuple[str, ...]) -> str:
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300", "TERM": "dumb"})
    assert r.exit_code == 0, r.output
    return r.output


def _option(cmd: Any, opt: str) -> Any:
    return next((p for p in cmd.params if opt in getattr(p, "opts", [])), None)


def _is_path(p: Any) -> bool:
    td = getattr(p, "type_descriptor", None)
    return "Path" in str(getattr(td, "annotation", "")) or "Path" in type(getattr(p, "type", None)).__name__


def test_every_command_and_group_has_help() -> None:
    every = _commands()
    assert len(COMMANDS) >= 15, [p for p, _ in COMMANDS]
    for path, _ in every:
        _help(path)


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_conventions(path: tuple[str, ...], cmd: Any) -> None:
    text = _help(path)
    out = _option(cmd, "-o") or _option(cmd, "--output")
    if out is not None:
        assert "-o" in out.opts and "--output" in out.opts, f"{path}: -o and --output go together"
        allowed = (out.metavar or "").split("|")
        assert allowed and set(allowed) <= set(FORMATS), f"{path}: -o {out.metavar} is not a set of formats"
        assert f"Output format: {', '.join(allowed)}" in re.sub(r"\s+", " ", text), f"{path}: help lists formats"
        assert "json" in allowed or "yaml" in allowed, f"{path}: -o offers json or yaml"
        r = runner.invoke(app, [*path, "-o", "no-such-format"], env={"COLUMNS": "300"})
        assert r.exit_code == 2, (path, r.output)
        assert "allowed: " + ", ".join(allowed) in re.sub(r"\s+", " ", r.output), (path, r.output)
    for p in cmd.params:
        names = getattr(p, "opts", [])
        if any(n in ("--out", "--output", "-o", "--output-file") for n in names):
            assert not _is_path(p), f"{path}: {names} writes a file: use a named flag"
    for short, long in (("-f", "--filename"), ("-n", "--namespace"), ("-o", "--output")):
        for p in cmd.params:  # kubectl's short flags mean only what they mean in kubectl
            names = getattr(p, "opts", [])
            assert (short in names) == (long in names) or short not in names, f"{path}: {short} is not {long}"
    if _option(cmd, "--kubeconfig") is not None and path not in KUBECONFIG_AS_VALUE:
        assert _option(cmd, "--context") is not None, f"{path}: --kubeconfig without --context"
        if path not in NO_NAMESPACE:
            ns = _option(cmd, "--namespace")
            assert ns is not None and "-n" in ns.opts, f"{path}: reaches a cluster without -n/--namespace"
    if path in MUST_REACH:
        assert _option(cmd, "--kubeconfig") is not None and "--context" in text, path


def test_new_formats_are_kubectls() -> None:
    assert FORMATS == ("table", "wide", "json", "yaml", "name")


def test_file_writing_flags_are_named() -> None:
    """The commands that write files take the file from a flag that says so."""
    writers = {("config", "migrate"): "--write-to", ("config", "render"): "--write-to"}
    cmds = dict(COMMANDS)
    for path, flag in writers.items():
        p = _option(cmds[path], flag)
        assert p is not None and _is_path(p), (path, flag)


def test_the_walk_sees_the_commands() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    for n in ("version", "completion", "config migrate", "describe-pod", "deploy", "plugins list"):
        assert n in names, names
    assert Path(__file__).exists()

"""Accepting a flag or field means honouring it: every kube-scheduler v1.37.2 flag and every
KubeSchedulerConfiguration field ksched accepts is either implemented (the table names a behaviour test that
must exist) or refused with a one-line error naming it. The table is tests/data/kube-scheduler-coverage.yaml;
the flag list is the real binary's --help and the field list its --write-config-to output (checked-in
copies here; tests/integration/test_serving_parity.py::test_every_real_help_flag_and_config_field_is_covered
reads the real binary)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.config import load_config
from scheduler_runtime.config.loader import CC_FIELDS, LE_FIELDS, PLUGINS_FIELDS, PROFILE_FIELDS, TOP_FIELDS
from scheduler_runtime.errors import KschedError, UsageError
from scheduler_runtime.kubeversion import KUBE_VERSION
from scheduler_runtime.options.flags import BOOL_FLAGS, VALUE_FLAGS, parse
from scheduler_runtime.plugins.registry import build_registry

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TABLE = yaml.safe_load((DATA / "kube-scheduler-coverage.yaml").read_text())
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
_FLAG = re.compile(r"^\s+(?:-\w, )?--([a-z0-9-]+)\b")


def help_flags(text: str) -> set[str]:
    """Flag names of a pflag --help text (only option lines: they start with spaces and a dash)."""
    return {m.group(1) for line in text.splitlines() if (m := _FLAG.match(line))}


def config_paths(doc: Any, prefix: str = "") -> set[str]:
    """Leaf paths of a configuration; pluginConfig args become `args.<Kind>.<field...>`; `[]` marks lists."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if prefix.endswith("pluginConfig[]") and k == "args" and isinstance(v, dict):
                kind = v.get("kind", "?")
                out |= config_paths({a: b for a, b in v.items() if a not in ("kind", "apiVersion")}, f"args.{kind}")
                continue
            out |= config_paths(v, f"{prefix}.{k}" if prefix else k)
        return out or {prefix}
    if isinstance(doc, list):
        for v in doc:
            out |= config_paths(v, prefix + "[]")
        return out or {prefix}
    return {prefix}


def covered(path: str) -> bool:
    """A table key covers the path itself and everything under it (list markers aside); a path whose every
    sub-field has its own key is covered too."""
    flat = path.replace("[]", "")
    parts = flat.split(".")
    keys = {k.replace("[]", "") for k in TABLE["fields"]}
    return any(".".join(parts[:i]) in keys for i in range(1, len(parts) + 1)) or \
        any(k.startswith(flat + ".") for k in keys)


def test_table_names_every_flag_of_the_real_help() -> None:
    flags = help_flags((DATA / f"kube-scheduler-{KUBE_VERSION}-help.txt").read_text())
    assert len(flags) == 62
    assert flags == set(TABLE["flags"])
    assert flags <= BOOL_FLAGS | VALUE_FLAGS  # none is an "unknown flag" to ksched's parser


def test_every_accepted_config_field_is_in_the_table() -> None:
    want = {f"{k}" for k in TOP_FIELDS} | {f"leaderElection.{k}" for k in LE_FIELDS} | \
        {f"clientConnection.{k}" for k in CC_FIELDS} | {f"profiles[].{k}" for k in PROFILE_FIELDS - {"plugins"}} | \
        {f"profiles[].plugins.{k}" for k in PLUGINS_FIELDS}
    want -= {"leaderElection", "clientConnection", "profiles"}
    missing = sorted(p for p in want if not covered(p))
    assert missing == []
    reg = build_registry([])
    for name in reg.names():
        model = reg.get(name).args_model
        if model is None:
            continue
        for fname, f in model.model_fields.items():
            path = f"args.{model.__name__}.{f.alias or fname}"
            assert covered(path), path


def test_every_field_kube_writes_is_in_the_table() -> None:
    doc = yaml.safe_load((DATA / f"kube-scheduler-{KUBE_VERSION}-write-config-to.yaml").read_text())
    assert sorted(p for p in config_paths(doc) if not covered(p)) == []


@pytest.mark.parametrize("name", sorted(n for n, e in TABLE["flags"].items() if "test" in e))
def test_implemented_flag_names_an_existing_behaviour_test(name: str) -> None:
    _assert_test_exists(TABLE["flags"][name])


@pytest.mark.parametrize("name", sorted(n for n, e in TABLE["fields"].items() if "test" in e))
def test_implemented_field_names_an_existing_behaviour_test(name: str) -> None:
    _assert_test_exists(TABLE["fields"][name])


def _assert_test_exists(entry: dict[str, Any]) -> None:
    path, _, func = entry["test"].partition("::")
    f = ROOT / path
    assert f.is_file(), path
    assert re.search(rf"^def {re.escape(func)}\(", f.read_text(), re.M), entry["test"]


@pytest.mark.parametrize("name", sorted(n for n, e in TABLE["flags"].items() if "refused" in e))
def test_refused_flag_is_a_one_line_usage_error(name: str) -> None:
    entry = TABLE["flags"][name]
    with pytest.raises(UsageError) as exc:
        parse(entry["refused"])
    msg = str(exc.value)
    assert "\n" not in msg and f"--{name}" in msg and entry["error"] in msg


@pytest.mark.parametrize("name", sorted(n for n, e in TABLE["fields"].items() if "refused" in e))
def test_refused_field_is_a_one_line_error_naming_it(name: str, tmp_path: Path) -> None:
    entry = TABLE["fields"][name]
    p = tmp_path / "c.yaml"
    p.write_text(HEAD + entry["refused"] + "\n")
    with pytest.raises(KschedError) as exc:
        load_config(p, build_registry([]))
    msg = str(exc.value)
    assert "\n" not in msg and entry["error"] in msg and str(p) in msg
    leaf = name.rsplit(".", 1)[-1]
    assert leaf in msg or "pluginConfig[0]" in msg  # the field path, or the args entry that holds it

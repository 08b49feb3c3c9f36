"""The upstream-table harvester (hack/upstream_tables/harvest.py): which module pins a release, and where it puts
its dump calls in a test file (named and inline tables). No Go run: the injected source is checked as text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _harvest():
    spec = importlib.util.spec_from_file_location("ksched_harvest", ROOT / "hack/upstream_tables/harvest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_pinned_release_has_its_module() -> None:
    h = _harvest()
    assert h.module_for("1.37.2") == ROOT / "hack/controlplane"
    assert h.module_for("1.36.3") == ROOT / "hack/controlplane-prev"
    with pytest.raises(SystemExit, match="v1.30.0"):
        h.module_for("1.30.0")


GO_TEST = """package demo

func TestNamed(t *testing.T) {
\ttests := []struct{ name string }{{name: "a"}}
\tfor _, tt := range tests {
\t\t_ = tt
\t}
}

func TestInline(t *testing.T) {
\tfor _, tt := range []struct {
\t\tname string
\t}{
\t\t{name: "b"},
\t} {
\t\t_ = tt
\t}
}
"""


def test_dump_calls_go_into_named_and_inline_table_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = _harvest()
    src = tmp_path / "kube"
    (src / "demo").mkdir(parents=True)
    (src / "demo" / "demo_test.go").write_text(GO_TEST)
    monkeypatch.setattr(h, "kube_source", lambda version: src)
    out = h.inject("demo", "1.37.2", tmp_path / "scratch").joinpath("demo_test.go").read_text().splitlines()
    named = out.index("\tfor _, tt := range tests {")
    assert out[named + 1] == '\t\tksDumpWith(t, "TestNamed", "", &tt, map[string]any{})'
    inline = out.index("\t} {")
    assert out[inline + 1] == '\t\tksDumpWith(t, "TestInline", "", &tt, map[string]any{})'
    assert (tmp_path / "scratch" / "demo" / "zz_ksched_dump_test.go").read_text().startswith("// Harvest helper")

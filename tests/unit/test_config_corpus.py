"""The config corpus under tests/data/configs: each file states its verdict in its first line.

`# expect: valid` or `# expect-error: <text that one reported error contains>`. Seed tutorials' configs
(v1beta1-3) must fail with the removal message, then validate cleanly after `migrate`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_runtime.config import ConfigError
from scheduler_runtime.config.loader import build, read_document
from scheduler_runtime.config.migrate import migrate
from scheduler_runtime.errors import InputError
from scheduler_runtime.plugins.registry import build_registry

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted((REPO / "tests" / "data" / "configs").glob("*.yaml"))
REG = build_registry([REPO / "plugins"])


def expectation(path: Path) -> str | None:
    first = path.read_text().splitlines()[0]
    if first.startswith("# expect: valid"):
        return None
    assert first.startswith("# expect-error: "), path
    return first[len("# expect-error: "):]


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_verdict(path: Path):
    want = expectation(path)
    doc = read_document(path)
    if want is None:
        build(doc, REG, str(path))
        return
    with pytest.raises(ConfigError) as exc:
        build(doc, REG, str(path))
    assert any(want in e for e in exc.value.errors), exc.value.errors


@pytest.mark.parametrize("path", [p for p in CORPUS if p.stem.startswith("seed-")], ids=lambda p: p.stem)
def test_seed_configs_migrate_to_valid_v1(path: Path):
    m = migrate(read_document(path))
    assert m.doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert any("apiVersion" in c for c in m.changes)
    if path.stem.startswith("seed-04"):
        assert any("deniedPGExpirationTimeSeconds" in w and "podGroupBackoffSeconds" in w for w in m.warnings)
    build(m.doc, REG, str(path))


def _mutations() -> st.SearchStrategy:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 200), st.text(max_size=8),
                        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                             max_size=2))
    return st.tuples(st.sampled_from(CORPUS), st.lists(st.tuples(st.integers(0, 50), scalars), max_size=4))


def _paths(obj, prefix=()):
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_mutated_configs_only_raise_validation_errors(case):
    path, edits = case
    doc = read_document(path)
    for idx, value in edits:
        paths = [p for p, _ in _paths(doc) if p]
        if not paths:
            break
        target = paths[idx % len(paths)]
        parent = doc
        for k in target[:-1]:
            parent = parent[k]
        parent[target[-1]] = value
    try:
        build(doc, REG, str(path))
    except (ConfigError, InputError):
        pass

"""The one YAML reader: every hostile or broken file ends in one InputError (exit 2) naming file and line."""

from __future__ import annotations

import gc
import os
import tracemalloc
from pathlib import Path

import pytest

from scheduler_runtime import yamlio
from scheduler_runtime.cluster.kube import KubeConfigError, _read_kubeconfig_file
from scheduler_runtime.cluster.memory import load_objects
from scheduler_runtime.config.loader import read_document
from scheduler_runtime.errors import InputError

BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))


def _write(tmp_path: Path, text: str, name: str = "f.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _err(fn, *args) -> InputError:
    with pytest.raises(InputError) as info:
        fn(*args)
    return info.value


def test_a_mapping_used_as_a_key_in_a_cluster_file_is_an_input_error(tmp_path: Path) -> None:
    exc = _err(load_objects, _write(tmp_path, "apiVersion: v1\nkind: Node\nmetadata:\n  ? {a: 1}\n  : x\n"))
    assert exc.exit_code == 2 and "f.yaml" in str(exc) and "line 4" in str(exc) and "mapping key" in str(exc)


def test_recursive_anchors_in_a_config_are_refused(tmp_path: Path) -> None:
    text = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- &p\n  schedulerName: x\n  pluginConfig: [{name: NodeResourcesFit, args: *p}]\n")
    exc = _err(read_document, _write(tmp_path, text))
    assert exc.exit_code == 2 and "recursive anchor" in str(exc) and "line " in str(exc)


def test_an_alias_bomb_of_few_aliases_is_refused_before_it_is_built(tmp_path: Path) -> None:
    assert BOMB.count("*") < 100  # far under the old "1000 aliases" rule, still 9**9 nodes once expanded
    tracemalloc.start()
    try:
        exc = _err(read_document, _write(tmp_path, BOMB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "YAML bomb" in str(exc) and exc.exit_code == 2
    assert peak < 50 * 1024 * 1024


def test_nesting_is_bounded(tmp_path: Path) -> None:
    exc = _err(load_objects, _write(tmp_path, "a: " + "[" * 300 + "]" * 300 + "\n"))
    assert "nesting deeper than" in str(exc)


def test_duplicate_keys_are_refused_with_line_and_column(tmp_path: Path) -> None:
    exc = _err(read_document, _write(tmp_path, "kind: A\nkind: B\n"))
    assert str(exc).endswith("line 2, column 1: duplicate key 'kind'")


def test_duplicate_keys_count_after_the_key_becomes_a_string(tmp_path: Path) -> None:
    exc = _err(load_objects, _write(tmp_path, "metadata:\n  labels:\n    1: a\n    '1': b\n"))
    assert "duplicate key '1'" in str(exc)


def test_merge_keys_still_work_and_own_keys_override(tmp_path: Path) -> None:
    docs = yamlio.load_all("b: &b {x: 1, y: 1}\nm:\n  <<: *b\n  y: 2\n")
    assert docs == [{"b": {"x": 1, "y": 1}, "m": {"x": 1, "y": 2}}]


def test_values_follow_go_yaml(tmp_path: Path) -> None:
    doc = yamlio.load_all("t: 2001-12-14\nbig: 1.0e+400\n1: one\ntrue: yes\n")[0]
    assert doc == {"t": "2001-12-14", "big": "1.0e+400", "1": "one", "true": True}


@pytest.mark.parametrize("text", ["a: .inf\n", "a: -.Inf\n", "a: .nan\n", "a: !!binary aGk=\n", "a: !!set {x}\n"])
def test_values_kubernetes_cannot_hold_are_refused(text: str) -> None:
    exc = _err(yamlio.load_all, text)
    assert exc.exit_code == 2 and "line 1" in str(exc)


def test_dev_zero_is_refused_after_the_limit(tmp_path: Path) -> None:
    exc = _err(read_document, Path("/dev/zero"))
    assert "larger than" in str(exc) and exc.exit_code == 2


@pytest.mark.timeout(30)
def test_a_fifo_nobody_writes_to_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "cfg.yaml"
    os.mkfifo(fifo)
    exc = _err(read_document, fifo)  # opened without blocking: reads as empty
    assert "empty file" in str(exc)


def test_a_file_over_the_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    p = tmp_path / "big.yaml"
    with p.open("wb") as f:
        f.truncate(yamlio.CONFIG_LIMIT + 1)
    exc = _err(read_document, p)
    assert "larger than 8 MiB" in str(exc)


def test_binary_and_non_utf8_are_refused(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(b"a: \xff\xfe\n")
    assert "not UTF-8" in str(_err(load_objects, tmp_path / "b.yaml"))
    (tmp_path / "z.yaml").write_bytes(b"a: 1\x00\n")
    assert "binary file" in str(_err(load_objects, tmp_path / "z.yaml"))


def test_a_large_alias_free_file_is_parsed_without_rescanning_it(tmp_path: Path) -> None:
    """A 5 MB file took 75 s and 3 GB: the cyclic collector rescanned every parsed node again and again.
    Parsing now runs without it (the parsed objects hold no cycles), and the file parses in one pass."""
    pod = ("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\n"
           "  labels: {{app: web}}\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
           "    resources:\n      requests: {{cpu: 100m, memory: 64Mi}}\n")
    p = tmp_path / "pods.yaml"
    p.write_text("".join(pod.format(i=i) for i in range(1024 * 1024 // len(pod))))
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        docs = yamlio.load_file(p, limit=yamlio.SNAPSHOT_LIMIT)
    finally:
        gc.callbacks.remove(count)
    assert len(docs) > 4000
    assert collections == []
    assert gc.isenabled()


def test_kubeconfig_with_a_mapping_key_is_a_one_line_usage_error(tmp_path: Path) -> None:
    p = _write(tmp_path, "apiVersion: v1\nkind: Config\n? [a]\n: b\n", "kc")
    with pytest.raises(KubeConfigError) as info:
        _read_kubeconfig_file(str(p))
    assert info.value.exit_code == 2 and "line 3" in str(info.value) and "\n" not in str(info.value)


def test_roundtrip_load_has_the_same_limits() -> None:
    assert "YAML bomb" in str(_err(yamlio.load_roundtrip, BOMB))
    assert "duplicate key" in str(_err(yamlio.load_roundtrip, "a: 1\na: 2\n"))
    docs = yamlio.load_roundtrip("# keep\na: 1  # me\n")
    assert docs[0]["a"] == 1 and hasattr(docs[0], "ca")

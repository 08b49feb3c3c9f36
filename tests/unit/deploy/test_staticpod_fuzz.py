"""Static pod manifests as fuzz input: every malformed manifest is one `error:` line naming the file (and
the field path), exit 1 or 2, nothing written; never a traceback. Bounded for the default run; a long
mode can reuse staticpod_fuzz.staticpod_case_problems."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings


def _helpers():  # tests/ is not a package (pytest's importlib mode): load the shared fuzz case by path
    if "staticpod_fuzz" not in sys.modules:
        spec = importlib.util.spec_from_file_location("staticpod_fuzz", Path(__file__).with_name("staticpod_fuzz.py"))
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["staticpod_fuzz"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["staticpod_fuzz"]


fuzz_staticpod_case = _helpers().fuzz_staticpod_case
manifest_bytes = _helpers().manifest_bytes
staticpod_case_problems = _helpers().staticpod_case_problems


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=manifest_bytes())
def test_any_manifest_ends_in_success_or_one_clean_error(data: bytes) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ksched-fuzz-"))
    try:
        assert staticpod_case_problems(data, tmp) == []
    finally:
        shutil.rmtree(tmp)


BAD = {
    # case: (manifest bytes, exit code, words in the one error line)
    "not YAML": (b"spec: {containers: [\n", 2, ["invalid YAML"]),
    "not a mapping": (b"- a\n- b\n", 1, ["expected a Pod manifest (a mapping), got a list"]),
    "no containers": (b"apiVersion: v1\nkind: Pod\nspec: {containers: []}\n", 1, ["spec.containers", "missing"]),
    "containers not mappings": (b"apiVersion: v1\nkind: Pod\nspec: {containers: [1, x]}\n", 1,
                                ["spec.containers[0]", "expected a mapping, got a integer"]),
    "command not a list": (b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-scheduler\n"
                           b"    command: kube-scheduler --v=2\n", 1,
                           ["spec.containers[0].command", "expected a list, got a string"]),
    "flag not a string": (b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-scheduler\n"
                          b"    command: [kube-scheduler, 5]\n", 1, ["spec.containers[0].command[1]", "string"]),
    "volumeMounts not a list": (b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-scheduler\n"
                                b"    volumeMounts: {a: b}\n", 1, ["spec.containers[0].volumeMounts", "list"]),
    "mountPath not a string": (b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-scheduler\n"
                               b"    volumeMounts: [{name: a, mountPath: 7}]\n", 1,
                               ["spec.containers[0].volumeMounts[0].mountPath", "string"]),
    "hostPath not a mapping": (b"apiVersion: v1\nkind: Pod\nspec:\n  volumes: [{name: a, hostPath: /etc}]\n"
                               b"  containers: [{name: kube-scheduler}]\n", 1, ["spec.volumes[0].hostPath", "mapping"]),
    "runAsUser not an integer": (b"apiVersion: v1\nkind: Pod\nspec:\n  securityContext: {runAsUser: root}\n"
                                 b"  containers: [{name: kube-scheduler}]\n", 1,
                                 ["spec.securityContext.runAsUser", "integer"]),
    "deeply nested": (b"[" * 20000, 2, ["invalid YAML"]),
    "huge": (b"x: " + b"a" * (1 << 20) + b"\n", 2, ["larger than 32 KiB"]),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\xff", 2, ["not UTF-8"]),
    "NUL in text": (b"apiVersion: v1\x00\n", 2, ["invalid YAML"]),
    "duplicate key": (b"apiVersion: v1\nkind: Pod\nkind: Pod\n", 2, ["line 3", "duplicate key 'kind'"]),
    "tag that does not fit": (b"apiVersion: v1\nkind: !!set Pod\n", 2, ["line 2", "unsupported YAML tag"]),
    "lone surrogate": (b'{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "kube-scheduler", '
                       b'"image": "x\\ud800"}]}}', 2, ["invalid YAML", "invalid Unicode character escape"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_manifest_is_one_line_with_file_and_field(case: str, tmp_path: Path) -> None:
    data, code, words = BAD[case]
    got, stderr, unchanged = fuzz_staticpod_case(data, tmp_path)
    assert got == code, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    assert str(tmp_path / "etc-kubernetes" / "manifests" / "kube-scheduler.yaml") in lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert unchanged


def test_a_fifo_or_device_as_manifest_never_blocks(tmp_path: Path) -> None:
    import os

    from ksched_cli.deploy import staticpod
    from scheduler_runtime.errors import InputError

    fifo = tmp_path / "kube-scheduler.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(InputError, match="not a regular file") as exc:
            staticpod.read_manifest(path)
        assert exc.value.exit_code == 2

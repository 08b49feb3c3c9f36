"""The parts of `ksched build` that decide before and after the engine: image references, platforms, the
base image's Python and its wheel tags, the build log stream (push errors: test_push_errors.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ksched_cli.imagebuild.engine import BuildEvent, BuildFailed, parse_build_stream
from ksched_cli.imagebuild.reference import parse_platform, parse_reference
from ksched_cli.imagebuild.target import PROBE_SCRIPT, PythonTarget
from scheduler_runtime.errors import InputError, KschedError


@pytest.mark.parametrize("value,repository,tag,registry", [
    ("ksched", "ksched", None, "docker.io"),
    ("ksched:0.1.0", "ksched", "0.1.0", "docker.io"),
    ("team/ksched:v1", "team/ksched", "v1", "docker.io"),
    ("localhost/ksched-test:abc", "localhost/ksched-test", "abc", "localhost"),
    ("registry.example.com:5000/a/b-c__d.e:V_1.2-rc", "registry.example.com:5000/a/b-c__d.e", "V_1.2-rc",
     "registry.example.com:5000"),
    ("127.0.0.1:5000/ksched", "127.0.0.1:5000/ksched", None, "127.0.0.1:5000"),
])
def test_valid_references(value: str, repository: str, tag: str | None, registry: str) -> None:
    ref = parse_reference(value, flag="--tag")
    assert (ref.repository, ref.tag, ref.registry) == (repository, tag, registry)
    assert str(ref) == value


@pytest.mark.parametrize("value,why", [
    ("", "must not be empty"),
    ("KSched:v1", "repository names must be lowercase"),
    ("registry.example.com/Team/ksched", "repository names must be lowercase"),
    ("ksched:-v1", "a tag is 1-128"),
    ("ksched:", "a tag is 1-128"),
    ("ksched:" + "x" * 129, "a tag is 1-128"),
    ("ksched v1", "contains whitespace"),
    ("a//b", "use [registry[:port]/]name[:tag]"),
    ("ksched@sha256:12", "a digest looks like"),
])
def test_invalid_references_name_the_flag_and_the_reason(value: str, why: str) -> None:
    with pytest.raises(InputError) as err:
        parse_reference(value, flag="--tag")
    assert str(err.value).startswith("--tag: ") and why in str(err.value)


def test_a_built_image_is_tagged_not_named_by_digest() -> None:
    ref = "ksched@sha256:" + "a" * 64
    assert parse_reference(ref, flag="--base-image").digest == "sha256:" + "a" * 64
    with pytest.raises(InputError, match="named by a tag, not a digest"):
        parse_reference(ref, flag="--tag", allow_digest=False)


def test_platforms() -> None:
    assert parse_platform("linux/amd64") == ("linux/amd64", "x86_64")
    assert parse_platform("Linux/ARM64") == ("linux/arm64", "aarch64")
    assert parse_platform("linux/arm/v7") == ("linux/arm/v7", "armv7l")
    for bad, why in (("amd64", "use os/arch"), ("windows/amd64", "Linux images"), ("linux/m68k", "one of")):
        with pytest.raises(InputError, match=why):
            parse_platform(bad)


# --------------------------------------------------------------------------------------------- the target


def test_probe_script_reads_this_interpreter() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], capture_output=True, text=True, check=True).stdout
    t = PythonTarget.from_probe(out, "host")
    assert t.version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert t.implementation == "cpython" and t.has_venv


def test_glibc_tags_cover_every_older_manylinux_newest_first() -> None:
    tags = PythonTarget("3.11", "x86_64", "glibc", "2.36").platform_tags()
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_5_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_37_x86_64" not in tags
    arm = PythonTarget("3.12", "aarch64", "glibc", "2.28").platform_tags()
    assert "manylinux2014_aarch64" in arm and not [t for t in arm if t.startswith(("manylinux1", "manylinux2010"))]
    old = PythonTarget("3.11", "x86_64", "glibc", "2.12").platform_tags()
    assert "manylinux2014_x86_64" not in old and "manylinux2010_x86_64" in old
    assert PythonTarget("3.11", "x86_64", "musl", "1.2").platform_tags() == \
        ["musllinux_1_2_x86_64", "musllinux_1_1_x86_64", "musllinux_1_0_x86_64"]


def test_pip_args_select_binary_wheels_for_the_image_python() -> None:
    args = PythonTarget("3.12", "aarch64", "glibc", "2.36").pip_args()
    assert "--only-binary=:all:" in args
    assert args[args.index("--python-version") + 1] == "3.12"
    assert args[args.index("--abi") + 1] == "cp312"
    assert "manylinux_2_36_aarch64" in args


@pytest.mark.parametrize("probe,why", [
    ('{"version": "3.10", "machine": "x86_64", "libc": "glibc", "libc_version": "2.31", '
     '"implementation": "cpython", "has_venv": true}', "needs 3.11 or newer"),
    ('{"version": "3.11", "machine": "x86_64", "libc": "glibc", "libc_version": "2.36", '
     '"implementation": "cpython", "has_venv": false}', "install python3-venv"),
    ('{"version": "3.11", "machine": "x86_64", "libc": "glibc", "libc_version": "2.36", '
     '"implementation": "pypy", "has_venv": true}', "not CPython"),
    ('{"version": "3.11", "machine": "x86_64", "libc": "unknown", "libc_version": "", '
     '"implementation": "cpython", "has_venv": true}', "unknown C library"),
    ("Traceback (most recent call last): ...", "could not read its Python"),
])
def test_unusable_base_images_are_refused_with_a_hint(probe: str, why: str) -> None:
    with pytest.raises(KschedError) as err:
        PythonTarget.from_probe(probe, "example/base:1")
    assert why in str(err.value) and "example/base:1" in str(err.value)


# --------------------------------------------------------------------------------------------- build log


def _collect(chunks: list[dict]) -> tuple[list[BuildEvent], str]:
    items = list(parse_build_stream(chunks))
    *events, image_id = items
    assert isinstance(image_id, str)
    return events, image_id  # type: ignore[return-value]


def test_podman_stream_steps_lines_split_across_chunks_and_id() -> None:
    events, image_id = _collect([
        {"stream": "[1/2] STEP 1/7: FROM localhost/base AS install\n"},
        {"stream": "[1/2] STEP 3/7: RUN python3 -m ve"}, {"stream": "nv /opt/ksched/venv\n--> 3b76264\n"},
        {"stream": "STEP 2/3: USER 65532:65532\n"},
        {"stream": "Successfully tagged docker.io/library/ksched:dev\n"},
        {"stream": "26dab75888cb4c80e12f28e891880b84a4df406b2cb7aa7ef49c0920cee6eef1\n"},
        {"stream": "Successfully built 26dab75888cb\n"},
    ])
    assert [e.step for e in events if e.step] == ["FROM localhost/base AS install",
                                                  "RUN python3 -m venv /opt/ksched/venv", "USER 65532:65532"]
    assert "--> 3b76264" in [e.line for e in events]
    assert image_id == "26dab75888cb"


def test_docker_stream_takes_the_id_from_aux() -> None:
    events, image_id = _collect([{"stream": "Step 1/2 : FROM python:3.11-slim-bookworm\n"},
                                 {"stream": " ---> abc\n"}, {"aux": {"ID": "sha256:" + "f" * 64}},
                                 {"stream": "Successfully built ffffffffffff\n"}])
    assert events[0].step == "FROM python:3.11-slim-bookworm"
    assert image_id == "sha256:" + "f" * 64


def test_a_failed_step_raises_with_the_engine_message() -> None:
    chunks = [{"stream": "STEP 5/7: RUN pip install ...\n"}, {"stream": "ERROR: No matching distribution\n"},
              {"error": "building at STEP \"RUN pip install\": exit status 1",
               "errorDetail": {"message": "building at STEP \"RUN pip install\": exit status 1"}}]
    seen: list[str] = []
    with pytest.raises(BuildFailed, match="exit status 1"):
        for item in parse_build_stream(chunks):
            seen.append(item.line if isinstance(item, BuildEvent) else item)
    assert "ERROR: No matching distribution" in seen


def test_a_stream_without_an_image_id_is_a_failure() -> None:
    with pytest.raises(BuildFailed, match="without reporting an image ID"):
        list(parse_build_stream([{"stream": "STEP 1/1: FROM x\n"}]))


@pytest.mark.parametrize("value", ["ksched:ünicode", "ksched:v1\n", "régistry.example.com/ksched"])
def test_references_use_go_ascii_classes(value: str) -> None:
    """distribution/reference's \\w is ASCII (Go RE2): a Unicode letter in a tag is malformed there too."""
    with pytest.raises(InputError):
        parse_reference(value, flag="--tag")


@pytest.mark.parametrize("tag", ["ksched:ünicode", "", "team/KSched:v1", "ksched::v1"])
def test_ksched_build_refuses_a_malformed_tag_in_one_line(tag: str, tmp_path: Path) -> None:
    """Before any engine or network is touched: one line naming --tag, exit 2, even with no engine reachable."""
    import os

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
           "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    r = subprocess.run([str(Path(sys.executable).parent / "ksched"), "build", "--tag", tag], capture_output=True,
                       text=True, timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("error: --tag: "), r.stderr

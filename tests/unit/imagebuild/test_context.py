"""`ksched build` without an engine: plugin selection, the rendered Dockerfile, the context folder, the
entrypoint's dispatch, the ksched wheel (from source and repacked from an installed copy)."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import io
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ksched_cli.imagebuild import context, wheels
from ksched_cli.imagebuild.context import ImageSpec, PluginSource, collect_plugins, count_steps, render_dockerfile
from scheduler_runtime import __version__
from scheduler_runtime.errors import InputError, KschedError

REPO = Path(__file__).resolve().parents[3]
BUNDLED = REPO / "plugins"
SEED_PLUGINS = ["coscheduling", "my_prefilter", "network_traffic", "node_crd_resource_fit"]


def _spec(**kw: object) -> ImageSpec:
    base = {"base_image": "localhost/ksched-base:bookworm", "ksched_version": __version__,
            "plugins": list(SEED_PLUGINS), "python_version": "3.11"}
    return ImageSpec(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ksched_whl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real wheel of this checkout, built once for the module (its cache kept out of ~/.cache)."""
    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("KSCHED_CACHE")
    os.environ["KSCHED_CACHE"] = str(cache)
    try:
        return wheels.ksched_wheel(tmp_path_factory.mktemp("whl"), lambda _msg: None)
    finally:
        if old is None:
            os.environ.pop("KSCHED_CACHE", None)
        else:
            os.environ["KSCHED_CACHE"] = old


# ------------------------------------------------------------------------------------------------ plugins


def test_bundled_plugin_folder_yields_the_four_seed_plugins() -> None:
    found = collect_plugins([BUNDLED])
    assert [p.name for p in found] == SEED_PLUGINS
    assert all(p.path.parent == BUNDLED for p in found)


def test_plugin_folders_skip_caches_hidden_and_non_packages(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "plugin.py").write_text("")
    for junk in ("__pycache__", ".hidden", "_private", "docs"):
        (tmp_path / junk).mkdir()
        if junk != "docs":
            (tmp_path / junk / "__init__.py").write_text("")
    (tmp_path / "README.md").write_text("not a plugin")
    assert [p.name for p in collect_plugins([tmp_path])] == ["good"]


@pytest.mark.parametrize("case,expect", [
    ("missing", "plugin folder does not exist"),
    ("file", "is not a folder"),
    ("empty", "contains no plugin packages"),
    ("package", "is a plugin package itself: pass its parent folder"),
])
def test_bad_plugin_folders_are_refused_with_the_folder_and_flag(tmp_path: Path, case: str, expect: str) -> None:
    target = tmp_path / case
    if case == "file":
        target.write_text("x")
    elif case == "empty":
        target.mkdir()
    elif case == "package":
        target.mkdir()
        (target / "__init__.py").write_text("")
    with pytest.raises(InputError) as err:
        collect_plugins([target])
    assert expect in str(err.value)
    assert str(target) in str(err.value) and "--plugin-dir" in str(err.value)


def test_same_plugin_name_in_two_folders_is_refused(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "dup").mkdir(parents=True)
        (tmp_path / d / "dup" / "plugin.py").write_text("")
    with pytest.raises(InputError, match="'dup' is also in"):
        collect_plugins([tmp_path / "a", tmp_path / "b"])
    # the same folder twice is not a clash
    assert [p.name for p in collect_plugins([tmp_path / "a", tmp_path / "a"])] == ["dup"]


def test_plugin_requirements_are_read_and_pip_options_refused(tmp_path: Path) -> None:
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "plugin.py").write_text("")
    assert PluginSource("p", pkg).requirements == []
    (pkg / "requirements.txt").write_text("# talks to Redis\nredis>=5  # client\n\nsix==1.17.0\n")
    assert PluginSource("p", pkg).requirements == ["redis>=5", "six==1.17.0"]
    (pkg / "requirements.txt").write_text("--index-url https://example.invalid/simple\n")
    with pytest.raises(InputError, match="only package requirements"):
        PluginSource("p", pkg).requirements  # noqa: B018


# --------------------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_installs_offline_into_a_venv_and_runs_as_65532() -> None:
    text = render_dockerfile(_spec())
    instructions = [ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#"))]
    froms = [ln for ln in instructions if ln.startswith("FROM ")]
    assert froms == ["FROM localhost/ksched-base:bookworm AS install", "FROM localhost/ksched-base:bookworm"]
    assert "PIP_NO_INDEX=1" in text  # pip in the image never looks for an index
    assert "apt-get" not in text and "http://" not in text and "https://" not in text
    assert "pip install --quiet --no-deps /tmp/wheels/deps/*.whl" in text
    assert "COPY --from=install /opt/ksched/venv /opt/ksched/venv" in text  # the wheels stay in stage 1
    assert "pip install --quiet --no-deps /opt/ksched/dist/*.whl && /opt/ksched/venv/bin/pip check" in text
    assert "USER 65532:65532" in instructions
    assert "WORKDIR /opt/ksched" in instructions
    assert "COPY plugins/ /opt/ksched/plugins/" in instructions
    assert instructions[-2:] == ['ENTRYPOINT ["/usr/local/bin/ksched-entrypoint"]', 'CMD ["--help"]']
    # the plugins are imported at build time, as the non-root user (after USER)
    assert instructions.index("USER 65532:65532") < next(i for i, ln in enumerate(instructions)
                                                          if "ksched plugins list" in ln)
    assert 'LABEL io.ksched.plugins="coscheduling,my_prefilter,network_traffic,node_crd_resource_fit"' in text
    assert f'LABEL org.opencontainers.image.version="{__version__}"' in text
    assert 'LABEL io.ksched.kubernetes-version="v1.37.2"' in text  # the kube-scheduler release it follows


def test_layers_go_from_dependencies_to_ksched_to_plugins() -> None:
    text = render_dockerfile(_spec())
    order = [text.index(s) for s in ("COPY wheels/deps/", "COPY wheels/ksched/", "COPY plugins/")]
    assert order == sorted(order)


def test_plugin_requirements_get_their_own_layer_only_when_they_add_wheels() -> None:
    plain = render_dockerfile(_spec())
    assert "plugin-deps" not in plain
    text = render_dockerfile(_spec(plugin_deps=["six-1.17.0-py2.py3-none-any.whl"]))
    assert "COPY wheels/plugin-deps/ /tmp/wheels/plugin-deps/" in text
    # installed in the install stage, after ksched's dependencies
    assert text.index("wheels/deps/*.whl") < text.index("wheels/plugin-deps/*.whl") < \
        text.index("FROM localhost/ksched-base:bookworm\n")
    assert count_steps(text) == count_steps(plain) + 2


def test_label_values_cannot_break_out_of_their_quotes() -> None:
    text = render_dockerfile(_spec(labels={"team": 'a "quoted" $HOME\\path\nsecond line'}))
    assert 'LABEL team="a \\"quoted\\" \\$HOME\\\\path second line"' in text


def test_step_count_matches_the_instructions_engines_report() -> None:
    text = render_dockerfile(_spec())
    assert count_steps(text) == 5 + 20  # install stage + image stage, as podman numbers them
    assert count_steps("# c\nFROM a\nRUN x \\\n  # comment inside\n  && y\n\nCMD [\"z\"]\n") == 3


def test_missing_template_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(context, "TEMPLATE_DIR", tmp_path)
    with pytest.raises(KschedError, match="Dockerfile.j2 not found"):
        render_dockerfile(_spec())


# ------------------------------------------------------------------------------------------------ context


def test_context_holds_dockerfile_entrypoint_wheels_and_clean_plugins(tmp_path: Path, ksched_whl: Path) -> None:
    plugins_src = tmp_path / "src"
    shutil.copytree(BUNDLED, plugins_src)
    (plugins_src / "my_prefilter" / "__pycache__").mkdir(exist_ok=True)
    (plugins_src / "my_prefilter" / "__pycache__" / "plugin.cpython-311.pyc").write_bytes(b"stale")
    (plugins_src / "my_prefilter" / ".env").write_text("SECRET=1")
    dep = tmp_path / "six-1.17.0-py2.py3-none-any.whl"
    dep.write_bytes(b"PK")
    ctx = context.write_context(tmp_path / "ctx", _spec(), ksched_whl, [dep], collect_plugins([plugins_src]))

    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    assert "Dockerfile" in files and "ksched-entrypoint" in files
    assert f"wheels/ksched/{ksched_whl.name}" in files
    assert "wheels/deps/six-1.17.0-py2.py3-none-any.whl" in files
    for name in SEED_PLUGINS:
        assert f"plugins/{name}/__init__.py" in files
    assert not [f for f in files if "__pycache__" in f or "/." in f]
    assert (ctx / "Dockerfile").read_text() == render_dockerfile(_spec())
    assert (ctx / "ksched-entrypoint").stat().st_mode & stat.S_IXUSR
    assert not (ctx / "wheels" / "plugin-deps").exists()
    with pytest.raises(KschedError, match="is not empty"):
        context.write_context(ctx, _spec(), ksched_whl, [], [])


def test_plugin_dependency_wheels_go_to_their_own_folder(tmp_path: Path, ksched_whl: Path) -> None:
    extra = tmp_path / "six-1.17.0-py2.py3-none-any.whl"
    extra.write_bytes(b"PK")
    spec = _spec(plugin_deps=[extra.name])
    ctx = context.write_context(tmp_path / "ctx", spec, ksched_whl, [], [], [extra])
    assert [p.name for p in (ctx / "wheels" / "plugin-deps").iterdir()] == [extra.name]
    assert "COPY wheels/plugin-deps/" in (ctx / "Dockerfile").read_text()
    with pytest.raises(KschedError, match="differ from the ImageSpec"):
        context.write_context(tmp_path / "ctx2", _spec(), ksched_whl, [], [], [extra])


def _fake_bin(folder: Path, name: str) -> None:
    script = folder / name
    script.write_text(f'#!/bin/sh\necho "{name}" "$@"\n')
    script.chmod(0o755)


@pytest.mark.parametrize("args,expect", [
    ([], "ksched"),
    (["--version"], "ksched --version"),
    (["plugins", "list"], "ksched plugins list"),
    (["kube-scheduler", "--config=/etc/k.yaml"], "kube-scheduler --config=/etc/k.yaml"),
    (["ksched", "run"], "ksched run"),
    (["echo", "hi"], "hi"),
])
def test_entrypoint_runs_ksched_unless_the_first_word_is_a_command(tmp_path: Path, args: list[str],
                                                                   expect: str) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("ksched", "kube-scheduler"):
        _fake_bin(bindir, name)
    entry = tmp_path / "entry"
    entry.write_text(context.ENTRYPOINT)
    out = subprocess.run(["/bin/sh", str(entry), *args], capture_output=True, text=True, check=True,
                         env={"PATH": f"{bindir}:/usr/bin:/bin"})
    assert out.stdout.strip() == expect


# ----------------------------------------------------------------------------------------------- wheels


def test_ksched_wheel_has_both_console_scripts_and_every_package(ksched_whl: Path) -> None:
    assert ksched_whl.name == f"ksched-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(ksched_whl) as zf:
        names = zf.namelist()
        eps = zf.read(f"ksched-{__version__}.dist-info/entry_points.txt").decode()
    assert "ksched = ksched_cli.main:app" in eps
    assert "kube-scheduler = ksched_cli.kube_scheduler:main" in eps
    assert "ksched_cli/imagebuild/context.py" in names and "scheduler_runtime/scheduler.py" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "plugins/"))]


def test_unchanged_sources_reuse_the_cached_wheel(tmp_path: Path, ksched_whl: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSCHED_CACHE", str(tmp_path / "cache"))
    msgs: list[str] = []
    first = wheels.build_from_source(REPO, tmp_path / "a", msgs.append)
    second = wheels.build_from_source(REPO, tmp_path / "b", msgs.append)
    assert len(msgs) == 1 and "building the ksched wheel" in msgs[0]
    assert first.read_bytes() == second.read_bytes()  # byte-identical: the engine's COPY layer cache hits


def test_wheel_repacked_from_an_installed_copy_installs_the_same_files(tmp_path: Path, ksched_whl: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
                    str(site), str(ksched_whl)], check=True)
    dist = next(d for d in md.distributions(path=[str(site)]) if d.metadata["Name"] == "ksched")
    repacked = wheels.repack_installed(dist, tmp_path / "out")
    assert repacked.name == ksched_whl.name

    with zipfile.ZipFile(ksched_whl) as a, zipfile.ZipFile(repacked) as b:
        original = {n: a.read(n) for n in a.namelist() if not n.endswith("RECORD")}
        again = {n: b.read(n) for n in b.namelist() if not n.endswith(("RECORD", "INSTALLER", "REQUESTED"))}
        record = b.read(f"ksched-{__version__}.dist-info/RECORD").decode()
    assert again == original
    for path, digest, size in csv.reader(io.StringIO(record)):
        if digest:
            data = again[path]
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data)
    site2 = tmp_path / "site2"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
                    str(site2), str(repacked)], check=True)
    assert (site2 / "ksched_cli" / "commands" / "build.py").read_bytes() == \
        (site / "ksched_cli" / "commands" / "build.py").read_bytes()


def test_a_source_tree_of_another_project_is_not_taken_for_ksched(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert wheels.source_tree(tmp_path) is None
    assert wheels.source_tree(REPO) == REPO


def test_host_pins_are_exact_and_leave_out_ksched_and_the_installers() -> None:
    pins = wheels.host_pins()
    names = {p.split("==")[0] for p in pins}
    assert "docker" in names and "numpy" in names
    assert not names & {"ksched", "pip", "setuptools", "wheel"}
    assert all("==" in p and "+" not in p for p in pins)

"""The build context: plugin folders, the Dockerfile rendered from templates/Dockerfile.j2, the wheels.

Layout written by `write_context` (all an engine needs; nothing in it reaches the network):

    Dockerfile          rendered from templates/Dockerfile.j2
    ksched-entrypoint   runs `ksched ARGS`, or the command named first (`kube-scheduler ...`)
    wheels/deps/        ksched's dependency wheels for the base image's Python (one layer, cached across builds)
    wheels/plugin-deps/ what the plugins' requirements.txt add to those (only when they add something)
    wheels/ksched/      the ksched wheel (changes with every source edit, so it is a layer of its own)
    plugins/<name>/     each selected plugin package, without caches
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from scheduler_runtime.errors import InputError, KschedError
from scheduler_runtime.kubeversion import KUBE_VERSION
from scheduler_runtime.resources import templates_dir

TEMPLATE_DIR = templates_dir()
DOCKERFILE_TEMPLATE = "Dockerfile.j2"
IMAGE_UID = 65532  # like distroless' "nonroot"; `ksched deploy` checks file permissions against it
PLUGIN_ROOT = "/opt/ksched"  # WORKDIR: ksched's default --plugin-dir ./plugins resolves to PLUGIN_ROOT/plugins
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*", "*.egg-info")

ENTRYPOINT = """\
#!/bin/sh
# ksched image entrypoint: `IMAGE plugins list` runs `ksched plugins list`; a first argument that is a
# command on PATH runs that command, so `IMAGE kube-scheduler --config=...` and a manifest's
# `command: [kube-scheduler, ...]` both work.
set -e
case "${1:-}" in
  ""|-*) exec ksched "$@" ;;
esac
if command -v "$1" >/dev/null 2>&1; then
  exec "$@"
fi
exec ksched "$@"
"""


@dataclass(frozen=True)
class PluginSource:
    """One plugin package to ship: its folder name (the import name under ./plugins) and where it is."""

    name: str
    path: Path

    @property
    def requirements(self) -> list[str]:
        """Lines of the plugin's requirements.txt: third-party packages it imports, as wheels in the image."""
        req = self.path / "requirements.txt"
        if not req.is_file():
            return []
        lines = [ln.split("#", 1)[0].strip() for ln in req.read_text().splitlines()]
        for ln in lines:
            if ln.startswith("-"):
                raise InputError("only package requirements are supported (no pip options such as -r, -e, "
                                 f"--index-url): {ln!r}", file=str(req), usage=True)
        return [ln for ln in lines if ln]


def is_plugin_package(folder: Path) -> bool:
    """The registry's rule (scheduler_runtime.framework.registry.load_plugin_dir), so what ships is what loads."""
    return folder.is_dir() and not folder.name.startswith((".", "_")) and \
        ((folder / "__init__.py").is_file() or (folder / "plugin.py").is_file())


def collect_plugins(dirs: list[Path]) -> list[PluginSource]:
    """The plugin packages under each folder of `dirs`; refuses missing or empty folders and name clashes."""
    found: dict[str, PluginSource] = {}
    for d in dirs:
        if not d.exists():
            raise InputError("plugin folder does not exist", file=str(d), field="--plugin-dir", usage=True)
        if not d.is_dir():
            raise InputError("is not a folder: --plugin-dir names a folder of plugin packages", file=str(d),
                             field="--plugin-dir", usage=True)
        packages = [p for p in sorted(d.iterdir()) if is_plugin_package(p)]
        if not packages:
            if is_plugin_package(d):
                raise InputError(f"is a plugin package itself: pass its parent folder ({d.resolve().parent})",
                                 file=str(d), field="--plugin-dir", usage=True)
            raise InputError("contains no plugin packages (sub-folders with __init__.py or plugin.py)",
                             file=str(d), field="--plugin-dir", usage=True)
        for p in packages:
            if p.name in found and found[p.name].path.resolve() != p.resolve():
                raise InputError(f"plugin package {p.name!r} is also in {found[p.name].path}: folder names must "
                                 "be unique, they become module names", file=str(p), field="--plugin-dir", usage=True)
            found[p.name] = PluginSource(p.name, p)
    return list(found.values())


@dataclass
class ImageSpec:
    """What the Dockerfile template needs."""

    base_image: str
    ksched_version: str
    plugins: list[str]
    python_version: str
    plugin_deps: list[str] = field(default_factory=list)  # wheel file names the plugins' requirements add
    labels: dict[str, str] = field(default_factory=dict)
    uid: int = IMAGE_UID
    workdir: str = PLUGIN_ROOT


def _environment() -> jinja2.Environment:
    if not (TEMPLATE_DIR / DOCKERFILE_TEMPLATE).is_file():
        raise KschedError(f"{TEMPLATE_DIR / DOCKERFILE_TEMPLATE} not found: reinstall ksched from its sources",
                          usage=False)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["dq"] = docker_quote
    return env


def docker_quote(value: object) -> str:
    """A double-quoted Dockerfile word: LABEL/ENV values expand $VAR and split on spaces unless quoted."""
    text = " ".join(str(value).splitlines())
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def render_dockerfile(spec: ImageSpec) -> str:
    labels = {"org.opencontainers.image.title": "ksched",
              "org.opencontainers.image.description": "Kubernetes scheduler with Python plugins (ksched)",
              "org.opencontainers.image.version": spec.ksched_version,
              "org.opencontainers.image.base.name": spec.base_image,
              "io.ksched.plugins": ",".join(spec.plugins),
              # the kube-scheduler release the image behaves like by default (scheduler_runtime.kubeversion)
              "io.ksched.kubernetes-version": f"v{KUBE_VERSION}", **spec.labels}
    return _environment().get_template(DOCKERFILE_TEMPLATE).render(
        base_image=spec.base_image, labels=labels, uid=spec.uid, workdir=spec.workdir,
        python_version=spec.python_version, plugins=spec.plugins, ksched_version=spec.ksched_version,
        plugin_deps=spec.plugin_deps)


def count_steps(dockerfile: str) -> int:
    """Instructions in a Dockerfile (continuations joined): the step count engines report while building."""
    steps, continued = 0, False
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not continued and line and not line.startswith("#"):
            steps += 1
        continued = line.endswith("\\") or (continued and (not line or line.startswith("#")))
    return steps


def write_context(dest: Path, spec: ImageSpec, ksched_wheel: Path, dep_wheels: list[Path],
                  plugins: list[PluginSource], plugin_dep_wheels: list[Path] | None = None) -> Path:
    """Fill `dest` (which must be empty or absent) with everything the Dockerfile copies."""
    if sorted(w.name for w in plugin_dep_wheels or []) != sorted(spec.plugin_deps):
        raise KschedError("internal: the plugin dependency wheels differ from the ImageSpec's list", usage=False)
    if dest.exists() and any(dest.iterdir()):
        raise KschedError(f"build context folder {dest} is not empty", usage=False)
    (dest / "wheels" / "deps").mkdir(parents=True, exist_ok=True)
    (dest / "wheels" / "ksched").mkdir(parents=True, exist_ok=True)
    (dest / "plugins").mkdir(parents=True, exist_ok=True)
    for whl in dep_wheels:
        _link_or_copy(whl, dest / "wheels" / "deps" / whl.name)
    if plugin_dep_wheels:
        (dest / "wheels" / "plugin-deps").mkdir()
        for whl in plugin_dep_wheels:
            _link_or_copy(whl, dest / "wheels" / "plugin-deps" / whl.name)
    _link_or_copy(ksched_wheel, dest / "wheels" / "ksched" / ksched_wheel.name)
    for p in plugins:
        shutil.copytree(p.path, dest / "plugins" / p.name, ignore=_SKIP, symlinks=False)
    entry = dest / "ksched-entrypoint"
    entry.write_text(ENTRYPOINT)
    entry.chmod(0o755)  # COPY keeps the mode; the classic builder has no COPY --chmod
    (dest / "Dockerfile").write_text(render_dockerfile(spec))
    return dest


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)

"""Wheels for the build context: ksched itself and every runtime dependency, fetched on the host.

Both are cached under `$KSCHED_CACHE/build` (default ~/.cache/ksched/build) so a second build of the same
sources needs no network at all: the ksched wheel by a hash of its sources, dependency wheels in one flat
pool that `pip download --no-index` resolves from first, going to the index only when something is missing.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

from scheduler_runtime.errors import KschedError

from .target import PythonTarget

DIST_NAME = "ksched"
SOURCE_ROOT = Path(__file__).resolve().parents[2]
_SKIP_DIRS = {"__pycache__", ".git", ".venv", "build", "dist", ".pytest_cache", ".ruff_cache", ".mypy_cache"}

Log = Callable[[str], None]


def cache_root() -> Path:
    return Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched")) / "build"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_project(path: Path) -> str:
    """The normalized project name of a wheel file (the part before the first dash)."""
    return _normalize(path.name.split("-", 1)[0])


# ---------------------------------------------------------------------------------------------- ksched wheel


def source_tree(root: Path = SOURCE_ROOT) -> Path | None:
    """The ksched source checkout this code runs from, or None when ksched is installed from a wheel."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        name = tomllib.loads(pyproject.read_text()).get("project", {}).get("name")
    except (tomllib.TOMLDecodeError, OSError):
        return None
    return root if name == DIST_NAME else None


def _source_files(root: Path) -> list[Path]:
    """What a wheel build reads: pyproject, README/LICENSE, its data-files and the packages it includes."""
    conf = tomllib.loads((root / "pyproject.toml").read_text())
    include = conf.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {}).get("include") or ["*"]
    files = [p for p in root.iterdir() if p.is_file() and (p.name == "pyproject.toml" or
                                                            p.name.upper().startswith(("README", "LICENSE")))]
    for listed in (conf.get("tool", {}).get("setuptools", {}).get("data-files") or {}).values():
        files += [root / f for f in listed if (root / f).is_file()]  # templates/ ships as data-files
    for top in sorted(root.iterdir()):
        if top.is_dir() and top.name not in _SKIP_DIRS and not top.name.endswith(".egg-info") \
                and any(fnmatch(top.name, pat) for pat in include) and (top / "__init__.py").exists():
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
                files += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith((".pyc", ".pyo"))]
    return sorted(files)


def _tree_hash(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def build_from_source(root: Path, out_dir: Path, log: Log) -> Path:
    """`pip wheel --no-deps` of a copy of the sources (building in the checkout would leave build/ there)."""
    files = _source_files(root)
    cached_dir = cache_root() / "self" / _tree_hash(root, files)
    cached = sorted(cached_dir.glob(f"{DIST_NAME}-*.whl"))
    if not cached:
        log(f"building the ksched wheel from {root}")
        with tempfile.TemporaryDirectory(prefix="ksched-src-") as tmp:
            src = Path(tmp) / "src"
            for f in files:
                dest = src / f.relative_to(root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dest)
            wheel_dir = Path(tmp) / "out"
            base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
                    "--wheel-dir", str(wheel_dir), str(src)]
            proc = _pip(base)
            if proc.returncode != 0:  # offline: build with the setuptools of this environment instead
                proc = _pip([*base[:4], "--no-build-isolation", *base[4:]])
            if proc.returncode != 0:
                raise KschedError(f"could not build the ksched wheel from {root}: {_pip_error(proc)}", usage=False)
            built = sorted(wheel_dir.glob(f"{DIST_NAME}-*.whl"))
            if not built:
                raise KschedError(f"pip wheel of {root} produced no {DIST_NAME} wheel", usage=False)
            cached_dir.mkdir(parents=True, exist_ok=True)
            _atomic_copy(built[0], cached_dir / built[0].name)
        cached = sorted(cached_dir.glob(f"{DIST_NAME}-*.whl"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(cached[0], out_dir / cached[0].name))


DATA_MARK = "share/ksched/"


def repack_installed(dist: md.Distribution, out_dir: Path) -> Path:
    """Rebuild a wheel from an installed (non-editable) distribution's RECORD, for users without the sources.

    Console scripts (paths outside site-packages) are left out: the installer in the image recreates them
    from entry_points.txt. RECORD is rewritten with fresh hashes so pip in the image accepts the wheel.
    """
    files = [f for f in (dist.files or []) if not str(f).startswith("..") and "__pycache__" not in f.parts]
    data_files = [f for f in (dist.files or []) if DATA_MARK in f.as_posix()]  # templates (pyproject data-files)
    info_dir = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
    if info_dir is None or not any(str(f).endswith(".py") for f in files):
        raise KschedError(f"{DIST_NAME} {dist.version} is installed without its files (editable install?): "
                          "run ksched build from the source checkout instead", usage=False)
    wheel_meta = dist.read_text("WHEEL") or ""
    tag = next((line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")),
               "py3-none-any")
    name = f"{DIST_NAME}-{dist.version}-{tag}.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    skip = {f"{info_dir}/{n}" for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    rows: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(out_dir / name, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(files, key=str):
            arc = f.as_posix()
            if arc in skip:
                continue
            data = Path(str(dist.locate_file(f))).read_bytes()
            zf.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append((arc, f"sha256={digest}", str(len(data))))
        for f in sorted(data_files, key=str):
            posix = f.as_posix()
            rel = posix[posix.index(DATA_MARK):]
            # RECORD is relative to where pip first put the files; `pip install --target` moves them after
            site_dir = Path(str(dist.locate_file(info_dir))).parent
            src = next((c for c in (Path(str(dist.locate_file(f))), site_dir / rel) if c.is_file()), None)
            if src is None:
                raise KschedError(f"{DIST_NAME} {dist.version}: installed file {rel} is missing; reinstall ksched",
                                  usage=False)
            body = src.read_bytes()
            arc = f"{DIST_NAME}-{dist.version}.data/data/{rel}"
            zf.writestr(arc, body)
            digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
            rows.append((arc, f"sha256={digest}", str(len(body))))
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows([*rows, (f"{info_dir}/RECORD", "", "")])
        zf.writestr(f"{info_dir}/RECORD", record.getvalue())
    return out_dir / name


def ksched_wheel(out_dir: Path, log: Log) -> Path:
    """The wheel of the ksched that is running: built from its checkout, or repacked from site-packages."""
    root = source_tree()
    if root is not None:
        return build_from_source(root, out_dir, log)
    log("repacking the installed ksched distribution into a wheel")
    return repack_installed(md.distribution(DIST_NAME), out_dir)


# ---------------------------------------------------------------------------------------- dependency wheels


def host_pins() -> list[str]:
    """`name==version` of everything installed here: the image gets the versions ksched was tested with."""
    pins = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and _normalize(name) not in (DIST_NAME, "pip", "setuptools", "wheel") and "+" not in dist.version:
            pins[_normalize(name)] = f"{_normalize(name)}=={dist.version}"
    return sorted(pins.values())


def _pip(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    env.pop("PIP_FIND_LINKS", None)  # the pool is the only local source; a site-wide folder would be mixed in
    return subprocess.run(args, capture_output=True, text=True, env=env)


def _pip_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return " ".join((errors or lines or ["pip failed without output"])[-2:])


def _atomic_copy(src: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.copy2(src, tmp)
    os.replace(tmp, dest)


def dependency_wheels(ksched: Path, requirements: list[str], target: PythonTarget, dest: Path,
                      log: Log, pin: bool | None = None) -> list[Path]:
    """Download wheels of ksched's dependencies and `requirements` for `target` into `dest`.

    Resolution runs offline against the cache pool first; only when that fails does pip go to the index.
    Pins to the host's versions when the host runs the same Python minor version (`pin=None`).
    """
    pool = cache_root() / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    if pin is None:
        pin = target.version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    with tempfile.TemporaryDirectory(prefix="ksched-pip-") as tmp:
        args = [sys.executable, "-m", "pip", "download", "--dest", tmp, "--progress-bar", "off",
                "--find-links", str(pool), *target.pip_args()]
        if pin:
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text("\n".join(host_pins()) + "\n")
            args += ["--constraint", str(constraints)]
        args += [str(ksched), *requirements]
        proc = _pip([*args[:4], "--no-index", *args[4:]])
        if proc.returncode != 0:
            log(f"fetching dependency wheels for {target.describe()} from the package index")
            proc = _pip(args)
            if proc.returncode != 0:
                raise KschedError(f"could not get wheels of ksched's dependencies for {target.describe()}: "
                                  f"{_pip_error(proc)}", usage=False)
        else:
            log(f"dependency wheels for {target.describe()} found in the cache {pool}")
        wheels = []
        for whl in sorted(Path(tmp).glob("*.whl")):
            if wheel_project(whl) == DIST_NAME:
                continue
            if not (pool / whl.name).exists():
                _atomic_copy(whl, pool / whl.name)
            wheels.append(Path(shutil.copy2(whl, dest / whl.name)))
        others = [p.name for p in Path(tmp).iterdir() if p.suffix != ".whl" and p.name != "constraints.txt"]
        if others:
            raise KschedError(f"pip fetched source distributions, which an offline image build cannot install: "
                              f"{', '.join(others)}", usage=False)
    return wheels

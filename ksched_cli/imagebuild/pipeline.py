"""`ksched build` from start to end. Inputs are checked before the engine is contacted, the engine before
any wheel is fetched, so the cheap mistakes (a typo in --tag, a missing plugin folder) fail in milliseconds."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from scheduler_runtime import __version__
from scheduler_runtime.errors import KschedError
from scheduler_runtime.framework.registry import load_plugin_dir

from . import context, engine, wheels
from .reference import parse_platform, parse_reference
from .ui import Display

DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"
DEFAULT_TAG = f"ksched:{__version__}"


@dataclass
class BuildRequest:
    tag: str = DEFAULT_TAG
    base_image: str = DEFAULT_BASE_IMAGE
    plugin_dirs: list[Path] = field(default_factory=list)
    push: bool = False
    platform: str | None = None
    no_cache: bool = False


@dataclass
class BuildResult:
    tag: str
    image_id: str
    size: int
    plugins: list[str]
    python: str
    digest: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


def run(req: BuildRequest, display: Display) -> BuildResult:
    """Check the inputs, build the context on the host, build (and push) the image on the engine."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    ref = parse_reference(req.tag, flag="--tag", allow_digest=False)
    parse_reference(req.base_image, flag="--base-image")
    platform, machine = parse_platform(req.platform) if req.platform else (None, None)
    plugins = context.collect_plugins(req.plugin_dirs)
    requirements = [r for p in plugins for r in p.requirements]
    for d in req.plugin_dirs:  # refuse a plugin the framework could not call before spending a build on it
        load_plugin_dir(d, on_import_error=lambda err: display.note(
            f"{err} (not checked here; it must import in the image)"))

    client = engine.connect()
    display.note(f"engine: {engine.describe(client)}")

    try:
        base = engine.ensure_image(client, req.base_image, platform,
                                   lambda event: display.transfer_event(event, f"pulling {req.base_image}"))
    finally:
        display.transfer_finished()
    target = engine.probe_python(client, req.base_image, str(base.get("Id", "")), platform,
                                 cache_dir=wheels.cache_root() / "probe")
    if machine is not None and target.machine != machine:
        raise KschedError(f"--platform {platform}: the base image {req.base_image} runs {target.machine}; the "
                          f"engine has no {platform} variant of it (pull one, or drop --platform)", usage=False)
    display.note(f"base image {req.base_image}: {target.describe()}")
    timings["prepare"] = time.monotonic() - t0

    with tempfile.TemporaryDirectory(prefix="ksched-build-") as tmp:
        t1 = time.monotonic()
        ksched_whl = wheels.ksched_wheel(Path(tmp) / "self", display.note)
        deps = wheels.dependency_wheels(ksched_whl, [], target, Path(tmp) / "deps", display.note)
        extra: list[Path] = []
        if requirements:  # resolved together with ksched's, shipped as the difference (a layer of their own)
            display.note(f"plugin requirements: {', '.join(requirements)}")
            both = wheels.dependency_wheels(ksched_whl, requirements, target, Path(tmp) / "all", display.note)
            have = {w.name for w in deps}
            extra = [w for w in both if w.name not in have]
        spec = context.ImageSpec(base_image=req.base_image, ksched_version=__version__,
                                 plugins=[p.name for p in plugins], python_version=target.version,
                                 plugin_deps=[w.name for w in extra])
        ctx = context.write_context(Path(tmp) / "context", spec, ksched_whl, deps, plugins, extra)
        size_mb = sum(f.stat().st_size for f in ctx.rglob("*") if f.is_file()) / 1e6
        display.note(f"build context: {ksched_whl.name}, {len(deps) + len(extra)} dependency wheels, "
                     f"{len(plugins)} plugins ({', '.join(spec.plugins) or 'none'}), {size_mb:.0f} MB")
        timings["context"] = time.monotonic() - t1

        t2 = time.monotonic()
        display.build_started(context.count_steps((ctx / "Dockerfile").read_text()))
        try:
            attrs = engine.build(client, ctx, str(ref), platform, req.no_cache, display.build_event)
        finally:
            display.build_finished()
        timings["build"] = time.monotonic() - t2

    image_id, size = engine.image_summary(attrs)
    result = BuildResult(tag=str(ref), image_id=image_id, size=size, plugins=spec.plugins,
                         python=target.describe(), timings=timings)
    if req.push:
        t3 = time.monotonic()
        display.transfer_started(f"pushing {ref}")
        try:
            result.digest = engine.push(client, ref, display.transfer_event)
        finally:
            display.transfer_finished()
        timings["push"] = time.monotonic() - t3
    return result

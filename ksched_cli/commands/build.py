"""`ksched build`: the thin CLI over ksched_cli.imagebuild (see docs/build.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from scheduler_runtime.errors import InputError

from ..guard import DEBUG, fail

#: no container engine answers on DOCKER_HOST (or the default socket)
EXIT_ENGINE = 3
#: the image was built but the registry refused the push or could not be reached
EXIT_PUSH = 4

BUILD_EPILOG = (
    "Examples:\n\n"
    "  ksched build\n\n"
    "  ksched build --tag registry.example.com/team/ksched:v1 --plugin-dir plugins/ --push\n\n"
    "  DOCKER_HOST=unix:///run/ksched-podman/podman.sock ksched build --base-image localhost/ksched-base:bookworm\n\n"
    "  sudo ksched build --tag localhost/ksched:v1 --load-into containerd   (air-gapped control-plane node)\n\n"
    "The build itself runs without network: the wheels of ksched, its dependencies and the plugins' "
    "requirements.txt are fetched on this host first (cached in ~/.cache/ksched/build). "
    "Exit codes: 0 built (and pushed), 1 the build failed, 2 invalid input (tag, platform, plugin folder), "
    "3 no container engine reachable (or, with --load-into, no ctr or containerd socket), 4 push failed. "
    "See docs/build.md and docs/deploy.md.")


def register(app: typer.Typer) -> None:
    app.command("build", epilog=BUILD_EPILOG)(build)


def build(
    tag: Annotated[str | None, typer.Option(
        "--tag", "-t", help="Image reference to tag (and push). [default: ksched:VERSION]")] = None,
    base_image: Annotated[str, typer.Option(
        "--base-image", envvar="KSCHED_BASE_IMAGE",
        help="Image with python3 (3.11+, with venv) to build on. [default: python:3.11-slim-bookworm]")] = "",
    plugin_dir: Annotated[list[Path] | None, typer.Option(
        "--plugin-dir", help="Folder of plugin packages to ship (repeatable). Default: ./plugins when it exists, "
                             "else the plugins bundled with ksched.")] = None,
    push: Annotated[bool, typer.Option("--push", help="Push the image after building it.")] = False,
    platform: Annotated[str | None, typer.Option(
        "--platform", help="Target platform, e.g. linux/arm64 (the engine must be able to run it).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    load_into: Annotated[str | None, typer.Option(
        "--load-into", help="After the build, import the image into this node's runtime: `containerd` (namespace "
                            "k8s.io, where the kubelet looks; socket $CONTAINERD_ADDRESS or "
                            "/run/containerd/containerd.sock). For nodes without a registry.")] = None,
) -> None:
    """Build a container image of ksched with your plugins; it runs as `ksched ...` or as a drop-in
    `kube-scheduler` with kube-scheduler's flags, as non-root user 65532."""

    from ..imagebuild import load, pipeline
    from ..imagebuild.engine import EngineUnavailable, PushFailed
    from ..imagebuild.ui import Display

    try:  # before any work, so a missing ctr or socket fails in milliseconds
        target = load.preflight(load_into) if load_into is not None else None
    except load.LoadUnavailable as exc:
        if DEBUG["on"]:
            raise
        raise fail(str(exc), EXIT_ENGINE) from None

    req = pipeline.BuildRequest(tag=pipeline.DEFAULT_TAG if tag is None else tag,  # --tag "" is refused
                                base_image=base_image or pipeline.DEFAULT_BASE_IMAGE,
                                plugin_dirs=list(plugin_dir) if plugin_dir else _default_plugin_dirs(),
                                push=push, platform=platform, no_cache=no_cache)
    display = Display()
    try:
        result = pipeline.run(req, display)
    except (EngineUnavailable, PushFailed, InputError) as exc:
        if DEBUG["on"]:
            raise
        code = EXIT_ENGINE if isinstance(exc, EngineUnavailable) else EXIT_PUSH \
            if isinstance(exc, PushFailed) else exc.exit_code
        raise fail(str(exc), code) from None
    loaded: list[str] = []
    if target is not None:
        from ..imagebuild.engine import connect

        t0 = time.monotonic()
        loaded = load.load(connect(), result.tag, target)
        result.timings["load"] = time.monotonic() - t0
    t = result.timings
    display.note(f"built in {t.get('build', 0):.1f} s (context {t.get('context', 0):.1f} s, engine checks "
                 f"{t.get('prepare', 0):.1f} s)" + (f", pushed in {t['push']:.1f} s" if "push" in t else ""))
    print(f"image: {result.tag}")
    print(f"id: {result.image_id}")
    print(f"size: {result.size / 1e6:.1f} MB")
    print(f"plugins: {', '.join(result.plugins) or '(none)'}")
    if result.digest:
        print(f"digest: {result.digest}")
    if target is not None:
        print(f"containerd: {', '.join(loaded)} (namespace {load.NAMESPACE} at {target.address}, "
              f"{t['load']:.1f} s): deploy it with --image {loaded[0]}")


def _default_plugin_dirs() -> list[Path]:
    """./plugins like every other command; outside a plugin project, the plugins bundled with ksched."""
    from ..imagebuild.context import is_plugin_package
    from ..imagebuild.wheels import SOURCE_ROOT

    local = Path("plugins")
    if local.is_dir() and any(is_plugin_package(p) for p in local.iterdir()):
        return [local]
    bundled = SOURCE_ROOT / "plugins"
    return [bundled] if bundled.is_dir() else []

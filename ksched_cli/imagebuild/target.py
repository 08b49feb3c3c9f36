"""The Python inside the base image, and which wheels fit it.

Dependency wheels are fetched on the host for the *image's* interpreter, not the host's: numpy, orjson,
pydantic-core and cryptography ship compiled code, so version, CPU and C library must match or the
offline `pip install` in the image finds nothing to install.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from scheduler_runtime.errors import KschedError

#: run in the base image by `engine.probe_python`; prints one JSON object (stdlib only: the base has no pip)
PROBE_SCRIPT = """\
import glob, json, platform, sys
try:
    import ensurepip, venv  # noqa: F401  (the Dockerfile creates a venv)
    has_venv = True
except ImportError:
    has_venv = False
libc, libc_version = platform.libc_ver()
if not libc and glob.glob("/lib/ld-musl-*.so.1"):
    libc, libc_version = "musl", "1.2"
print(json.dumps({"version": "%d.%d" % sys.version_info[:2], "machine": platform.machine(),
                  "libc": libc or "unknown", "libc_version": libc_version, "implementation":
                  sys.implementation.name, "has_venv": has_venv}))
"""


@dataclass(frozen=True)
class PythonTarget:
    """What a wheel must match to install in the image."""

    version: str  # "3.11"
    machine: str  # "x86_64", "aarch64", ...
    libc: str  # "glibc" or "musl"
    libc_version: str  # "2.36"
    implementation: str = "cpython"
    has_venv: bool = True

    @classmethod
    def from_probe(cls, output: str, image: str) -> PythonTarget:
        """Parse PROBE_SCRIPT's output; refuse bases ksched cannot install into, saying what to use."""
        try:
            data = json.loads(output.strip().splitlines()[-1])
            target = cls(**{k: data[k] for k in ("version", "machine", "libc", "libc_version", "implementation",
                                                  "has_venv")})
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise KschedError(f"base image {image}: could not read its Python ({exc}): output was {output!r}",
                              usage=False) \
                from None
        target.check(image)
        return target

    def check(self, image: str) -> None:
        hint = "use a Debian-based Python image such as python:3.11-slim-bookworm"
        if self.implementation != "cpython":
            raise KschedError(f"base image {image} runs {self.implementation}, not CPython: {hint}", usage=False)
        major, minor = (int(x) for x in self.version.split(".")[:2])
        if (major, minor) < (3, 11):
            raise KschedError(f"base image {image} has Python {self.version}; ksched needs 3.11 or newer: {hint}",
                              usage=False)
        if self.libc not in ("glibc", "musl"):
            raise KschedError(f"base image {image}: unknown C library {self.libc!r} (wheels need glibc or musl): "
                              f"{hint}", usage=False)
        if not self.has_venv:
            raise KschedError(f"base image {image} has python3 without the venv/ensurepip modules: install "
                              f"python3-venv in it, or {hint}", usage=False)

    @property
    def abi(self) -> str:
        return "cp" + self.version.replace(".", "")

    def platform_tags(self) -> list[str]:
        """Every platform tag the image accepts, newest first (pip does not expand manylinux_2_X by itself)."""
        lib_major, _, lib_minor = self.libc_version.partition(".")
        minor = int(lib_minor.split(".")[0] or 0)
        m = self.machine
        if self.libc == "musl":
            return [f"musllinux_{lib_major}_{v}_{m}" for v in range(minor, -1, -1)]
        tags = [f"manylinux_2_{v}_{m}" for v in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        for glibc_minor, name in legacy.items():
            if minor >= glibc_minor and (glibc_minor == 17 or m in ("x86_64", "i686")):
                tags.append(f"{name}_{m}")
        return tags

    def pip_args(self) -> list[str]:
        """Arguments that make `pip download` choose wheels for this target instead of the host."""
        args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", self.version,
                "--abi", self.abi, "--abi", "abi3", "--abi", "none"]
        for tag in self.platform_tags():
            args += ["--platform", tag]
        return args

    def describe(self) -> str:
        return f"CPython {self.version} on {self.machine} ({self.libc} {self.libc_version})"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

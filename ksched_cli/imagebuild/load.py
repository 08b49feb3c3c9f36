"""`ksched build --load-into containerd`: copy the built image from the build engine into the containerd of this
machine, in the `k8s.io` namespace where the kubelet (CRI) looks for images, so a control-plane node without
a registry (air-gapped) can run it as its kube-scheduler static pod.

The engine exports the image as a docker-archive (what `docker save` / `podman save --format docker-archive`
write) and `ctr images import -` reads it from its standard input: nothing is written to disk. `ctr` and the
socket are checked before the build starts, so a missing one fails in milliseconds, not after the build."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from typing import Any

from scheduler_runtime.errors import KschedError, UsageError

#: where --load-into can put the image
TARGETS = ("containerd",)
#: the containerd namespace of the CRI plugin, i.e. of the kubelet's images
NAMESPACE = "k8s.io"
DEFAULT_ADDRESS = "/run/containerd/containerd.sock"
#: seconds `ctr images import` may take after the last byte of the archive (it unpacks the layers)
IMPORT_TIMEOUT = 600.0


class LoadUnavailable(KschedError):
    """ctr or the containerd socket is missing or not usable: nothing was built (exit as for a missing engine)."""


class LoadFailed(KschedError):
    """The image was built but containerd did not import it."""

    usage = False


@dataclass(frozen=True)
class Target:
    ctr: str
    address: str


def check_target(name: str) -> None:
    if name not in TARGETS:
        raise UsageError(f"--load-into: unsupported target {name!r} (allowed: {', '.join(TARGETS)})")


def preflight(name: str) -> Target:
    """ctr on PATH and a containerd socket we may use; CONTAINERD_ADDRESS overrides the socket, as for ctr."""
    check_target(name)
    ctr = shutil.which("ctr")
    if ctr is None:
        raise LoadUnavailable("--load-into containerd: `ctr` not found on PATH (it comes with containerd: "
                              "apt-get install containerd); nothing was built", usage=False)
    address = os.environ.get("CONTAINERD_ADDRESS") or DEFAULT_ADDRESS
    try:
        mode = os.stat(address).st_mode
    except FileNotFoundError:
        raise LoadUnavailable(f"--load-into containerd: no containerd socket at {address} (is containerd running? "
                              f"set CONTAINERD_ADDRESS to its socket); nothing was built", usage=False) from None
    except PermissionError:
        raise LoadUnavailable(f"--load-into containerd: permission denied on {address}: run as root (sudo); "
                              f"nothing was built", usage=False) from None
    if not stat.S_ISSOCK(mode):
        raise LoadUnavailable(f"--load-into containerd: {address} is not a socket (set CONTAINERD_ADDRESS to "
                              f"containerd's socket); nothing was built", usage=False)
    if not os.access(address, os.R_OK | os.W_OK):
        raise LoadUnavailable(f"--load-into containerd: permission denied on {address}: run as root (sudo); "
                              f"nothing was built", usage=False)
    return Target(ctr, address)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:300]


def load(client: Any, tag: str, target: Target) -> list[str]:
    """Stream image `tag` from the engine into containerd; returns the names containerd stored it under."""
    image = client.images.get(tag)
    cmd = [target.ctr, "--address", target.address, "-n", NAMESPACE, "images", "import", "-"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None
    broken = False
    try:
        for chunk in image.save(named=True):
            proc.stdin.write(chunk)
    except BrokenPipeError:
        broken = True  # ctr gave up; its stderr says why
    try:
        out, errs = proc.communicate(timeout=IMPORT_TIMEOUT)  # closes ctr's stdin: the end of the archive
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise LoadFailed(f"ctr images import did not finish within {IMPORT_TIMEOUT:.0f} s") from None
    if proc.returncode != 0 or broken:
        raise LoadFailed(f"ctr -n {NAMESPACE} images import failed (exit {proc.returncode}): "
                         f"{_first_line(errs.decode('utf-8', 'replace'))}")
    text = out.decode("utf-8", "replace") + errs.decode("utf-8", "replace")
    return re.findall(r"unpacking (\S+) \(", text) or [tag]


__all__ = ["NAMESPACE", "TARGETS", "LoadFailed", "LoadUnavailable", "Target", "check_target", "load", "preflight"]

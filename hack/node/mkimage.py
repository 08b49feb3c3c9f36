#!/usr/bin/env python3
"""Write a one-layer image as a docker-archive tarball, without a container engine.

`ctr images import` and `podman load` both read this format. Usage:
    mkimage.py OUT.tar NAME:TAG ENTRYPOINT HOST_FILE:IMAGE_PATH [HOST_FILE:IMAGE_PATH ...]
Every file goes in as root-owned, mode 0755 (they are executables), mtime 0, so the same inputs give the same
layer digest."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile


def layer(files: list[tuple[str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for host, inside in files:
            with open(host, "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(inside.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def archive(out: str, ref: str, entrypoint: str, files: list[tuple[str, str]]) -> None:
    blob = layer(files)
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Entrypoint": [entrypoint]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(blob).hexdigest()]},
    }, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(out, "w") as tar:
        for name, data in ((config_name, config), ("layer.tar", blob), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, ref, entrypoint, *specs = argv
    files = []
    for spec in specs:
        host, sep, inside = spec.partition(":")
        if not sep or not inside.startswith("/"):
            print(f"mkimage.py: {spec!r}: expected HOST_FILE:/IMAGE_PATH", file=sys.stderr)
            return 2
        files.append((host, inside))
    archive(out, ref, entrypoint, files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

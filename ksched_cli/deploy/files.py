"""Writing files a user owns: atomic replace, timestamped backups, unified diffs.

The kubelet runs every file in /etc/kubernetes/manifests, so temporary files start with a dot (the
kubelet skips hidden files) and backups are refused inside the manifests folder.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import os
import tempfile
from pathlib import Path

from scheduler_runtime.errors import InputError

BACKUP_SUFFIX = ".bak"


def read_bytes(path: Path, what: str) -> bytes:
    """The file's bytes, or an InputError naming the file and what to do."""
    try:
        if path.is_dir():
            raise InputError(f"Is a directory, expected the {what}", file=str(path), usage=True)
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file or directory", file=str(path), usage=True) from None
    except PermissionError:
        raise InputError(f"Permission denied reading the {what}: run as root (sudo)", file=str(path),
                         usage=True) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", file=str(path), usage=True) from None


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename: readers see the old or the new file, never half of one.

    Keeps the old file's mode and owner unless `mode` is given."""
    old: os.stat_result | None
    try:
        old = path.stat()
    except FileNotFoundError:
        old = None
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".ksched-tmp", dir=path.parent)
    except PermissionError:
        raise InputError("Permission denied writing here: run as root (sudo)", file=str(path), usage=True) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode if mode is not None else (old.st_mode & 0o7777 if old else 0o644))
        if old is not None and os.geteuid() == 0:
            os.chown(tmp, old.st_uid, old.st_gid)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # directory fsync is best effort (not every filesystem supports it)


def timestamp() -> str:
    """UTC, sortable as text, unique to the microsecond."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def backup_name(original: Path, stamp: str) -> str:
    return f"{original.name}.{stamp}{BACKUP_SUFFIX}"


def backups_of(original: Path, backup_dir: Path) -> list[Path]:
    """Backups of `original` in `backup_dir`, oldest first."""
    if not backup_dir.is_dir():
        return []
    prefix = original.name + "."
    found = [p for p in backup_dir.iterdir()
             if p.name.startswith(prefix) and p.name.endswith(BACKUP_SUFFIX) and p.is_file()]
    return sorted(found, key=lambda p: p.name)


def stamp_of(backup: Path, original: Path) -> str:
    return backup.name[len(original.name) + 1:-len(BACKUP_SUFFIX)]


def is_inside(path: Path, folder: Path) -> bool:
    p, f = path.resolve(), folder.resolve()
    return p == f or f in p.parents


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=old_label, tofile=new_label)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def readable_by(path: Path, uid: int, gid: int) -> bool | None:
    """Whether uid:gid may read `path` by its mode bits (None if the file cannot be inspected here)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & 0o400)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o040)
    return bool(st.st_mode & 0o004)

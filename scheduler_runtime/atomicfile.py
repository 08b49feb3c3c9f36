"""The one atomic file write, shared by the runtime and the CLI: replace a file in one rename, never through
a symlink, never half-written; and the checks for a file the user named with -o/--output (or
--write-config-to) before any work is done."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from .errors import InputError


def refuse_symlink(path: Path, what: str, flag: str | None = None) -> None:
    """Raise if `path` is a symlink: replacing it would turn the link into a plain file."""
    if not path.is_symlink():
        return
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    real = Path(os.path.join(path.parent, target)).resolve()
    hint = f"pass the real file with {flag} {real}" if flag else f"replace the link with the file {real} itself"
    raise InputError(f"is a symlink (to {target}): ksched replaces the {what} by renaming a new file over it, which "
                     f"would turn the link into a plain file and leave {real} unchanged; {hint}", file=str(path),
                     usage=True)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename: readers see the old or the new file, never half of one.

    Keeps the old file's mode and owner unless `mode` is given. Never writes through a symlink."""
    old: os.stat_result | None
    try:
        old = path.lstat()
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISLNK(old.st_mode):
        refuse_symlink(path, "file")
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


def check_output_path(path: Path | str) -> Path:
    """Refuse an output path that cannot be written (before any work is done): `OUT: is a directory`,
    `OUT: no such directory: PARENT`, `OUT: not a directory: PARENT` (all usage errors, exit 2)."""
    p = Path(path)
    where = str(path)
    if p.is_dir():
        raise InputError("is a directory", file=where, usage=True)
    parent = p.parent
    if not parent.exists():
        raise InputError(f"no such directory: {parent}", file=where, usage=True)
    if not parent.is_dir():
        raise InputError(f"not a directory: {parent}", file=where, usage=True)
    return p


def write_output(path: Path | str, text: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `text` in one rename (atomic_write): readers see the old file or the
    new one, and a failure leaves the old file as it was. Keeps an existing file's mode (new files: 0644)."""
    p = check_output_path(path)
    where = str(path)
    try:
        atomic_write(p, text.encode("utf-8") if isinstance(text, str) else text, mode)
    except InputError:  # atomic_write's refusal is worded for /etc/kubernetes; say it for an output file
        raise InputError(f"permission denied: cannot create a file in {p.parent}", file=where, usage=True) from None
    except OSError as exc:
        if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
            raise InputError("is a directory", file=where, usage=True) from None
        if isinstance(exc, PermissionError):
            raise InputError("permission denied", file=where, usage=True) from None
        raise InputError(f"cannot write: {exc.strerror or exc}", file=where, usage=True) from None

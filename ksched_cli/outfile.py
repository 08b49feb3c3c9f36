"""Writing a file the user named with -o/--output: checked first, replaced atomically, never half-written."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from scheduler_runtime.errors import InputError


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
    """Replace `path` with `text` in one rename: readers see the old file or the new one, and a failure
    leaves the old file as it was. Keeps an existing file's mode (new files get 0644 unless `mode`)."""
    p = check_output_path(path)
    where = str(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        old_mode = p.stat().st_mode & 0o7777
    except OSError:
        old_mode = None
    try:
        fd, tmp = tempfile.mkstemp(dir=str(p.parent), prefix=f".{p.name}.", suffix=".tmp")
    except PermissionError:
        raise InputError(f"permission denied: cannot create a file in {p.parent}", file=where, usage=True) from None
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=where, usage=True) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode if mode is not None else (old_mode if old_mode is not None else 0o644))
        os.replace(tmp, p)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, IsADirectoryError) or getattr(exc, "errno", None) == errno.EISDIR:
            raise InputError("is a directory", file=where, usage=True) from None
        if isinstance(exc, PermissionError):
            raise InputError("permission denied", file=where, usage=True) from None
        if isinstance(exc, OSError):
            raise InputError(f"cannot write: {exc.strerror or exc}", file=where, usage=True) from None
        raise

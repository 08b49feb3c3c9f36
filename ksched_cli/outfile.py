"""Writing a file the user named with -o/--output: checked first, replaced atomically, never half-written."""

from __future__ import annotations

import errno
from pathlib import Path

from scheduler_runtime.errors import InputError

from .deploy.files import atomic_write


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
    """Replace `path` with `text` in one rename (deploy.files.atomic_write): readers see the old file or the
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

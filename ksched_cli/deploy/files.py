"""Writing files a user owns: atomic replace, timestamped backups, unified diffs, safe locations.

The kubelet runs every file in /etc/kubernetes/manifests, so temporary files start with a dot (the
kubelet skips hidden files) and backups are refused inside the manifests folder. ksched writes as root
into folders the kubelet trusts, so it refuses to write through a symlink (a rename would replace the
link, not its target) and into a folder that users other than root may write.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import errno
import os
import stat
from pathlib import Path

from scheduler_runtime.atomicfile import atomic_write, refuse_symlink  # noqa: F401  (files.atomic_write in deploy/)
from scheduler_runtime.errors import InputError

BACKUP_SUFFIX = ".bak"
#: backups hold a manifest or a config: anything larger was not written by ksched
MAX_BACKUP_BYTES = 64 << 20


def read_bytes(path: Path, what: str) -> bytes:
    """The file's bytes (`-`: standard input), or an InputError naming the file and what to do."""
    if str(path) == "-":
        from scheduler_runtime import yamlio

        return yamlio.read_bytes("-")
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


def read_limited(path: Path, what: str, limit: int, flag: str | None = None) -> bytes:
    """At most `limit` bytes of a regular file that is not a symlink, or an InputError naming the file.

    Opened without following symlinks and without blocking (a FIFO or /dev/zero never hangs or fills
    memory); a larger file is refused rather than truncated."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError("no such file or directory", file=str(path), usage=True) from None
    except PermissionError:
        raise InputError(f"Permission denied reading the {what}: run as root (sudo)", file=str(path),
                         usage=True) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_symlink(path, what, flag)
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", file=str(path), usage=True) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"Is a directory, expected the {what}", file=str(path), usage=True)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a regular file (a device, FIFO or socket), expected the {what}", file=str(path),
                             usage=True)
        if st.st_size > limit:
            raise InputError(f"larger than {limit // 1024} KiB ({st.st_size} bytes): too big for the {what}",
                             file=str(path), usage=True)
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise InputError(f"larger than {limit // 1024} KiB: too big for the {what}", file=str(path), usage=True)
        return data
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", file=str(path), usage=True) from None
    finally:
        os.close(fd)


def _mode_problem(st: os.stat_result, itself: bool) -> str | None:
    """Why users other than root (or us) could change what is in a folder, or None."""
    mode = stat.S_IMODE(st.st_mode)
    sticky = bool(mode & stat.S_ISVTX) and not itself  # /tmp-like ancestors: others cannot rename our entries
    if st.st_uid not in (0, os.geteuid()):
        return f"is owned by uid {st.st_uid}, who could replace what is in it"
    if mode & 0o002 and not sticky:
        return f"is mode {mode:04o}: every user may write in it"
    if mode & 0o020 and st.st_gid != 0 and not sticky:
        return f"is mode {mode:04o} with group {st.st_gid}: that group may write in it"
    return None


def check_folder(folder: Path, holds: str, flag: str) -> None:
    """Refuse a folder (or a folder above it) that users other than root may write.

    ksched writes files there that root processes trust (the kubelet runs every manifest; the scheduler
    reads its config); anyone who can write the folder could plant or swap them. Like OpenSSH's
    StrictModes, every existing folder up to / is checked; a sticky folder above (such as /tmp) is fine."""
    real = Path(os.path.realpath(folder))
    chain = [real, *real.parents]
    itself = True
    for d in chain:
        try:
            st = d.stat()
        except FileNotFoundError:
            continue  # created later by ksched, mode 0700 or the umask's
        except OSError:
            return
        why = _mode_problem(st, itself and d == real)
        itself = False
        if why is not None:
            where = "" if d == real else f" (above {folder})"
            fix = f"`chmod go-w {d}`" if "mode" in why else f"`chown root {d}`"
            raise InputError(f"folder{where} {why}, so they could plant or replace {holds}: run {fix} or choose "
                             f"another {flag}", file=str(d), usage=True)


def timestamp() -> str:
    """UTC, sortable as text, unique to the microsecond."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def backup_name(original: Path, stamp: str) -> str:
    return f"{original.name}.{stamp}{BACKUP_SUFFIX}"


def backups_of(original: Path, backup_dir: Path) -> list[Path]:
    """Files (or links) named like backups of `original` in `backup_dir`, oldest first."""
    if not backup_dir.is_dir() or backup_dir.is_symlink():
        return []
    prefix = original.name + "."
    found = [p for p in backup_dir.iterdir()
             if p.name.startswith(prefix) and p.name.endswith(BACKUP_SUFFIX) and not p.is_dir()]
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

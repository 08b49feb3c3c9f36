"""The record of backups `ksched deploy --static-pod` wrote, so `--rollback` restores only those.

A `*.bak` file is just a file: anyone who can write the backup folder could plant one, and picking the
newest by name cannot step back past the last change. The journal (JSON beside the backups, mode 0600,
replaced atomically) lists each change ksched made: when, which files it replaced, the backup of each
with its sha256, and what it wrote instead. A rollback undoes the newest change not yet rolled back,
one per run, back to the manifest as it was before ksched first changed it; a backup whose hash no
longer matches, or a backup-like file the journal does not list, is refused.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler_runtime.errors import InputError

from . import files

JOURNAL_NAME = "ksched-journal.json"
VERSION = 1
#: a journal grows by a few hundred bytes per deploy; anything near this is not ours
MAX_BYTES = 4 << 20
APPLIED = "applied"
ROLLED_BACK = "rolled-back"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass
class Replaced:
    """One file a deploy replaced: its backup (None when the file did not exist) and what ksched wrote."""

    path: str
    backup: str | None
    sha256: str | None
    mode: int
    written_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "backup": self.backup, "sha256": self.sha256, "mode": self.mode,
                "written_sha256": self.written_sha256}


@dataclass
class Entry:
    id: str
    time: str
    manifest: Replaced
    config: Replaced | None
    state: str = APPLIED
    rolled_back_at: str | None = None
    #: the private kubeconfig copy for the image's user (see kubeconfig.py); absent in older journals
    kubeconfig: Replaced | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, "time": self.time, "state": self.state, "rolled_back_at": self.rolled_back_at,
               "manifest": self.manifest.to_json(), "config": self.config.to_json() if self.config else None}
        if self.kubeconfig is not None:
            out["kubeconfig"] = self.kubeconfig.to_json()
        return out

    def backups(self) -> list[str]:
        return [r.backup for r in (self.manifest, self.config, self.kubeconfig) if r is not None and r.backup]


@dataclass
class Journal:
    path: Path
    entries: list[Entry] = field(default_factory=list)

    def for_manifest(self, manifest: Path) -> list[Entry]:
        key = str(manifest.absolute())
        return [e for e in self.entries if e.manifest.path == key]

    def recorded_names(self) -> set[str]:
        return {b for e in self.entries for b in e.backups()}

    def save(self) -> None:
        data = json.dumps({"version": VERSION, "entries": [e.to_json() for e in self.entries]}, indent=1) + "\n"
        files.atomic_write(self.path, data.encode(), 0o600)


def _replaced(d: Any, where: str, file: str) -> Replaced:
    if not isinstance(d, dict):
        raise InputError(f"expected a mapping, got {type(d).__name__}", file=file, field=where, usage=False)

    def get(key: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
        v = d.get(key)
        if (v is None and optional) or (isinstance(v, kind) and not isinstance(v, bool)):
            return v
        raise InputError(f"expected {getattr(kind, '__name__', 'a value')}, got {type(v).__name__}", file=file,
                         field=f"{where}.{key}", usage=False)

    backup = get("backup", str, True)
    if backup is not None and (not backup or "/" in backup or backup.startswith(".")):
        raise InputError(f"{backup!r} is not a file name in the backup folder", file=file, field=f"{where}.backup",
                         usage=False)
    return Replaced(get("path", str), backup, get("sha256", str, backup is None), get("mode", int),
                    get("written_sha256", str))


def load(backup_dir: Path) -> Journal:
    """The journal in `backup_dir` (empty when there is none yet); a malformed one is an error."""
    path = backup_dir / JOURNAL_NAME
    if not path.exists() and not path.is_symlink():
        return Journal(path)
    raw = files.read_limited(path, "ksched backup journal", MAX_BYTES)
    where = str(path)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not valid JSON ({exc}); ksched writes this file: restore it or move it away",
                         file=where, usage=True) from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("entries"), list):
        raise InputError(f"expected {{version: {VERSION}, entries: [...]}}", file=where, field="version",
                         usage=False)
    out = Journal(path)
    for i, e in enumerate(doc["entries"]):
        at = f"entries[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or not isinstance(e.get("time"), str) \
                or e.get("state") not in (APPLIED, ROLLED_BACK):
            raise InputError("expected id, time and state (applied or rolled-back)", file=where, field=at,
                             usage=False)
        cfg = e.get("config")
        kc = e.get("kubeconfig")
        out.entries.append(Entry(e["id"], e["time"], _replaced(e.get("manifest"), f"{at}.manifest", where),
                                 _replaced(cfg, f"{at}.config", where) if cfg is not None else None, e["state"],
                                 e.get("rolled_back_at") if isinstance(e.get("rolled_back_at"), str) else None,
                                 _replaced(kc, f"{at}.kubeconfig", where) if kc is not None else None))
    return out


def verified_backup(backup_dir: Path, r: Replaced, journal: Journal) -> bytes:
    """The bytes of a recorded backup, refused unless it is a regular file with the recorded sha256."""
    assert r.backup is not None
    path = backup_dir / r.backup
    data = files.read_limited(path, "backup", files.MAX_BACKUP_BYTES)
    if sha256(data) != r.sha256:
        raise InputError(f"does not match the sha256 recorded in {journal.path} when ksched wrote it: it was changed "
                         f"since, so it is not restored; compare it with the file you expect and copy it back by "
                         f"hand if you trust it", file=str(path), usage=False)
    return data

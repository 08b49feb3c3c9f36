"""Writing a static-pod plan (backups first, atomic replace, journal) and rolling it back from the
backups, byte for byte."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from scheduler_runtime.errors import InputError

from . import files, journal, kubeconfig
from .manifest import MAX_MANIFEST_BYTES
from .staticplan import StaticPodPlan, _owner_mode, check_backup_dir

# ------------------------------------------------------------------------------------------ write


@dataclass
class Written:
    backup: Path | None = None
    config_backup: Path | None = None
    kubeconfig_backup: Path | None = None
    wrote_config: bool = False
    wrote_kubeconfig: bool = False
    wrote_manifest: bool = False
    entry: journal.Entry | None = None


def _mode_of(path: Path, default: int) -> int:
    try:
        return path.lstat().st_mode & 0o7777
    except FileNotFoundError:
        return default


def apply(p: StaticPodPlan, backup_dir: Path) -> Written:
    """Back up and record in the journal, install the config (0644), then replace the manifest.

    If a later step fails, what was written is undone (config, journal entry, backups)."""
    w = Written()
    if not p.changed:
        return w
    check_backup_dir(backup_dir)
    try:
        backup_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except PermissionError:
        raise InputError("Permission denied creating the backup folder: run as root (sudo)",
                         file=str(backup_dir), usage=True) from None
    j = journal.load(backup_dir)  # a malformed journal stops us before anything is written
    stamp = files.timestamp()
    mode = _mode_of(p.manifest, 0o600)
    cfg_mode = _mode_of(p.config_dest, 0o644)
    old_manifest = p.old_manifest.encode()
    written: list[Path] = []
    try:
        w.backup = backup_dir / files.backup_name(p.manifest, stamp)
        files.atomic_write(w.backup, old_manifest, mode)
        written.append(w.backup)
        if p.config_changed and p.old_config is not None:
            w.config_backup = backup_dir / files.backup_name(p.config_dest, stamp)
            files.atomic_write(w.config_backup, p.old_config, cfg_mode)
            written.append(w.config_backup)
        kc_entry = None
        if p.kubeconfig_copy_changed:
            assert p.kubeconfig_copy is not None
            if p.old_kubeconfig_copy is not None:
                w.kubeconfig_backup = backup_dir / files.backup_name(p.kubeconfig_copy, stamp)
                files.atomic_write(w.kubeconfig_backup, p.old_kubeconfig_copy, 0o600)
                written.append(w.kubeconfig_backup)
            old_kc = p.old_kubeconfig_copy
            kc_entry = journal.Replaced(str(p.kubeconfig_copy.absolute()),
                                        w.kubeconfig_backup.name if w.kubeconfig_backup else None,
                                        journal.sha256(old_kc) if old_kc is not None else None, 0o600,
                                        journal.sha256(p.new_kubeconfig_copy))
        cfg = None
        if p.config_changed:
            old = p.old_config
            cfg = journal.Replaced(str(p.config_dest.absolute()), w.config_backup.name if w.config_backup else None,
                                   journal.sha256(old) if old is not None else None, cfg_mode,
                                   journal.sha256(p.new_config))
        w.entry = journal.Entry(stamp, journal.now(), journal.Replaced(
            str(p.manifest.absolute()), w.backup.name, journal.sha256(old_manifest), mode,
            journal.sha256(p.new_manifest.encode())), cfg, kubeconfig=kc_entry)
        j.entries.append(w.entry)
        j.save()
    except BaseException:
        for f in written:
            f.unlink(missing_ok=True)
        raise
    try:
        if p.config_changed:
            files.atomic_write(p.config_dest, p.new_config, 0o644)
            w.wrote_config = True
        if p.kubeconfig_copy_changed:
            assert p.kubeconfig_copy is not None
            files.atomic_write(p.kubeconfig_copy, p.new_kubeconfig_copy, 0o600)  # root's alone until the chown
            os.chown(p.kubeconfig_copy, *p.kubeconfig_owner)
            w.wrote_kubeconfig = True
        if p.manifest_changed:
            files.atomic_write(p.manifest, p.new_manifest.encode(), mode)
            w.wrote_manifest = True
    except BaseException:
        if w.wrote_config:
            if p.old_config is None:
                p.config_dest.unlink(missing_ok=True)
            else:
                files.atomic_write(p.config_dest, p.old_config, cfg_mode)
        if w.wrote_kubeconfig and p.kubeconfig_copy is not None:
            if p.old_kubeconfig_copy is None:
                p.kubeconfig_copy.unlink(missing_ok=True)
            else:
                files.atomic_write(p.kubeconfig_copy, p.old_kubeconfig_copy, 0o600)
        j.entries.remove(w.entry)
        j.save()
        for f in written:
            f.unlink(missing_ok=True)
        raise
    return w


@dataclass
class RollbackPlan:
    """The newest recorded change not yet rolled back, and what undoing it writes (entry None: none left)."""

    manifest: Path
    backup_dir: Path
    journal: journal.Journal
    entry: journal.Entry | None
    current: bytes = b""
    restored: bytes = b""
    config_dest: Path | None = None
    config_current: bytes | None = None
    config_restored: bytes | None = None
    earlier: int = 0
    edited_since: bool = False
    #: the private kubeconfig copy the change installed: removed (freshly installed) or restored from its backup
    kubeconfig_path: Path | None = None
    kubeconfig_current: bytes | None = None
    kubeconfig_restored: bytes | None = None
    kubeconfig_remove: bool = False

    @property
    def backup(self) -> Path:
        assert self.entry is not None and self.entry.manifest.backup is not None
        return self.backup_dir / self.entry.manifest.backup

    @property
    def config_backup(self) -> Path | None:
        c = self.entry.config if self.entry else None
        return self.backup_dir / c.backup if c is not None and c.backup else None

    @property
    def kubeconfig_changed(self) -> bool:
        return self.kubeconfig_remove or (self.kubeconfig_restored is not None and
                                          self.kubeconfig_current != self.kubeconfig_restored)

    @property
    def changed(self) -> bool:
        return self.current != self.restored or (self.config_restored is not None and
                                                 self.config_current != self.config_restored) or \
            self.kubeconfig_changed

    def diff(self) -> str:
        out = ""
        if self.config_backup is not None and self.config_restored is not None and \
                self.config_current != self.config_restored:
            out += files.unified_diff((self.config_current or b"").decode("utf-8", "replace"),
                                      self.config_restored.decode("utf-8", "replace"), str(self.config_dest),
                                      str(self.config_backup))
        out += files.unified_diff(self.current.decode("utf-8", "replace"), self.restored.decode("utf-8", "replace"),
                                  str(self.manifest), str(self.backup))
        return out


def plan_rollback(manifest: Path, backup_dir: Path, config_dest: Path) -> RollbackPlan:
    """Undo the newest change ksched recorded for `manifest` (and the config it replaced with it).

    Only backups listed in the journal are restored, and only while their sha256 still matches; a
    backup-like file the journal does not list stops the rollback, as it means someone else writes here."""
    check_backup_dir(backup_dir)
    j = journal.load(backup_dir)
    entries = j.for_manifest(manifest)
    config_names = {config_dest.name, kubeconfig.PRIVATE_NAME} | {Path(e.config.path).name for e in entries
                                                                 if e.config} | \
        {Path(e.kubeconfig.path).name for e in entries if e.kubeconfig}
    recorded = j.recorded_names()
    candidates = files.backups_of(manifest, backup_dir) + [b for n in sorted(config_names)
                                                           for b in files.backups_of(Path(n), backup_dir)]
    unrecorded = [b for b in candidates if b.name not in recorded]
    if unrecorded:
        more = f" (and {len(unrecorded) - 1} more)" if len(unrecorded) > 1 else ""
        raise InputError(f"is not a backup ksched recorded in {j.path}{more}: ksched restores only the backups it "
                         f"wrote, and a file it did not write here means someone else does; move it out of "
                         f"{backup_dir} (copy it back by hand if you trust it) and run again", file=str(unrecorded[0]),
                         usage=False)
    if not entries:
        raise InputError(f"no backup of {manifest.name} recorded in {j.path} (ksched deploy --static-pod writes one "
                         f"before each change; pass --backup-dir if you used another folder)", field="--rollback",
                         usage=False)
    applied = [e for e in entries if e.state == journal.APPLIED]
    if not applied:
        return RollbackPlan(manifest, backup_dir, j, None)
    e = applied[-1]
    if e.config is not None and Path(e.config.path) != config_dest.absolute():
        raise InputError(f"the change being undone ({e.time}) installed the config at {e.config.path}, not "
                         f"{config_dest}: pass --config-dest {e.config.path}", field="--config-dest", usage=True)
    if e.manifest.backup is None:
        raise InputError("records no backup of the manifest", file=str(j.path), field=f"entries[{j.entries.index(e)}]",
                         usage=False)
    restored = journal.verified_backup(backup_dir, e.manifest, j)
    current = (files.read_limited(manifest, "static pod manifest", MAX_MANIFEST_BYTES, "--manifest")
               if manifest.exists() or manifest.is_symlink() else b"")
    r = RollbackPlan(manifest, backup_dir, j, e, current, restored, earlier=len(applied) - 1,
                     edited_since=journal.sha256(current) != e.manifest.written_sha256)
    if e.config is not None and e.config.backup:
        r.config_dest = config_dest
        r.config_restored = journal.verified_backup(backup_dir, e.config, j)
        files.refuse_symlink(config_dest, "installed config", "--config-dest")
        r.config_current = config_dest.read_bytes() if config_dest.is_file() else None
    elif e.config is not None:
        r.config_dest = config_dest  # ksched installed it fresh: left in place
    if e.kubeconfig is not None:
        kp = Path(e.kubeconfig.path)
        files.refuse_symlink(kp, "private kubeconfig", "--config-dest")
        r.kubeconfig_path = kp
        r.kubeconfig_current = kp.read_bytes() if kp.is_file() else None
        if e.kubeconfig.backup:
            r.kubeconfig_restored = journal.verified_backup(backup_dir, e.kubeconfig, j)
        elif r.kubeconfig_current is not None and journal.sha256(r.kubeconfig_current) == \
                e.kubeconfig.written_sha256:
            r.kubeconfig_remove = True  # a credential ksched created: it goes with the change
    return r


def apply_rollback(r: RollbackPlan) -> None:
    """Restore what the plan says, then record the change as rolled back (so the next run goes further)."""
    assert r.entry is not None
    e = r.entry
    if r.config_restored is not None and r.config_current != r.config_restored:
        assert r.config_dest is not None and e.config is not None
        files.atomic_write(r.config_dest, r.config_restored, e.config.mode)
    if r.current != r.restored:
        files.atomic_write(r.manifest, r.restored, e.manifest.mode)
    if r.kubeconfig_path is not None and r.kubeconfig_changed:
        if r.kubeconfig_remove:
            r.kubeconfig_path.unlink(missing_ok=True)
        elif r.kubeconfig_restored is not None:
            owner = _owner_mode(r.kubeconfig_path)
            files.atomic_write(r.kubeconfig_path, r.kubeconfig_restored, 0o600)
            if owner is not None:
                os.chown(r.kubeconfig_path, owner[0], owner[1])
    e.state = journal.ROLLED_BACK
    e.rolled_back_at = journal.now()
    r.journal.save()

"""The static-pod plan: everything `ksched deploy --static-pod` will change (image, flags, config volume,
a private kubeconfig for the image's user), computed and checked before a byte is written."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from scheduler_runtime.errors import InputError

from ..imagebuild.context import IMAGE_UID  # the user the ksched image runs as (templates/Dockerfile.j2)
from . import files, kubeconfig
from .manifest import (
    _RUAMEL_FAULTS,
    _STYLES,
    DEFAULT_BACKUP_DIR,
    DEFAULT_CONFIG_DEST,
    LEADER_FLAGS,
    VOLUME_NAME,
    Flag,
    _flag_list,
    _host_path_of,
    _insert_sorted,
    _mount_covering,
    _remove_flag,
    _yaml,
    check_manifest_shape,
    find_flags,
    find_scheduler_container,
    load_roundtrip,
    read_manifest,
)
from .rbac import DEFAULT_LEASE, RUNTIME_RULES, lease_rules, plugin_rules

# ------------------------------------------------------------------------------------------ plan


@dataclass
class StaticPodPlan:
    manifest: Path
    config_source: Path
    config_dest: Path
    old_manifest: str
    new_manifest: str
    old_config: bytes | None
    new_config: bytes
    kubeconfig: str
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rbac: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: the private, self-contained copy of the kubeconfig for the image's user (None: none needed)
    kubeconfig_copy: Path | None = None
    old_kubeconfig_copy: bytes | None = None
    new_kubeconfig_copy: bytes = b""
    kubeconfig_owner: tuple[int, int] = (IMAGE_UID, IMAGE_UID)

    @property
    def manifest_changed(self) -> bool:
        return self.old_manifest != self.new_manifest

    @property
    def kubeconfig_copy_changed(self) -> bool:
        return self.kubeconfig_copy is not None and (self.old_kubeconfig_copy != self.new_kubeconfig_copy or
                                                     _owner_mode(self.kubeconfig_copy) !=
                                                     (*self.kubeconfig_owner, 0o600))

    @property
    def config_changed(self) -> bool:
        return self.old_config != self.new_config

    @property
    def changed(self) -> bool:
        return self.manifest_changed or self.config_changed or self.kubeconfig_copy_changed

    def diff(self) -> str:
        out = ""
        if self.config_changed:
            old = self.old_config.decode("utf-8", "replace") if self.old_config is not None else ""
            out += files.unified_diff(old, self.new_config.decode(), str(self.config_dest) if
                                      self.old_config is not None else "/dev/null", str(self.config_dest))
        out += files.unified_diff(self.old_manifest, self.new_manifest, str(self.manifest), str(self.manifest))
        return out


def check_locations(manifest: Path, config_dest: Path, backup_dir: Path) -> None:
    """Refuse destinations the kubelet would pick up as manifests, and relative in-container paths."""
    folder = manifest.parent
    if not config_dest.is_absolute():
        raise InputError(f"must be an absolute path (it is also the path inside the container), got {config_dest}",
                         field="--config-dest", usage=True)
    if files.is_inside(config_dest, folder):
        raise InputError(f"{config_dest} is inside the manifests folder {folder}: the kubelet would try to run it as "
                         f"a pod; use e.g. {DEFAULT_CONFIG_DEST}", field="--config-dest", usage=True)
    if files.is_inside(backup_dir, folder):
        raise InputError(f"{backup_dir} is inside the manifests folder {folder}: the kubelet runs every file there, "
                         f"backups included; use e.g. {DEFAULT_BACKUP_DIR}", field="--backup-dir", usage=True)
    check_folders(manifest, config_dest)
    check_backup_dir(backup_dir)


def check_folders(manifest: Path, config_dest: Path) -> None:
    """Refuse manifest and config folders that users other than root may write."""
    files.check_folder(manifest.parent, "the manifests the kubelet runs as root", "--manifest")
    files.check_folder(config_dest.parent, "the config the scheduler reads", "--config-dest")


def validate_config(path: Path, registry: Any) -> tuple[dict[str, Any], Any]:
    """The config's raw document and built configuration; refuses invalid files with the first error."""
    from scheduler_runtime.config import ConfigError
    from scheduler_runtime.config.loader import build, read_document

    doc = read_document(path)
    try:
        cfg = build(doc, registry, None)
    except ConfigError as exc:
        more = f" (and {len(exc.errors) - 1} more)" if len(exc.errors) > 1 else ""
        raise InputError(f"{exc.errors[0]}{more}: fix the config (`ksched config validate {path}` lists every "
                         f"error); nothing was changed", file=str(path), usage=False) from None
    return doc, cfg


def _set_config_kubeconfig(text: str, path: Path, kubeconfig: str) -> str:
    """The config text with clientConnection.kubeconfig set, comments and order kept."""
    loaded = load_roundtrip(path, text)
    doc = loaded.doc
    cc = doc.get("clientConnection")
    if not isinstance(cc, dict):
        cc = CommentedMap()
        keys = list(doc.keys())
        pos = max((keys.index(k) + 1 for k in ("apiVersion", "kind") if k in keys), default=0)
        doc.insert(pos, "clientConnection", cc)
    if "kubeconfig" in cc:
        cc["kubeconfig"] = kubeconfig
    else:
        cc.insert(0, "kubeconfig", kubeconfig)
    return loaded.dump()


def plan(manifest: Path, config: Path, image: str, config_dest: Path, registry: Any) -> StaticPodPlan:
    """Everything `deploy --static-pod` would change, without writing anything."""
    if not image or not image.strip() or any(ch.isspace() for ch in image):
        raise InputError("must be a non-empty image reference without spaces, e.g. registry.example.com/"
                         "ksched:v1 (the tag `ksched build` printed)", field="--image", usage=True)
    check_folders(manifest, config_dest)
    loaded = read_manifest(manifest)
    text = loaded.text
    doc = loaded.doc
    idx, c = find_scheduler_container(doc, manifest)
    cpath = f"spec.containers[{idx}]"
    spec = doc["spec"]
    config_raw, cfg = validate_config(config, registry)
    cfg_text = files.read_bytes(config, "config").decode("utf-8")

    p = StaticPodPlan(manifest=manifest, config_source=config, config_dest=config_dest, old_manifest=text,
                      new_manifest=text, old_config=None, new_config=b"", kubeconfig="")
    if not loaded.exact:
        p.notes.append("this file's layout cannot be reproduced exactly by the YAML writer: a few unrelated lines "
                       "may change formatting (see the diff)")

    # -- which kubeconfig the scheduler uses ---------------------------------------------------------------
    flags = find_flags(c)
    by_name = {f.name: f for f in flags}
    manifest_kc = (by_name["kubeconfig"].value if "kubeconfig" in by_name else None)
    kc_source = f"--kubeconfig in {cpath}"
    if not manifest_kc and "authentication-kubeconfig" in by_name:
        manifest_kc, kc_source = by_name["authentication-kubeconfig"].value, f"--authentication-kubeconfig in {cpath}"
    if not manifest_kc and "config" in by_name:
        manifest_kc = _installed_kubeconfig(_host_path_of(spec, c, str(by_name["config"].value)))
        kc_source = f"the config the manifest runs now ({by_name['config'].value})"
    cc = config_raw.get("clientConnection") if isinstance(config_raw.get("clientConnection"), dict) else {}
    cfg_kc = str(cc.get("kubeconfig") or "")
    if not cfg_kc and not manifest_kc:
        raise InputError("not set, and the manifest has no --kubeconfig to take it from: set it to the kubeconfig the "
                         "scheduler should use (kubeadm: /etc/kubernetes/scheduler.conf)", file=str(config),
                         field="clientConnection.kubeconfig", usage=False)
    if cfg_kc and manifest_kc and cfg_kc != manifest_kc:
        if _mount_covering(c, cfg_kc) is None:
            raise InputError(f"{cfg_kc!r} is not mounted in the kube-scheduler container (the manifest uses "
                             f"{manifest_kc}, {kc_source}): set it to {manifest_kc} or remove it", file=str(config),
                             field="clientConnection.kubeconfig", usage=False)
        p.notes.append(f"clientConnection.kubeconfig is {cfg_kc} (the manifest used {manifest_kc}); kept as you set it")
    if cfg_kc:
        p.kubeconfig = cfg_kc
        installed = cfg_text
    else:
        assert manifest_kc is not None
        p.kubeconfig = manifest_kc
        installed = _set_config_kubeconfig(cfg_text, config, manifest_kc)
        p.notes.append(f"added clientConnection.kubeconfig: {manifest_kc} to the installed config (taken from "
                       f"{kc_source}): kube-scheduler ignores --kubeconfig once --config is given")
    # -- a kubeconfig the image's user can read (a private copy when kubeadm's is root's alone) ----------------
    uid, gid = _run_as(spec, c)
    original_kc = p.kubeconfig
    host_kc = Path(_host_path_of(spec, c, p.kubeconfig) or p.kubeconfig)
    why = _private_copy_reason(host_kc, uid, gid, c, p)
    if why is not None:
        data, kdoc = kubeconfig.read(host_kc)
        progs = kubeconfig.plugins(kdoc)
        if progs:
            raise InputError(f"authenticates through a program or auth provider, which a copy for the ksched "
                             f"container cannot carry ({why}): use a kubeconfig with a client certificate or token, "
                             f"like kubeadm's scheduler.conf; nothing was changed", file=str(host_kc), field=progs[0],
                             usage=False)
        private = config_dest.parent / kubeconfig.PRIVATE_NAME
        files.refuse_symlink(private, "private kubeconfig", "--config-dest")
        p.kubeconfig_copy, p.kubeconfig_owner = private, (uid, gid)
        p.new_kubeconfig_copy = kubeconfig.self_contained(host_kc, data, kdoc)
        p.old_kubeconfig_copy = private.read_bytes() if private.is_file() else None
        p.kubeconfig = str(private)
        installed = _set_config_kubeconfig(installed, config, str(private))
        if p.kubeconfig_copy_changed:
            p.changes.append(f"install {private}: a self-contained copy of {host_kc} (mode 0600, owner {uid}:{gid}, "
                             f"readable by the image's user and root only), because {why}; {host_kc} is not "
                             f"touched, and --rollback removes the copy")
    p.new_config = installed.encode()
    files.refuse_symlink(config_dest, "installed config", "--config-dest")
    try:
        p.old_config = config_dest.read_bytes()
    except FileNotFoundError:
        p.old_config = None
    except PermissionError:
        raise InputError("Permission denied reading the installed config: run as root (sudo)",
                         file=str(config_dest), usage=True) from None
    except IsADirectoryError:
        raise InputError("Is a directory; --config-dest must name a file", file=str(config_dest), usage=True) from None

    # -- image ----------------------------------------------------------------------------------------------
    old_image = c.get("image")
    if old_image != image:
        c["image"] = image
        p.changes.append(f"{cpath}.image: {old_image} → {image}")

    # -- --config -------------------------------------------------------------------------------------------
    dest = str(config_dest)
    old_config_flag = by_name.get("config")
    if old_config_flag is None:
        seq, start = _flag_list(c)
        _insert_sorted(seq, start, f"--config={dest}")
        p.changes.append(f"added --config={dest}: kube-scheduler reads the installed KubeSchedulerConfiguration")
    elif old_config_flag.value != dest:
        if old_config_flag.separate:
            old_config_flag.seq[old_config_flag.index + 1] = dest
        else:
            old_config_flag.seq[old_config_flag.index] = f"--config={dest}"
        p.changes.append(f"replaced --config={old_config_flag.value} with --config={dest}")
        if _mount_covering(c, str(old_config_flag.value)) is not None and \
                str(_mount_covering(c, str(old_config_flag.value)).get("mountPath")) == old_config_flag.value:
            m = _mount_covering(c, str(old_config_flag.value))
            p.notes.append(f"left the volume {m.get('name')!r} that mounts {old_config_flag.value} in place: the "
                           f"scheduler no longer reads it; remove it by hand when nothing else needs it")

    # -- flags the config now owns ---------------------------------------------------------------------------
    le = config_raw.get("leaderElection") if isinstance(config_raw.get("leaderElection"), dict) else {}
    removals: list[tuple[Flag, str]] = []
    for f in find_flags(c):
        if f.name == "kubeconfig":
            removals.append((f, f"removed {f.text}: ignored when --config is given; clientConnection.kubeconfig "
                                f"in the installed config points at {p.kubeconfig}"))
        elif f.name in LEADER_FLAGS:
            key = LEADER_FLAGS[f.name]
            if le.get(key) is not None:
                removals.append((f, f"removed {f.text}: a leader-election flag overrides the config file, which sets "
                                    f"leaderElection.{key}: {_scalar(le[key])}"))
            else:
                p.notes.append(f"kept {f.text}: the config does not set leaderElection.{key}, so the flag still "
                               f"applies")
    for f, _ in sorted(removals, key=lambda r: (id(r[0].seq), -r[0].index)):
        _remove_flag(f)  # from the end, so earlier indexes stay valid
    p.changes += [why for _, why in removals]
    if p.kubeconfig_copy is not None:  # the delegated authn/authz kubeconfigs too: the same unreadable file
        for f in find_flags(c):
            if f.name in ("authentication-kubeconfig", "authorization-kubeconfig") and f.value == original_kc:
                if f.separate:
                    f.seq[f.index + 1] = p.kubeconfig
                else:
                    f.seq[f.index] = f"--{f.name}={p.kubeconfig}"
                p.changes.append(f"--{f.name}={original_kc} → --{f.name}={p.kubeconfig} (the private copy)")
    p.changes.sort(key=lambda s: 0 if s.startswith(cpath) else 1)

    # -- volume + mount for the config -----------------------------------------------------------------------
    _ensure_volume(spec, c, cpath, dest, p)
    if p.kubeconfig_copy is not None:
        _ensure_volume(spec, c, cpath, p.kubeconfig, p, kubeconfig.VOLUME_NAME)

    # -- checks that do not block ---------------------------------------------------------------------------

    names = [prof.scheduler_name for prof in cfg.profiles]
    if "default-scheduler" not in names:
        p.warnings.append(f"no profile is named default-scheduler (profiles: {', '.join(names)}): once this "
                          f"scheduler replaces kube-scheduler, pods that do not set spec.schedulerName stay Pending")
    lease = str(le.get("resourceName") or DEFAULT_LEASE)
    p.rbac = [("ksched", r) for r in RUNTIME_RULES] + plugin_rules(cfg, registry)
    if lease != DEFAULT_LEASE:
        p.rbac += [("leader election", r) for r in lease_rules(lease)]

    p.new_manifest = loaded.dump()
    try:  # never write a manifest that does not read back as the same kind of Pod
        check_manifest_shape(_yaml(_STYLES[0]).load(p.new_manifest), manifest)
    except (YAMLError, RecursionError, *_RUAMEL_FAULTS) as exc:
        raise InputError(f"the patched manifest would not read back ({type(exc).__name__}); nothing was changed",
                         file=str(manifest), usage=False) from None
    except InputError as exc:
        raise InputError(f"the patched manifest would not read back ({exc.detail}); nothing was changed",
                         file=str(manifest), field=exc.field, usage=False) from None
    return p


def _installed_kubeconfig(host_path: str | None) -> str | None:
    """clientConnection.kubeconfig of the config a (patched) manifest already runs, read on this node."""
    if not host_path:
        return None
    import yaml

    try:  # bounded and never through a FIFO or device: the path comes from the manifest
        doc = yaml.safe_load(files.read_limited(Path(host_path), "config", 1 << 20).decode("utf-8"))
    except (InputError, UnicodeDecodeError, ValueError, RecursionError, yaml.YAMLError):
        return None
    cc = doc.get("clientConnection") if isinstance(doc, dict) else None
    kc = cc.get("kubeconfig") if isinstance(cc, dict) else None
    return str(kc) if kc else None


def _scalar(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _run_as(spec: CommentedMap, c: CommentedMap) -> tuple[int, int]:
    """The uid and gid the scheduler container runs as: its securityContext, the pod's, else the image's."""
    uid = gid = None
    for sc in (c.get("securityContext"), spec.get("securityContext")):
        if isinstance(sc, dict):
            if uid is None and isinstance(sc.get("runAsUser"), int):
                uid = int(sc["runAsUser"])
            if gid is None and isinstance(sc.get("runAsGroup"), int):
                gid = int(sc["runAsGroup"])
    uid = IMAGE_UID if uid is None else uid
    return uid, (gid if gid is not None else uid if uid == IMAGE_UID else 0)


def _owner_mode(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_uid, st.st_gid, st.st_mode & 0o7777


def _private_copy_reason(kc: Path, uid: int, gid: int, c: CommentedMap, p: StaticPodPlan) -> str | None:
    """Why the scheduler's user needs a private copy of kubeconfig `kc` (None: it can use `kc` as it is).

    A copy is needed when that user cannot read `kc`, or when `kc` names files (certificates, keys) that are
    not mounted into the container. A world-readable `kc` is only warned about: that is the node's problem."""
    readable = files.readable_by(kc, uid, gid)
    if readable is None:
        p.notes.append(f"could not check that uid {uid} can read {kc} (not present on this machine); the "
                       f"scheduler crash-loops if it cannot")
        return None
    st = kc.stat()
    mode = st.st_mode & 0o777
    if readable is False:
        return f"it is mode {mode:04o} owned by {st.st_uid}:{st.st_gid} and the ksched image runs as uid {uid}"
    _, kdoc = kubeconfig.read(kc)
    for ref in kubeconfig.references(kc, kdoc):
        if _mount_covering(c, str(ref.path)) is None:
            return f"it names {ref.path} ({ref.field}), which is not mounted into the container"
    if mode & 0o004:
        p.warnings.append(f"{kc} is mode {mode:04o}: every user on this node can read kube-scheduler's credentials "
                          f"in it. Fix: `chmod 0600 {kc}` (ksched deploy then installs a private copy readable by "
                          f"uid {uid} only)")
    return None


def _ensure_volume(spec: CommentedMap, c: CommentedMap, cpath: str, dest: str, p: StaticPodPlan,
                   volume_name: str = VOLUME_NAME) -> None:
    """A read-only mount of `dest` from a hostPath volume of type File, reusing one that is already there."""
    mounts = c.get("volumeMounts")
    if not isinstance(mounts, list):
        mounts = c["volumeMounts"] = CommentedSeq()
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        volumes = spec["volumes"] = CommentedSeq()
    mount = next((m for m in mounts if isinstance(m, dict) and m.get("mountPath") == dest), None)
    if mount is None:
        taken = {m.get("name") for m in mounts if isinstance(m, dict)}
        name = volume_name
        n = 2
        while name in taken:
            name, n = f"{volume_name}-{n}", n + 1
        mount = CommentedMap([("mountPath", dest), ("name", name), ("readOnly", True)])
        mounts.append(mount)
        p.changes.append(f"added volumeMount {name!r}: {dest}, read-only")
    elif mount.get("readOnly") is not True:
        mount["readOnly"] = True
        p.changes.append(f"volumeMount {mount.get('name')!r} ({dest}) made read-only")
    name = mount.get("name")
    vol = next((v for v in volumes if isinstance(v, dict) and v.get("name") == name), None)
    if vol is None:
        volumes.append(CommentedMap([("hostPath", CommentedMap([("path", dest), ("type", "File")])),
                                     ("name", name)]))
        p.changes.append(f"added volume {name!r}: hostPath {dest} (type File: the pod does not start if the file "
                         f"is missing, rather than starting with an empty config)")
        return
    hp = vol.get("hostPath")
    if not isinstance(hp, dict):
        for k in [k for k in vol if k != "name"]:
            del vol[k]
        vol.insert(0, "hostPath", CommentedMap([("path", dest), ("type", "File")]))
        p.changes.append(f"volume {name!r} now comes from hostPath {dest} (type File)")
        return
    if hp.get("path") != dest:
        p.changes.append(f"volume {name!r}: hostPath {hp.get('path')} → {dest}")
        hp["path"] = dest
    if hp.get("type") != "File":
        p.changes.append(f"volume {name!r}: hostPath type {hp.get('type') or '(none)'} → File (FileOrCreate would "
                         f"create an empty config, and a crash loop, if the file were missing)")
        if "type" in hp:
            hp["type"] = "File"
        else:
            hp.insert(len(hp), "type", "File")


def check_backup_dir(backup_dir: Path) -> None:
    """Refuse a backup folder that is a symlink or that others may write (they could plant backups)."""
    if backup_dir.is_symlink():
        raise InputError(f"is a symlink (to {os.readlink(backup_dir)}): ksched does not follow a link to write the "
                         f"backups it restores as root; pass the real folder with --backup-dir", file=str(backup_dir),
                         usage=True)
    if backup_dir.exists() and not backup_dir.is_dir():
        raise InputError("not a directory: --backup-dir names the folder for backups", file=str(backup_dir),
                         usage=True)
    files.check_folder(backup_dir, "the backups --rollback restores", "--backup-dir")

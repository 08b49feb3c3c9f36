"""Patch a kubeadm kube-scheduler static pod manifest so the kubelet runs a ksched image instead.

Everything is computed first (`plan`), shown as a diff, and only then written (`apply`): a refusal
writes nothing. The manifest is edited with ruamel.yaml's round-trip mode so comments, key order and
every field ksched does not own stay as they were; the indentation style is taken from the file.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from scheduler_runtime import yamlio
from scheduler_runtime.errors import InputError

from ..kube_flags import VALUE_FLAGS
from . import files
from .rbac import DEFAULT_LEASE, RUNTIME_RULES, lease_rules, plugin_rules

DEFAULT_MANIFEST = Path("/etc/kubernetes/manifests/kube-scheduler.yaml")
DEFAULT_CONFIG_DEST = Path("/etc/kubernetes/ksched-config.yaml")
DEFAULT_BACKUP_DIR = Path("/etc/kubernetes/ksched-backups")
VOLUME_NAME = "ksched-config"
#: the user the ksched image runs as (USER 65532:65532 in templates/Dockerfile.j2, like distroless' nonroot)
IMAGE_UID = 65532

#: kube-scheduler flag -> leaderElection field of the config file
LEADER_FLAGS = {
    "leader-elect": "leaderElect", "leader-elect-lease-duration": "leaseDuration",
    "leader-elect-renew-deadline": "renewDeadline", "leader-elect-retry-period": "retryPeriod",
    "leader-elect-resource-lock": "resourceLock", "leader-elect-resource-name": "resourceName",
    "leader-elect-resource-namespace": "resourceNamespace",
}

#: (mapping indent, sequence indent, sequence dash offset) styles tried, kubeadm's first
_STYLES = [(2, 2, 0), (2, 4, 2), (4, 4, 2), (4, 2, 0), (2, 3, 1), (4, 6, 4)]


def _yaml(style: tuple[int, int, int]) -> YAML:
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096  # never re-wrap long lines (flags, image references)
    y.indent(mapping=style[0], sequence=style[1], offset=style[2])

    def null(rep: Any, _data: None) -> Any:
        return rep.represent_scalar("tag:yaml.org,2002:null", "null")

    y.representer.add_representer(type(None), null)
    return y


def _dump(y: YAML, doc: Any) -> str:
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()


@dataclass
class Loaded:
    """A YAML file parsed for round-trip editing, with the dump style that reproduces it."""

    path: Path
    text: str
    doc: Any
    yaml: YAML
    exact: bool  # True when dumping the unmodified document gives back the file byte for byte

    def dump(self) -> str:
        return _dump(self.yaml, self.doc)


def load_roundtrip(path: Path, text: str) -> Loaded:
    """Parse `text`, choosing the indentation style that dumps it back unchanged."""
    y0 = _yaml(_STYLES[0])
    try:
        docs = yamlio.load_roundtrip(text, file=str(path), yaml_rt=y0)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise InputError(f"{line}invalid YAML: {getattr(exc, 'problem', None) or exc}", file=str(path)) from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise InputError(f"{len(docs)} YAML documents; expected exactly one", file=str(path))
    best: tuple[int, YAML, Any] | None = None
    for style in _STYLES:
        y = _yaml(style)
        doc = y.load(text)
        out = _dump(y, doc)
        if out == text:
            return Loaded(path, text, doc, y, True)
        score = sum(1 for a, b in zip(out.splitlines(), text.splitlines(), strict=False) if a != b) + \
            abs(len(out.splitlines()) - len(text.splitlines()))
        if best is None or score < best[0]:
            best = (score, y, doc)
    assert best is not None
    return Loaded(path, text, best[2], best[1], False)


# ------------------------------------------------------------------------------------------ flags


@dataclass
class Flag:
    """One kube-scheduler flag inside a container's command or args list."""

    seq: CommentedSeq
    index: int
    name: str
    value: str | None
    separate: bool  # `--flag value` (two items) rather than `--flag=value`

    @property
    def text(self) -> str:
        return f"--{self.name}" + (f"={self.value}" if self.value is not None else "")


def find_flags(container: CommentedMap) -> list[Flag]:
    """Flags in `command[1:]` and `args`, in order; Go's flag syntax (`-x`, `--x`, `=` or separate value)."""
    out: list[Flag] = []
    for key, start in (("command", 1), ("args", 0)):
        seq = container.get(key)
        if not isinstance(seq, list):
            continue
        i = start
        while i < len(seq):
            item = seq[i]
            if isinstance(item, str) and item.startswith("-") and item not in ("-", "--"):
                name, eq, value = item.lstrip("-").partition("=")
                if eq:
                    out.append(Flag(seq, i, name, value, False))
                elif name in VALUE_FLAGS and i + 1 < len(seq):
                    out.append(Flag(seq, i, name, str(seq[i + 1]), True))
                    i += 1
                else:
                    out.append(Flag(seq, i, name, None, False))
            i += 1
    return out


def _flag_list(container: CommentedMap) -> tuple[CommentedSeq, int]:
    """The list new flags go into, and the index where flags start in it."""
    args = container.get("args")
    cmd = container.get("command")
    if isinstance(args, list) and (len(args) > 0 or not isinstance(cmd, list) or len(cmd) <= 1):
        return args, 0
    if isinstance(cmd, list):
        return cmd, 1
    container["args"] = CommentedSeq()
    return container["args"], 0


def _remove_flag(flag: Flag) -> None:
    if flag.separate:
        del flag.seq[flag.index + 1]
    del flag.seq[flag.index]


def _insert_sorted(seq: CommentedSeq, start: int, item: str) -> None:
    """Insert a flag where kubeadm's order (sorted by flag name) puts it; at the end if the list is unsorted."""
    def key(x: object) -> str:
        return str(x).lstrip("-").partition("=")[0]

    flags = [key(x) for x in seq[start:]]
    if flags != sorted(flags):
        seq.append(item)
        return
    for i in range(start, len(seq)):
        if key(seq[i]) > key(item):
            seq.insert(i, item)
            return
    seq.append(item)


# ------------------------------------------------------------------------------------------ manifest


def find_scheduler_container(doc: Any, path: Path) -> tuple[int, CommentedMap]:
    """The kube-scheduler container of a static pod; refuses anything else with file + field + fix."""
    where = str(path)
    if not isinstance(doc, dict):
        raise InputError(f"expected a Pod manifest (a mapping), got a {type(doc).__name__}", file=where)
    kind = doc.get("kind")
    if kind != "Pod" or doc.get("apiVersion") != "v1":
        raise InputError(f"is {kind!r} ({doc.get('apiVersion')!r}), expected kind Pod, apiVersion v1: pass the "
                         f"kubelet's static pod manifest of kube-scheduler with --manifest", file=where, field="kind")
    spec = doc.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise InputError("missing: a Pod needs containers; pass kube-scheduler's static pod manifest with --manifest",
                         file=where, field="spec.containers")
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            continue
        cmd = c.get("command")
        first = str(cmd[0]) if isinstance(cmd, list) and cmd else ""
        if c.get("name") == "kube-scheduler" or os.path.basename(first) == "kube-scheduler":
            return i, c
    names = ", ".join(str(c.get("name")) for c in containers if isinstance(c, dict))
    raise InputError(f"no kube-scheduler container (found: {names or 'none'}; looked for name kube-scheduler or a "
                     f"command starting with kube-scheduler): pass kube-scheduler's manifest with --manifest",
                     file=where, field="spec.containers")


def _mount_covering(container: CommentedMap, path: str) -> dict[str, Any] | None:
    best = None
    for m in container.get("volumeMounts") or []:
        mp = str(m.get("mountPath", "")).rstrip("/")
        if mp and (path == mp or path.startswith(mp + "/")) and (best is None or len(mp) > len(best["mountPath"])):
            best = m
    return best


def _host_path_of(spec: CommentedMap, container: CommentedMap, path: str) -> str | None:
    """Where a path inside the container comes from on the node (None if not from a hostPath)."""
    m = _mount_covering(container, path)
    if m is None:
        return None
    for v in spec.get("volumes") or []:
        if v.get("name") == m.get("name") and isinstance(v.get("hostPath"), dict):
            hp = str(v["hostPath"].get("path", "")).rstrip("/")
            rest = path[len(str(m["mountPath"]).rstrip("/")):]
            return hp + rest
    return None


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

    @property
    def manifest_changed(self) -> bool:
        return self.old_manifest != self.new_manifest

    @property
    def config_changed(self) -> bool:
        return self.old_config != self.new_config

    @property
    def changed(self) -> bool:
        return self.manifest_changed or self.config_changed

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
                         field="--config-dest")
    if files.is_inside(config_dest, folder):
        raise InputError(f"{config_dest} is inside the manifests folder {folder}: the kubelet would try to run it as "
                         f"a pod; use e.g. {DEFAULT_CONFIG_DEST}", field="--config-dest")
    if files.is_inside(backup_dir, folder):
        raise InputError(f"{backup_dir} is inside the manifests folder {folder}: the kubelet runs every file there, "
                         f"backups included; use e.g. {DEFAULT_BACKUP_DIR}", field="--backup-dir")


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
                         f"error); nothing was changed", file=str(path)) from None
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
                         "ksched:v1 (the tag `ksched build` printed)", field="--image")
    raw = files.read_bytes(manifest, "static pod manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text, expected a YAML Pod manifest", file=str(manifest)) from None
    loaded = load_roundtrip(manifest, text)
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
                         field="clientConnection.kubeconfig")
    if cfg_kc and manifest_kc and cfg_kc != manifest_kc:
        if _mount_covering(c, cfg_kc) is None:
            raise InputError(f"{cfg_kc!r} is not mounted in the kube-scheduler container (the manifest uses "
                             f"{manifest_kc}, {kc_source}): set it to {manifest_kc} or remove it", file=str(config),
                             field="clientConnection.kubeconfig")
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
    p.new_config = installed.encode()
    try:
        p.old_config = config_dest.read_bytes()
    except FileNotFoundError:
        p.old_config = None
    except PermissionError:
        raise InputError("Permission denied reading the installed config: run as root (sudo)",
                         file=str(config_dest)) from None
    except IsADirectoryError:
        raise InputError("Is a directory; --config-dest must name a file", file=str(config_dest)) from None

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
    p.changes.sort(key=lambda s: 0 if s.startswith(cpath) else 1)

    # -- volume + mount for the config -----------------------------------------------------------------------
    _ensure_volume(spec, c, cpath, dest, p)

    # -- checks that do not block ---------------------------------------------------------------------------
    uid = _run_as_user(spec, c)
    host_kc = _host_path_of(spec, c, p.kubeconfig) or p.kubeconfig
    readable = files.readable_by(Path(host_kc), uid, uid)
    if readable is False:
        st = Path(host_kc).stat()
        p.warnings.append(f"{host_kc} is mode {st.st_mode & 0o777:04o} owned by uid {st.st_uid}: the ksched image "
                          f"runs as uid {uid} and cannot read it, so the scheduler would crash-loop. Fix: "
                          f"`chmod 0644 {host_kc}` (what scheduler-plugins' install guide does) or "
                          f"`chown {uid} {host_kc}`")
    elif readable is None:
        p.notes.append(f"could not check that uid {uid} can read {host_kc} (not present on this machine); the "
                       f"scheduler crash-loops if it cannot")

    names = [prof.scheduler_name for prof in cfg.profiles]
    if "default-scheduler" not in names:
        p.warnings.append(f"no profile is named default-scheduler (profiles: {', '.join(names)}): once this "
                          f"scheduler replaces kube-scheduler, pods that do not set spec.schedulerName stay Pending")
    lease = str(le.get("resourceName") or DEFAULT_LEASE)
    p.rbac = [("ksched", r) for r in RUNTIME_RULES] + plugin_rules(cfg, registry)
    if lease != DEFAULT_LEASE:
        p.rbac += [("leader election", r) for r in lease_rules(lease)]

    p.new_manifest = loaded.dump()
    return p


def _installed_kubeconfig(host_path: str | None) -> str | None:
    """clientConnection.kubeconfig of the config a (patched) manifest already runs, read on this node."""
    if not host_path:
        return None
    try:
        import yaml

        doc = yaml.safe_load(Path(host_path).read_text())
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return None
    cc = doc.get("clientConnection") if isinstance(doc, dict) else None
    kc = cc.get("kubeconfig") if isinstance(cc, dict) else None
    return str(kc) if kc else None


def _scalar(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _run_as_user(spec: CommentedMap, c: CommentedMap) -> int:
    for sc in (c.get("securityContext"), spec.get("securityContext")):
        if isinstance(sc, dict) and isinstance(sc.get("runAsUser"), int):
            return int(sc["runAsUser"])
    return IMAGE_UID


def _ensure_volume(spec: CommentedMap, c: CommentedMap, cpath: str, dest: str, p: StaticPodPlan) -> None:
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
        name = VOLUME_NAME
        n = 2
        while name in taken:
            name, n = f"{VOLUME_NAME}-{n}", n + 1
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


# ------------------------------------------------------------------------------------------ write


@dataclass
class Written:
    backup: Path | None = None
    config_backup: Path | None = None
    wrote_config: bool = False
    wrote_manifest: bool = False


def apply(p: StaticPodPlan, backup_dir: Path) -> Written:
    """Back up, install the config (0644), then replace the manifest; undo the config if the last step fails."""
    w = Written()
    if not p.changed:
        return w
    stamp = files.timestamp()
    try:
        backup_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except PermissionError:
        raise InputError("Permission denied creating the backup folder: run as root (sudo)",
                         file=str(backup_dir)) from None
    mode = p.manifest.stat().st_mode & 0o7777
    w.backup = backup_dir / files.backup_name(p.manifest, stamp)
    files.atomic_write(w.backup, p.old_manifest.encode(), mode)
    if p.config_changed and p.old_config is not None:
        w.config_backup = backup_dir / files.backup_name(p.config_dest, stamp)
        files.atomic_write(w.config_backup, p.old_config, 0o644)
    if p.config_changed:
        files.atomic_write(p.config_dest, p.new_config, 0o644)
        w.wrote_config = True
    if p.manifest_changed:
        try:
            files.atomic_write(p.manifest, p.new_manifest.encode(), mode)
        except BaseException:
            if w.wrote_config:
                if p.old_config is None:
                    p.config_dest.unlink(missing_ok=True)
                else:
                    files.atomic_write(p.config_dest, p.old_config, 0o644)
            raise
        w.wrote_manifest = True
    return w


@dataclass
class RollbackPlan:
    manifest: Path
    backup: Path
    current: bytes
    restored: bytes
    config_dest: Path
    config_backup: Path | None
    config_current: bytes | None
    config_restored: bytes | None
    older: list[Path]

    @property
    def changed(self) -> bool:
        return self.current != self.restored or (self.config_restored is not None and
                                                 self.config_current != self.config_restored)

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
    """Restore the newest backup of `manifest` (and the config backed up with it, if any)."""
    found = files.backups_of(manifest, backup_dir)
    if not found:
        raise InputError(f"no backup of {manifest.name} in {backup_dir} (ksched deploy --static-pod writes one before "
                         f"each change; pass --backup-dir if you used another folder)", field="--rollback",
                         usage=False)
    newest = found[-1]
    restored = files.read_bytes(newest, "backup")
    current = files.read_bytes(manifest, "static pod manifest") if manifest.exists() else b""
    stamp = files.stamp_of(newest, manifest)
    cb = backup_dir / files.backup_name(config_dest, stamp)
    config_backup = cb if cb.is_file() else None
    config_restored = files.read_bytes(cb, "config backup") if config_backup else None
    config_current = config_dest.read_bytes() if config_backup and config_dest.is_file() else None
    return RollbackPlan(manifest, newest, current, restored, config_dest, config_backup, config_current,
                        config_restored, found[:-1])


def apply_rollback(r: RollbackPlan) -> None:
    mode = r.backup.stat().st_mode & 0o7777
    if r.config_restored is not None and r.config_current != r.config_restored:
        files.atomic_write(r.config_dest, r.config_restored, 0o644)
    if r.current != r.restored:
        files.atomic_write(r.manifest, r.restored, mode)

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
from scheduler_runtime.options.flags import VALUE_FLAGS

from ..imagebuild.context import IMAGE_UID  # the user the ksched image runs as (templates/Dockerfile.j2)
from . import files, journal, kubeconfig
from .rbac import DEFAULT_LEASE, RUNTIME_RULES, lease_rules, plugin_rules

DEFAULT_MANIFEST = Path("/etc/kubernetes/manifests/kube-scheduler.yaml")
DEFAULT_CONFIG_DEST = Path("/etc/kubernetes/ksched-config.yaml")
DEFAULT_BACKUP_DIR = Path("/etc/kubernetes/ksched-backups")
VOLUME_NAME = "ksched-config"
#: kubeadm's manifests are 2-4 KiB; the round-trip reader and writer take about a second for 32 KiB
MAX_MANIFEST_BYTES = 32 << 10

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


def _yaml_error(path: Path, exc: Exception) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    line = f"line {mark.line + 1}: " if mark is not None else ""
    what = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return InputError(f"{line}invalid YAML: {what}", file=str(path), usage=True)


def _flow_depth(text: str) -> int:
    """How deep `[` and `{` nest outside quotes and comments (an upper bound of YAML flow nesting).

    Checked before parsing: the YAML scanner's cost grows with the square of the flow depth."""
    depth = top = 0
    quote = ""
    prev = "\n"
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                if quote == "'" and i + 1 < n and text[i + 1] == "'":
                    i += 1
                else:
                    quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch == "#" and prev in " \t\n":
            j = text.find("\n", i)
            i = n if j < 0 else j
            prev = "\n"
            continue
        elif ch in "'\"" and prev in " \t\n[{,:-?":
            quote = ch
        elif ch in "[{":
            depth += 1
            top = max(top, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
        prev = ch
        i += 1
    return top


#: deeper than any Pod manifest; keeps the parser's time and stack bounded
MAX_DEPTH = 64
#: what ruamel.yaml's constructors and representers raise, besides YAMLError, on a tag that does not fit
#: its node (`!!set` on a scalar, `!!binary` on a non-base64 string, ...): the file is not a valid manifest
_RUAMEL_FAULTS = (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError)
#: files up to this size that the guessed style does not reproduce exactly try every style in _STYLES
SEARCH_BYTES = 8 << 10


def _guess_style(text: str) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) read off the first nested mapping and block sequence."""
    mapping = offset = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for a, b in zip(lines, lines[1:], strict=False):
        head = a.rstrip()
        if not head.endswith(":") or head.lstrip().startswith("- "):
            continue
        ia = len(a) - len(a.lstrip(" "))
        ib = len(b) - len(b.lstrip(" "))
        if b.lstrip().startswith("- "):
            if offset is None and ib >= ia:
                offset = ib - ia
        elif mapping is None and ib > ia:
            mapping = ib - ia
        if mapping is not None and offset is not None:
            break
    m = mapping or 2
    o = offset if offset is not None else 0
    return (m, max(o + 2, m) if o else m, o)


def load_roundtrip(path: Path, text: str) -> Loaded:
    """Parse `text` once, then choose the indentation style that dumps it back unchanged."""
    if _flow_depth(text) > MAX_DEPTH:
        raise InputError(f"invalid YAML: nested deeper than {MAX_DEPTH} levels", file=str(path), usage=True)
    y0 = _yaml(_STYLES[0])
    try:
        docs = yamlio.load_roundtrip(text, file=str(path), yaml_rt=y0)
    except YAMLError as exc:
        raise _yaml_error(path, exc) from None
    except RecursionError:
        raise InputError("invalid YAML: nested too deeply", file=str(path), usage=True) from None
    except _RUAMEL_FAULTS as exc:  # e.g. `kind: !!set Pod`: a tag that does not fit its node
        raise InputError(f"invalid YAML: a tag or value ruamel.yaml cannot build ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:80]})", file=str(path), usage=True) from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise InputError(f"{len(docs)} YAML documents; expected exactly one", file=str(path), usage=True)
    doc = docs[0]
    guess = _guess_style(text)
    styles = [guess] + [st for st in _STYLES if st != guess]
    if len(text) > SEARCH_BYTES:  # each try dumps the whole file: past a few KiB, trust the guess
        styles = styles[:1]
    best: tuple[int, YAML] | None = None
    for style in styles:
        y = _yaml(style)
        try:
            out = _dump(y, doc)
        except (YAMLError, RecursionError, *_RUAMEL_FAULTS) as exc:
            raise InputError(f"the YAML writer cannot write this document back ({type(exc).__name__}: "
                             f"{(str(exc).splitlines() or [''])[0]}); simplify the file", file=str(path),
                             usage=True) from None
        if out == text:
            return Loaded(path, text, doc, y, True)
        score = sum(1 for a, b in zip(out.splitlines(), text.splitlines(), strict=False) if a != b) + \
            abs(len(out.splitlines()) - len(text.splitlines()))
        if best is None or score < best[0]:
            best = (score, y)
    assert best is not None
    return Loaded(path, text, doc, best[1], False)


def read_manifest(path: Path) -> Loaded:
    """The static pod manifest, read and checked: the one place a manifest is read (bounded, no symlinks).

    Every problem is one InputError naming the file and the field path."""
    raw = files.read_limited(path, "static pod manifest", MAX_MANIFEST_BYTES, "--manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text, expected a YAML Pod manifest", file=str(path), usage=True) from None
    loaded = load_roundtrip(path, text)
    check_manifest_shape(loaded.doc, path)
    bad = _not_unicode(loaded.doc, "")
    if bad is not None:
        raise InputError("holds an escaped lone surrogate (such as \\ud800), which is not Unicode text and cannot be "
                         "written back as UTF-8", file=str(path), field=bad or None, usage=False)
    return loaded


def _not_unicode(v: Any, at: str) -> str | None:
    """The field path of the first string (key or value) that cannot be encoded as UTF-8, or None."""
    def bad(s: object) -> bool:
        if not isinstance(s, str):
            return False
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    if bad(v):
        return at
    if isinstance(v, dict):
        for k, x in v.items():
            sub = f"{at}.{k}" if at else str(k)
            if bad(k):
                return sub.encode("utf-8", "backslashreplace").decode()
            found = _not_unicode(x, sub)
            if found is not None:
                return found
    elif isinstance(v, list | tuple | set):
        for i, x in enumerate(v):
            found = _not_unicode(x, f"{at}[{i}]")
            if found is not None:
                return found
    return None


def _type_name(v: Any) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(next((t for t in (bool, dict, list, str, int, float, type(None))
                                           if isinstance(v, t)), object), type(v).__name__)


def _expect(v: Any, kind: str, file: str, where: str, optional: bool = True) -> None:
    """Refuse `v` at field path `where` unless it is a `kind` (mapping, list, string, boolean, integer)."""
    if v is None and optional:
        return
    ok = {"mapping": isinstance(v, dict), "list": isinstance(v, list), "string": isinstance(v, str),
          "boolean": isinstance(v, bool), "integer": isinstance(v, int) and not isinstance(v, bool)}[kind]
    if not ok:
        raise InputError(f"expected a {kind}, got a {_type_name(v)}: pass kube-scheduler's static pod manifest "
                         f"with --manifest", file=file, field=where, usage=False)


def check_manifest_shape(doc: Any, path: Path) -> None:
    """Refuse a manifest whose fields ksched reads or edits have the wrong type (the kubelet would too)."""
    where = str(path)
    if not isinstance(doc, dict):
        raise InputError(f"expected a Pod manifest (a mapping), got a {_type_name(doc)}", file=where, usage=False)
    spec = doc.get("spec")
    _expect(spec, "mapping", where, "spec")
    if not isinstance(spec, dict):
        return  # find_scheduler_container says what is missing
    containers = spec.get("containers")
    _expect(containers, "list", where, "spec.containers")
    _expect(spec.get("securityContext"), "mapping", where, "spec.securityContext")
    volumes = spec.get("volumes")
    _expect(volumes, "list", where, "spec.volumes")
    for i, v in enumerate(volumes or []):
        at = f"spec.volumes[{i}]"
        _expect(v, "mapping", where, at, optional=False)
        _expect(v.get("name"), "string", where, f"{at}.name", optional=False)
        _expect(v.get("hostPath"), "mapping", where, f"{at}.hostPath")
        if isinstance(v.get("hostPath"), dict):
            _expect(v["hostPath"].get("path"), "string", where, f"{at}.hostPath.path", optional=False)
            _expect(v["hostPath"].get("type"), "string", where, f"{at}.hostPath.type")
    for i, c in enumerate(containers or []):
        at = f"spec.containers[{i}]"
        _expect(c, "mapping", where, at, optional=False)
        _expect(c.get("name"), "string", where, f"{at}.name")
        _expect(c.get("image"), "string", where, f"{at}.image")
        for key in ("command", "args"):
            seq = c.get(key)
            _expect(seq, "list", where, f"{at}.{key}")
            for j, item in enumerate(seq or []):
                _expect(item, "string", where, f"{at}.{key}[{j}]", optional=False)
        mounts = c.get("volumeMounts")
        _expect(mounts, "list", where, f"{at}.volumeMounts")
        for j, m in enumerate(mounts or []):
            mat = f"{at}.volumeMounts[{j}]"
            _expect(m, "mapping", where, mat, optional=False)
            _expect(m.get("name"), "string", where, f"{mat}.name", optional=False)
            _expect(m.get("mountPath"), "string", where, f"{mat}.mountPath", optional=False)
            _expect(m.get("readOnly"), "boolean", where, f"{mat}.readOnly")
        sc = c.get("securityContext")
        _expect(sc, "mapping", where, f"{at}.securityContext")
        for owner, sat in ((sc, f"{at}.securityContext"), (spec.get("securityContext"), "spec.securityContext")):
            if isinstance(owner, dict):
                for key in ("runAsUser", "runAsGroup"):
                    _expect(owner.get(key), "integer", where, f"{sat}.{key}")


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


def _short(v: Any) -> str:
    """A value as it goes into a one-line error: repr, cut to 60 characters."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def find_scheduler_container(doc: Any, path: Path) -> tuple[int, CommentedMap]:
    """The kube-scheduler container of a static pod; refuses anything else with file + field + fix."""
    where = str(path)
    if not isinstance(doc, dict):
        raise InputError(f"expected a Pod manifest (a mapping), got a {type(doc).__name__}", file=where, usage=False)
    kind = doc.get("kind")
    if kind != "Pod" or doc.get("apiVersion") != "v1":
        raise InputError(f"is {_short(kind)} ({_short(doc.get('apiVersion'))}), expected kind Pod, apiVersion v1: "
                         f"pass the kubelet's static pod manifest of kube-scheduler with --manifest", file=where,
                         field="kind", usage=False)
    spec = doc.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise InputError("missing: a Pod needs containers; pass kube-scheduler's static pod manifest with --manifest",
                         file=where, field="spec.containers", usage=False)
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            continue
        cmd = c.get("command")
        first = str(cmd[0]) if isinstance(cmd, list) and cmd else ""
        if c.get("name") == "kube-scheduler" or os.path.basename(first) == "kube-scheduler":
            return i, c
    names = ", ".join(_short(c.get("name")) for c in containers if isinstance(c, dict))[:200]
    raise InputError(f"no kube-scheduler container (found: {names or 'none'}; looked for name kube-scheduler or a "
                     f"command starting with kube-scheduler): pass kube-scheduler's manifest with --manifest",
                     file=where, field="spec.containers", usage=False)


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

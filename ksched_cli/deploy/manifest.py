"""Reading and editing a kube-scheduler static pod manifest without disturbing it: ruamel.yaml's round-trip
mode (comments, key order, the file's own indentation style), shape checks with field paths, and the
container's command-line flags. The lower layer of `staticpod` (plan) and `staticapply` (write, rollback)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from scheduler_runtime import yamlio
from scheduler_runtime.errors import InputError
from scheduler_runtime.options.flags import VALUE_FLAGS

from . import files

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



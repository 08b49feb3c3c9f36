"""The one YAML reader of ksched: bounded in bytes, alias expansion and depth, strict about keys.

Every file a command reads (scheduler configurations, kubeconfigs, cluster snapshots, pod files, values
files, static-pod manifests) goes through here, so a hostile or broken file ends in one `InputError`
naming the file and the line instead of a traceback, a hang or gigabytes of memory.

Why each limit exists:
- bytes: reading is capped at `limit + 1` bytes, so `/dev/zero` or a huge file cannot exhaust memory;
- alias expansion: PyYAML shares an aliased object, but everything after parsing (deep copies, JSON,
  validation) walks the expanded tree, so a "billion laughs" file is refused before it is built;
- depth: deeply nested or self-referencing documents would end in RecursionError further on;
- keys: duplicate keys are an error (as with kubectl), a mapping or list cannot be a key, and scalar
  keys become strings as sigs.k8s.io/yaml makes them (`1: x` is the key "1");
- values: like go-yaml, timestamp-looking scalars stay strings, a number too large for a float stays a
  string, and `.nan`/`.inf` are refused (JSON, and so Kubernetes, cannot carry them).

libyaml (PyYAML's C parser) is used when present: on a 5 MB file it is about 8x faster than the pure
Python parser and it bounds nesting itself.
"""

from __future__ import annotations

import gc
import math
import os
import stat
import sys
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import InputError

#: byte limits: a configuration-like file (config, kubeconfig, values, manifest) and a cluster snapshot
CONFIG_LIMIT = 8 * 1024 * 1024
SNAPSHOT_LIMIT = 64 * 1024 * 1024
#: nodes that aliases may add to a document once expanded
MAX_ALIAS_EXPANSION = 100_000
#: nesting depth of a document, counted through aliases
MAX_DEPTH = 100

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_UNSUPPORTED_TAGS = ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:set", "tag:yaml.org,2002:omap",
                     "tag:yaml.org,2002:pairs")

_Base: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def _human(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


class _Refused(Exception):
    """A document the loader will not build; carries the node where the problem is."""

    def __init__(self, message: str, node: Node | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.node = node


def _where(node: Node | None) -> str:
    mark = getattr(node, "start_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def check_graph(root: Node, max_expansion: int = MAX_ALIAS_EXPANSION, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a composed document whose expansion, depth or cycles would hurt whoever walks it.

    Iterative post-order walk with memoised sizes: linear in the number of distinct nodes."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            on_path.discard(nid)
            kids = _children(node)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            d = 1 + max((depth[id(k)] for k in kids), default=0)
            depth[nid] = d
            if d > max_depth:
                raise _Refused(f"nesting deeper than {max_depth} levels", node)
            if size[nid] - distinct > max_expansion:
                raise _Refused(f"aliases expand to more than {max_expansion} extra nodes "
                               "(refusing a possible YAML bomb)", node)
            continue
        if nid in size:
            continue
        if nid in on_path:
            raise _Refused("an alias refers to a node that contains it (recursive anchor)", node)
        distinct += 1
        on_path.add(nid)
        stack.append((node, True))
        for k in _children(node):
            kid = id(k)
            if kid in on_path:
                raise _Refused("an alias refers to a node that contains it (recursive anchor)", k)
            if kid not in size:
                stack.append((k, False))
        if len(on_path) > max_depth:
            raise _Refused(f"nesting deeper than {max_depth} levels", node)


def check_depth(root: Node, max_depth: int = MAX_DEPTH) -> None:
    """Depth of an alias-free (so acyclic, tree-shaped) document, level by level."""
    level = [root]
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise _Refused(f"nesting deeper than {max_depth} levels", level[0])
        nxt: list[Node] = []
        for node in level:
            if isinstance(node, MappingNode):
                for k, v in node.value:
                    if not isinstance(k, ScalarNode):
                        nxt.append(k)
                    if not isinstance(v, ScalarNode):
                        nxt.append(v)
            elif isinstance(node, SequenceNode):
                nxt += [v for v in node.value if not isinstance(v, ScalarNode)]
        level = nxt


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        out: list[Node] = []
        for k, v in node.value:
            out += (k, v)
        return out
    return []


def _key_text(key: Any, node: Node) -> str:
    """A mapping key as sigs.k8s.io/yaml turns it into a JSON object key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float) and math.isfinite(key):
        return str(int(key)) if key.is_integer() and abs(key) < 1e21 else repr(key)
    raise _Refused(f"unsupported mapping key {node.value!r}", node)


class StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader with ksched's rules (see the module docstring)."""

    max_expansion = MAX_ALIAS_EXPANSION
    max_depth = MAX_DEPTH

    #: False when the text has no `*`, so no alias can exist and a cheaper depth-only check suffices
    aliases_possible = True

    def construct_document(self, node: Node) -> Any:
        if self.aliases_possible:
            check_graph(node, self.max_expansion, self.max_depth)
        else:
            check_depth(node, self.max_depth)
        return super().construct_document(node)

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise _Refused("expected a mapping", node)
        pairs = node.value
        if any(k.tag == _MERGE_TAG for k, _ in pairs):
            return self._construct_merged(node, deep)
        out: dict[Any, Any] = {}
        for key_node, value_node in pairs:
            key = self._key(key_node)
            if key in out:
                raise _Refused(f"duplicate key {key!r}", key_node)
            out[key] = self.construct_object(value_node, deep=deep)
        return out

    def _key(self, key_node: Node) -> str:
        if not isinstance(key_node, ScalarNode):
            raise _Refused("a mapping or a list cannot be a mapping key", key_node)
        if key_node.tag == _STR_TAG:
            return str(key_node.value)  # what construct_scalar would return, without the detour
        return _key_text(self.construct_object(key_node, deep=True), key_node)

    def _construct_merged(self, node: MappingNode, deep: bool) -> dict[Any, Any]:
        """`<<: *base` merge keys: duplicates among the mapping's own keys are still refused, while its
        own keys override merged ones (YAML merge semantics)."""
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node)
            if key in seen:
                raise _Refused(f"duplicate key {key!r}", key_node)
            seen.add(key)
        self.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            out[self._key(key_node)] = self.construct_object(value_node, deep=deep)
        return out

    def construct_yaml_float(self, node: Node) -> Any:
        value = super().construct_yaml_float(node)
        if math.isfinite(value):
            return value
        text = str(node.value).lower().lstrip("+-")
        if text in (".inf", ".nan"):
            raise _Refused(f"{node.value} is not a number JSON (and so Kubernetes) can hold", node)
        return node.value  # too large for a float: go-yaml keeps it as a string

    def construct_yaml_int(self, node: Node) -> Any:
        if len(str(node.value)) > 400:  # go-yaml: too big for int64 and for float64, so a string
            return str(node.value)
        return super().construct_yaml_int(node)

    def construct_timestamp_as_string(self, node: Node) -> str:
        return str(node.value)

    def construct_unsupported(self, node: Node) -> Any:
        raise _Refused(f"unsupported YAML tag {node.tag}", node)


StrictLoader.add_constructor("tag:yaml.org,2002:map", StrictLoader.construct_yaml_map)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", StrictLoader.construct_timestamp_as_string)
for _tag in _UNSUPPORTED_TAGS:
    StrictLoader.add_constructor(_tag, StrictLoader.construct_unsupported)


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"{where}invalid YAML: {problem}"


def load_all(text: str | bytes, *, file: str | None = None) -> list[Any]:
    """Every document of `text` (empty documents are None), or InputError(usage=True) naming the line."""
    if isinstance(text, bytes):
        text = decode(text, file=file)
    loader = StrictLoader(text)
    loader.aliases_possible = "*" in text
    # The parser allocates millions of small acyclic objects that all stay alive; letting the cyclic
    # collector rescan them over and over made a 5 MB file take minutes.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        docs = []
        while loader.check_data():
            docs.append(loader.get_data())
        return docs
    except _Refused as exc:
        raise InputError(_where(exc.node) + exc.message, file=file, usage=True) from None
    except yaml.YAMLError as exc:
        raise InputError(_yaml_error(exc), file=file, usage=True) from None
    except RecursionError:  # pure-Python parser without libyaml on a deep document
        raise InputError(f"nesting deeper than {MAX_DEPTH} levels", file=file, usage=True) from None
    finally:
        loader.dispose()
        if gc_was_on:
            gc.enable()


def load_one(text: str | bytes, *, file: str | None = None, what: str = "a YAML mapping") -> dict[str, Any]:
    """Exactly one non-empty document that is a mapping."""
    docs = [d for d in load_all(text, file=file) if d is not None]
    if not docs:
        raise InputError(f"empty file, expected {what}", file=file, usage=True)
    if len(docs) > 1:
        raise InputError(f"{len(docs)} YAML documents; expected exactly one ({what})", file=file, usage=True)
    doc = docs[0]
    if not isinstance(doc, dict):
        raise InputError(f"expected {what}, got a {_kind(doc)}", file=file, usage=True)
    return doc


def _kind(v: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(v), "value")


def decode(data: bytes, *, file: str | None = None) -> str:
    """UTF-8 text (a leading BOM is allowed); binary data is refused."""
    if b"\x00" in data[:8192]:
        raise InputError("binary file, expected YAML text", file=file, usage=True)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start}), expected YAML", file=file, usage=True) from None


def read_bytes(path: str | os.PathLike[str], *, limit: int = CONFIG_LIMIT, what: str = "file") -> bytes:
    """At most `limit` bytes of `path`; a larger input (or an endless device) is refused after `limit + 1`.

    Pipes and devices are read too (`--config <(...)` works, as with kube-scheduler), but never
    without a bound; a FIFO is opened without blocking so a FIFO nobody writes to reads as empty.
    `-` is standard input (kubectl's `-f -`), read once."""
    where = os.fspath(path)
    if where == STDIN:
        return _read_stdin(limit)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError("no such file or directory", file=where, usage=True) from None
    except PermissionError:
        raise InputError("permission denied", file=where, usage=True) from None
    except IsADirectoryError:
        raise InputError(f"is a directory, expected a {what}", file=where, usage=True) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", file=where, usage=True) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"is a directory, expected a {what}", file=where, usage=True)
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise InputError(f"larger than {_human(limit)} ({st.st_size} bytes)", file=where, usage=True)
        if stat.S_ISFIFO(st.st_mode):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InputError(f"larger than {_human(limit)}", file=where, usage=True)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=where, usage=True) from None
    finally:
        os.close(fd)


#: the path that means standard input, as in `kubectl apply -f -`
STDIN = "-"
#: (the stdin object, its bytes): a command that reads its `-` input twice (check, then load) sees the same
#: text; the CLI refuses `-` for two different inputs of one command
_stdin_read: list[tuple[Any, bytes]] = []


def _read_stdin(limit: int) -> bytes:
    """Standard input, at most `limit` bytes (read once per process; later reads get the same bytes)."""
    stream = sys.stdin
    if stream is None:
        raise InputError("standard input is closed", file=STDIN, usage=True)
    if _stdin_read and _stdin_read[0][0] is stream:
        data = _stdin_read[0][1]
    else:
        raw = getattr(stream, "buffer", None)
        data = bytes(raw.read(limit + 1) if raw is not None else stream.read(limit + 1).encode())
        _stdin_read[:] = [(stream, data)]
    if len(data) > limit:
        raise InputError(f"larger than {_human(limit)}", file=STDIN, usage=True)
    return data


def read_text(path: str | os.PathLike[str], *, limit: int = CONFIG_LIMIT, what: str = "file") -> str:
    return decode(read_bytes(path, limit=limit, what=what), file=os.fspath(path))


def load_file(path: str | os.PathLike[str], *, limit: int = CONFIG_LIMIT, what: str = "file") -> list[Any]:
    """Every document of the file at `path` (see `load_all`)."""
    where = os.fspath(path)
    return load_all(read_text(path, limit=limit, what=what), file=where)


def load_file_one(path: str | os.PathLike[str], *, what: str = "a YAML mapping",
                  limit: int = CONFIG_LIMIT) -> dict[str, Any]:
    """The one mapping in the file at `path` (see `load_one`)."""
    where = os.fspath(path)
    text = read_text(path, limit=limit, what=what.removeprefix("a ").removeprefix("an "))
    if not text.strip():
        raise InputError(f"empty file, expected {what}", file=where, usage=True)
    return load_one(text, file=where, what=what)


def load_roundtrip(text: str, *, file: str | None = None, yaml_rt: Any = None) -> list[Any]:
    """Every document of `text` loaded with ruamel.yaml's round-trip (comment-preserving) loader.

    The text is first read with the strict loader, so the same limits and key rules apply and the
    (pure Python, recursive) round-trip parser only ever sees a bounded, well-formed document."""
    if len(text.encode("utf-8", "surrogatepass")) > CONFIG_LIMIT:
        raise InputError(f"larger than {_human(CONFIG_LIMIT)}", file=file, usage=True)
    load_all(text, file=file)
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError as RtError

    y = yaml_rt if yaml_rt is not None else YAML()
    try:
        return list(y.load_all(text))
    except RtError as exc:
        raise InputError(_yaml_error(exc), file=file, usage=True) from None  # type: ignore[arg-type]


def safe_scalar(text: str) -> Any:
    """A command-line value read as a YAML scalar (`--args Name.key=value`); the text itself when it is
    not plain YAML or would parse into something bigger than a scalar-ish value."""
    try:
        docs = load_all(text)
    except InputError:
        return text
    return docs[0] if len(docs) == 1 else text


__all__ = ["CONFIG_LIMIT", "MAX_ALIAS_EXPANSION", "MAX_DEPTH", "SNAPSHOT_LIMIT", "StrictLoader", "check_graph",
           "decode", "load_all", "load_file", "load_file_one", "load_one", "load_roundtrip", "read_bytes",
           "read_text", "safe_scalar"]

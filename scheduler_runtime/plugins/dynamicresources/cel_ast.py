"""The checked AST of a compiled selector, read from cel-expr-python's serialized `cel.expr.CheckedExpr`.

Upstream: kube-scheduler v1.36 checks selectors with cel-go (checker/checker.go), whose checked AST is the same
`cel.expr.CheckedExpr` message (cel-spec checked.proto) this module decodes.

cel-expr-python exposes no AST, only `Expression.serialize()` (a `google.protobuf.Any` holding the CheckedExpr);
this module decodes the protobuf wire format of the few messages needed (Expr, Type, SourceInfo) without a
protobuf dependency. ksched needs the AST for the compile-time checks kube's CEL environment adds to plain CEL
(cel_checks.py): homogeneous aggregate literals and literal validation.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: ints for varint/fixed, bytes for length-delimited."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        out.append((num, wt, v))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass
class Node:
    """One expression: `kind` is const|ident|select|call|list|map|struct|comprehension."""

    id: int
    kind: str
    value: Any = None  # const value, ident name, select field, call function
    const_kind: str = ""  # for constants: null|bool|int|uint|double|string|bytes
    operand: Node | None = None  # select operand, call target
    args: list[Node] = field(default_factory=list)  # call args, list elements
    optional: set[int] = field(default_factory=set)  # optional list indices
    entries: list[tuple[Node, Node, bool]] = field(default_factory=list)  # map (key, value, optional)
    parts: dict[str, Node] = field(default_factory=dict)  # comprehension parts
    names: dict[str, str] = field(default_factory=dict)  # comprehension variable names

    def children(self) -> list[Node]:
        out = [self.operand] if self.operand is not None else []
        out += self.args
        for k, v, _ in self.entries:
            out += [k, v]
        out += list(self.parts.values())
        return out


_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "timestamp", 3: "duration"}  # as cel-go prints them


def decode_type(buf: bytes) -> Any:
    """A type as a nested tuple: ("int",), ("list", elem), ("map", k, v), ("dyn",), ("optional_type", t)..."""
    for num, _wt, v in fields(buf):
        if num == 1:
            return ("dyn",)
        if num == 2:
            return ("null",)
        if num == 3:
            return (_PRIMITIVES.get(v, "?"),)
        if num == 4:
            return ("wrapper", _PRIMITIVES.get(v, "?"))
        if num == 5:
            return (_WELL_KNOWN.get(v, "?"),)
        if num == 6:
            elem = next((decode_type(x) for n, _, x in fields(v) if n == 1), ("dyn",))
            return ("list", elem)
        if num == 7:
            kv = {n: decode_type(x) for n, _, x in fields(v)}
            return ("map", kv.get(1, ("dyn",)), kv.get(2, ("dyn",)))
        if num == 9:
            return (v.decode(),)
        if num == 10:
            return ("param", v.decode())
        if num == 11:
            return ("type",)
        if num == 12:
            return ("error",)
        if num == 14:
            parts = fields(v)
            name = next((x.decode() for n, _, x in parts if n == 1), "")
            params = [decode_type(x) for n, _, x in parts if n == 2]
            return (name, *params)
    return ("dyn",)


def _const(buf: bytes) -> tuple[str, Any]:
    for num, _wt, v in fields(buf):
        if num == 1:
            return "null", None
        if num == 2:
            return "bool", bool(v)
        if num == 3:
            return "int", _signed(v)
        if num == 4:
            return "uint", v
        if num == 5:
            return "double", struct.unpack("<d", v)[0]
        if num == 6:
            return "string", v.decode("utf-8", "replace")
        if num == 7:
            return "bytes", bytes(v)
    return "null", None


def decode_expr(buf: bytes) -> Node:
    node = Node(0, "const")
    for num, _wt, v in fields(buf):
        if num == 2:
            node.id = _signed(v)
        elif num == 3:
            node.kind = "const"
            node.const_kind, node.value = _const(v)
        elif num == 4:
            node.kind = "ident"
            node.value = next((x.decode() for n, _, x in fields(v) if n == 1), "")
        elif num in (5, 6):  # Select{operand, field, test_only} / Call{target, function, args}
            node.kind = "select" if num == 5 else "call"
            for n, _, x in fields(v):
                if n == 1:
                    node.operand = decode_expr(x)
                elif n == 2:
                    node.value = x.decode()
                elif n == 3 and num == 6:
                    node.args.append(decode_expr(x))
        elif num == 7:
            node.kind = "list"
            for n, wt, x in fields(v):
                if n == 1:
                    node.args.append(decode_expr(x))
                elif n == 2 and wt == 2:
                    j = 0
                    while j < len(x):
                        idx, j = _varint(x, j)
                        node.optional.add(idx)
                elif n == 2:
                    node.optional.add(x)
        elif num == 8:
            node.kind = "struct"
            for n, _, x in fields(v):
                if n == 1 and x:
                    node.kind = "message"
                elif n == 2:
                    entry = {m: y for m, _, y in fields(x)}
                    if 3 in entry:
                        node.kind = "map" if node.kind == "struct" else node.kind
                        node.entries.append((decode_expr(entry[3]), decode_expr(entry.get(4, b"")),
                                             bool(entry.get(5, 0))))
            if node.kind == "struct":
                node.kind = "map"
        elif num == 9:
            node.kind = "comprehension"
            names = {1: "iter_var", 3: "accu_var", 8: "iter_var2"}
            parts = {2: "range", 4: "init", 5: "cond", 6: "step", 7: "result"}
            for n, _, x in fields(v):
                if n in names:
                    node.names[names[n]] = x.decode()
                elif n in parts:
                    node.parts[parts[n]] = decode_expr(x)
    return node


@dataclass
class CheckedAst:
    root: Node
    types: dict[int, Any]
    positions: dict[int, int]
    line_offsets: list[int]


def _source_info(buf: bytes, positions: dict[int, int], line_offsets: list[int]) -> None:
    for n, wt, x in fields(buf):
        if n == 3 and wt == 2:
            j = 0
            while j < len(x):
                off, j = _varint(x, j)
                line_offsets.append(off)
        elif n == 3:
            line_offsets.append(x)
        elif n == 4:
            kv = {m: y for m, _, y in fields(x)}
            positions[_signed(kv.get(1, 0))] = kv.get(2, 0)


def _decode(serialized: bytes, expr_num: int, source_num: int, type_num: int | None) -> CheckedAst:
    """Shared reader of ParsedExpr/CheckedExpr: they differ only in field numbers (and types)."""
    top = fields(serialized)
    if top and top[0][0] == 1 and isinstance(top[0][2], bytes) and top[0][2].startswith(b"type.googleapis.com/"):
        serialized = next(v for n, _, v in top if n == 2)
    root = Node(0, "const")
    types: dict[int, Any] = {}
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    for num, _wt, v in fields(serialized):
        if num == expr_num:
            root = decode_expr(v)
        elif num == type_num:
            kv = {n: x for n, _, x in fields(v)}
            types[_signed(kv.get(1, 0))] = decode_type(kv.get(2, b""))
        elif num == source_num:
            _source_info(v, positions, line_offsets)
    return CheckedAst(root, types, positions, line_offsets)


def decode_parsed(serialized: bytes) -> CheckedAst:
    """The ParsedExpr of an expression compiled with `disable_check=True` (no types)."""
    return _decode(serialized, expr_num=2, source_num=3, type_num=None)


def decode_checked(serialized: bytes) -> CheckedAst:
    """The CheckedExpr inside cel-expr-python's serialized expression (an Any, or the bare message)."""
    return _decode(serialized, expr_num=4, source_num=5, type_num=3)


def walk(node: Node) -> list[Node]:
    """Every node, parents before children."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children()))
    return out

"""Compile-time checks of kube's CEL base environment that cel-cpp does not make, run on the checked AST.

Upstream: kube-scheduler v1.36's environment (k8s.io/apiserver v0.36 pkg/cel/environment/base.go) enables
cel-go's AST validators `ValidateHomogeneousAggregateLiterals`, `ValidateDurationLiterals`,
`ValidateTimestampLiterals` and `ValidateRegexLiterals` (cel-go cel/validator.go). Their errors are reported
like cel-go's issues (`ERROR: <input>:L:C: msg`, the source line and a caret), so a selector refused by
kube-scheduler is refused here with the same text.

Types are kube's: in its DRA environment `device` is an object whose attributes are of type `any` and
capacities `kubernetes.Quantity`, while ksched declares `device` as `map(string, dyn)`; the types of
expressions reached from `device` are therefore derived from the path, the others from cel-cpp's checked types
(ksched's stand-ins for Kubernetes types are named as kube names them).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .cel_ast import CheckedAst, Node, walk
from .cel_k8s import regex_error

ANY, STRING, QUANTITY = ("any",), ("string",), ("kubernetes.Quantity",)
_ATTRS = ("map", STRING, ("map", STRING, ANY))
_CAPS = ("map", STRING, ("map", STRING, QUANTITY))
_DEVICE_FIELDS = {"driver": STRING, "attributes": _ATTRS, "capacity": _CAPS, "allowMultipleAllocations": ("bool",)}
#: ksched's map stand-ins for Kubernetes types (cel.py, cel_k8s.py) by their checked type
_STANDINS = {("map", STRING, ("string",)): QUANTITY, ("map", STRING, ("int",)): ("net.IP",),
             ("map", STRING, ("uint",)): ("net.CIDR",), ("map", STRING, ("double",)): ("kubernetes.URL",),
             ("list", STRING): ("kubernetes.Semver",)}
#: functions whose results are ksched's stand-ins for Kubernetes types
_STANDIN_FUNCTIONS = {"ip", "cidr", "url", "quantity", "semver", "masked", "add", "sub"}
_DURATION = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$|^-?0$")


def type_name(t: Any) -> str:
    """cel-go's FormatCELType."""
    head = t[0]
    if head in ("list", "map", "optional_type") or (len(t) > 1 and head not in ("param", "wrapper")):
        return f"{head}({', '.join(type_name(p) for p in t[1:])})"
    if head == "param":
        return t[1]
    if head == "wrapper":
        return f"wrapper({t[1]})"
    return head


class _Types:
    """kube's type of each node: device paths by kube's declarations, the rest from cel-cpp's type map."""

    def __init__(self, ast: CheckedAst) -> None:
        self.ast = ast
        self.memo: dict[int, Any] = {}
        self.scopes: dict[str, Any] = {}

    def of(self, n: Node) -> Any:
        if n.id in self.memo:
            return self.memo[n.id]
        t = self._derive(n)
        self.memo[n.id] = t
        return t

    def _checked(self, n: Node) -> Any:
        t = self.ast.types.get(n.id, ("dyn",))
        if n.kind == "call" and n.value in _STANDIN_FUNCTIONS:
            return self._standin(t)
        return t

    def _standin(self, t: Any) -> Any:
        if t in _STANDINS:
            return _STANDINS[t]
        if t[0] in ("list", "map", "optional_type"):
            return (t[0], *(self._standin(p) for p in t[1:]))
        return t

    def _derive(self, n: Node) -> Any:
        if n.kind == "ident":
            if n.value == "device":
                return ("kubernetes.DRADevice",)
            if n.value in self.scopes:
                return self.scopes[n.value]
            return self._checked(n)
        if n.kind == "select" and n.operand is not None:
            base = self.of(n.operand)
            if base == ("kubernetes.DRADevice",):
                return _DEVICE_FIELDS.get(n.value, self._checked(n))
            if base[0] == "map" and base[2] != ("dyn",) and base in (_ATTRS, _CAPS, _ATTRS[2], _CAPS[2]):
                return base[2]
            return self._checked(n)
        if n.kind == "list" and n.args:
            elems = [self.of(e) for e in n.args]
            elems = [t[1] if i in n.optional and t[0] == "optional_type" else t for i, t in enumerate(elems)]
            return ("list", _joined(elems))
        if n.kind == "map" and n.entries:
            keys = [self.of(k) for k, _v, _o in n.entries]
            vals = [self.of(v) for _k, v, _o in n.entries]
            vals = [t[1] if o and t[0] == "optional_type" else t
                    for t, (_k, _v, o) in zip(vals, n.entries, strict=True)]
            return ("map", _joined(keys), _joined(vals))
        if n.kind == "call" and n.value == "_[_]" and len(n.args) == 2:
            base = self.of(n.args[0])
            if base in (_ATTRS, _CAPS, _ATTRS[2], _CAPS[2]):
                return base[2]
        return self._checked(n)


def _location(ast: CheckedAst, node_id: int) -> tuple[int, int]:
    offset = ast.positions.get(node_id, 0)
    line, start = 1, 0
    for i, end in enumerate(ast.line_offsets):
        if offset < end:
            line, start = i + 1, (ast.line_offsets[i - 1] if i else 0)
            break
    return line, offset - start + 1


def format_issue(source: str, ast: CheckedAst, node_id: int, message: str) -> str:
    """One issue as cel-go prints it: `ERROR: <input>:L:C: message`, the source line and a caret under C."""
    line, col = _location(ast, node_id)
    text = source.split("\n")[line - 1] if source else ""
    return f"ERROR: <input>:{line}:{col}: {message}\n | {text}\n | {'.' * (col - 1)}^"


def _exempt(parents: dict[int, Node], n: Node) -> bool:
    p = parents.get(n.id)
    while p is not None:
        if p.kind == "call" and p.value in ("format", "cel.@block"):
            return True
        p = parents.get(p.id)
    return False


def _bind_scopes(types: _Types, root: Node) -> None:
    """Variables bound by cel.bind and comprehensions over kube-typed ranges get kube's types."""
    for n in walk(root):
        if n.kind != "comprehension":
            continue
        init, rng = n.parts.get("init"), n.parts.get("range")
        accu, it = n.names.get("accu_var", ""), n.names.get("iter_var", "")
        if init is not None and rng is not None and rng.kind == "list" and not rng.args and accu != "__result__":
            t = types.of(init)
            if t[0] not in ("dyn",):
                types.scopes[accu] = t
        if rng is not None and it:
            t = types.of(rng)
            if t[0] == "map" and t in (_ATTRS, _CAPS, _ATTRS[2], _CAPS[2]):
                types.scopes[it] = t[1]
                if n.names.get("iter_var2"):
                    types.scopes[n.names["iter_var2"]] = t[2]
                    types.scopes[it] = t[1]


def check(source: str, ast: CheckedAst) -> list[str]:
    """kube's validator issues for a checked expression, sorted by location as cel-go prints them."""
    issues: list[tuple[int, int, str]] = []
    nodes = walk(ast.root)
    parents = {c.id: n for n in nodes for c in n.children()}
    for n in nodes:
        if n.kind != "call" or not n.args:
            continue
        lit = n.args[0]
        if lit.kind != "const" or lit.const_kind != "string":
            continue
        if n.value == "duration" and n.operand is None and not _valid_duration(lit.value):
            issues.append((0, lit.id, "invalid duration argument"))
        elif n.value == "timestamp" and n.operand is None and not _valid_timestamp(lit.value):
            issues.append((1, lit.id, "invalid timestamp argument"))
        elif n.value == "matches" and not _valid_regex(lit.value):
            issues.append((2, lit.id, "invalid matches argument"))
    types = _Types(ast)
    _bind_scopes(types, ast.root)
    for n in nodes:
        if n.kind == "list" and not _exempt(parents, n):
            first = None
            for i, e in enumerate(n.args):
                t = types.of(e)
                if i in n.optional and t[0] == "optional_type":
                    t = t[1]
                if first is None:
                    first = t
                elif not _equivalent(first, t):
                    issues.append((3, e.id, f"expected type '{type_name(first)}' but found '{type_name(t)}'"))
                    break
        elif n.kind == "map" and not _exempt(parents, n):
            kt = vt = None
            for k, v, opt in n.entries:
                tk, tv = types.of(k), types.of(v)
                if opt and tv[0] == "optional_type":
                    tv = tv[1]
                if kt is None:
                    kt, vt = tk, tv
                    continue
                if not _equivalent(kt, tk):
                    issues.append((3, k.id, f"expected type '{type_name(kt)}' but found '{type_name(tk)}'"))
                if not _equivalent(vt, tv):
                    issues.append((3, v.id, f"expected type '{type_name(vt)}' but found '{type_name(tv)}'"))
    issues.sort(key=lambda x: (_location(ast, x[1]), x[0]))
    return [format_issue(source, ast, node_id, msg) for _order, node_id, msg in issues]


def _joined(types: list[Any]) -> Any:
    """The element type cel-go's checker gives a literal: the common type, dyn when elements differ."""
    return types[0] if all(_equivalent(types[0], t) for t in types[1:]) else ("dyn",)


#: ksched's stand-in type names in cel-cpp's messages, by the constructor whose presence makes them kube types
_MESSAGE_NAMES = [("map(string, int)", "net.IP", "ip("), ("map(string, uint)", "net.CIDR", "cidr("),
                  ("map(string, double)", "kubernetes.URL", "url("),
                  ("map(string, string)", "kubernetes.Quantity", "quantity("),
                  ("list(string)", "kubernetes.Semver", "semver(")]


def kube_type_names(message: str, expression: str) -> str:
    """A cel-cpp check error with ksched's stand-in types named as kube names them (only the stand-ins the
    expression can produce, in the argument lists of overload errors)."""
    def rename(m: re.Match[str]) -> str:
        text = m.group(0).replace("google.protobuf.Duration", "duration")
        text = re.sub(r"google\.protobuf\.Timestamp", "timestamp", text)
        text = re.sub(r"\bT%\d+\b", "dyn", text)  # cel-cpp's unresolved type parameters; cel-go prints dyn
        for standin, name, ctor in _MESSAGE_NAMES:
            if ctor in expression:
                text = text.replace(standin, name)
        return text
    return re.sub(r"applied to '\(.*?\)'", rename, message)


def _equivalent(a: Any, b: Any) -> bool:
    if a[0] == "param" and b[0] == "param":
        return True
    if a[0] != b[0] or len(a) != len(b):
        return False
    return all(_equivalent(x, y) if isinstance(x, tuple) else x == y for x, y in zip(a[1:], b[1:], strict=True))


def _valid_duration(s: str) -> bool:
    return bool(_DURATION.match(s))


def _valid_timestamp(s: str) -> bool:
    try:
        datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in s or "t" in s


def _valid_regex(pattern: str) -> bool:
    return regex_error(pattern) is None


def program_errors(ast: CheckedAst) -> str | None:
    """kube's program instantiation error: its find/findAll regex optimization compiles a literal pattern when the
    program is built (`program instantiation failed: error parsing regexp: ...`)."""
    for n in walk(ast.root):
        if n.kind == "call" and n.value in ("find", "findAll") and n.operand is not None and n.args:
            lit = n.args[0]
            if lit.kind == "const" and lit.const_kind == "string":
                err = regex_error(lit.value)
                if err:
                    return f"program instantiation failed: {err}"
    return None


def unbounded_ranges(ast: CheckedAst) -> str | None:
    """Why evaluating the expression would exceed kube's cost limit by a `lists.range(n)` alone, else None.

    kube's cost tracker charges `lists.range(n)` the n elements it creates, so n above the limit (1,000,000)
    exceeds it; kube-apiserver's estimate of a non-literal n is unbounded, so such a selector is never stored.
    cel-expr-python has no cost tracking and would build the list (a large n exhausts memory), so ksched
    refuses to evaluate these selectors with kube's runtime error instead (docs/dra.md, Cost limit)."""
    for n in walk(ast.root):
        if n.kind == "call" and n.value == "lists.range" and n.operand is None and len(n.args) == 1:
            arg = n.args[0]
            if arg.kind != "const" or arg.const_kind not in ("int", "uint"):
                return "lists.range of a value not known before evaluation"
            if arg.value > RANGE_LIMIT:
                return f"lists.range({arg.value})"
    return None


#: kube's CELSelectorExpressionMaxCost: a list of more elements costs more than a selector may
RANGE_LIMIT = 1_000_000


_LOGICAL = re.compile(r"^ERROR: <input>:(\d+):(\d+): found no matching overload for '(_&&_|_\|\|_)' applied to "
                      r"'\((.*)\)'\n")


def _split_types(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return [*out, cur.strip()]


def logical_operand_issues(message: str, source: str, parsed: CheckedAst) -> str | None:
    """cel-go's wording for a non-bool operand of `&&` / `||`: cel-cpp reports no matching overload for the
    operator, cel-go `expected type 'bool' but found '<type>'` at each such operand."""
    m = _LOGICAL.match(message)
    if not m:
        return None
    line, col, op, types = int(m.group(1)), int(m.group(2)), m.group(3), _split_types(m.group(4))
    for n in walk(parsed.root):
        if n.kind == "call" and n.value == op and _location(parsed, n.id) == (line, col) and len(n.args) == len(types):
            bad = [(a, t) for a, t in zip(n.args, types, strict=True) if t not in ("bool", "dyn")]
            if not bad:
                return None
            return "\n".join(format_issue(source, parsed, a.id, f"expected type 'bool' but found '{t}'")
                             for a, t in bad)
    return None

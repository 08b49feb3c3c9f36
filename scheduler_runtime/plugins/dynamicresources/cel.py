"""CEL device selectors, evaluated with cel-expr-python (Google's cel-cpp) in a Kubernetes-like environment.

Upstream: kube-scheduler v1.36, staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go.

Why cel-expr-python: compared with cel-python (pure Python, ~530 µs per evaluation, no `.?` optional syntax, no
`cel.bind`) and common-expression-language (cel-rust, fast but no optional syntax, no `cel.bind`, no type
checking), it is the official Google implementation, type-checks at compile time, has the optional and bindings
extensions kube's environment enables, and evaluates a selector in ~7-17 µs (docs/dra.md has the figures).

The environment kube-scheduler's DRA allocator uses (k8s.io/dynamic-resource-allocation/cel) differs from plain
CEL in ways reproduced here:

- the variable `device` with `driver`, `attributes` (domain -> id -> value), `capacity` (domain -> id ->
  Quantity) and `allowMultipleAllocations`; attribute and capacity names without a domain are filed under the
  device's driver; looking up a domain the device does not have gives an empty map (kube's custom map), a missing
  id inside a domain is the runtime error `no such key: <id>`;
- version attributes are Semver values and capacities Quantity values, with the Kubernetes Quantity library
  (`quantity()`, `isQuantity()`, `sign()` (a global function: `sign(q)`), `compareTo`, `isGreaterThan`,
  `isLessThan`, `add`, `sub`, `isInteger`, `asInteger`, `asApproximateFloat`) and Semver library (`semver()`,
  `isSemver()`, `major`, `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`);
- an expression must evaluate to bool (or an untyped value); anything else fails to compile with kube's
  `must evaluate to bool or the unknown type, not <type>`; an expression longer than 10 Ki fails to compile;
- a derived attribute's expression (DRADerivedAttributes, `compile_expression(..., derived=True)`, cached apart
  from selectors) must evaluate to a string, int, bool, semver or a list of those, and `Compiled.derive` turns
  its result into a device attribute as kube's EvaluateDerivedAttribute does.

The Kubernetes IP, CIDR, URL, regex and lists libraries are in cel_k8s.py, kube's AST validators in
cel_checks.py; cel-go's strings, sets, lists and two-variable comprehension extensions come with cel-cpp.

Differences (documented in docs/dra.md): cel-expr-python has no cost tracking, so kube's runtime cost limit
(1 000 000) cannot be counted; its fixed budget of 10 000 comprehension iterations per evaluation is reported as
ITERATION_BUDGET_ERROR (on a real cluster kube-apiserver refuses selectors whose estimated cost exceeds the
limit, so stored selectors never reach it in kube-scheduler); kube's format library (optional results) and
cross-type numeric comparisons are not available.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ...errors import InputError
from ...quantity import parse_quantity
from . import cel_ast, cel_checks, cel_k8s

try:  # the runtime must import without it (only DRA needs CEL); missing -> a clear error at compile time
    from cel_expr_python import cel as _cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
except ImportError:  # pragma: no cover - exercised only when the dependency is absent
    _cel = None

#: kube's resourceapi.CELSelectorExpressionMaxCost; see the module docstring for how ksched bounds the cost
CEL_SELECTOR_MAX_COST = 1_000_000
#: cel-go's error when an evaluation exceeds the runtime cost limit
COST_LIMIT_ERROR = "operation cancelled: actual cost limit exceeded"
#: cel-expr-python stops an evaluation after this many comprehension iterations (fixed in its binding)
CEL_ITERATION_BUDGET = 10_000
ITERATION_BUDGET_ERROR = (f"operation cancelled: iteration budget exceeded (ksched evaluates at most "
                          f"{CEL_ITERATION_BUDGET} comprehension iterations per selector, kube-scheduler a cost "
                          f"of {CEL_SELECTOR_MAX_COST})")
#: apiserver's maximum length of a stored CEL expression (bytes)
MAX_EXPRESSION_LENGTH = 10 * 1024
_log = logging.getLogger(__name__)
_QKEY = "__k8s_quantity_nano__"
_SKEY = cel_k8s.SEMVER_KEY
_NANO = Decimal(10) ** 9
_DEVICE_FIELDS = {"driver", "attributes", "capacity", "allowMultipleAllocations"}


class CelError(Exception):
    """A compile or runtime error; the message is the detail kube-scheduler puts after `CEL ... error: `."""


# ----------------------------------------------------------------------------------------- Quantity / Semver
def quantity_value(q: object) -> dict[str, str]:
    """A Quantity as the CEL map value that represents it: exact, in nano units (kube's finest scale), so `==`
    between quantities compares amounts, as Quantity.Equal does."""
    d = parse_quantity(q)
    nano = (d * _NANO).to_integral_value(rounding="ROUND_CEILING")
    return {_QKEY: str(int(nano))}


def _nano(q: Any) -> int:
    if isinstance(q, dict) and _QKEY in q:
        return int(q[_QKEY])
    raise ValueError("no such overload")


def _q_from_nano(n: int) -> dict[str, str]:
    return {_QKEY: str(n)}


def _quantity(s: str) -> dict[str, str]:
    try:
        return quantity_value(s)
    except InputError as exc:
        raise ValueError(exc.detail) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except InputError:
        return False
    return True


def _cmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _as_integer(q: Any) -> int:
    n = _nano(q)
    if n % 10**9:
        raise ValueError("cannot convert value to integer")
    v = n // 10**9
    if not -(2**63) <= v < 2**63:
        raise ValueError("cannot convert value to integer")
    return v


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                     r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
_LOOSE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


def parse_semver(s: str, normalize: bool = False) -> tuple[int, int, int, str]:
    """(major, minor, patch, pre-release) of a semantic version 2.0.0 string; `normalize` accepts a `v` prefix,
    missing minor/patch and leading zeros as Kubernetes' semver(string, true) does. Build metadata is dropped:
    it does not take part in comparisons."""
    if normalize:
        m = _LOOSE.match(s)
        if m:
            s = f"{int(m.group(1))}.{int(m.group(2) or 0)}.{int(m.group(3) or 0)}{m.group(4)}"
    m = _SEMVER.match(s)
    if not m:
        raise ValueError(f"could not parse {s!r} as semver")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def semver_value(s: str, normalize: bool = False) -> list[str]:
    major, minor, patch, pre = parse_semver(s, normalize)
    return [_SKEY, f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")]


def _sv(v: Any) -> tuple[int, int, int, str]:
    if cel_k8s.is_semver(v):
        return parse_semver(v[1])
    raise ValueError("no such overload")


def _pre_key(pre: str) -> tuple:
    # a version without pre-release sorts after every pre-release of it
    if not pre:
        return (1,)
    parts = []
    for p in pre.split("."):
        parts.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return (0, tuple(parts))


def semver_compare(a: Any, b: Any) -> int:
    x, y = _sv(a), _sv(b)
    kx, ky = (x[:3], _pre_key(x[3])), (y[:3], _pre_key(y[3]))
    return (kx > ky) - (kx < ky)


def _is_semver(s: str, normalize: bool = False) -> bool:
    try:
        parse_semver(s, normalize)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------------------- environment
#: [core, with the Kubernetes IP/CIDR/URL/regex/lists libraries]: cel-expr-python's per-evaluation overhead
#: grows with the number of Python functions in an environment (~2.5 µs without any, ~11 µs with the libraries),
#: so a selector naming none of the libraries' functions is compiled and evaluated in the core environment
_envs: list[Any] = [None, None]
_env_lock = threading.Lock()
_LIBRARY_NAMES: frozenset[str] | None = None


def _uses_libraries(expression: str) -> bool:
    """Whether an identifier of the expression names a function of cel_k8s's libraries (then the expression must
    see their declarations, including their overloads of `string` and `indexOf`)."""
    global _LIBRARY_NAMES
    if _LIBRARY_NAMES is None:
        _LIBRARY_NAMES = cel_k8s.FUNCTION_NAMES
    return not _LIBRARY_NAMES.isdisjoint(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression))


def _environment(full: bool = True) -> Any:
    env = _envs[full]
    if env is not None:
        return env
    with _env_lock:
        if _envs[full] is not None:
            return _envs[full]
        if _cel is None:
            raise CelError("the Python package cel-expr-python is not installed (pip install cel-expr-python)")
        T = _cel.Type
        Q = T.Map(T.STRING, T.STRING)
        S = T.List(T.STRING)

        def fn(name: str, *overloads: tuple[str, Any, list[Any], bool, Any]) -> Any:
            return _cel.FunctionDecl(name, [_cel.Overload(oid, ret, params, is_member=member, impl=impl)
                                            for oid, ret, params, member, impl in overloads])

        funcs = [
            fn("quantity", ("k8s_quantity", Q, [T.STRING], False, _quantity)),
            fn("isQuantity", ("k8s_is_quantity", T.BOOL, [T.STRING], False, _is_quantity)),
            # a global function, unlike the library's other Quantity functions: kube declares it with
            # cel.Overload, so `sign(q)` compiles and `q.sign()` does not (its doc comment shows the latter)
            fn("sign", ("k8s_quantity_sign", T.INT, [Q], False, lambda q: _cmp(_nano(q), 0))),
            fn("isInteger", ("k8s_quantity_is_integer", T.BOOL, [Q], True, lambda q: _nano(q) % 10**9 == 0)),
            fn("asInteger", ("k8s_quantity_as_integer", T.INT, [Q], True, _as_integer)),
            fn("asApproximateFloat", ("k8s_quantity_as_float", T.DOUBLE, [Q], True, lambda q: _nano(q) / 1e9)),
            fn("add", ("k8s_quantity_add", Q, [Q, Q], True, lambda a, b: _q_from_nano(_nano(a) + _nano(b))),
               ("k8s_quantity_add_int", Q, [Q, T.INT], True, lambda a, b: _q_from_nano(_nano(a) + b * 10**9))),
            fn("sub", ("k8s_quantity_sub", Q, [Q, Q], True, lambda a, b: _q_from_nano(_nano(a) - _nano(b))),
               ("k8s_quantity_sub_int", Q, [Q, T.INT], True, lambda a, b: _q_from_nano(_nano(a) - b * 10**9))),
            fn("compareTo", ("k8s_quantity_compare", T.INT, [Q, Q], True, lambda a, b: _cmp(_nano(a), _nano(b))),
               ("k8s_semver_compare", T.INT, [S, S], True, semver_compare)),
            fn("isGreaterThan",
               ("k8s_quantity_gt", T.BOOL, [Q, Q], True, lambda a, b: _nano(a) > _nano(b)),
               ("k8s_semver_gt", T.BOOL, [S, S], True, lambda a, b: semver_compare(a, b) > 0)),
            fn("isLessThan",
               ("k8s_quantity_lt", T.BOOL, [Q, Q], True, lambda a, b: _nano(a) < _nano(b)),
               ("k8s_semver_lt", T.BOOL, [S, S], True, lambda a, b: semver_compare(a, b) < 0)),
            fn("semver", ("k8s_semver", S, [T.STRING], False, lambda s: _semver_or_error(s, False)),
               ("k8s_semver_normalize", S, [T.STRING, T.BOOL], False, lambda s, n: _semver_or_error(s, n))),
            fn("isSemver", ("k8s_is_semver", T.BOOL, [T.STRING], False, _is_semver),
               ("k8s_is_semver_normalize", T.BOOL, [T.STRING, T.BOOL], False, _is_semver)),
            fn("major", ("k8s_semver_major", T.INT, [S], True, lambda v: _sv(v)[0])),
            fn("minor", ("k8s_semver_minor", T.INT, [S], True, lambda v: _sv(v)[1])),
            fn("patch", ("k8s_semver_patch", T.INT, [S], True, lambda v: _sv(v)[2])),
        ]
        k8s_funcs, k8s_overloads = cel_k8s.declarations(_cel) if full else ([], [])
        # cel-go extensions of kube's base environment that cel-cpp provides only through an env config
        config = _cel.NewEnvConfigFromYaml("name: kubernetes-dra\nextensions:\n  - name: sets\n"
                                           "  - name: lists\n    version: 2\n"
                                           "  - name: two-var-comprehensions\n")
        env = _cel.NewEnv(config=config, variables={"device": T.Map(T.STRING, T.DYN)},
                           extensions=[ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
                                       ext_strings.ExtStrings(2),
                                      *([_cel.CelExtension("kubernetes", k8s_overloads)] if full else [])],
                          functions=funcs + k8s_funcs)
        _envs[full] = env
    return env


def _semver_or_error(s: str, normalize: bool) -> list[str]:
    try:
        return semver_value(s, normalize)
    except ValueError:
        raise ValueError("could not parse semver") from None


# ----------------------------------------------------------------------------------------- compile
_DOMAIN_LOOKUP = re.compile(r"""\b(?:attributes|capacity)\s*\[\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\]""")
_DEVICE_FIELD = re.compile(r"\bdevice\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_TYPE_NAMES = {"BOOL": "bool", "INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string",
               "BYTES": "bytes", "NULL": "null_type", "DURATION": "google.protobuf.Duration",
               "TIMESTAMP": "google.protobuf.Timestamp"}

#: domains any compiled expression looks up by a literal; devices get empty maps for those they lack
_known_domains: set[str] = set()


class Compiled:
    """One compiled selector: `error` (a compile error's text) or a program to evaluate per device."""

    __slots__ = ("expression", "program", "error", "full", "over_limit")

    def __init__(self, expression: str, program: Any = None, error: str | None = None, full: bool = True,
                 over_limit: str | None = None) -> None:
        self.expression = expression
        self.program = program
        self.error = error
        self.full = full
        #: why evaluating would exceed kube's cost limit (cel_checks.unbounded_ranges), then not evaluated
        self.over_limit = over_limit

    def matches(self, device: DeviceInput) -> bool:
        """Evaluate against a device; raises CelError (kube's runtime error text) on a runtime error."""
        value = self._eval(device)
        kind = value.type()
        name = kind.name() if kind is not None else ""
        if name == "ERROR":
            raise CelError(_runtime_text(str(value.value())))
        if name == "BOOL":
            return bool(value.value())
        tname = _TYPE_NAMES.get(name, name.lower())
        if tname.startswith("list"):  # a list-typed attribute (cel-go names the type and its error plainly)
            raise CelError("CEL result of type list could not be converted to bool: type conversion error from list "
                           "to 'bool'")
        raise CelError(f"CEL result of type {tname} could not be converted to bool: type conversion error from "
                       f"'{tname}' to 'bool'")

    def derive(self, device: DeviceInput) -> dict[str, Any]:
        """Evaluate a derived attribute's expression against a device: the result as a device attribute
        (`{"int": 3}`, `{"strings": [...]}`, ...), as kube's EvaluateDerivedAttribute converts it; raises
        CelError with kube's text on a runtime error or a result that is no attribute value."""
        return _as_attribute(self._eval(device))

    def _eval(self, device: DeviceInput) -> Any:
        """The engine's value for the device; raises CelError with kube's text when it cannot run or fails."""
        if self.program is None:
            raise CelError(self.error or "not compiled")
        if self.over_limit is not None:
            raise CelError(COST_LIMIT_ERROR)
        try:
            return self.program.eval(device.activation(self.full))
        except Exception as exc:  # noqa: BLE001 - any engine failure is the claim's error, never a crash
            raise CelError(_runtime_text(str(exc))) from None


def _scalar_attribute(kind: str, plain: Any) -> dict[str, Any] | None:
    """A scalar CEL result as a device attribute; None for any other value."""
    if kind == "BOOL":
        return {"bool": bool(plain)}
    if kind == "INT":
        return {"int": int(plain)}
    if kind == "STRING":
        return {"string": str(plain)}
    if cel_k8s.is_semver(plain):
        return {"version": plain[1]}
    return None


#: device attribute list field and kube's element wording, by the attribute field of the first element
_LIST_FIELDS = {"bool": ("bools", "bool"), "int": ("ints", "int"), "string": ("strings", "string"),
                "version": ("versions", "semver")}


def _as_attribute(value: Any) -> dict[str, Any]:
    kind = value.type().name() if value.type() is not None else ""
    if kind == "ERROR":
        raise CelError(_runtime_text(str(value.value())))
    plain = value.plain_value()
    scalar = _scalar_attribute(kind, plain)
    if scalar is not None:
        return scalar
    if not kind.startswith("LIST"):
        raise CelError(f"unsupported CEL return type: {_go_type(kind, plain)}")
    elems = value.value()
    if not elems:
        return {"strings": []}
    first = _scalar_attribute(elems[0].type().name(), elems[0].plain_value())
    if first is None:
        raise CelError(f"unsupported list element type: {_go_type(elems[0].type().name(), elems[0].plain_value())}")
    want = next(iter(first))
    field_name, wording = _LIST_FIELDS[want]
    out = []
    for i, e in enumerate(elems):
        ekind, eplain = e.type().name(), e.plain_value()
        attr = _scalar_attribute(ekind, eplain)
        if attr is None or want not in attr:
            raise CelError(f"expected list element at index {i} to be {wording}, got {_go_type(ekind, eplain)}")
        out.append(attr[want])
    return {field_name: out}


def _go_type(kind: str, plain: Any) -> str:
    """The Go type cel-go's value has (what kube's errors print with %T)."""
    if cel_k8s.is_semver(plain):
        return "semver.Version"
    if isinstance(plain, dict) and _QKEY in plain:
        return "*resource.Quantity"
    if kind.startswith("LIST"):
        return "[]ref.Val"
    if kind.startswith("MAP"):
        return "map[ref.Val]ref.Val"
    return {"BOOL": "bool", "INT": "int64", "UINT": "uint64", "DOUBLE": "float64", "STRING": "string",
            "BYTES": "[]uint8", "NULL": "structpb.NullValue", "DURATION": "time.Duration",
            "TIMESTAMP": "time.Time"}.get(kind, kind.lower())


def _runtime_text(msg: str) -> str:
    """cel-cpp's status text in cel-go's wording where the two differ."""
    msg = msg.strip()
    m = re.match(r'^(?:NOT_FOUND: )?Key not found in map ?: ?"?(.*?)"?$', msg)
    if m:
        return f"no such key: {m.group(1)}"
    if "Iteration budget exceeded" in msg:
        return ITERATION_BUDGET_ERROR
    if "No matching overloads found" in msg:  # an operator on dyn values of types it has no overload for
        return "no such overload"
    m = re.match(r"^[A-Z_]+: (.*)$", msg)
    if m:
        msg = m.group(1)
    msg = msg.removesuffix(" [UNKNOWN]").removesuffix(" [INVALID_ARGUMENT]")
    # cel-cpp prefixes some extension errors with the function; cel-go does not
    return re.sub(r"^(flatten|sortBy|sort|slice)\(\): ", "", msg)


def compile_expression(expression: str, derived: bool = False) -> Compiled:
    """Compile without caching (see CelCache). The device always has its `allowMultipleAllocations` field,
    whatever DRAConsumableCapacity: kube's selector cache compiles in its StoredExpressions environment, which
    declares every versioned option regardless of the feature gates (the last device type declared wins).
    `derived`: a derived attribute's expression (DRADerivedAttributes), whose result type is checked as kube's
    compiler checks it (see `derived_type_error`) instead of having to be bool."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return Compiled(expression, error=f"compilation failed: expression too long ({len(expression)} characters, "
                                          f"maximum {MAX_EXPRESSION_LENGTH})")
    for m in _DEVICE_FIELD.finditer(expression):
        if m.group(1) not in _DEVICE_FIELDS:
            return Compiled(expression, error=f"compilation failed: ERROR: <input>:1:{m.start(1)}: undefined field "
                                              f"'{m.group(1)}'")
    try:
        full = _uses_libraries(expression)
        env = _environment(full)
        program = env.compile(expression)
    except CelError as exc:
        return Compiled(expression, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the engine's parse/check errors
        text = str(exc).strip()
        text = re.sub(r"^INVALID_ARGUMENT: ", "", text)
        text = re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", text)
        return Compiled(expression, error="compilation failed: " + _kube_wording(text, expression))
    try:
        ast = cel_ast.decode_checked(program.serialize())
        issues = cel_checks.check(expression, ast)
    except Exception as exc:  # noqa: BLE001 - an AST ksched cannot read: kube's extra checks are skipped, no crash
        ast, issues = None, []
        _log.warning("CEL selector %r: kube's compile-time checks skipped: %s", expression, exc)
    if issues:
        return Compiled(expression, error="compilation failed: " + "\n".join(issues))
    rtype = program.return_type().name()
    if derived:
        bad = derived_type_error(rtype, expression)
        if bad is not None:
            return Compiled(expression, error=bad)
    elif rtype not in ("BOOL", "DYN", "ANY"):
        tname = _TYPE_NAMES.get(rtype, rtype.lower())
        return Compiled(expression, error=f"must evaluate to bool or the unknown type, not {tname}")
    instantiation = cel_checks.program_errors(ast) if ast is not None else None
    if instantiation:
        return Compiled(expression, error=instantiation)
    for m in _DOMAIN_LOOKUP.finditer(expression):
        dom = m.group(1) if m.group(1) is not None else m.group(2)
        if dom not in _known_domains:
            _known_domains.add(dom)
            DeviceInput.domains_version += 1
    over = cel_checks.unbounded_ranges(ast) if ast is not None else None
    return Compiled(expression, program=program, full=full, over_limit=over)


def _kube_wording(text: str, expression: str) -> str:
    """A cel-cpp check error in cel-go's words where they differ (operands of && and ||, Kubernetes types)."""
    if text.startswith("ERROR: ") and ("'_&&_'" in text or "'_||_'" in text):
        try:
            parsed = cel_ast.decode_parsed(_environment(_uses_libraries(expression)).compile(
                expression, disable_check=True).serialize())
        except Exception as exc:  # noqa: BLE001 - keep cel-cpp's text
            _log.debug("CEL selector %r: no parsed AST: %s", expression, exc)
            parsed = None
        if parsed is not None:
            issues: list[str] = []
            for issue in re.split(r"\n(?=ERROR: )", text):
                converted = cel_checks.logical_operand_issues(issue + "\n", expression, parsed)
                issues.extend(re.split(r"\n(?=ERROR: )", converted) if converted else [issue])

            def where(issue: str) -> tuple[int, int]:
                m = re.match(r"ERROR: <input>:(\d+):(\d+):", issue)
                return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            text = "\n".join(sorted(issues, key=where))
    return cel_checks.kube_type_names(text, expression)


#: element types kube allows in a derived attribute's result (alone or as a list's elements); ksched's Semver
#: stand-in is list<string>, see `derived_type_error`
_DERIVED_SCALARS = frozenset({"BOOL", "INT", "STRING", "DYN", "ANY"})
_KUBE_TYPE_WORDS = {"null": "null_type", "duration": "google.protobuf.Duration",
                    "timestamp": "google.protobuf.Timestamp"}


def derived_type_error(rtype: str, expression: str) -> str | None:
    """kube's compile-time check of a derived attribute's result type: a scalar (string, integer, boolean,
    semver, or an untyped value) or a list of those. kube-scheduler compiles derived attributes in the
    StoredExpressions environment, where lists are allowed whatever DRAListTypeAttributes. ksched's Semver is a
    list<string>, so a list<string> always passes (strings or one Semver) and a list<list<string>> passes as a
    list of Semvers when the expression names `semver`."""
    if rtype in _DERIVED_SCALARS or rtype == "LIST<STRING>":
        return None
    m = re.fullmatch(r"LIST<(.*)>", rtype)
    if m and (m.group(1) in _DERIVED_SCALARS or (m.group(1) == "LIST<STRING>" and "semver" in expression)):
        return None
    return ("must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these scalars, "
            f"not {_kube_type_name(rtype, expression)}")


def _kube_type_name(rtype: str, expression: str) -> str:
    """A cel-cpp type name as cel-go prints it (`list(int)`, `map(string, int)`, `null_type`), with ksched's
    stand-ins for Kubernetes types named as kube names them when the expression builds one."""
    text = re.sub(r"[A-Za-z_.]+", lambda m: _KUBE_TYPE_WORDS.get(m.group(0).lower(), m.group(0).lower()), rtype)
    text = text.replace("<", "(").replace(">", ")")
    for standin, name, ctor in cel_checks._MESSAGE_NAMES:
        if ctor in expression and text == standin:
            return name
    return text


class CelCache:
    """kube's cel.Cache: compiled selectors and derived attribute expressions (each in its own scope, as kube
    prefixes their keys), least recently used evicted (kube keeps 10)."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[bool, str], Compiled] = OrderedDict()

    def get_or_compile(self, expression: str) -> Compiled:
        return self._get(expression, False)

    def get_or_compile_derived(self, expression: str) -> Compiled:
        """A derived attribute's expression (kube's GetOrCompileDerivedAttribute)."""
        return self._get(expression, True)

    def _get(self, expression: str, derived: bool) -> Compiled:
        key = (derived, expression)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        compiled = compile_expression(expression, derived)
        with self._lock:
            self._items[key] = compiled
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return compiled


# ----------------------------------------------------------------------------------------- device input
def _split(name: str, driver: str) -> tuple[str, str]:
    if "/" in name:
        dom, ident = name.split("/", 1)
        return dom, ident
    return driver, name


#: list-typed attribute values (DRAListTypeAttributes) and how each element becomes a CEL value
_LIST_KINDS: tuple[tuple[str, Callable[[Any], Any]], ...] = (("ints", int), ("bools", bool), ("strings", str))


def _attribute_value(attr: Any, lists: bool = True) -> Any:
    """An attribute as a CEL value. A list-typed one (`ints`, `bools`, `strings`, `versions`) becomes a list, as
    kube 1.37 passes it whatever the DRAListTypeAttributes gate (`lists` off: 1.36, which fails on it)."""
    if not isinstance(attr, dict):
        raise CelError("unsupported attribute value")
    if lists:
        for key, conv in _LIST_KINDS:
            if attr.get(key) is not None:
                return [conv(v) for v in attr[key]]
        if attr.get("versions") is not None:
            try:
                return [semver_value(str(v)) for v in attr["versions"]]
            except ValueError as exc:
                raise CelError(f"parse semantic version: {exc}") from None
    if "int" in attr:
        return int(attr["int"])
    if "bool" in attr:
        return bool(attr["bool"])
    if "string" in attr:
        return str(attr["string"])
    if "version" in attr:
        try:
            return semver_value(str(attr["version"]))
        except ValueError as exc:
            raise CelError(f"parse semantic version: {exc}") from None
    raise CelError("unsupported attribute value")


class DeviceInput:
    """The `device` variable for one ResourceSlice device, built once and reused for every selector."""

    #: bumped when a newly compiled selector looks up a new domain literal
    domains_version = 0
    __slots__ = ("driver", "raw", "list_values", "multi_alloc", "_data", "_act", "_version", "_error")
    # _act / _version: one activation per environment (core, full)

    def __init__(self, driver: str, raw: dict[str, Any], list_values: bool = True, multi_alloc: bool = True
                 ) -> None:
        self.driver = driver
        self.raw = raw
        #: `device.allowMultipleAllocations` reads the device's field; off: false whatever the field, as kube's
        #: stable allocator and NodeResourcesFit's scoring build their CEL device without it
        self.multi_alloc = multi_alloc
        #: list-typed attributes become CEL lists (kube 1.37); off: they fail as in 1.36
        self.list_values = list_values
        self._data: dict[str, Any] | None = None
        self._act: list[Any] = [None, None]
        self._version = [-1, -1]
        self._error: str | None = None

    def _build(self) -> dict[str, Any]:
        attrs: dict[str, dict[str, Any]] = {}
        for name, attr in (self.raw.get("attributes") or {}).items():
            dom, ident = _split(str(name), self.driver)
            try:
                attrs.setdefault(dom, {})[ident] = _attribute_value(attr, self.list_values)
            except CelError as exc:
                raise CelError(f"attribute {name}: {exc}") from None
        caps: dict[str, dict[str, Any]] = {}
        for name, cap in (self.raw.get("capacity") or {}).items():
            dom, ident = _split(str(name), self.driver)
            value = cap.get("value") if isinstance(cap, dict) else cap
            try:
                caps.setdefault(dom, {})[ident] = quantity_value(value)
            except (InputError, InvalidOperation):
                raise CelError(f"capacity {name}: invalid quantity {value!r}") from None
        return {"driver": self.driver, "attributes": attrs, "capacity": caps,
                "allowMultipleAllocations": self.multi_alloc and bool(self.raw.get("allowMultipleAllocations"))}

    def activation(self, full: bool = True) -> Any:
        if self._error is not None:
            raise CelError(self._error)
        if self._act[full] is None or self._version[full] != DeviceInput.domains_version:
            if self._data is None:
                try:
                    self._data = self._build()
                except CelError as exc:
                    self._error = str(exc)
                    raise
            version = DeviceInput.domains_version
            data = self._data
            for dom in list(_known_domains):
                data["attributes"].setdefault(dom, {})
                data["capacity"].setdefault(dom, {})
            self._act[full] = _environment(full).Activation(data={"device": data})
            self._version[full] = version
        return self._act[full]

"""Checks a plugin class's extension-point methods against the contract before any pod is scheduled.

The framework finds extension points by method name and calls them positionally (interface.py lists the
parameters); a method that cannot take those arguments would otherwise fail only when a pod reaches it,
as a TypeError inside the scheduling cycle. Parameter names are free (the framework never passes them by
keyword); the count and kind must fit: the framework's arguments fill the positional parameters, extra
parameters need defaults, and a keyword-only parameter needs a default.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..errors import InputError
from .interface import METHOD_CONTRACTS, MethodContract

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _function_of(cls: type, name: str) -> tuple[Callable[..., object], int] | None:
    """The function behind `cls.name` and how many leading parameters the call binds (self/cls), or None
    when it is not something we can inspect (a callable object, a builtin)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            raw = vars(klass)[name]
            break
    else:
        return None
    if isinstance(raw, staticmethod):
        return raw.__func__, 0
    if isinstance(raw, classmethod):
        return raw.__func__, 1
    if inspect.isfunction(raw):
        return raw, 1
    return None


def _render(name: str, sig: inspect.Signature) -> str:
    """`name(self, pod, node=...)`: the parameters without annotations, as a user wrote them."""
    parts: list[str] = []
    seen_kw_marker = False
    for p in sig.parameters.values():
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            seen_kw_marker = True
        elif p.kind == inspect.Parameter.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            if p.kind == inspect.Parameter.KEYWORD_ONLY and not seen_kw_marker:
                parts.append("*")
                seen_kw_marker = True
            parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}=...")
    return f"{name}({', '.join(parts)})"


def _mismatch(sig: inspect.Signature, bound: int, contract: MethodContract) -> str | None:
    """What is wrong with `sig` for the framework's call, or None when the call fits."""
    params = list(sig.parameters.values())[bound:]
    given = len(contract.params)
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    varargs = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
    kw_required = [p.name for p in params
                   if p.kind == inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty]

    def count(n: int) -> str:
        return f"{n} argument{'' if n == 1 else 's'}"

    if len(required) > given:
        return f"requires {count(len(required))}" if len(required) != len(positional) or varargs \
            else f"takes {count(len(positional))}"
    if len(positional) < given and not varargs:
        return f"takes {count(len(positional))}" if len(required) == len(positional) \
            else f"takes at most {count(len(positional))}"
    if kw_required:
        return f"has the keyword-only parameter {kw_required[0]!r} without a default"
    return None


def signature_errors(cls: type, shown: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """(file:line, message) per extension-point method of `cls` the framework could not call; the message
    reads `Cls.method(...) takes N arguments; the <Point> extension point calls method(...)`.
    `shown` turns a source path into the form the user knows (relative to their plugin folder)."""
    out: list[tuple[str, str]] = []
    for name, contract in METHOD_CONTRACTS.items():
        found = _function_of(cls, name)
        if found is None:
            continue
        fn, bound = found
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        problem = _mismatch(sig, bound, contract)
        if problem is None:
            continue
        out.append((_where(fn, shown), f"{cls.__qualname__}.{_render(name, sig)} {problem}; "
                                       f"{contract.expectation(cls.__qualname__)}"))
    return out


def _where(fn: Callable[..., object], shown: Callable[[str], str]) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return ""
    return f"{shown(code.co_filename)}:{code.co_firstlineno}"


def check_plugin_class(cls: type, shown: Callable[[str], str] = str) -> None:
    """Refuse a plugin class whose extension-point methods the framework could not call: the first such
    method, as one line naming its file and line (exit 1)."""
    errors = signature_errors(cls, shown)
    if errors:
        where, what = errors[0]
        raise InputError(what, file=where or None, usage=False)

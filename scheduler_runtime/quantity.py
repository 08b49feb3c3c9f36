"""Kubernetes resource.Quantity parsing into the integer units the scheduler computes with.

CPU is kept in millicores and every other resource in its base unit (bytes, count), like
kube-scheduler's `framework.Resource`, so comparisons are exact integer arithmetic.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext

from .errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_SUFFIX = re.compile(r"(?:[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")
_FORMAT = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#: the scheduler counts in int64 (millicores for cpu, base units otherwise), like kube-scheduler
INT64_MAX = (1 << 63) - 1


class QuantityTooLarge(InputError):
    """A quantity kube-apiserver stores but kube-scheduler cannot count with: its int64 arithmetic overflows."""


def parse_quantity(value: object, field: str = "") -> Decimal:
    """Parse a quantity string (or number) exactly with resource.ParseQuantity's grammar.

    A value with no meaningful size limit in the text (`1e2147483647`) is never expanded: anything
    beyond 10**40 is refused as too large before it is computed."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"quantities must match the regular expression {_FORMAT}, got {value!r}", field=field,
                         usage=False)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"invalid quantity {value!r}", field=field, usage=False)
    if isinstance(value, int | float):
        text = str(value) if isinstance(value, float) else None
        if text is None:
            if abs(value) > 10**40:
                raise QuantityTooLarge(f"quantity {_short(value)} is too large", field=field, usage=False)
            return Decimal(value)
    elif isinstance(value, str):
        text = value
    else:
        raise InputError(f"invalid quantity {_short(value)}: expected a string or number", field=field, usage=False)
    m = _NUMBER.match(text)
    if not m:
        raise InputError(f"quantities must match the regular expression {_FORMAT}, got {_short(value)}",
                         field=field, usage=False)
    suffix = text[m.end():]
    if not _SUFFIX.fullmatch(suffix):
        raise InputError(f"unable to parse quantity's suffix in {_short(value)}", field=field, usage=False)
    number = Decimal(m.group(0).rstrip("."))  # "5." is 5; the pattern guarantees a digit
    if suffix[:1] in ("e", "E") and len(suffix) > 1 and suffix not in _BINARY:
        exp = int(suffix[1:]) if len(suffix) < 12 else (10**12 if suffix[1] != "-" else -(10**12))
        scale = Decimal(1)
    elif suffix in _BINARY:
        exp, scale = 0, Decimal(_BINARY[suffix])
    else:
        exp, scale = 0, _DECIMAL[suffix]
    if number.is_zero():
        return Decimal(0)
    magnitude = number.adjusted() + exp + scale.adjusted()
    if magnitude > 40:
        raise QuantityTooLarge(f"quantity {_short(value)} is too large", field=field, usage=False)
    if magnitude < -40:  # kube rounds any positive amount below 1n up to 1n
        return Decimal("1e-9") if number > 0 else Decimal("-1e-9")
    with localcontext() as ctx:
        ctx.prec = len(number.as_tuple().digits) + 120
        ctx.Emax, ctx.Emin = 10**6, -(10**6)
        return number.scaleb(exp) * scale


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ceil(d: Decimal, factor: int = 1) -> int:
    with localcontext() as ctx:  # exact: a parsed quantity has at most 40 integer digits
        ctx.prec = len(d.as_tuple().digits) + 60
        return int((d * factor).to_integral_value(rounding="ROUND_CEILING"))


def _bounded(amount: int, value: object, field: str, unit: str) -> int:
    if amount > INT64_MAX:
        raise QuantityTooLarge(f"quantity {_short(value)} is too large: {amount} {unit} does not fit kube-scheduler's "
                               f"int64 arithmetic (the largest is {INT64_MAX})", field=field, usage=False)
    return amount


def cpu_millis(value: object, field: str = "") -> int:
    """CPU quantity in millicores, rounded up like Quantity.MilliValue()."""
    q = parse_quantity(value, field)
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {_short(value)}", field=field, usage=False)
    return _bounded(_ceil(q, 1000), value, field, "millicores")


def base_units(value: object, field: str = "") -> int:
    """Quantity in base units (bytes, count), rounded up like Quantity.Value()."""
    q = parse_quantity(value, field)
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {_short(value)}", field=field, usage=False)
    return _bounded(_ceil(q), value, field, "units")


#: (is cpu, quantity text) -> amount: every pod of a workload repeats the same few request strings
_AMOUNTS: dict[tuple[bool, str], int] = {}
_AMOUNTS_MAX = 4096


def resource_amount(name: str, value: object, field: str = "") -> int:
    """Amount of resource `name` in scheduler units: millicores for cpu, base units otherwise. Valid text is
    parsed once (invalid text is parsed, and refused with its field, every time)."""
    cpu = name == "cpu"
    if type(value) is str:
        got = _AMOUNTS.get((cpu, value))
        if got is not None:
            return got
    amount = cpu_millis(value, field) if cpu else base_units(value, field)
    if type(value) is str:
        if len(_AMOUNTS) >= _AMOUNTS_MAX:
            _AMOUNTS.clear()
        _AMOUNTS[(cpu, value)] = amount
    return amount


def format_amount(name: str, amount: int) -> str:
    """Human-readable amount, the way kubectl prints it (500m, 2, 512Mi)."""
    if name == "cpu":
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)

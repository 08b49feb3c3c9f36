"""Kubernetes resource.Quantity parsing into the integer units the scheduler computes with.

CPU is kept in millicores and every other resource in its base unit (bytes, count), like
kube-scheduler's `framework.Resource`, so comparisons are exact integer arithmetic.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from .errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")


def parse_quantity(value: object, field: str = "") -> Decimal:
    """Parse a quantity string (or number) exactly; raises InputError on anything Kubernetes would reject."""
    if isinstance(value, bool):
        raise InputError(f"quantities must match the regular expression, got {value!r}", field=field, usage=False)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"invalid quantity {value!r}", field=field, usage=False)
        return Decimal(str(value))
    if not isinstance(value, str):
        raise InputError(f"invalid quantity {value!r}: expected a string or number", field=field, usage=False)
    m = _RE.match(value.strip())
    if not m:
        raise InputError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}", field=field, usage=False)
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as exc:  # pragma: no cover - regex already guards this
        raise InputError(f"invalid quantity {value!r}", field=field, usage=False) from exc
    if m.group(2):
        return number * (Decimal(10) ** int(m.group(2)[1:]))
    suffix = m.group(3) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _ceil(d: Decimal) -> int:
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


def cpu_millis(value: object, field: str = "") -> int:
    """CPU quantity in millicores, rounded up like Quantity.MilliValue()."""
    q = parse_quantity(value, field)
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {value!r}", field=field, usage=False)
    return _ceil(q * 1000)


def base_units(value: object, field: str = "") -> int:
    """Quantity in base units (bytes, count), rounded up like Quantity.Value()."""
    q = parse_quantity(value, field)
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {value!r}", field=field, usage=False)
    return _ceil(q)


def resource_amount(name: str, value: object, field: str = "") -> int:
    """Amount of resource `name` in scheduler units: millicores for cpu, base units otherwise."""
    return cpu_millis(value, field) if name == "cpu" else base_units(value, field)


def format_amount(name: str, amount: int) -> str:
    """Human-readable amount, the way kubectl prints it (500m, 2, 512Mi)."""
    if name == "cpu":
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)

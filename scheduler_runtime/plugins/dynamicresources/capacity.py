"""Consumable capacity (DRAConsumableCapacity): how much of a device's `capacity` a request consumes and whether
it still fits next to what other claims consume.

Upstream: kube-scheduler v1.37 allocates with k8s.io/dynamic-resource-allocation v0.37
structured/internal/incubating/consumable_capacity.go (the allocator it selects once this beta gate is on).
A request names amounts in `capacity.requests`; the device's `requestPolicy` rounds each up (`validRange` to
min + n*step, `validValues` to the first value not below it); a capacity the request does not name consumes the
policy's `default`, or else the whole value. A `validRange` with a step is rounded and checked on integers
(resource.Quantity.Value(): fractions round up) unless DRAFractionalCapacityRange (beta, off by default in 1.37)
is on and min, max and step all have an exact milli value (step at least 1m): then on milli values, as kube does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from ...errors import InputError
from ...quantity import parse_quantity

_MAX_INT64 = 2**63 - 1
_NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))

#: consumed amounts by capacity name, each with the quantity string it is written as
Consumed = dict[str, tuple[Decimal, str]]


class CapacityError(Exception):
    """The request cannot be computed at all (kube aborts the allocation, it does not try another device)."""


def quantity(raw: object) -> tuple[Decimal, str]:
    """A quantity as (value, the string it is written as); an unparseable one counts as zero."""
    return _quantity_text(str(raw if raw is not None else "0").strip())


@functools.lru_cache(maxsize=4096)
def _quantity_text(text: str) -> tuple[Decimal, str]:
    """Parsed once per distinct text: the allocator checks every device's capacities on every node and cycle
    while consumable capacity is on, and slices repeat the same few strings (Decimal results are immutable)."""
    try:
        return parse_quantity(text), text
    except InputError:
        return Decimal(0), "0"


def _ceil_int(d: Decimal) -> int:
    """resource.Quantity.Value(): rounded up to an integer."""
    return int(d.to_integral_value(rounding=ROUND_CEILING))


def format_like(value: int, like: str) -> str:
    """resource.NewQuantity(value, format-of-`like`).String(): the canonical form (binary suffixes when `like` has
    one, else decimal SI)."""
    if value == 0:
        return "0"
    table = _BINARY if like.rstrip().endswith("i") else _DECIMAL
    for suffix, factor in table:
        if value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)


def _go_rem(a: int, b: int) -> int:
    """Go's `%` (truncated toward zero)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _wrap64(v: int) -> int:
    """Go's int64 arithmetic wrapping around."""
    return (v + 2**63) % 2**64 - 2**63


def _milli(d: Decimal) -> int | None:
    """kube's safeMilliValue: the value in thousandths when that is exact and fits an int64, else None."""
    m = d * 1000
    if m != m.to_integral_value() or not -(2**63) <= m <= _MAX_INT64:
        return None
    return int(m)


def _use_milli(vr: Mapping[str, Any], fractional: bool) -> bool:
    """kube's useMilli: with DRAFractionalCapacityRange on, milli arithmetic whenever min, max and step (those
    set) have exact milli values and the step is at least 1m."""
    if not fractional:
        return False
    for key in ("min", "max", "step"):
        if vr.get(key) is None:
            continue
        m = _milli(quantity(vr[key])[0])
        if m is None or (key == "step" and m < 1):
            return False
    return True


def _round_up_milli(requested: tuple[Decimal, str], lo: tuple[Decimal, str], step: tuple[Decimal, str]
                    ) -> tuple[Decimal, str]:
    """roundUpRange's milli path: min + n*step in thousandths, n rounded up; a whole result is written like the
    step (NewQuantity), a fractional one in milli units (NewMilliQuantity)."""
    req_m = _milli(requested[0])
    if req_m is None:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: request {requested[1]} is not a representable milli value")
    step_m, min_m = _milli(step[0]) or 1, _milli(lo[0]) or 0
    added = req_m - min_m
    n = abs(added) // step_m * (1 if added >= 0 else -1)
    if _go_rem(added, step_m):
        n += 1
    limit = _wrap64(_MAX_INT64 - min_m)
    if n > abs(limit) // step_m * (1 if limit >= 0 else -1):  # Go's division truncates toward zero
        raise CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {requested[1]} up to the next step passes the "
                            f"milli-value range")
    value_m = min_m + step_m * n
    if value_m % 1000 == 0:
        return Decimal(value_m // 1000), format_like(value_m // 1000, step[1])
    return Decimal(value_m) / 1000, f"{value_m}m"


def _round_up_range(requested: tuple[Decimal, str], vr: Mapping[str, Any], fractional: bool = False
                    ) -> tuple[Decimal, str]:
    lo = quantity(vr.get("min"))
    if requested[0] < lo[0]:
        return lo
    if vr.get("step") is None:
        return requested
    if _use_milli(vr, fractional):
        return _round_up_milli(requested, lo, quantity(vr.get("step")))
    if requested[0] > _MAX_INT64:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: request {requested[1]} exceeds MaxInt64")
    step = quantity(vr.get("step"))
    step_i, min_i = _ceil_int(step[0]), _ceil_int(lo[0])
    if step_i <= 0:
        return requested
    added = _ceil_int(requested[0]) - min_i
    n = abs(added) // step_i * (1 if added >= 0 else -1)
    if _go_rem(added, step_i):
        n += 1
    if min_i >= 0 and n > (_MAX_INT64 - min_i) // step_i:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {requested[1]} up to the next step passes "
                            f"MaxInt64")
    value = min_i + step_i * n
    return Decimal(value), format_like(value, step[1])


def consumed_one(requested: tuple[Decimal, str] | None, cap: Mapping[str, Any], fractional: bool = False
                 ) -> tuple[Decimal, str]:
    """calculateConsumedCapacity: what one request consumes of one capacity entry (`fractional`: the
    DRAFractionalCapacityRange gate)."""
    policy = cap.get("requestPolicy")
    if requested is None:
        if policy and policy.get("default") is not None:
            return quantity(policy["default"])
        return quantity(cap.get("value"))
    if not policy:
        return requested
    vr = policy.get("validRange")
    if vr and vr.get("min") is not None:
        return _round_up_range(requested, vr, fractional)
    values = policy.get("validValues")
    if values is not None:
        for v in values:
            q = quantity(v)
            if requested[0] <= q[0]:
                return q
    return requested


def _violates(consumed: Decimal, policy: Mapping[str, Any] | None, fractional: bool = False) -> bool:
    if not policy:
        return False
    if policy.get("default") is not None and consumed == quantity(policy["default"])[0]:
        return False
    vr = policy.get("validRange")
    if vr is not None:
        if vr.get("max") is not None and consumed > quantity(vr["max"])[0]:
            return True
        if vr.get("step") is not None:
            if _use_milli(vr, fractional):  # violateValidRange's milli path
                got = _milli(consumed)
                if got is None:
                    return True
                step, lo, value = _milli(quantity(vr["step"])[0]) or 1, _milli(quantity(vr.get("min"))[0]) or 0, got
            else:
                step = _ceil_int(quantity(vr["step"])[0])
                lo = _ceil_int(quantity(vr.get("min"))[0])
                value = _ceil_int(consumed)
            if step and _go_rem(value - lo, step):
                return True
        return False
    values = policy.get("validValues") or []
    if values:
        return all(consumed != quantity(v)[0] for v in values)
    return False


def request_amounts(capacity: Mapping[str, Any] | None) -> dict[str, tuple[Decimal, str]] | None:
    """A request's `capacity.requests`, parsed (None when it names none)."""
    reqs = (capacity or {}).get("requests")
    if reqs is None:
        return None
    return {str(k): quantity(v) for k, v in reqs.items()}


def consumed_by(requests: Mapping[str, tuple[Decimal, str]] | None, device_capacity: Mapping[str, Any],
                fractional: bool = False) -> Consumed:
    """GetConsumedCapacityFromRequest: the amount of every capacity of the device the request consumes. Raises
    CapacityError naming the capacity."""
    out: Consumed = {}
    for name, cap in device_capacity.items():
        try:
            out[name] = consumed_one((requests or {}).get(name), cap or {}, fractional)
        except CapacityError as exc:
            raise CapacityError(f"capacity {json.dumps(name)}: {exc}") from None
    return out


def fits(requests: Mapping[str, tuple[Decimal, str]] | None, device_capacity: Mapping[str, Any] | None,
         allocated: Mapping[str, Decimal] | None, allocating: Mapping[str, Decimal] | None,
         fractional: bool = False) -> bool:
    """CmpRequestOverCapacity: the device has every capacity the request names, each consumed amount obeys the
    request policy, and with what allocated and in-flight claims consume it stays within the capacity's value.
    Raises CapacityError when an amount cannot be computed or is negative."""
    caps = device_capacity or {}
    if requests and any(name not in caps for name in requests):
        return False
    consumed = consumed_by(requests, caps, fractional)
    for name, (value, _text) in consumed.items():
        if value < 0:
            raise CapacityError(f"capacity {json.dumps(name)}: capacity value is negative")
    for name, cap in caps.items():
        value = consumed[name][0]
        if _violates(value, (cap or {}).get("requestPolicy"), fractional):
            return False
        total = value + (allocated or {}).get(name, Decimal(0)) + (allocating or {}).get(name, Decimal(0))
        if total > quantity((cap or {}).get("value"))[0]:
            return False
    return True


def add_into(target: dict[str, Decimal], consumed: Mapping[str, Decimal], sign: int = 1) -> None:
    for name, value in consumed.items():
        if sign > 0:
            target[name] = target.get(name, Decimal(0)) + value
        elif name in target:
            target[name] -= value

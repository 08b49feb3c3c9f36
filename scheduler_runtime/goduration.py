"""Go's time.ParseDuration, the one duration parser of ksched (flags, config files, leader election), and
metav1.Duration's printed form (`format_seconds`).

Kube's rules: a duration is a string of signed decimal numbers, each with a unit (`300ms`, `-1.5h`,
`2h45m`); `0` is the only number allowed without a unit; the value must fit an int64 of nanoseconds
(about 292 years). In a configuration file a duration field is a metav1.Duration, which decodes only
from a JSON/YAML *string*: a bare number (`leaseDuration: 15`) is a decoding error in kube-scheduler,
never seconds or nanoseconds.
"""

from __future__ import annotations

NS_PER_SECOND = 1_000_000_000
_UNITS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000, "s": NS_PER_SECOND,
          "m": 60 * NS_PER_SECOND, "h": 3600 * NS_PER_SECOND}
_MAX = 1 << 63  # |min int64|; a positive result must stay below it
_DIGITS = "0123456789"


def go_quote(s: str) -> str:
    """Go's %q of a string (the escapes its error messages show)."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return '"' + "".join(out) + '"'


def parse_ns(text: str) -> int:
    """Nanoseconds of a Go duration string; ValueError carries Go's message (`time: invalid duration "x"`)."""
    if not isinstance(text, str):
        raise ValueError(f"time: invalid duration {go_quote(str(text))}")
    invalid = ValueError(f"time: invalid duration {go_quote(text)}")
    s = text
    neg = False
    if s[:1] in ("-", "+"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        i = 0
        while i < len(s) and s[i] in _DIGITS:
            i += 1
        whole, s = s[:i], s[i:]
        frac = ""
        if s[:1] == ".":
            s = s[1:]
            i = 0
            while i < len(s) and s[i] in _DIGITS:
                i += 1
            frac, s = s[:i], s[i:]
            if not whole and not frac:
                raise invalid
        elif not whole:
            raise invalid
        i = 0
        while i < len(s) and s[i] != "." and s[i] not in _DIGITS:
            i += 1
        if i == 0:
            raise ValueError(f"time: missing unit in duration {go_quote(text)}")
        unit_name, s = s[:i], s[i:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise ValueError(f"time: unknown unit {go_quote(unit_name)} in duration {go_quote(text)}")
        whole = whole.lstrip("0")
        if len(whole) > 19:
            raise invalid
        v = int(whole or "0")
        if v > _MAX // unit:
            raise invalid
        v *= unit
        frac = frac[:19]  # Go drops digits beyond int64 precision too
        if frac.strip("0"):
            v += int(frac) * unit // 10 ** len(frac)
        if v > _MAX:
            raise invalid
        total += v
        if total > _MAX:
            raise invalid
    if neg:
        return -total
    if total > _MAX - 1:
        raise invalid
    return total


def parse_seconds(text: str) -> float:
    """Seconds of a Go duration string (see `parse_ns`)."""
    return parse_ns(text) / NS_PER_SECOND


def decode_field(value: object) -> float:
    """A metav1.Duration field of a decoded YAML/JSON file, in seconds: only a string is a duration."""
    if isinstance(value, str):
        return parse_seconds(value)
    kind = {bool: "bool", int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "value")
    raise ValueError(f"a duration is a string with a unit such as \"15s\" "
                     f"(json: cannot unmarshal {kind} into Go value of type string)")


def format_ns(ns: int) -> str:
    """Go's time.Duration.String(): "10m0s", "1h0m0.5s", and below a second the largest unit that keeps the
    number at least 1 ("500ms", "1.5\u00b5s", "1ns"), so a printed duration parses back to the same value."""
    if ns == 0:
        return "0s"
    sign, u = ("-", -ns) if ns < 0 else ("", ns)
    if u < NS_PER_SECOND:
        for unit, size in (("ns", 1), ("\u00b5s", 1_000), ("ms", 1_000_000)):
            if u < size * 1_000:
                return sign + _with_fraction(u, size) + unit
    secs = _with_fraction(u % (60 * NS_PER_SECOND), NS_PER_SECOND) + "s"
    minutes = u // (60 * NS_PER_SECOND)
    if minutes == 0:
        return sign + secs
    hours, minutes = divmod(minutes, 60)
    return sign + (f"{hours}h" if hours else "") + f"{minutes}m" + secs


def _with_fraction(value: int, size: int) -> str:
    """value/size in decimal, without trailing zeros (Go's fmtFrac and fmtInt)."""
    whole, frac = divmod(value, size)
    if not frac:
        return str(whole)
    digits = len(str(size)) - 1
    return f"{whole}." + f"{frac:0{digits}d}".rstrip("0")


def format_seconds(seconds: float) -> str:
    """metav1.Duration's printed form of a number of seconds (Go's Duration.String, see `format_ns`)."""
    return format_ns(round(seconds * NS_PER_SECOND))


__all__ = ["NS_PER_SECOND", "decode_field", "format_ns", "format_seconds", "parse_ns", "parse_seconds"]

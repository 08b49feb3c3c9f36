"""The Kubernetes CEL libraries kube-scheduler's DRA environment enables, as cel-expr-python functions.

Upstream: kube-scheduler v1.36 compiles selectors in k8s.io/apiserver v0.36 pkg/cel/environment/base.go (the
StoredExpressions environment, via k8s.io/dynamic-resource-allocation/cel/compile.go); the libraries are
pkg/cel/library/ip.go, cidr.go, urls.go, regex.go and lists.go.
The cel-go extensions the base environment enables (strings v2, sets, lists, two-variable comprehensions,
bindings, optional types) come with cel-cpp and are switched on in cel.py.

cel-expr-python cannot hold opaque values (an abstract type fails at run time), so each Kubernetes type is a
one-entry map whose key names the type and whose value is the canonical text, e.g. `{"__k8s_ip__": "::1"}`.
Each type is declared with a distinct map type so the checker still refuses `ip(...)` where a CIDR is expected;
equality of two values is equality of their canonical text, as kube's `Equal` methods compare.

cel-cpp registers one implementation per function name and argument kinds (all these values are maps), so
overloads sharing a name and kinds (IP and CIDR `family()`...) are declared separately and implemented once,
dispatching on the value's key (`_declare`).
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

try:
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised only when the dependency is absent
    _re2 = None

#: the first element of the two-element list that represents a Semver (cel.py)
SEMVER_KEY = "__k8s_semver__"
#: the value of the one entry of an IP / CIDR / URL map (its key is the canonical text)
IP_MARK, CIDR_MARK, URL_MARK = 1, 2, 3.0
_INT64 = (-(2**63), 2**63 - 1)


# ----------------------------------------------------------------------------------------- equality
def cel_equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: numbers compare by value across int/uint/double, bool is not a number,
    lists and maps compare element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            match = [bv for bk, bv in b.items() if cel_equal(k, bk)]
            if not match or not cel_equal(v, match[0]):
                return False
        return True
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------------------------------- IP
def _go_ip_error(raw: str, why: str) -> ValueError:
    return ValueError(f"IP Address {_goq(raw)} parse error during conversion from string: ParseAddr({_goq(raw)}): "
                      f"{why}")


def _goq(s: str) -> str:
    """Go's %q of a string (ASCII printable cases)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_ip(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as net/netip.ParseAddr accepts it, without zone and not IPv4-mapped (kube's parseIPAddr)."""
    if raw == "":
        raise _go_ip_error(raw, "unable to parse IP")
    if "%" in raw:
        head = raw.split("%", 1)[0]
        try:
            ipaddress.IPv6Address(head)
        except ValueError:
            raise _go_ip_error(raw, "unable to parse IP") from None
        raise ValueError(f"IP address {_goq(raw)} with zone value is not allowed")
    if ":" not in raw and "." in raw:
        why = _ipv4_error(raw)
        if why:
            raise _go_ip_error(raw, why)
    try:
        addr = ipaddress.ip_address(raw)
    except ValueError:
        raise _go_ip_error(raw, _ipv6_error(raw) if ":" in raw else "unable to parse IP") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_goq(raw)} is not allowed")
    return addr


def _ipv4_error(raw: str) -> str:
    """net/netip's reason for refusing a dotted IPv4 address, "" if it is valid."""
    fields = 0
    val, digits = 0, 0
    for i, ch in enumerate(raw):
        if ch.isdigit() and ch.isascii():
            if digits == 1 and val == 0:
                return "IPv4 field has octet with leading zero"
            val = val * 10 + int(ch)
            digits += 1
            if val > 255:
                return "IPv4 field has value >255"
        elif ch == ".":
            if i == 0 or i == len(raw) - 1 or raw[i - 1] == ".":
                return "IPv4 field must have at least one digit"
            if fields == 3:
                return "IPv4 address too long"
            fields += 1
            val, digits = 0, 0
        else:
            return "unexpected character"
    if fields < 3:
        return "IPv4 address too short"
    return ""


def _ipv6_error(raw: str) -> str:
    """net/netip's reason for refusing an IPv6 address (the common cases)."""
    if ":::" in raw:
        return f'each colon-separated field must have at least one digit (at {_goq(raw[raw.index(":::") + 2:])})'
    if raw.count("::") > 1:
        return "multiple :: in address"
    if raw.count(":") > 7 + ("::" in raw):
        return "trailing garbage after address"
    return "unable to parse IP"


def _ip_text(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return addr.compressed


def ip_value(raw: str) -> dict[str, str]:
    return {_ip_text(parse_ip(raw)): IP_MARK}


def _ip(v: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if _kind(v) == "ip":
        return ipaddress.ip_address(_text(v))
    raise ValueError("no such overload")


def _is_ip(raw: str) -> bool:
    try:
        parse_ip(raw)
    except ValueError:
        return False
    return True


def _ip_is_canonical(raw: str) -> bool:
    return _ip_text(parse_ip(raw)) == raw


def _is_multicast(a: Any) -> bool:
    return a.is_multicast


def _link_local_multicast(a: Any) -> bool:
    if a.version == 4:
        return a in ipaddress.ip_network("224.0.0.0/24")
    return a.packed[0] == 0xFF and a.packed[1] & 0x0F == 0x02


def _link_local_unicast(a: Any) -> bool:
    if a.version == 4:
        return a in ipaddress.ip_network("169.254.0.0/16")
    return a in ipaddress.ip_network("fe80::/10")


def _global_unicast(a: Any) -> bool:
    # Go's definition: private and ULA addresses count as global unicast
    if a.version == 4 and a in (ipaddress.IPv4Address("0.0.0.0"), ipaddress.IPv4Address("255.255.255.255")):
        return False
    return not (a.is_unspecified or a.is_loopback or _is_multicast(a) or _link_local_unicast(a))


# ----------------------------------------------------------------------------------------- CIDR
def parse_cidr(raw: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """(address, bits) as net/netip.ParsePrefix accepts them (the address is kept unmasked)."""
    def bad(why: str) -> ValueError:
        return ValueError(f"network address parse error during conversion from string: netip.ParsePrefix("
                          f"{_goq(raw)}): {why}")
    if "/" not in raw:
        raise bad("no '/'")
    head, bits = raw.rsplit("/", 1)
    if "%" in head:
        raise bad("IPv6 zones cannot be present in a prefix")
    try:
        addr = ipaddress.ip_address(head) if head else None
    except ValueError:
        addr = None
    if addr is None or (":" not in head and any(len(p) > 1 and p[0] == "0" for p in head.split("."))):
        raise bad(f"ParseAddr({_goq(head)}): unable to parse IP")
    if not bits.isdigit() or (len(bits) > 1 and bits[0] == "0") or int(bits) > addr.max_prefixlen:
        raise bad(f"bad bits after slash: {_goq(bits)}")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_goq(raw)} is not allowed")
    return addr, int(bits)


def cidr_value(raw: str) -> dict[str, str]:
    try:
        addr, bits = parse_cidr(raw)
    except ValueError as exc:
        raise ValueError(f"network address parse error during conversion from string: {exc}") from None
    return {f"{_ip_text(addr)}/{bits}": CIDR_MARK}


def _cidr(v: Any) -> tuple[Any, int]:
    if _kind(v) == "cidr":
        head, bits = _text(v).rsplit("/", 1)
        return ipaddress.ip_address(head), int(bits)
    raise ValueError("no such overload")


def _network(v: Any) -> Any:
    addr, bits = _cidr(v)
    return ipaddress.ip_network(f"{addr}/{bits}", strict=False)


def _is_cidr(raw: str) -> bool:
    try:
        parse_cidr(raw)
    except ValueError:
        return False
    return True


def _contains_ip(c: Any, other: Any) -> bool:
    ip = _ip(ip_value(other) if isinstance(other, str) else other)
    net = _network(c)
    return ip.version == net.version and ip in net


def _contains_cidr(c: Any, other: Any) -> bool:
    inner = _network(cidr_value(other) if isinstance(other, str) else other)
    outer = _network(c)
    return outer.version == inner.version and outer.prefixlen <= inner.prefixlen and inner.subnet_of(outer)


def _masked(c: Any) -> dict[str, str]:
    net = _network(c)
    return {f"{_ip_text(net.network_address)}/{net.prefixlen}": CIDR_MARK}


# ----------------------------------------------------------------------------------------- URL
_SCHEME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


def _split_scheme(raw: str) -> tuple[str, str]:
    for i, ch in enumerate(raw):
        if ch == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        if ch not in _SCHEME_CHARS or (i == 0 and not ch.isalpha()):
            return "", raw
    return "", raw


def parse_request_uri(raw: str) -> urllib.parse.SplitResult:
    """Go's url.ParseRequestURI: an absolute URI or an absolute path, no fragment split."""
    def bad(why: str) -> ValueError:
        return ValueError(f"parse {_goq(raw)}: {why}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise bad("net/url: invalid control character in URL")
    try:
        scheme, rest = _split_scheme(raw)
    except ValueError as exc:
        raise bad(str(exc)) from None
    if not scheme and not raw.startswith("/"):
        raise bad("invalid URI for request")
    if scheme and not rest.startswith("/") and rest:
        return urllib.parse.SplitResult(scheme.lower(), "", rest, "", "")
    u = urllib.parse.urlsplit(raw)
    host = u.netloc.rsplit("@", 1)[-1]
    colon = host.rfind(":")
    if colon >= 0 and not host.endswith("]"):
        port = host[colon:]
        if not host.startswith("[") and host.count(":") > 1 or not port[1:].isdigit() and port != ":":
            raise bad(f"invalid port {_goq(port)} after host")
    return u


def url_value(raw: str) -> dict[str, str]:
    try:
        parse_request_uri(raw)
    except ValueError as exc:
        raise ValueError(f"URL parse error during conversion from string: {exc}") from None
    return {raw: URL_MARK}


def _url(v: Any) -> urllib.parse.SplitResult:
    if _kind(v) == "url":
        return urllib.parse.urlsplit(_text(v))
    raise ValueError("no such overload")


def _is_url(raw: str) -> bool:
    try:
        parse_request_uri(raw)
    except ValueError:
        return False
    return True


def _hostport(u: urllib.parse.SplitResult) -> tuple[str, str]:
    host = u.netloc.rsplit("@", 1)[-1]
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[1:end], host[end + 1:]
        return name, rest[1:] if rest.startswith(":") else ""
    if ":" in host:
        name, port = host.rsplit(":", 1)
        return name, port
    return host, ""


def _escaped_path(u: urllib.parse.SplitResult) -> str:
    path = urllib.parse.unquote(u.path)
    escaped = urllib.parse.quote(path, safe="/!$&'()*+,;=:@-._~")
    # Go keeps the original escaping when it is a valid encoding of the path (RawPath)
    return u.path if urllib.parse.unquote(u.path) == path and _valid_encoded(u.path) else escaped


def _valid_encoded(p: str) -> bool:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%")
    return all(c in allowed for c in p)


def _query(u: urllib.parse.SplitResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in u.query.replace(";", "&").split("&") if u.query else []:
        if not part or ";" in part:
            continue
        k, _, v = part.partition("=")
        try:
            key = urllib.parse.unquote_plus(k, errors="strict")
            val = urllib.parse.unquote_plus(v, errors="strict")
        except UnicodeDecodeError:
            continue
        out.setdefault(key, []).append(val)
    return out


# ----------------------------------------------------------------------------------------- regex
#: RE2's error codes in Go regexp/syntax's words (Go's regexp is the RE2 syntax kube evaluates)
_RE2_TO_GO = {"missing ]": "missing closing ]", "missing )": "missing closing )",
              "no argument for repetition operator": "missing argument to repetition operator",
              "bad repetition operator": "invalid nested repetition operator",
              "invalid repetition size": "invalid repeat count", "invalid perl operator":
              "invalid or unsupported Perl syntax", "invalid named capture group": "invalid named capture"}


def regex_error(pattern: str) -> str | None:
    """Go's `error parsing regexp: <code>: `<text>`` for a pattern RE2 refuses, None when it compiles."""
    try:
        _compile_re2(pattern)
    except ValueError as exc:
        return str(exc)
    return None


def _compile_re2(pattern: str) -> Any:
    if _re2 is None:
        raise ValueError("the Python package google-re2 is not installed (pip install google-re2)")
    options = _re2.Options()
    options.log_errors = False  # the error is the caller's to report, not re2's to print on stderr
    try:
        return _re2.compile(pattern, options)
    except Exception as exc:  # noqa: BLE001 - re2's error type varies between versions
        text = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        code, _, arg = text.partition(": ")
        if code.startswith("trailing \\"):
            code, arg = "trailing backslash at end of expression", ""
        raise ValueError(f"error parsing regexp: {_RE2_TO_GO.get(code, code)}: `{arg}`") from None


def _regex(pattern: str) -> Any:
    try:
        return _compile_re2(pattern)
    except ValueError as exc:
        raise ValueError(f"Illegal regex: {exc}") from None


def _find(s: str, pattern: str) -> str:
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    """Go's Regexp.FindAllString: successive non-overlapping matches, an empty match right after the previous
    match is skipped; n < 0 means all, n == 0 none."""
    rx = _regex(pattern)
    out: list[str] = []
    pos, prev_end = 0, -1
    while pos <= len(s) and (n < 0 or len(out) < n):
        m = rx.search(s, pos)
        if m is None:
            break
        start, end = m.span()
        if end == start and start == prev_end:
            pos = start + 1
            continue
        out.append(m.group(0))
        prev_end = end
        pos = end if end > start else end + 1
    return out


# ----------------------------------------------------------------------------------------- lists
def _cmp_values(a: Any, b: Any) -> int:
    if isinstance(a, bool) != isinstance(b, bool):
        raise ValueError("no such overload")
    return (a > b) - (a < b)


def _is_sorted(xs: list[Any]) -> bool:
    return all(_cmp_values(xs[i], xs[i + 1]) <= 0 for i in range(len(xs) - 1))


def _sum(xs: list[Any]) -> Any:
    """kube's sum: int64 overflow is an error (a uint list shares the check: Python does not tell them apart)."""
    if not xs:
        return 0
    if isinstance(xs[0], timedelta):
        return sum(xs, timedelta())
    acc = xs[0]
    for x in xs[1:]:
        acc = acc + x
        if isinstance(acc, int) and not _INT64[0] <= acc <= _INT64[1]:
            raise ValueError("integer overflow")
    return acc


def _extreme(name: str, prefer: int) -> Callable[[list[Any]], Any]:
    def pick(xs: list[Any]) -> Any:
        if not xs:
            raise ValueError(f"{name} called on empty list")
        best = xs[0]
        for x in xs[1:]:
            if _cmp_values(best, x) == prefer:
                best = x
        return best
    return pick


def _index_of(xs: list[Any], item: Any) -> int:
    return next((i for i, x in enumerate(xs) if cel_equal(x, item)), -1)


def _last_index_of(xs: list[Any], item: Any) -> int:
    return next((i for i in range(len(xs) - 1, -1, -1) if cel_equal(xs[i], item)), -1)


def _includes(target: Any, item: Any) -> bool:
    """kube's `<dyn>.includes(<dyn>)`: an element of a list equals the item, or any other value equals it, so one
    selector serves a scalar attribute and its list-typed successor (a Semver is a list only inside ksched)."""
    if isinstance(target, list) and not is_semver(target):
        return any(cel_equal(x, item) for x in target)
    return cel_equal(target, item)


def is_semver(v: Any) -> bool:
    """Whether a value is cel.py's representation of a Semver."""
    return isinstance(v, list) and len(v) == 2 and v[0] == SEMVER_KEY


# ----------------------------------------------------------------------------------------- declarations
def _dispatch(impls: list[tuple[Callable[..., bool], Callable[..., Any]]]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        for accepts, impl in impls:
            if accepts(*args):
                return impl(*args)
        raise ValueError("no such overload")
    return run


def _kind(v: Any) -> str:
    """Which Kubernetes value a one-entry map is ("" for any other value)."""
    if not isinstance(v, dict) or len(v) != 1:
        return ""
    mark = next(iter(v.values()))
    if isinstance(mark, float):
        return "url" if mark == URL_MARK else ""
    if isinstance(mark, bool) or not isinstance(mark, int):
        return ""
    return {IP_MARK: "ip", CIDR_MARK: "cidr"}.get(mark, "")


def _text(v: dict[str, Any]) -> str:
    return str(next(iter(v)))


def _is(kind: str) -> Callable[..., bool]:
    return lambda v, *rest: _kind(v) == kind


def _other_is(kind: str) -> Callable[..., bool]:
    return lambda v, o: _kind(v) == "cidr" and _kind(o) == kind


def _other_str(v: Any, o: Any) -> bool:
    return _kind(v) == "cidr" and isinstance(o, str)


def declarations(cel: Any) -> tuple[list[Any], list[Any]]:
    """(function declarations, overloads of existing functions for a CelExtension) of the Kubernetes IP, CIDR,
    URL, regex and lists libraries. Overloads sharing a name and argument kinds get one dispatching impl."""
    T = cel.Type
    IP, CIDR, URL = T.Map(T.STRING, T.INT), T.Map(T.STRING, T.UINT), T.Map(T.STRING, T.DOUBLE)
    S, B, N = T.STRING, T.BOOL, T.INT

    def ov(oid: str, ret: Any, params: list[Any], member: bool, impl: Any = None) -> Any:
        if impl is None:
            return cel.Overload(oid, ret, params, is_member=member)
        return cel.Overload(oid, ret, params, is_member=member, impl=impl)

    F = cel.FunctionDecl
    fam = _dispatch([(_is("ip"), lambda v: _ip(v).version), (_is("cidr"), lambda v: _cidr(v)[0].version)])
    contains_ip = _dispatch([(_other_is("ip"), _contains_ip), (_other_str, _contains_ip)])
    contains_cidr = _dispatch([(_other_is("cidr"), _contains_cidr), (_other_str, _contains_cidr)])
    funcs = [
        F("ip", [ov("string_to_ip", IP, [S], False, ip_value),
                 ov("cidr_ip", IP, [CIDR], True, lambda v: {_ip_text(_cidr(v)[0]): IP_MARK})]),
        F("isIP", [ov("is_ip", B, [S], False, _is_ip)]),
        F("ip.isCanonical", [ov("ip_is_canonical", B, [S], False, _ip_is_canonical)]),
        F("family", [ov("ip_family", N, [IP], True, fam), ov("cidr_family", N, [CIDR], True)]),
        F("isUnspecified", [ov("ip_is_unspecified", B, [IP], True, lambda v: _ip(v).is_unspecified)]),
        F("isLoopback", [ov("ip_is_loopback", B, [IP], True, lambda v: _ip(v).is_loopback)]),
        F("isLinkLocalMulticast", [ov("ip_is_link_local_multicast", B, [IP], True,
                                      lambda v: _link_local_multicast(_ip(v)))]),
        F("isLinkLocalUnicast", [ov("ip_is_link_local_unicast", B, [IP], True,
                                    lambda v: _link_local_unicast(_ip(v)))]),
        F("isGlobalUnicast", [ov("ip_is_global_unicast", B, [IP], True, lambda v: _global_unicast(_ip(v)))]),
        F("cidr", [ov("string_to_cidr", CIDR, [S], False, cidr_value)]),
        F("isCIDR", [ov("is_cidr", B, [S], False, _is_cidr)]),
        F("containsIP", [ov("cidr_contains_ip_string", B, [CIDR, S], True, contains_ip),
                         ov("cidr_contains_ip_ip", B, [CIDR, IP], True, contains_ip)]),
        F("containsCIDR", [ov("cidr_contains_cidr_string", B, [CIDR, S], True, contains_cidr),
                           ov("cidr_contains_cidr", B, [CIDR, CIDR], True, contains_cidr)]),
        F("prefixLength", [ov("cidr_prefix_length", N, [CIDR], True, lambda v: _cidr(v)[1])]),
        F("masked", [ov("cidr_masked", CIDR, [CIDR], True, _masked)]),
        F("url", [ov("string_to_url", URL, [S], False, url_value)]),
        F("isURL", [ov("is_url_string", B, [S], False, _is_url)]),
        F("getScheme", [ov("url_get_scheme", S, [URL], True, lambda v: _url(v).scheme)]),
        F("getHost", [ov("url_get_host", S, [URL], True, lambda v: _url(v).netloc.rsplit("@", 1)[-1])]),
        F("getHostname", [ov("url_get_hostname", S, [URL], True, lambda v: _hostport(_url(v))[0])]),
        F("getPort", [ov("url_get_port", S, [URL], True, lambda v: _hostport(_url(v))[1])]),
        F("getEscapedPath", [ov("url_get_escaped_path", S, [URL], True, lambda v: _escaped_path(_url(v)))]),
        F("getQuery", [ov("url_get_query", T.Map(S, T.List(S)), [URL], True, lambda v: _query(_url(v)))]),
        F("find", [ov("string_find_string", S, [S, S], True, _find)]),
        F("findAll", [ov("string_find_all_string", T.List(S), [S, S], True, _find_all),
                      ov("string_find_all_string_int", T.List(S), [S, S, N], True, _find_all)]),
    ]
    comparable = [("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("bool", T.BOOL),
                  ("duration", T.DURATION), ("timestamp", T.TIMESTAMP), ("string", T.STRING), ("bytes", T.BYTES)]
    summable = [("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("duration", T.DURATION)]

    def templated(name: str, pattern: str, types: list[tuple[str, Any]], ret: Callable[[Any], Any],
                  impl: Callable[..., Any]) -> Any:
        # cel-cpp converts an implementation's result to its overload's declared type, and one implementation
        # serves every element type: it sits on an overload no call type-checks against (list(null_type))
        return F(name, [ov(f"{name}_k8s_list_impl", T.DYN, [T.List(T.NULL)], True, impl)]
                 + [ov(pattern.format(t=n), ret(t), [T.List(t)], True) for n, t in types])

    funcs += [
        templated("isSorted", "list_{t}_is_sorted_bool", comparable, lambda t: B, _is_sorted),
        templated("sum", "list_{t}_sum_{t}", summable, lambda t: t, _sum_typed),
        templated("max", "list_{t}_max_{t}", comparable, lambda t: t, _extreme("max", -1)),
        templated("min", "list_{t}_min_{t}", comparable, lambda t: t, _extreme("min", 1)),
    ]
    # list.indexOf(x) / lastIndexOf(x): one overload on list(dyn) (cel-cpp declares no type parameters from
    # Python); strings' own indexOf on strings keeps its overloads
    extension = [
        F("indexOf", [ov("list_a_index_of_int", N, [T.List(T.DYN), T.DYN], True, _index_of)]),
        F("lastIndexOf", [ov("list_a_last_index_of_int", N, [T.List(T.DYN), T.DYN], True, _last_index_of)]),
        # kube 1.37's lists library v1 (and its DRA environment's own declaration): in the stored-expressions
        # environment kube-scheduler compiles selectors in, whatever DRAListTypeAttributes
        F("includes", [ov("list_includes_dyn_dyn", B, [T.DYN, T.DYN], True, _includes)]),
        # one overload for IP and CIDR: cel-cpp registers an implementation for each overload of an extension,
        # and both are maps at run time; a Quantity passed here type-checks but fails with `no such overload`
        F("string", [ov("k8s_net_to_string", S, [T.Map(S, T.DYN)], False, _dispatch([
            (_is("ip"), _text), (_is("cidr"), _text)]))]),
    ]
    return funcs, extension


#: the identifiers the libraries declare (`ip.isCanonical` is `ip` and `isCanonical` to a tokenizer); cel.py
#: compiles an expression naming none of them without the libraries (tests/unit/test_dra_cel.py covers each)
FUNCTION_NAMES = frozenset({
    "ip", "isIP", "isCanonical", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
    "isGlobalUnicast", "cidr", "isCIDR", "containsIP", "containsCIDR", "prefixLength", "masked", "url", "isURL",
    "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery", "find", "findAll", "isSorted",
    "sum", "max", "min", "indexOf", "lastIndexOf", "string", "includes"})


def _sum_typed(xs: list[Any]) -> Any:
    if xs and isinstance(xs[0], datetime):
        raise ValueError("no such overload")
    return _sum(xs)

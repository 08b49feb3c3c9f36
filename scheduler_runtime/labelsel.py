"""Label requirements parsed with apimachinery's rules (labels.NewRequirement, LabelSelectorAsSelector).

kube-scheduler does not trust that the API server validated a selector: it parses it again and treats a
parse error as an error of the pod (InterPodAffinity) or as a term that matches nothing (node affinity).
`SelectorError` carries the error text worded as Go prints it, so statuses built from it read the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

Matcher = Callable[[Mapping[str, str]], bool]

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME_FMT}$")
_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_VALUE_RE = re.compile(f"^{_VALUE_FMT}$")
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _DNS_LABEL + "(\\." + _DNS_LABEL + ")*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
              "and must start and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character")
_INT64 = re.compile(r"^[+-]?[0-9]+$")


class SelectorError(ValueError):
    """A selector kube-scheduler cannot parse; str() is Go's error text."""


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def label_key_errors(key: str) -> list[str]:
    """apimachinery's content.IsLabelKey (labels.Parse, selectors and config validation all use it): the
    problems, worded as kube words them."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 bytes")
            if not _SUBDOMAIN_RE.match(prefix):
                errs.append("prefix part " + _regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    else:
        return ["a valid label key " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _NAME_RE.match(name):
        errs.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _VALUE_RE.match(value):
        errs.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _strings(vals: Sequence[str]) -> str:
    return "[]string{" + ", ".join(_q(v) for v in vals) + "}" if vals else "[]string{}"


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


def _aggregate(errs: list[str]) -> str:
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"


_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def requirement(key: str, op: str, vals: Sequence[str], path: str = "") -> Matcher:
    """labels.NewRequirement + Requirement.Matches; `op` is In, NotIn, Exists, DoesNotExist, Gt, Lt or
    Equals (matchLabels). Raises SelectorError with Go's aggregate error text."""
    def p(child: str) -> str:
        return f"{path}.{child}" if path else child

    errs: list[str] = []
    kerr = label_key_errors(key)
    if kerr:
        errs.append(_invalid(p("key"), _q(key), "; ".join(kerr)))
    vpath = p("values")
    if op in ("In", "NotIn"):
        if not vals:
            errs.append(_invalid(vpath, _strings(vals), "for 'in', 'notin' operators, values set can't be empty"))
    elif op == "Equals":
        if len(vals) != 1:
            errs.append(_invalid(vpath, _strings(vals), "exact-match compatibility requires one single value"))
    elif op in ("Exists", "DoesNotExist"):
        if vals:
            errs.append(_invalid(vpath, _strings(vals), "values set must be empty for exists and does not exist"))
    elif op in ("Gt", "Lt"):
        if len(vals) != 1:
            errs.append(_invalid(vpath, _strings(vals), "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(vals):
            if not _INT64.match(v) or not -(2 ** 63) <= int(v) < 2 ** 63:
                errs.append(_invalid(f"{vpath}[{i}]", _q(v), "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(_q(o) for o in ("!", "!=", "=", "==", "exists", "gt", "in", "lt", "notin"))
        errs.append(f"{p('operator')}: Unsupported value: {_q(op)}: supported values: {supported}")
    for i, v in enumerate(vals):
        verr = label_value_errors(v)
        if verr:
            errs.append(_invalid(f"{vpath}[{i}][{key}]", _q(v), "; ".join(verr)))
    if errs:
        raise SelectorError(_aggregate(errs))
    return _matcher(key, op, frozenset(vals))


def _matcher(key: str, op: str, vals: frozenset[str]) -> Matcher:
    if op in ("In", "Equals"):
        return lambda labels: labels.get(key) in vals
    if op == "NotIn":
        return lambda labels: labels.get(key) not in vals
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    bound = int(next(iter(vals)))

    def cmp(labels: Mapping[str, str]) -> bool:
        v = labels.get(key)
        if v is None or not _INT64.match(v):
            return False
        n = int(v)
        return n > bound if op == "Gt" else n < bound
    return cmp


def selector_requirements(match_labels: Mapping[str, str], exprs: Sequence[Mapping[str, object]]) -> list[Matcher]:
    """metav1.LabelSelectorAsSelector: the first bad requirement raises SelectorError (Go stops there too)."""
    out = [requirement(str(k), "Equals", [str(v)]) for k, v in match_labels.items()]
    for e in exprs:
        op = str(e.get("operator") or "")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f"{_q(op)} is not a valid label selector operator")
        vals = e.get("values") or []
        out.append(requirement(str(e.get("key") or ""), op, [str(v) for v in vals]))  # type: ignore[union-attr]
    return out


def node_selector_requirements(exprs: Sequence[Mapping[str, object]], path: str) -> list[Matcher]:
    """nodeaffinity's nodeSelectorRequirementsAsSelector: every error of the term, aggregated."""
    errs: list[str] = []
    out: list[Matcher] = []
    for i, e in enumerate(exprs):
        op = str(e.get("operator") or "")
        p = f"{path}[{i}]"
        if op not in _OPS:
            errs.append(f"{p}.operator: Unsupported value: {_q(op)}: supported values: "
                        + ", ".join(_q(o) for o in _OPS))
            continue
        try:
            out.append(requirement(str(e.get("key") or ""), op,
                                   [str(v) for v in e.get("values") or []], p))  # type: ignore[union-attr]
        except SelectorError as exc:
            errs.append(str(exc))
    if errs:
        raise SelectorError(_aggregate(errs))
    return out


def node_field_requirements(exprs: Sequence[Mapping[str, object]], path: str) -> list[Matcher]:
    """nodeSelectorRequirementsAsFieldSelector: In/NotIn with exactly one value, over the node's fields."""
    errs: list[str] = []
    out: list[Matcher] = []
    for i, e in enumerate(exprs):
        op = str(e.get("operator") or "")
        vals = [str(v) for v in e.get("values") or []]  # type: ignore[union-attr]
        key = str(e.get("key") or "")
        p = f"{path}[{i}]"
        if op in ("In", "NotIn"):
            if len(vals) != 1:
                errs.append(_invalid(f"{p}.values", _strings(vals), "must have one element"))
                continue
            v = vals[0]
            if op == "In":
                out.append(lambda f, k=key, v=v: f.get(k, "") == v)
            else:
                out.append(lambda f, k=key, v=v: f.get(k, "") != v)
        else:
            errs.append(f"{p}.operator: Unsupported value: {_q(op)}: supported values: \"In\", \"NotIn\"")
    if errs:
        raise SelectorError(_aggregate(errs))
    return out

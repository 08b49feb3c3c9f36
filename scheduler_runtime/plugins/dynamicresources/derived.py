"""A request's derived attributes (DRADerivedAttributes, alpha in kube 1.37).

Upstream: kube-scheduler v1.37, staging/src/k8s.io/dynamic-resource-allocation/structured/internal/experimental/
allocator_experimental.go (lookupAttribute, derivedAttributesCache) and cel/compile.go (EvaluateDerivedAttribute).

An `exactly` request or a `firstAvailable` sub-request may list `derivedAttributes: [{name, expression}]`: CEL
expressions evaluated per candidate device. Only the claim's constraints see them: when a constraint covering
the request names one, its value on the device replaces the device attribute of that name (exact name, no
driver-domain shorthand); selectors never see them. kube evaluates an expression at most once per device
(whatever the attribute name or request using it); ksched keeps the value per device object for the allocator's
cycle. A compile or runtime error stops the allocation with kube's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: (driver, pool, device)
DeviceID = tuple[str, str, str]
#: (expression, attribute name, device, its ID) -> the value as a device attribute; raises DerivedAttributeError
Evaluate = Callable[[str, str, dict[str, Any], DeviceID], dict[str, Any]]


class DerivedAttributeError(Exception):
    """A derived attribute that does not compile or fails on a device; the message is kube's."""


class DerivedAttributes:
    """The derived attributes of one request or sub-request: name -> expression, and how to evaluate one."""

    __slots__ = ("exprs", "_evaluate")

    def __init__(self, exprs: Mapping[str, str], evaluate: Evaluate) -> None:
        self.exprs = dict(exprs)
        self._evaluate = evaluate

    def value(self, name: str, device: dict[str, Any], did: DeviceID) -> dict[str, Any]:
        """The attribute `name` (one of `exprs`) on the device."""
        return self._evaluate(self.exprs[name], name, device, did)


def declared(body: Mapping[str, Any]) -> dict[str, str] | None:
    """A request body's (`exactly` or a sub-request) derived attributes by name (a later entry of the same name
    wins, as in kube's map); None when it has none."""
    entries = body.get("derivedAttributes") or []
    if not entries:
        return None
    return {str(e.get("name") or ""): str(e.get("expression") or "") for e in entries if isinstance(e, Mapping)}

"""Claim constraints on one device attribute, and their set form for list-typed attributes.

Upstream: kube-scheduler v1.37, staging/src/k8s.io/dynamic-resource-allocation/structured/internal/experimental/
allocator_experimental.go and constraint.go: the allocator it runs when DRAListTypeAttributes (alpha) is on.

With that gate a constraint compares attribute values as sets: a list attribute (`ints`, `bools`, `strings`,
`versions`, non-empty) is the set of its elements, a scalar a set of one, and values of different types never
meet. `matchAttribute` holds while the devices' sets have a common element; the running intersection is kept
per device so that backtracking restores it. `distinctAttribute` holds while the sets are pairwise disjoint.
Without the gate the allocator compares scalars only (allocator.py's `_MatchAttribute`).

With DRADerivedAttributes a request's derived attribute of the constraint's name replaces the device's
attribute (derived.py): `attribute_of` looks up what a constraint compares, here and in allocator.py's scalar
constraints.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from .derived import DerivedAttributes

#: (value type, elements): an attribute as the experimental allocator compares it
AttributeSet = tuple[str, frozenset[Any]]
#: list fields, then scalar fields, in the order kube reads them
_LISTS = (("ints", "int"), ("bools", "bool"), ("strings", "string"), ("versions", "version"))
_SCALARS = ("int", "bool", "string", "version")


class RequestName(Protocol):
    """What a constraint needs to know about the request a device is picked for."""

    @property
    def name(self) -> str: ...

    @property
    def parent(self) -> str | None: ...

    @property
    def full_name(self) -> str: ...

    @property
    def derived(self) -> DerivedAttributes | None: ...


def raw_attribute(device: dict[str, Any], driver: str, name: str) -> Any:
    """A device's attribute by fully qualified name; `<driver>/<id>` also finds an unqualified `<id>`, because
    attribute names without a domain belong to the device's driver. None when it has no such attribute."""
    attrs = device.get("attributes") or {}
    raw = attrs.get(name)
    if raw is None and "/" in name:
        dom, ident = name.split("/", 1)
        if dom == driver:
            raw = attrs.get(ident)
    return raw


def attribute_of(req: RequestName, device: dict[str, Any], did: tuple[str, str, str], name: str) -> Any:
    """The attribute a constraint compares: the request's derived attribute of that name if it has one (raises
    DerivedAttributeError), else the device's own (`raw_attribute`)."""
    derived = req.derived
    if derived is not None and name in derived.exprs:
        return derived.value(name, device, did)
    return raw_attribute(device, did[0], name)


def attribute_set(raw: Any) -> AttributeSet | None:
    """The attribute as a typed set; None for a missing attribute, one without a value or an empty list (kube
    then refuses the device)."""
    if not isinstance(raw, dict):
        return None
    for key, kind in _LISTS:
        values = raw.get(key)
        if isinstance(values, list) and values:
            return kind, frozenset(values)
    for kind in _SCALARS:
        if raw.get(kind) is not None:
            return kind, frozenset((raw[kind],))
    return None


def intersection(a: AttributeSet, b: AttributeSet) -> AttributeSet | None:
    """The common elements of two sets of the same type; None when they have none (or differ in type)."""
    if a[0] != b[0]:
        return None
    common = a[1] & b[1]
    return (a[0], common) if common else None


class AttributeConstraint(ABC):
    """A constraint of a claim on one attribute of the devices picked for the requests it names (for all of
    the claim's requests when it names none). The search calls `remove` once for every successful `add`, in
    reverse order."""

    __slots__ = ("requests", "attribute")

    def __init__(self, requests: list[str], attribute: str) -> None:
        self.requests = set(requests)
        self.attribute = attribute

    def _applies(self, req: RequestName) -> bool:
        if not self.requests:
            return True
        if req.parent is None:
            return req.name in self.requests
        return req.parent in self.requests or req.full_name in self.requests

    @abstractmethod
    def add(self, req: RequestName, device: dict[str, Any], did: tuple[str, str, str]) -> bool:
        """Record the device if the constraint covers its request; False when it breaks the constraint."""

    @abstractmethod
    def remove(self, req: RequestName) -> None:
        """Forget the device the last successful `add` for this request recorded."""


class MatchAttributeSets(AttributeConstraint):
    """matchAttribute with DRAListTypeAttributes: the devices' sets must keep a common element."""

    __slots__ = ("stack",)

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        #: the intersection after each recorded device; the last one is current
        self.stack: list[AttributeSet] = []

    def add(self, req: RequestName, device: dict[str, Any], did: tuple[str, str, str]) -> bool:
        if not self._applies(req):
            return True
        s = attribute_set(attribute_of(req, device, did, self.attribute))
        if s is not None and self.stack:
            s = intersection(self.stack[-1], s)
        if s is None:
            return False
        self.stack.append(s)
        return True

    def remove(self, req: RequestName) -> None:
        if self._applies(req):
            self.stack.pop()


class DistinctAttributeSets(AttributeConstraint):
    """distinctAttribute with DRAListTypeAttributes: the devices' sets must be pairwise disjoint."""

    __slots__ = ("sets",)

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.sets: list[AttributeSet] = []

    def add(self, req: RequestName, device: dict[str, Any], did: tuple[str, str, str]) -> bool:
        if not self._applies(req):
            return True
        s = attribute_set(attribute_of(req, device, did, self.attribute))
        if s is None or any(intersection(s, other) is not None for other in self.sets):
            return False
        self.sets.append(s)
        return True

    def remove(self, req: RequestName) -> None:
        if self._applies(req):
            self.sets.pop()

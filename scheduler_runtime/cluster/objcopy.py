"""Deep copies of the embedded cluster's objects.

The embedded cluster copies every object it stores and every object it patches, as an API server's
serialisation does. `copy.deepcopy` spent most of a DynamicResources PreBind there: its memo and dispatch cost
more than the copy of a JSON-shaped object (a claim is ~50 nested values). Here dicts and lists are rebuilt
and the immutable scalars are shared, as deepcopy shares them (so a copy costs no memory for its strings, which a
JSON round trip would duplicate); anything else (a tuple, a datetime from YAML, a subclass) goes to
`copy.deepcopy`. Unlike deepcopy, a dict appearing twice in the object (a YAML alias) is copied twice.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

_SHARED = frozenset((str, int, float, bool, type(None)))


def copy_object(obj: T) -> T:
    """A deep copy of `obj`, equal to `copy.deepcopy(obj)`."""
    return _copy(obj)  # type: ignore[no-any-return]


def _copy(obj: Any) -> Any:
    t = type(obj)
    if t is dict:
        return {k: v if type(v) in _SHARED else _copy(v) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _SHARED else _copy(v) for v in obj]
    if t in _SHARED:
        return obj
    return copy.deepcopy(obj)

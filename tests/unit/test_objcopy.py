"""copy_object must behave as copy.deepcopy for what the embedded cluster stores."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from scheduler_runtime.cluster.objcopy import copy_object


def _containers(obj: Any) -> list[Any]:
    out = []
    if isinstance(obj, dict):
        out.append(obj)
        for v in obj.values():
            out += _containers(v)
    elif isinstance(obj, (list, tuple)):
        out.append(obj)
        for v in obj:
            out += _containers(v)
    return out


def test_equal_and_nothing_mutable_shared() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}, "ownerReferences": [{"uid": "u", "controller": True}]},
           "spec": {"n": 3, "f": 1.5, "none": None, "nested": [[1, {"k": [2]}]], "t": (1, [2])},
           "ts": datetime.datetime(2024, 1, 1)}
    got = copy_object(obj)
    assert got == obj == copy.deepcopy(obj)
    mutable = {id(c) for c in _containers(obj) if not isinstance(c, tuple)}
    assert not mutable & {id(c) for c in _containers(got)}
    got["spec"]["nested"][0][1]["k"].append(3)
    got["metadata"]["labels"]["y"] = "2"
    assert obj["spec"]["nested"][0][1]["k"] == [2] and "y" not in obj["metadata"]["labels"]
    assert type(got["spec"]["t"]) is tuple and got["spec"]["t"][1] is not obj["spec"]["t"][1]

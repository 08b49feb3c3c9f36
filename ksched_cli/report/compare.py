"""How two simulated variants differ, pod by pod: shared by the `--compare` table and the HTML report."""

from __future__ import annotations

from typing import Any


def differs(a: Any, b: Any, key: str) -> bool:
    """Placed on different nodes, or placed in one variant and not in the other (or left out differently)."""
    oa, ob = a.outcome(key), b.outcome(key)
    return (oa.status, oa.node) != (ob.status, ob.node)


def keys(a: Any, b: Any) -> list[str]:
    """The pods to show: those scheduled in the replay, then snapshot pods preempted in either variant."""
    out = list(a.pods)
    for r in (a, b):
        out += [v for v in r.preempted if v not in out]
    return out

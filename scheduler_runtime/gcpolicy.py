"""The cyclic garbage collector's settings for a long-running scheduler.

A scheduler holds a large, long-lived heap (every node, pod, slice and claim, decoded once) and allocates
many short-lived containers per cycle. With CPython's default first-generation threshold (700 allocations)
the young generations are collected every few hundred microseconds and the old one grows into repeated
full scans of the whole cluster state: measured on scheduler_perf's DRA workload, 15–25% of the CPU per
pod. Almost everything a cycle allocates dies by reference counting, so the collector is made to run
rarely, and what exists once the informers have synced is moved out of its reach (`gc.freeze`): objects
that become garbage later are still freed by reference counting; only reference cycles among frozen
objects would wait (the scheduler's cluster objects are plain dicts and records without cycles).
"""

from __future__ import annotations

import gc

#: first-generation threshold: a young collection per 20,000 net container allocations instead of 700
GEN0_THRESHOLD = 20_000


def tune() -> None:
    """Raise the first-generation threshold (the older generations keep their defaults)."""
    _, g1, g2 = gc.get_threshold()
    if gc.get_threshold()[0] < GEN0_THRESHOLD:
        gc.set_threshold(GEN0_THRESHOLD, g1, g2)


def freeze_synced_state() -> None:
    """After the initial sync: move every object alive now out of the collector's scans."""
    gc.freeze()

"""The cyclic garbage collector's settings for a long-running scheduler.

A scheduler holds a large, long-lived heap (every node, pod, slice and claim, decoded once) and allocates
many short-lived containers per cycle. With CPython's default first-generation threshold (700 allocations)
the young generations are collected every few hundred microseconds and the old one grows into repeated
full scans of the whole cluster state: measured on scheduler_perf's DRA workload, 15–25% of the CPU per
pod. Almost everything a cycle allocates dies by reference counting, so the collector is made to run
rarely, and what exists once the informers have synced is moved out of its reach (`gc.freeze`): objects
that become garbage later are still freed by reference counting; only reference cycles among frozen
objects would wait (the scheduler's cluster objects are plain dicts and records without cycles).

Starting up (imports, the registry, the configuration, the Runner) allocates a few hundred thousand objects
that live as long as the process, and the collector scanned them over and over: about 50 ms of a start's
CPU. `hold` keeps it off for that stretch; `release` resumes it, freezing what startup left alive first so
the next collection does not scan all of it once more. The few hundred cyclic garbage objects startup leaves
(throwaway classes and functions, well under 1 MB) are frozen with the rest instead of freed.
"""

from __future__ import annotations

import gc

#: first-generation threshold: a young collection per 20,000 net container allocations instead of 700
GEN0_THRESHOLD = 20_000

#: hold() turned the collector off and release() has not turned it back on yet
_held = {"on": False}


def tune() -> None:
    """Raise the first-generation threshold (the older generations keep their defaults)."""
    _, g1, g2 = gc.get_threshold()
    if gc.get_threshold()[0] < GEN0_THRESHOLD:
        gc.set_threshold(GEN0_THRESHOLD, g1, g2)


def freeze_synced_state() -> None:
    """After the initial sync: move every object alive now out of the collector's scans."""
    gc.freeze()


def hold() -> None:
    """No collections until `release`; a no-op when the collector is already off (the caller's choice)."""
    if gc.isenabled():
        gc.disable()
        _held["on"] = True


def release(freeze: bool) -> None:
    """Undo `hold` (a no-op without one). `freeze` (the runtime is about to run): what is alive now is
    long-lived, so it is frozen before collection resumes; without it (startup ended early, e.g. an invalid
    configuration, possibly inside a test process) collection simply resumes."""
    if not _held["on"]:
        return
    _held["on"] = False
    if freeze:
        gc.freeze()
    gc.enable()

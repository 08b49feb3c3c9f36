"""Assertions with messages that show the whole verdict, so a failing plugin test explains itself."""

from __future__ import annotations

import json

from .cycle import CycleResult


def _dump(r: CycleResult) -> str:
    return json.dumps({"outcome": r.outcome, "node": r.node, "message": r.message, "preenqueue": r.preenqueue,
                       "prefilter": r.prefilter, "filters": r.filters, "postfilter": r.postfilter,
                       "prescore": r.prescore, "weighted": r.weighted, "reserve": r.reserve, "permit": r.permit,
                       "prebind": r.prebind, "bind": r.bind}, indent=1)


def assert_scheduled_to(r: CycleResult, node: str) -> None:
    assert r.outcome == "scheduled" and r.node == node, f"expected the pod on {node}:\n{_dump(r)}"


def assert_unschedulable(r: CycleResult, contains: str = "") -> None:
    assert r.outcome == "unschedulable" and not r.node, f"expected the pod to stay pending:\n{_dump(r)}"
    assert contains in r.message, f"expected {contains!r} in the message:\n{_dump(r)}"


def assert_gated(r: CycleResult, by: str) -> None:
    """PreEnqueue plugin `by` kept the pod out of the scheduling queue (no attempt was made)."""
    assert r.outcome == "gated" and r.preenqueue.get(by) == "gated", f"expected the pod gated by {by}:\n{_dump(r)}"


def assert_filtered(r: CycleResult, node: str, by: str, reason: str = "") -> None:
    """`node` was rejected by plugin `by` (and the message contains `reason`)."""
    got = r.rejected_by(node)
    if got is None and by in r.prefilter and r.prefilter[by] != "success":
        got = (by, r.prefilter[by])  # a PreFilter rejection applies to every node
    assert got is not None and got[0] == by, f"expected {node} filtered by {by}, got {got}:\n{_dump(r)}"
    assert reason in got[1], f"expected {reason!r} in {by}'s message {got[1]!r}"


def assert_passed(r: CycleResult, node: str) -> None:
    assert r.rejected_by(node) is None and node in r.filters, f"expected {node} to pass every filter:\n{_dump(r)}"


def assert_score(r: CycleResult, node: str, plugin: str, raw: int | None = None, normalized: int | None = None,
                 weighted: int | None = None) -> None:
    """`plugin` scored `node`: raw Score, after NormalizeScore, and normalized x weight (each optional)."""
    got_raw = r.scores.get(node, {}).get(plugin)
    got_w = r.weighted.get(node, {}).get(plugin)
    assert got_raw is not None, f"no score of {plugin} for {node}:\n{_dump(r)}"
    if raw is not None:
        assert got_raw == raw, f"{plugin} scored {node} {got_raw}, expected {raw}"
    if normalized is not None:
        got_n = r.normalized.get(node, {}).get(plugin)
        assert got_n == normalized, f"{plugin}'s normalized score of {node} is {got_n}, expected {normalized}"
    if weighted is not None:
        assert got_w == weighted, f"{plugin}'s weighted score of {node} is {got_w}, expected {weighted}"

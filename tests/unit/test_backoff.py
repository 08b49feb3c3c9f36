"""The one backoff policy: the numbers each user had before (queue, reflector, events, leader election,
webhook reviews) come out of it unchanged."""

from __future__ import annotations

import random

import pytest

from scheduler_runtime.backoff import Backoff, BackoffPolicy


def test_queue_backoff_doubles_to_the_cap_without_jitter() -> None:
    p = BackoffPolicy(1.0, cap=10.0)
    assert [p.duration(n) for n in range(0, 7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert [p.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert p.duration(10**9) == 10.0  # counts grow without limit: no overflow


def test_growing_factor_never_overflows() -> None:
    assert BackoffPolicy(0.5, factor=1.5).duration(10**6) == pytest.approx(0.5 * 1.5 ** 62)


def test_reflector_backoff_is_jittered_by_ten_percent_and_resets() -> None:
    b = Backoff(BackoffPolicy(0.8, cap=30.0, jitter=(0.9, 1.1)))
    delays = [b.next() for _ in range(8)]
    for d, base in zip(delays, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0], strict=True):
        assert base * 0.9 <= d <= base * 1.1
    b.reset()
    assert 0.72 <= b.next() <= 0.88


def test_webhook_review_backoff_matches_kube() -> None:
    p = BackoffPolicy(0.5, factor=1.5, jitter=(1.0, 1.2), steps=5)
    assert [p.duration(n) for n in range(1, 5)] == pytest.approx([0.5, 0.75, 1.125, 1.6875])
    random.seed(7)
    for n in range(1, 5):
        assert p.duration(n) <= p.delay(n) <= p.duration(n) * 1.2


def test_constant_retries_with_one_sided_jitter() -> None:
    events = BackoffPolicy(10.0, factor=1.0, jitter=(1.0, 1.25))
    leader = BackoffPolicy(2.0, factor=1.0, jitter=(1.0, 2.2))
    for n in range(1, 20):
        assert 10.0 <= events.delay(n) <= 12.5
        assert 2.0 <= leader.delay(n) <= 4.4

"""The binding pool keeps its worker count free of binding cycles stuck past the deadline."""

from __future__ import annotations

import threading
import time

from scheduler_runtime.bindpool import BindingPool


def _wait_until(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_stuck_workers_are_replaced_and_surplus_workers_leave_when_they_return() -> None:
    pool = BindingPool(2, deadline=0.2, check_interval=0.05)
    gate = threading.Event()
    done: list[int] = []
    try:
        for _ in range(2):
            pool.submit(gate.wait)
        for i in range(5):
            pool.submit(done.append, i)
        assert _wait_until(lambda: sorted(done) == [0, 1, 2, 3, 4]), done
        assert pool.stuck() == 2 and pool.size() == 4
        gate.set()
        assert _wait_until(lambda: pool.size() == 2 and pool.stuck() == 0), pool.size()
        pool.submit(done.append, 5)
        assert _wait_until(lambda: 5 in done)
    finally:
        gate.set()
        pool.shutdown(wait=True)
    assert pool.size() == 0


def test_a_raising_task_does_not_kill_its_worker() -> None:
    pool = BindingPool(1, deadline=0)
    out: list[str] = []

    def boom() -> None:
        raise RuntimeError("x")

    pool.submit(boom)
    pool.submit(out.append, "after")
    pool.shutdown(wait=True)
    assert out == ["after"]


def test_shutdown_runs_queued_work_and_does_not_wait_for_a_hung_worker() -> None:
    pool = BindingPool(1, deadline=0.2, check_interval=0.05)
    hang = threading.Event()
    out: list[int] = []
    pool.submit(hang.wait)
    pool.submit(out.append, 1)
    t0 = time.monotonic()
    pool.shutdown(wait=True)
    assert out == [1] and time.monotonic() - t0 < 5
    hang.set()


def test_an_idle_shutdown_starts_no_workers_and_logs_nothing(caplog) -> None:
    pool = BindingPool(8, deadline=0.2, check_interval=0.05)
    out: list[int] = []
    for i in range(20):
        pool.submit(out.append, i)
    with caplog.at_level("WARNING", logger="ksched.bindpool"):
        time.sleep(0.3)
        pool.shutdown(wait=True)
    assert sorted(out) == list(range(20)) and pool.size() == 0
    assert not caplog.records

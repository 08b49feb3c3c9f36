"""The scheduler process's collector settings (scheduler_runtime.gcpolicy), applied by app.Runner."""

from __future__ import annotations

import gc

from scheduler_runtime import gcpolicy


def test_tune_raises_only_the_first_generation_threshold() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        gcpolicy.tune()
        assert gc.get_threshold() == (gcpolicy.GEN0_THRESHOLD, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_freeze_moves_the_synced_state_out_of_the_collectors_scans() -> None:
    state = [{"pod": i} for i in range(100)]
    try:
        gcpolicy.freeze_synced_state()
        assert gc.get_freeze_count() >= len(state)
    finally:
        gc.unfreeze()


def test_the_runner_applies_the_policy() -> None:
    import inspect

    from scheduler_runtime import app
    src = inspect.getsource(app.Runner)
    assert "gcpolicy.tune()" in src and "gcpolicy.freeze_synced_state()" in src

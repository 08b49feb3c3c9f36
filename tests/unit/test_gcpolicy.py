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
    assert "gcpolicy.release(freeze=True)" in inspect.getsource(app.Runner.run)


def test_hold_and_release_keep_the_collector_off_for_startup_only() -> None:
    assert gc.isenabled()
    gcpolicy.hold()
    try:
        assert not gc.isenabled()
        gcpolicy.release(freeze=False)
        assert gc.isenabled() and gc.get_freeze_count() == 0
        gcpolicy.release(freeze=True)  # released already: nothing frozen
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_release_before_running_freezes_what_startup_left() -> None:
    gcpolicy.hold()
    state = [{"module": i} for i in range(100)]
    try:
        gcpolicy.release(freeze=True)
        assert gc.isenabled() and gc.get_freeze_count() >= len(state)
    finally:
        gc.enable()
        gc.unfreeze()


def test_hold_leaves_a_collector_the_caller_turned_off_alone() -> None:
    gc.disable()
    try:
        gcpolicy.hold()
        gcpolicy.release(freeze=False)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_startup_ending_early_turns_the_collector_back_on() -> None:
    from scheduler_runtime.errors import KschedError
    from scheduler_runtime.options.flags import parse
    from scheduler_runtime.options.resolve import run_on_cluster

    try:
        run_on_cluster(parse(["--config=/nonexistent/ksched-config.yaml"]), lambda _w: None)
    except KschedError:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == 0

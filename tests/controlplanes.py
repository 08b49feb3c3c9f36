"""A started control plane for a test fixture: the CI rule (a missing dependency fails, never skips) in one place."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from scheduler_runtime.controlplane import ControlPlane, ControlPlaneUnavailable


@contextmanager
def started_control_plane(**kwargs: Any) -> Iterator[ControlPlane]:
    """`ControlPlane(**kwargs)` started, stopped on exit; unavailable here: the test fails in CI, else skips."""
    try:
        cp = ControlPlane(**kwargs)
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()

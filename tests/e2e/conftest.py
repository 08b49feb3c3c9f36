"""End-to-end helpers: run the installed `ksched` console script as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"


def run_ksched(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([str(KSCHED), *args], cwd=cwd or REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture
def ksched():
    if not KSCHED.exists():
        pytest.fail(f"{KSCHED} is missing: install the package (make setup)")
    return run_ksched

"""Progress on long work only when stderr is a terminal (issue 17): a real pseudo-terminal gets the live
bar, a pipe gets nothing but the result."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import time
from ksched_cli.progress import progress
with progress("rollout deployment/x", 3, "available") as bar:
    for i in range(4):
        bar.update(completed=i)
        time.sleep(0.15)
print("result line")
"""


def _run(stderr_fd: int | None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                          stderr=stderr_fd if stderr_fd is not None else subprocess.PIPE, env=env, timeout=60)


def test_no_progress_when_stderr_is_a_pipe() -> None:
    r = _run(None)
    assert r.returncode == 0 and r.stdout == b"result line\n" and r.stderr == b""


def test_progress_when_stderr_is_a_terminal() -> None:
    main, sub = pty.openpty()
    try:
        r = _run(sub)
        os.close(sub)
        sub = -1
        seen = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if sub != -1:
            os.close(sub)
        os.close(main)
    assert r.returncode == 0 and r.stdout == b"result line\n"
    assert b"rollout deployment/x" in seen and b"available" in seen, seen[:500]

"""Children started with processes.die_with_parent do not outlive a starter killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1].split()[0] != "Z"


def test_a_child_dies_when_its_starter_is_killed_with_sigkill(tmp_path):
    pidfile = tmp_path / "child.pid"
    starter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, time
        from scheduler_runtime import processes
        p = subprocess.Popen(["sleep", "300"], preexec_fn=processes.die_with_parent, start_new_session=True)
        open({str(pidfile)!r}, "w").write(str(p.pid))
        time.sleep(300)
    """)], env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pidfile.read_text())
        assert _alive(child)
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        still = _alive(child)
        if still:
            os.kill(child, signal.SIGKILL)
        assert not still, "the child outlived its SIGKILLed starter"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()

"""Stopping processes we started earlier, without ever signalling a stranger.

A pid written to a state file may have been reused by an unrelated process by the time we read it back,
so a process is recorded with its identity (pid, start time in clock ticks since boot from
/proc/PID/stat field 22, and command line); before signalling, the live process must still match. The
check and the signals go through a pidfd, so the pid cannot be reused between the check and the kill.
Each recorded process leads its own session (started with start_new_session), so whatever else runs in its
process group when it is stopped is stopped with it. Linux only (the dev cluster's binaries are too).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import signal
import time
from dataclasses import dataclass
from typing import Any

#: seconds between SIGTERM and SIGKILL unless the caller says otherwise
DEFAULT_GRACE = 15.0
#: seconds to wait for a process to disappear after SIGKILL
KILL_WAIT = 10.0
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> None:
    """`preexec_fn` for a child that must not outlive us: the kernel sends it SIGKILL when the thread that
    started it ends. A test run or benchmark killed with SIGKILL has no chance to stop its etcd,
    kube-apiserver or kube-scheduler; without this they would run on, orphaned. Start such children from
    the main thread (or one that lives as long as they should). Linux only."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


@dataclass(frozen=True)
class Identity:
    """Who a process is: pid plus what a reused pid would not share."""

    pid: int
    start_time: int  # clock ticks after boot (/proc/PID/stat field 22)
    cmdline: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start_time": self.start_time, "cmdline": list(self.cmdline)}

    @staticmethod
    def from_json(d: Any) -> Identity | None:
        """The identity in a state file entry, or None when it lacks one (or is not well formed)."""
        if not isinstance(d, dict):
            return None
        pid, start, cmd = d.get("pid"), d.get("start_time"), d.get("cmdline")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and isinstance(start, int)
                and not isinstance(start, bool) and isinstance(cmd, list) and all(isinstance(a, str) for a in cmd)):
            return None
        return Identity(pid, start, tuple(cmd))

    def describe(self) -> str:
        return " ".join(self.cmdline)[:80] or "?"

    def matches(self, live: Identity | None) -> bool:
        """Whether `live` is this recorded process. An empty recorded command line matches any: the kernel
        shows none for a moment while exec sets the new one up, and an older ksched could record that moment
        (pid and start tick still tell the process apart)."""
        return (live is not None and live.pid == self.pid and live.start_time == self.start_time
                and (not self.cmdline or live.cmdline == self.cmdline))


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (the command name in field 2 may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    end = raw.rfind(b")")
    return raw[end + 2:].decode("ascii", "replace").split() if end >= 0 else None


def identify(pid: int) -> Identity | None:
    """The live process `pid`, or None when there is none (a zombie counts as gone)."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    args = tuple(a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0"))
    if args and args[-1] == "":
        args = args[:-1]
    return Identity(pid, int(fields[19]), args)


def identify_started(pid: int, timeout: float = 5.0) -> Identity | None:
    """`identify` for a process just started: waits (up to `timeout` s) until exec has set its command line.

    Popen returns once exec has closed the error pipe, which can be before the kernel has set up the new
    argv; /proc/PID/cmdline is empty in between. Recorded then, the identity never matched the running
    process again, so `dev-cluster up` took a live kwok for gone, started another and dropped the first from
    the state file, and `down` left it running."""
    deadline = time.monotonic() + timeout
    while True:
        ident = identify(pid)
        if ident is None or ident.cmdline or time.monotonic() >= deadline:
            return ident
        time.sleep(0.005)


def _pgrp(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields is not None and len(fields) > 2 else None


def _group_members(leader: Identity) -> list[int]:
    """pidfds of the other live processes in `leader`'s process group, opened while the leader (checked by the
    caller) runs, so the group id is still the leader's. Empty when the leader leads no group of its own."""
    if _pgrp(leader.pid) != leader.pid:
        return []
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == leader.pid or _pgrp(int(entry.name)) != leader.pid:
            continue
        try:
            fd = os.pidfd_open(int(entry.name))
        except OSError:
            continue
        if _pgrp(int(entry.name)) == leader.pid:  # still a member now that the pidfd pins the pid
            out.append(fd)
        else:
            os.close(fd)
    return out


def _signal_all(pidfds: list[int], sig: int) -> None:
    for fd in pidfds:
        try:
            signal.pidfd_send_signal(fd, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_all(pidfds: list[int], timeout: float) -> bool:
    """Whether every process behind `pidfds` exited within `timeout` seconds in all."""
    deadline = time.monotonic() + timeout
    return all(_wait_exit(fd, deadline - time.monotonic()) for fd in pidfds)


@dataclass
class Stopped:
    """How stopping one recorded process ended; `gone` means it no longer runs (whoever ended it)."""

    name: str
    pid: int
    how: str
    gone: bool

    def line(self) -> str:
        return f"{self.name} pid {self.pid}: {self.how}"


def _wait_exit(pidfd: int, timeout: float) -> bool:
    """Whether the process behind `pidfd` exited within `timeout` seconds (a pidfd polls readable then)."""
    p = select.poll()
    p.register(pidfd, select.POLLIN)
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        left = deadline - time.monotonic()
        if p.poll(max(int(left * 1000), 0)):
            return True
        if left <= 0:
            return False


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(name: str, recorded: Identity, grace: float = DEFAULT_GRACE) -> Stopped:
    """SIGTERM the recorded process, if it is still the one we started, and the rest of its process group;
    SIGKILL whatever of them runs `grace` seconds later. `gone` only once every one of them has exited."""
    try:
        pidfd = os.pidfd_open(recorded.pid)
    except ProcessLookupError:
        return Stopped(name, recorded.pid, "already gone", True)
    members: list[int] = []
    try:
        live = identify(recorded.pid)
        if live is None:
            _reap(recorded.pid)
            return Stopped(name, recorded.pid, "already gone", True)
        if not recorded.matches(live):
            differs = (f"started at tick {live.start_time}, not {recorded.start_time}"
                       if live.start_time != recorded.start_time else "with another command line")
            return Stopped(name, recorded.pid, f"already gone; the pid now belongs to another process "
                                               f"(`{live.describe()}`, {differs}): not signalled", True)
        members = _group_members(recorded)
        extra = f" (with {len(members)} more in its process group)" if members else ""
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError:
            return Stopped(name, recorded.pid, "permission denied sending SIGTERM: not stopped", False)
        _signal_all(members, signal.SIGTERM)
        everyone = [pidfd, *members]
        if _wait_all(everyone, grace):
            _reap(recorded.pid)
            return Stopped(name, recorded.pid, f"stopped by SIGTERM{extra}", True)
        _signal_all(everyone, signal.SIGKILL)
        if _wait_all(everyone, KILL_WAIT):
            _reap(recorded.pid)
            return Stopped(name, recorded.pid, f"still running {grace:g} s after SIGTERM: killed with SIGKILL{extra}",
                           True)
        return Stopped(name, recorded.pid, f"still running {KILL_WAIT:g} s after SIGKILL (stuck in the kernel?)"
                                           f"{extra}", False)
    finally:
        for fd in (pidfd, *members):
            os.close(fd)

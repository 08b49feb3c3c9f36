"""`ksched dev-cluster down` and ControlPlane.stop(): signal only our own processes, escalate to SIGKILL.

The processes here are ordinary children of the test (sleep, a Python that ignores SIGTERM), recorded in
a state file the way `dev-cluster up` records etcd and kube-apiserver: no control-plane binaries needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_runtime import devcluster, processes
from scheduler_runtime.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[2]
IGNORES_TERM = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\n"
                "time.sleep(60)\n")


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; whatever is left is SIGKILLed and reaped at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def _sleep(children: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(["sh", "-c", "echo ready; exec sleep 60"], stdout=subprocess.PIPE, start_new_session=True)
    children.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    while (i := processes.identify(p.pid)) is None or i.cmdline != ("sleep", "60"):  # exec is done
        time.sleep(0.01)
    return p


def _ignores_term(children: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], stdout=subprocess.PIPE, start_new_session=True)
    children.append(p)
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"  # the handler is in place
    return p


def _state(d: Path, entries: list[dict[str, object]]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"version": 2, "processes": entries, "api_port": 1, "etcd_port": 2}))


def _down(d: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ksched_cli", "dev-cluster", "down", "--state-dir", str(d), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_identity_reads_start_time_and_cmdline(children: list[subprocess.Popen[bytes]]) -> None:
    p = _sleep(children)
    ident = processes.identify(p.pid)
    assert ident is not None and ident.pid == p.pid and ident.cmdline == ("sleep", "60") and ident.start_time > 0
    assert processes.Identity.from_json(json.loads(json.dumps(ident.to_json()))) == ident


@pytest.mark.parametrize("wrong", ["start time", "command line"])
def test_stale_state_file_never_signals_an_unrelated_process(wrong: str, tmp_path: Path,
                                                             children: list[subprocess.Popen[bytes]]) -> None:
    p = _sleep(children)
    real = processes.identify(p.pid)
    assert real is not None
    entry = {"name": "kube-apiserver", **real.to_json()}
    if wrong == "start time":
        entry["start_time"] = real.start_time - 1
    else:
        entry["cmdline"] = ["/old/bin/kube-apiserver", "--secure-port=6443"]
    _state(tmp_path, [entry])
    r = _down(tmp_path)
    assert r.returncode == 0, r.stderr
    assert p.poll() is None, "an unrelated process was signalled"
    assert f"kube-apiserver pid {p.pid}: already gone; the pid now belongs to another process (`sleep 60`" in r.stdout
    assert "not signalled" in r.stdout
    assert not (tmp_path / "state.json").exists(), "nothing of ours is left: the stale state file goes"


def test_process_that_ignores_sigterm_is_killed_after_the_grace_period(
        tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    stubborn = _ignores_term(children)
    polite = _sleep(children)
    idents = [processes.identify(stubborn.pid), processes.identify(polite.pid)]
    assert all(idents)
    _state(tmp_path, [{"name": "kube-apiserver", **idents[0].to_json()},  # type: ignore[union-attr]
                      {"name": "etcd", **idents[1].to_json()}])  # type: ignore[union-attr]
    r = _down(tmp_path, "--grace-period", "0.5")
    assert r.returncode == 0, r.stderr
    assert stubborn.wait(10) == -signal.SIGKILL
    assert polite.wait(10) == -signal.SIGTERM
    lines = r.stdout.splitlines()
    assert lines == [f"kube-apiserver pid {stubborn.pid}: still running 0.5 s after SIGTERM: killed with SIGKILL",
                     f"etcd pid {polite.pid}: stopped by SIGTERM", "stopped"]


def test_already_gone_and_no_cluster(tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    p = _sleep(children)
    ident = processes.identify(p.pid)
    assert ident is not None
    p.kill()
    p.wait()
    _state(tmp_path, [{"name": "etcd", **ident.to_json()}])
    r = _down(tmp_path)
    assert r.returncode == 0 and f"etcd pid {p.pid}: already gone" in r.stdout
    r = _down(tmp_path)
    assert r.returncode == 1 and r.stderr.strip() == "error: no dev cluster is running"


def test_old_state_file_without_identity_is_not_signalled(tmp_path: Path,
                                                          children: list[subprocess.Popen[bytes]]) -> None:
    p = _sleep(children)
    (tmp_path / "state.json").write_text(json.dumps({"etcd_pid": p.pid, "apiserver_pid": 2 ** 22 + 7,
                                                     "api_port": 1, "etcd_port": 2}))
    r = _down(tmp_path)
    assert r.returncode == 1
    assert p.poll() is None
    assert f"etcd pid {p.pid}: recorded without its start time and command line" in r.stdout
    assert "may still be running" in r.stderr and len(r.stderr.splitlines()) == 1
    assert (tmp_path / "state.json").exists(), "kept, so the user sees what is left"


def test_save_state_records_identity_atomically_0600(tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    cp = ControlPlane(state_dir=tmp_path, bin_dir=tmp_path, stop_grace=0.5)
    cp.apiserver, cp.etcd = _sleep(children), _sleep(children)
    cp.save_state()
    st = ControlPlane.load_state(tmp_path)
    assert st is not None and [e["name"] for e in st["processes"]] == ["kube-apiserver", "etcd"]
    assert processes.Identity.from_json(st["processes"][0]) == processes.identify(cp.apiserver.pid)
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600
    assert [x.name for x in tmp_path.iterdir()] == ["state.json"]
    report = ControlPlane.stop_detached(tmp_path, grace=5)
    assert report is not None and [r.how for r in report] == ["stopped by SIGTERM"] * 2


def test_controlplane_stop_escalates_to_sigkill(tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    cp = ControlPlane(state_dir=tmp_path, bin_dir=tmp_path, stop_grace=0.5)
    cp.apiserver = _ignores_term(children)
    cp.etcd = _sleep(children)
    report = cp.stop()
    assert [r.line() for r in report] == [
        f"kube-apiserver pid {children[0].pid}: still running 0.5 s after SIGTERM: killed with SIGKILL",
        f"etcd pid {children[1].pid}: stopped by SIGTERM"]
    assert children[0].returncode == -signal.SIGKILL and children[1].returncode == -signal.SIGTERM
    assert cp.apiserver is None and cp.etcd is None and os.path.isdir(tmp_path)


def test_a_process_is_recorded_with_the_command_line_exec_set(children: list[subprocess.Popen[bytes]]) -> None:
    """Right after Popen, /proc/PID/cmdline can still be empty (exec is setting up argv); an identity taken
    then never matched the process again, and `dev-cluster up` started a second kwok beside the first."""
    for _ in range(100):
        p = subprocess.Popen(["sleep", "60"], start_new_session=True)
        children.append(p)
        ident = processes.identify_started(p.pid)
        assert ident is not None and ident.cmdline == ("sleep", "60")
        p.kill()
        p.wait(10)


def test_an_identity_recorded_mid_exec_still_stops_its_process(
        tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    p = _sleep(children)
    ident = processes.identify(p.pid)
    assert ident is not None
    entry = {"name": "kwok", **ident.to_json(), "cmdline": []}  # what an older ksched could record
    assert devcluster.running(processes.Identity.from_json(entry))
    _state(tmp_path, [entry])
    r = _down(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"kwok pid {p.pid}: stopped by SIGTERM", "stopped"]
    assert p.wait(10) == -signal.SIGTERM


def test_down_stops_the_rest_of_a_recorded_process_group(
        tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    """A recorded process leads its own session; a child it started in its group goes with it, though the
    leader's exit alone would leave it running."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                              start_new_session=True)
    children.append(leader)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    ident = processes.identify_started(leader.pid)
    assert ident is not None and processes.identify(child) is not None
    _state(tmp_path, [{"name": "kwok", **ident.to_json()}])
    r = _down(tmp_path, "--grace-period", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"kwok pid {leader.pid}: stopped by SIGTERM (with 1 more in its process group)",
                                     "stopped"]
    assert leader.wait(10) == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while processes.identify(child) is not None and time.monotonic() < deadline:  # reaped by init
        time.sleep(0.05)
    assert processes.identify(child) is None


def test_add_processes_keeps_a_recorded_process_that_still_runs(
        tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    old, new, dead = _sleep(children), _sleep(children), _sleep(children)
    idents = {p.pid: processes.identify(p.pid) for p in (old, new, dead)}
    _state(tmp_path, [{"name": "kwok", **idents[old.pid].to_json()},  # type: ignore[union-attr]
                      {"name": "kube-controller-manager", **idents[dead.pid].to_json()}])  # type: ignore[union-attr]
    dead.kill()
    dead.wait(10)
    devcluster.add_processes(tmp_path, [("kwok", new.pid), ("kube-controller-manager", new.pid)])
    st = json.loads((tmp_path / "state.json").read_text())
    assert [(e["name"], e["pid"]) for e in st["processes"]] == [
        ("kwok", new.pid), ("kube-controller-manager", new.pid), ("kwok", old.pid)]

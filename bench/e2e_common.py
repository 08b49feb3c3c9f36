"""The end-to-end measurement both e2e benches share (scheduler_perf.py --mode e2e, e2e_throughput.py).

With the measured pods already created and no scheduler running: a watch records when each pod whose name
starts with `prefix` is first seen bound, the scheduler command starts, its CPU seconds and peak RSS are read
from /proc while it runs, and once every pod is bound it is stopped. pods/s is first to last bind; latencies
are from the scheduler's start to each bind.
"""

from __future__ import annotations

import os
import queue
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from scheduler_runtime import processes

#: both schedulers read the same file: same clientConnection QPS/burst, leader election off
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: {qps}
  burst: {burst}
leaderElection:
  leaderElect: false
"""


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = 16) -> None:
    with ThreadPoolExecutor(workers) as ex:
        for _ in ex.map(fn, items):
            pass


def proc_stats(pid: int) -> tuple[float, float]:
    """(cpu seconds, peak RSS MB) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = float(os.sysconf("SC_CLK_TCK"))
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def _watch_binds(client: Any, ns: str, rv: str, n_pods: int, prefix: str, bound: dict[str, float],
                 done: threading.Event, on_bind: Callable[[str], None] | None = None) -> None:
    """Record first-seen bind times, handing each bound pod's name to `on_bind`. The API server closes a watch
    that falls behind during a burst (its per-watcher buffer fills while the cores are busy): resume from the
    last version seen."""
    last = rv
    while not done.is_set():
        resp = client.open_stream(f"/api/v1/namespaces/{ns}/pods",
                                  {"watch": "1", "resourceVersion": last, "allowWatchBookmarks": "true"},
                                  600, limit=False)
        buf = b""
        for chunk in resp.stream(65536):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = orjson.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    raise RuntimeError(f"watch error: {obj}")
                meta = obj.get("metadata") or {}
                last = meta.get("resourceVersion") or last
                name = meta.get("name") or ""
                if name.startswith(prefix) and (obj.get("spec") or {}).get("nodeName") and name not in bound:
                    bound[name] = time.monotonic()
                    if on_bind is not None:
                        on_bind(name)
                    if len(bound) >= n_pods:
                        done.set()
                        resp.close()  # mid-stream: never hand this connection back to the pool
                        return
        resp.close()


def _unbound_summary(client: Any, ns: str, prefix: str, bound: dict[str, float], most: int = 5) -> str:
    """At a timeout, what the API server holds: how many `prefix*` pods it shows bound that the bench's watch
    has not seen (a stalled watch rather than a stalled scheduler), and a few unbound ones with their nominated
    node, PodScheduled reason and message, and deletion mark."""
    try:
        items = client.call("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
    except Exception as exc:  # noqa: BLE001 - a diagnostic only
        return f" (pods not listed: {exc!r})"
    unseen, rows = 0, []
    for p in items:
        meta, spec, status = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
        name = meta.get("name") or ""
        if not name.startswith(prefix) or name in bound:
            continue
        if spec.get("nodeName"):
            unseen += 1
            continue
        cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        deleting = " deleting" if meta.get("deletionTimestamp") else ""
        rows.append(f"{name}{deleting} nominated={status.get('nominatedNodeName')} {cond.get('reason')}: "
                    f"{cond.get('message')}")
    out = f"; {unseen} bound per the API server but not seen by the watch" if unseen else ""
    return out + (f"; {len(rows)} unbound, e.g. {'; '.join(rows[:most])}" if rows else "")


def measure_scheduler(client: Any, log_path: Path, label: str, cmd: list[str], ns: str, n_pods: int,
                      prefix: str = "", timeout: float = 900.0,
                      during: Callable[[], Callable[[], None]] | None = None,
                      on_bind: Callable[[str], None] | None = None, duration: float = 0.0) -> dict[str, Any]:
    """Run `cmd` until the `n_pods` pods named `prefix*` in `ns` are bound. `during` starts background work
    (churn, deletions) when the scheduler starts and returns the function that stops it. With `duration`
    (scheduler_perf's steady state) it runs that many seconds from the first bind instead, `on_bind` replacing
    each bound pod (off the watch's thread, so the watch keeps up), and pods/s counts the binds in that window.
    Returns the figures, or {"label", "error"}."""
    rv = client.call("GET", f"/api/v1/namespaces/{ns}/pods", query={"limit": 1})["metadata"]["resourceVersion"]
    bound: dict[str, float] = {}
    done = threading.Event()
    errors: list[BaseException] = []
    bound_names: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def replacer() -> None:
        while (name := bound_names.get()) is not None and not done.is_set():
            try:
                on_bind(name)  # type: ignore[misc]
            except Exception as exc:  # surfaced below, as the watch's own errors are
                errors.append(exc)
                done.set()

    def guarded() -> None:
        try:
            _watch_binds(client, ns, rv, 2**62 if duration else n_pods, prefix, bound, done,
                         bound_names.put if on_bind is not None else None)
        except Exception as exc:  # surfaced below: a silent watch would hang the run
            errors.append(exc)
            done.set()

    threading.Thread(target=guarded, daemon=True).start()
    if on_bind is not None:
        threading.Thread(target=replacer, daemon=True).start()
    time.sleep(0.5)
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=processes.die_with_parent)
    stop_background = during() if during is not None else None
    peak_cpu, peak_rss, cpu, rss = 0.0, 0.0, 0.0, 0.0
    try:
        while not done.wait(0.5):
            if duration and bound and time.monotonic() - min(bound.values()) >= duration:
                done.set()
                break
            if proc.poll() is not None:
                return {"label": label, "error": f"exited early; see {log_path}"}
            cpu, rss = proc_stats(proc.pid)
            peak_cpu, peak_rss = max(peak_cpu, cpu), max(peak_rss, rss)
            if time.monotonic() - start > timeout:
                return {"label": label, "error": f"only {len(bound)}/{n_pods} bound after {timeout:.0f}s"
                        f"{_unbound_summary(client, ns, prefix, bound)}"}
        if errors:
            return {"label": label, "error": f"the bench's watch failed after {len(bound)} binds: {errors[0]!r}"}
        cpu, rss = proc_stats(proc.pid)
    finally:
        bound_names.put(None)
        if stop_background is not None:
            stop_background()
        proc.send_signal(signal.SIGINT if os.environ.get("KSCHED_PYSPY") else signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    times = sorted(bound.values())
    lat = sorted(t - start for t in times)
    if os.environ.get("SCHED_PERF_TIMELINE"):  # each bind's seconds from the scheduler's start, one file per run
        Path(os.environ["SCHED_PERF_TIMELINE"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["SCHED_PERF_TIMELINE"]) / f"{label}-{prefix or 'all'}-{n_pods}.txt").write_text(
            "".join(f"{x:.3f}\n" for x in lat))
    span = times[-1] - times[0] if len(times) > 1 else 1e-9
    cpu = max(cpu, peak_cpu)
    n = n_pods
    if duration:
        n = sum(1 for t in times if t - times[0] <= duration)
        span = duration
    return {"label": label, "pods_per_second": n / span, "p50": statistics.median(lat),
            "p99": lat[max(0, int(len(lat) * 0.99) - 1)], "cpu": cpu, "rss": max(rss, peak_rss),
            "cpu_ms_per_pod": 1000 * cpu / max(n, 1)}


def ensure_bytecode() -> None:
    """Compile ksched's modules to bytecode, as installing the package does: with PYTHONDONTWRITEBYTECODE set
    (or a fresh checkout) every start would otherwise compile the whole source tree, a second of CPU that an
    installed ksched never spends and that the bench would charge to its pods."""
    import compileall

    import ksched_cli
    import scheduler_runtime
    from scheduler_runtime.options.registry import BUNDLED_PLUGINS
    for pkg in (scheduler_runtime, ksched_cli):
        compileall.compile_dir(str(Path(pkg.__file__).parent), quiet=1)
    if BUNDLED_PLUGINS.is_dir():  # the seed plugins every start imports (an image ships them compiled too)
        compileall.compile_dir(str(BUNDLED_PLUGINS), quiet=1)


def ksched_command(cfg: Path, *extra: str) -> list[str]:
    """ksched's kube-scheduler drop-in from this venv, its modules compiled; under py-spy when KSCHED_PYSPY
    names an output file."""
    import sys
    ensure_bytecode()
    # the checkout this bench is in, not whatever the venv's editable install points at (a worktree's bench
    # would otherwise measure another tree's ksched)
    root = str(Path(__file__).resolve().parents[1])
    if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != root:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    cmd = [str(Path(sys.executable).parent / "kube-scheduler"), f"--config={cfg}", "--secure-port=0", *extra]
    if os.environ.get("KSCHED_PYSPY"):  # collapsed stacks into this file (py-spy on PATH); with
        # KSCHED_PYSPY_GIL=1 only the thread holding the GIL is sampled: where the Python CPU goes
        gil = ["--gil"] if os.environ.get("KSCHED_PYSPY_GIL") == "1" else []
        cmd = ["py-spy", "record", "--format", "raw", "-r", "250", *gil, "-o", os.environ["KSCHED_PYSPY"], "--",
               *cmd]
    return cmd

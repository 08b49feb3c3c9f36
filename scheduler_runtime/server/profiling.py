"""`/debug/pprof/...` for a Python process, installed where kube-scheduler installs Go's pprof handlers.

kube-scheduler serves them when profiling is on (`enableProfiling` in the configuration, or `--profiling`
without `--config`; default true), and turns on Go's block profile when contention profiling is on too.
A Python process has no pprof, so the same paths answer with Python profiles in plain text:

* `/debug/pprof` redirects (302) to `/debug/pprof/`, an HTML index of what is below.
* `/debug/pprof/profile?seconds=N` (default 30, as Go): every thread's stack sampled 100 times a second for
  N seconds, in the *collapsed stack* format flame-graph tools read (`thread;file:function:line;... count`,
  root first). Sampling sees all threads, which cProfile (one thread) would not.
* `/debug/pprof/goroutine`: a dump of every thread's current stack (the goroutine dump's counterpart).
* `/debug/pprof/heap`: live objects by type (count and shallow bytes), from the garbage collector's view.
* `/debug/pprof/block?seconds=N` (default 1): with contention profiling on, stacks of threads found waiting
  in `threading`/`queue` waits (a condition, event, queue or lock wait reached from Python) sampled for N
  seconds, collapsed; with it off, an empty profile, as Go's block profile is when its rate is 0.
* anything else under `/debug/pprof/` (allocs, mutex, threadcreate, trace, symbol, cmdline): 404
  `Unknown profile`; Python has no equivalent that measures something.

`/debug/flags/v` (PUT, body = the new verbosity) changes the log level, as kube's `routes.DebugFlags` does.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from types import FrameType
from urllib.parse import parse_qs

from ..verbosity import threshold
from .serving import Request, Response

PREFIX = "/debug/pprof"
SAMPLE_INTERVAL = 0.01
#: kube sets no bound; an hour keeps a typo from holding a connection thread for days
MAX_SECONDS = 3600.0
_WAIT_FILES = ("threading.py", "queue.py")
_WAIT_FUNCS = {"wait", "acquire", "get", "_wait_for_tstate_lock", "join", "put"}


def _frame_label(f: FrameType) -> str:
    code = f.f_code
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}:{f.f_lineno}"


def _stack(frame: FrameType | None) -> list[str]:
    out: list[str] = []
    while frame is not None:
        out.append(_frame_label(frame))
        frame = frame.f_back
    out.reverse()
    return out


def _thread_names() -> dict[int, str]:
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None}


def _waiting(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_filename.endswith(_WAIT_FILES) and code.co_name in _WAIT_FUNCS


def sample(seconds: float, *, only_waiting: bool = False, interval: float = SAMPLE_INTERVAL,
           stop: threading.Event | None = None) -> Counter[str]:
    """Collapsed stacks of every other thread, sampled every `interval` for `seconds`."""
    me = threading.get_ident()
    tally: Counter[str] = Counter()
    end = time.monotonic() + seconds
    while True:
        names = _thread_names()
        for ident, frame in sys._current_frames().items():
            if ident == me or (only_waiting and not _waiting(frame)):
                continue
            tally[";".join([names.get(ident, f"thread-{ident}"), *_stack(frame)])] += 1
        if time.monotonic() >= end or (stop is not None and stop.is_set()):
            return tally
        time.sleep(interval)


def collapsed(tally: Counter[str]) -> bytes:
    return "".join(f"{stack} {n}\n" for stack, n in sorted(tally.items())).encode()


def thread_dump() -> bytes:
    names = _thread_names()
    frames = sys._current_frames()
    parts = [f"thread profile: total {len(frames)}\n"]
    for ident, frame in sorted(frames.items()):
        parts.append(f"\nThread {ident} ({names.get(ident, '?')}):\n")
        parts.append("".join(traceback.format_stack(frame)))
    return "".join(parts).encode()


def heap_summary(limit: int = 200) -> bytes:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        t = type(obj)
        name = f"{t.__module__}.{t.__qualname__}"
        counts[name] += 1
        try:
            sizes[name] += sys.getsizeof(obj)
        except TypeError:
            pass
    lines = [f"heap profile: {sum(counts.values())} objects tracked by the garbage collector, "
             f"{sum(sizes.values())} shallow bytes", "count shallow_bytes type"]
    lines += [f"{n} {sizes[name]} {name}" for name, n in counts.most_common(limit)]
    return ("\n".join(lines) + "\n").encode()


_INDEX = """<html>
<head>
<title>/debug/pprof/</title>
</head>
<body>
/debug/pprof/
<br>
<p>ksched serves Python profiles in text: collapsed stacks for profile and block, a thread dump for goroutine,
live objects by type for heap.</p>
<ul>
<li><a href='profile?seconds=30'>profile</a>: every thread's stack sampled 100/s (collapsed stacks)</li>
<li><a href='goroutine'>goroutine</a>: the current stack of every thread</li>
<li><a href='heap'>heap</a>: live objects by type</li>
<li><a href='block?seconds=1'>block</a>: threads waiting in threading/queue waits
(contention profiling: {contention})</li>
</ul>
</body>
</html>
"""


def _bad(msg: str) -> Response:
    return Response(400, (msg + "\n").encode(), "text/plain; charset=utf-8", {"X-Go-Pprof": "1"})


def _seconds(req: Request, default: float) -> float | Response:
    raw = (parse_qs(req.query).get("seconds") or [""])[0]
    if not raw:
        return default
    try:
        sec = float(raw)
    except ValueError:
        return _bad(f"Bad Request: invalid value for \"seconds\": {raw!r}")
    if sec <= 0:
        return _bad("Bad Request: \"seconds\" must be positive")
    if sec >= MAX_SECONDS:
        return _bad(f"Bad Request: \"seconds\" must be below {MAX_SECONDS:.0f}")
    return sec


class Profiling:
    """The /debug handlers of one process; `contention` mirrors enableContentionProfiling."""

    def __init__(self, contention: bool, set_verbosity: Callable[[int], None] | None = None) -> None:
        self.contention = contention
        self.set_verbosity = set_verbosity or _set_log_verbosity

    def handle(self, req: Request) -> Response | None:
        path = req.path
        if path == "/debug/flags/v":
            return self._flag_v(req)
        if path == PREFIX:
            return Response(302, b'<a href="/debug/pprof/">Found</a>.\n\n', "text/html; charset=utf-8",
                            {"Location": "/debug/pprof/"})
        if not path.startswith(PREFIX + "/"):
            return None
        name = path[len(PREFIX) + 1:]
        plain = "text/plain; charset=utf-8"
        if name == "":
            body = _INDEX.replace("{contention}", "on" if self.contention else "off")
            return Response(200, body.encode(), "text/html; charset=utf-8")
        if name == "profile":
            sec = _seconds(req, 30.0)
            if isinstance(sec, Response):
                return sec
            return Response(200, collapsed(sample(sec)), plain,
                            {"Content-Disposition": 'attachment; filename="profile"'})
        if name == "goroutine":
            return Response(200, thread_dump(), plain)
        if name == "heap":
            return Response(200, heap_summary(), plain)
        if name == "block":
            if not self.contention:
                return Response(200, b"", plain)
            sec = _seconds(req, 1.0)
            if isinstance(sec, Response):
                return sec
            return Response(200, collapsed(sample(sec, only_waiting=True)), plain)
        return Response(404, b"Unknown profile\n", plain, {"X-Go-Pprof": "1"})

    def _flag_v(self, req: Request) -> Response:
        if req.method != "PUT":
            return Response(406, b"unsupported http method\n", "text/plain")
        raw = (req.body or b"").decode("utf-8", "replace").strip()
        try:
            level = int(raw)
        except ValueError:
            return Response(400, f'strconv.ParseUint: parsing "{raw}": invalid syntax\n'.encode(), "text/plain")
        self.set_verbosity(level)
        return Response(200, f"successfully set klog.logging.verbosity to {level}\n".encode(), "text/plain")


def _set_log_verbosity(level: int) -> None:
    """kube's -v N as ksched maps it at start-up (scheduler_runtime.verbosity)."""
    logging.getLogger().setLevel(threshold(level))

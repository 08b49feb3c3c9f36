"""Property-based fuzzing of every input ksched reads: each generated input must end in success or a
one-line error with a documented exit code (0, 1 invalid input, 2 unreadable input or bad usage), with
no traceback, within 2 s of CPU and 200 MB of extra memory.

The CLI runs in-process (a subprocess per case would cost ~1 s of imports). Targets are plain objects in
`TARGETS` (name -> Target(strategy, run)), so other input kinds (new-plugin arguments, static-pod
manifests) can be added with `register()`. tests/unit/test_fuzz_inputs.py runs a bounded number of
examples per target; this script is the long mode:

    python bench/fuzz_inputs.py                 # the default budget: >= 50,000 inputs
    python bench/fuzz_inputs.py --scale 0.1     # a tenth of it
    python bench/fuzz_inputs.py --only quantity,duration

It prints, per target: inputs run, successes, one-line errors per exit code, crashes (tracebacks,
internal errors, undocumented exit codes, multi-line errors), hangs (> 2 s CPU) and the peak memory,
and exits 1 when any crash, hang or over-memory case was seen (the first few are printed).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU_LIMIT = 2.0  # seconds of CPU per input
WALL_LIMIT = 20.0  # a real hang is interrupted after this (wall clock; the machine may be busy)
MEMORY_LIMIT = 200 * 1024 * 1024
EXIT_CODES = {0: "success", 1: "invalid input", 2: "unreadable input or bad usage"}
ALLOWED_STDERR = ("error: ", "warning: ", "changed: ", "note: ", "rendered config: ")


# ------------------------------------------------------------------------------------------ running


class _Hang(BaseException):
    pass


@dataclass
class Outcome:
    code: int | None
    stderr: str = ""
    cpu: float = 0.0
    crash: str | None = None  # why this input is a failure, or None


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_COMMAND: Any = None


def _command() -> Any:
    global _COMMAND
    if _COMMAND is None:
        import typer

        from ksched_cli.main import app
        from scheduler_runtime.plugins import registry

        # The plugin registry (entry points, plugin folders: ~60 ms) is not an input under test: build it
        # once per set of folders instead of once per generated input.
        build = registry.build_registry
        cache: dict[str, Any] = {}

        def cached_build(*args: Any, **kwargs: Any) -> Any:
            key = repr((args, sorted(kwargs.items())))
            if key not in cache:
                cache[key] = build(*args, **kwargs)
            return cache[key]

        registry.build_registry = cached_build  # type: ignore[assignment]
        _COMMAND = typer.main.get_command(app)
    return _COMMAND


@contextlib.contextmanager
def _watchdog() -> Any:
    def fire(*_: object) -> None:
        raise _Hang()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, WALL_LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _classify(code: int | None, err: str, allowed_prefixes: tuple[str, ...]) -> str | None:
    if "Traceback (most recent call last)" in err:
        return "traceback"
    if "internal error" in err:
        return "internal error: " + err.strip().splitlines()[-1][:300]
    if code not in EXIT_CODES:
        return f"undocumented exit code {code}"
    if code != 0:
        lines = [ln for ln in err.split("\n") if ln.strip()]  # only a real newline breaks the line
        if not lines:
            return f"exit {code} without an error line"
        bad = [ln for ln in lines if not ln.startswith(ALLOWED_STDERR + allowed_prefixes)]
        if bad:
            return f"not a one-line error: {err[:400]!r}"
    return None


def run_cli(args: list[str], allowed_prefixes: tuple[str, ...] = ()) -> Outcome:
    """`ksched ARGS` in this process: exit code, stderr, CPU time and what (if anything) went wrong."""
    from ksched_cli import guard
    from scheduler_runtime.errors import KschedError

    guard.DEBUG["on"] = bool(os.environ.get("FUZZ_DEBUG"))  # let the traceback through to see where
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    crash = None
    t0 = time.process_time()
    try:
        with _watchdog(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                debug = ["--debug"] if os.environ.get("FUZZ_DEBUG") else []
                _command().main(args=[*debug, *args], prog_name="ksched", standalone_mode=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except _Hang:
        crash = f"hang (> {WALL_LIMIT:.0f} s)"
    except KschedError as exc:  # only with FUZZ_DEBUG (--debug lets user errors through)
        code = exc.exit_code
        err.write(f"error: {exc}\n")
    except BaseException:  # noqa: BLE001 - anything escaping the CLI is the finding
        tb = traceback.format_exc().strip().splitlines()
        crash = "traceback: " + (" | ".join(tb[-7:]) if os.environ.get("FUZZ_DEBUG") else tb[-1])[:1500]
    cpu = time.process_time() - t0
    text = err.getvalue()
    if crash is None:
        crash = _classify(code, text, allowed_prefixes)
    if crash is None and cpu > CPU_LIMIT:
        crash = f"slow: {cpu:.2f} s CPU"
    return Outcome(code, text, cpu, crash)


def run_call(fn: Callable[[], Any], ok_errors: tuple[type[BaseException], ...]) -> Outcome:
    """A library entry point: it returns, or raises one of `ok_errors` with a one-line message."""
    t0 = time.process_time()
    try:
        with _watchdog():
            fn()
        code, text, crash = 0, "", None
    except _Hang:
        code, text, crash = None, "", f"hang (> {WALL_LIMIT:.0f} s)"
    except ok_errors as exc:
        code, text = getattr(exc, "exit_code", 1), str(exc)
        crash = f"multi-line message: {text[:200]!r}" if "\n" in text or not text else None
    except BaseException:  # noqa: BLE001
        code, text = None, ""
        crash = "traceback: " + traceback.format_exc().strip().splitlines()[-1][:300]
    cpu = time.process_time() - t0
    if crash is None and cpu > CPU_LIMIT:
        crash = f"slow: {cpu:.2f} s CPU"
    return Outcome(code, text, cpu, crash)


# ------------------------------------------------------------------------------------------ values


NASTY_STRINGS = ["", " ", "*", "-", "0", "-1", "1e400", "1E", "9999999Ei", "1e-400", "-0", "NaN", "inf", "15",
                 "1h", "-1s", "0s", "2562048h", "null", "~", "true", "yes", "{", "[", "&a", "*a", "!!binary x",
                 "\t", "\x00", "é", "\u2028", "a" * 300, "1" * 40, "default-scheduler", "NodeResourcesFit",
                 "kubescheduler.config.k8s.io/v1", "v1beta2", "KubeSchedulerConfiguration", "Pod", "Node",
                 "cpu", "memory", "100m", "1Gi", "LeastAllocated", "RequestedToCapacityRatio", "../../etc/passwd"]
QUANTITY_STRINGS = ["1E", "1e400", "9999999Ei", "1e-400", "-0", "0.1m", "1.", ".5", "+1", "1K", "1e", "1Mi",
                    "8Ei", "7Ei", "1e2147483647", "9223372036854775807", "9223372036854775808", "-1", "1.5Ki"]

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, 10**20, 92_000_000_000_000_000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY_STRINGS + QUANTITY_STRINGS),
    st.text(max_size=12),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=10) | st.sampled_from(["name", "args", "weight", "kind"]),
                                        inner, max_size=3), max_leaves=8)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw: Any, seeds: list[Any]) -> Any:
    """A real document with 1-4 values replaced, removed or added at random field paths."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(doc)))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "swap-type"]))
        if not path:
            if op == "replace":
                doc = draw(values)
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=10) | st.sampled_from(NASTY_STRINGS))] = draw(values)
        elif op == "add" and isinstance(parent, list):
            parent.append(draw(values))
        elif op == "swap-type":
            old = parent[key]
            parent[key] = [old] if not isinstance(old, list) else {"x": old}
        else:
            parent[key] = draw(values)
    return doc


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


TEXT_NOISE = st.sampled_from(["&a ", "*a", "<<: *a\n", "? ", ": ", "- ", "{", "}", "[", "]", "'", '"', "\n", "  ",
                              "\t", "#", "%YAML 1.1\n", "---\n", "...\n", "!!str ", "!!binary ", "!foo ", "\\",
                              "\x00", "\ufeff", "\udcff", "1e400", "\r\n", "|\n", ">-\n"])


@st.composite
def raw_text(draw: Any, seeds: list[str]) -> bytes:
    """A real file with raw edits: inserted tokens, cut slices, duplicated lines, truncation, bad bytes."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=200))
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.integers(0, 4))
        pos = draw(st.integers(0, len(text)))
        if op == 0:
            text = text[:pos] + draw(TEXT_NOISE | st.text(max_size=5)) + text[pos:]
        elif op == 1:
            end = draw(st.integers(pos, min(len(text), pos + 40)))
            text = text[:pos] + text[end:]
        elif op == 2:
            lines = text.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines.insert(i, lines[i])
                text = "".join(lines)
        elif op == 3:
            text = text[:pos]
        else:
            bomb = 'x0: &x0 ["a","a","a","a","a","a","a","a","a"]\n' + "".join(
                f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]\n" for i in range(1, draw(st.integers(2, 9))))
            text = text + "\n" + bomb
    data = text.encode("utf-8", "surrogateescape")
    if draw(st.integers(0, 15)) == 0:
        data = data.replace(b"a", b"\xff", 1)
    return data


# ------------------------------------------------------------------------------------------ seeds


def _yaml_docs(paths: list[Path]) -> list[Any]:
    out = []
    for p in paths:
        try:
            out += [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
        except yaml.YAMLError:
            pass
    return out


def config_seeds() -> list[Any]:
    files = [*sorted((REPO / "examples" / "configs").glob("*.yaml")),
             *sorted((REPO / "tests/data/configs").glob("*.yaml"))]
    return _yaml_docs(files)


def migrate_seeds() -> list[Any]:
    return _yaml_docs(sorted((REPO / "tests/data/configs").glob("seed-*.yaml"))) + config_seeds()[:5]


def plugin_args_seeds() -> list[Any]:
    """The default configuration with every in-tree plugin's args written out (what `config default` prints)."""
    from scheduler_runtime.config.loader import default_document
    from scheduler_runtime.plugins.registry import build_registry

    doc = default_document({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
                           build_registry([]))
    doc = json.loads(json.dumps(doc, default=str))
    out = [doc]
    for pc in doc["profiles"][0].get("pluginConfig") or []:  # one seed per plugin: mutations land in its args
        one = copy.deepcopy(doc)
        one["profiles"][0]["pluginConfig"] = [pc]
        out.append(one)
    return out


def object_seeds() -> tuple[list[Any], list[Any]]:
    nodes = _yaml_docs([REPO / "examples/cluster/nodes.yaml"])
    pods = _yaml_docs([REPO / "examples/pods.yaml"])
    return nodes, pods


def text_seeds() -> list[str]:
    files = [*sorted((REPO / "examples" / "configs").glob("*.yaml"))[:3], REPO / "examples/cluster/nodes.yaml",
             REPO / "examples/pods.yaml", REPO / "tests/data/configs/seed-04-coscheduling-v1beta2.yaml"]
    return [p.read_text() for p in files]


# ------------------------------------------------------------------------------------------ targets


@dataclass
class Target:
    """One kind of input: a hypothesis strategy and how to feed a generated value to ksched."""

    name: str
    strategy: Callable[[], Any]  # built lazily: seeds are read when the target first runs
    run: Callable[[Any, Path], Outcome]
    budget: int  # inputs in the long mode (scaled by --scale)
    quick: int = 100  # inputs in the unit-test run


TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    TARGETS[target.name] = target
    return target


def _write(work: Path, name: str, data: str | bytes) -> Path:
    p = work / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
    return p


def _config_cmd(sub: str) -> Callable[[Any, Path], Outcome]:
    def run(doc: Any, work: Path) -> Outcome:
        f = _write(work, "cfg.yaml", doc if isinstance(doc, bytes) else dump(doc))
        args = ["config", sub, str(f)]
        return run_cli(args, (str(f) + ":",))
    return run


def _simulate(case: tuple[Any, Any], work: Path) -> Outcome:
    nodes, pods = case
    cluster = work / "cluster"
    cluster.mkdir(exist_ok=True)
    n = _write(cluster, "nodes.yaml", nodes if isinstance(nodes, bytes) else
               "".join("---\n" + dump(d) for d in (nodes if isinstance(nodes, list) else [nodes])))
    p = _write(work, "pods.yaml", pods if isinstance(pods, bytes) else
               "".join("---\n" + dump(d) for d in (pods if isinstance(pods, list) else [pods])))
    return run_cli(["simulate", "--cluster", str(cluster), "--pods", str(p)], (str(n) + ":", str(p) + ":"))


@st.composite
def _objects(draw: Any) -> tuple[Any, Any]:
    nodes, pods = object_seeds()
    node_docs = [draw(mutated(nodes)) if draw(st.booleans()) else copy.deepcopy(draw(st.sampled_from(nodes)))
                 for _ in range(draw(st.integers(1, 3)))]
    pod_docs = [draw(mutated(pods)) if draw(st.booleans()) else copy.deepcopy(draw(st.sampled_from(pods)))
                for _ in range(draw(st.integers(1, 4)))]
    return node_docs, pod_docs


@st.composite
def _raw_objects(draw: Any) -> tuple[Any, Any]:
    nodes_text = (REPO / "examples/cluster/nodes.yaml").read_text()
    pods_text = (REPO / "examples/pods.yaml").read_text()
    if draw(st.booleans()):
        return draw(raw_text([nodes_text])), pods_text.encode()
    return nodes_text.encode(), draw(raw_text([pods_text]))


VALUES_SEEDS = [
    {"scheduler": {"name": "sp", "leaderElect": False},
     "plugins": {"enabled": ["Coscheduling"], "disabled": ["PrioritySort"]},
     "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]},
    {"scheduler": {"name": "tp"}, "plugins": {"enabled": ["NetworkTraffic"]},
     "pluginConfig": [{"name": "NetworkTraffic", "args": {"prometheusAddress": "http://p:9090",
                                                           "networkInterface": "eth0", "timeRangeInMinutes": 3}}]},
]


def _values(doc: Any, work: Path) -> Outcome:
    f = _write(work, "values.yaml", doc if isinstance(doc, bytes) else dump(doc))
    return run_cli(["config", "render", "--values", str(f)], (str(f) + ":",))


KUBECONFIG_SEEDS = [
    {"apiVersion": "v1", "kind": "Config", "current-context": "c",
     "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "eA=="}}],
     "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "default"}}],
     "users": [{"name": "u", "user": {"token": "t"}}]},
]


def _kubeconfig(doc: Any, work: Path) -> Outcome:
    """The kubeconfig check every command runs before the client library reads the file."""
    from scheduler_runtime.cluster.kube import KubeConfigError, check_kubeconfig

    f = _write(work, "kubeconfig", doc if isinstance(doc, bytes) else dump(doc))
    return run_call(lambda: check_kubeconfig(str(f)), (KubeConfigError,))


def _render(flags: list[str], work: Path) -> Outcome:
    return run_cli(["config", "render", *flags])


@st.composite
def _render_flags(draw: Any) -> list[str]:
    names = st.sampled_from(["NodeResourcesFit", "TaintToleration", "Coscheduling", "PrioritySort", "NetworkTraffic",
                             "ImageLocality", "*", "", "Nope"]) | st.text(max_size=8)
    out: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(["--plugin", "--disable", "--args", "--queue-sort", "--profile",
                                     "--scheduler-name"]))
        if flag == "--plugin":
            w = draw(st.sampled_from(["", ":1", ":-1", ":1e20", ":99999999999999999999", ":x", ":"]))
            val = draw(names) + w
        elif flag == "--args":
            val = (f"{draw(names)}.{draw(st.sampled_from(['hardPodAffinityWeight', 'scoringStrategy', 'x', '']))}"
                   f"={draw(st.sampled_from(NASTY_STRINGS) | st.text(max_size=10))}")
        elif flag == "--profile":
            val = draw(st.sampled_from(["name=a", "name=a,plugin=X:2", "plugin=A", "name=", "name=a,args=A.k=v", ""]))
        else:
            val = draw(names)
        out += [flag, val]
    return out


def _quantity(value: Any, work: Path) -> Outcome:
    from scheduler_runtime.errors import InputError
    from scheduler_runtime.quantity import resource_amount

    def go() -> None:
        for res in ("cpu", "memory"):
            try:
                amount = resource_amount(res, value, "spec.x")
            except InputError:
                continue
            assert isinstance(amount, int) and 0 <= amount <= 2**63 - 1, amount

    return run_call(go, (InputError,))


def _duration(value: str, work: Path) -> Outcome:
    """The parser itself, then the same text as a kube-scheduler flag (a UsageError is the one-line refusal)."""
    from scheduler_runtime.errors import UsageError
    from scheduler_runtime.goduration import parse_ns
    from scheduler_runtime.options.flags import parse

    def go() -> None:
        try:
            ns = parse_ns(value)
            assert -(2**63) <= ns <= 2**63 - 1
        except ValueError as exc:
            assert str(exc).startswith("time: ") and "\n" not in str(exc), exc
        parse(["--leader-elect-lease-duration", value])

    return run_call(go, (UsageError,))


quantity_text = st.one_of(
    st.sampled_from(QUANTITY_STRINGS),
    st.from_regex(r"\A[+-]?[0-9]{0,25}\.?[0-9]{0,25}([eE][+-]?[0-9]{1,12}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|K)?\Z"),
    st.text(alphabet="0123456789.+-eEKMGTPiunmk ", max_size=20),
    st.integers(min_value=-(2**80), max_value=2**80), st.floats(), st.none(), st.booleans(),
)
duration_text = st.one_of(
    st.from_regex(r"\A[+-]?([0-9]{0,22}(\.[0-9]{0,22})?(ns|us|µs|μs|ms|s|m|h|x|)){1,4}\Z"),
    st.text(alphabet="0123456789.+-nsuµμmhx ", max_size=16),
    st.sampled_from(["0", "-0", "15", "1h0", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
                     "-2562047h47m16.854775808s", "9" * 30 + "h", "." , "1.5h", "300ms"]),
)


def _builtin_targets() -> None:
    register(Target("config-validate", lambda: mutated(config_seeds()), _config_cmd("validate"), 8000))
    register(Target("config-default", lambda: mutated(config_seeds()), _config_cmd("default"), 4000))
    register(Target("config-migrate", lambda: mutated(migrate_seeds()), _config_cmd("migrate"), 8000))
    register(Target("plugin-args", lambda: mutated(plugin_args_seeds()), _config_cmd("validate"), 8000))
    register(Target("config-render", _render_flags, _render, 3000))
    register(Target("config-values", lambda: mutated(VALUES_SEEDS), _values, 3000))
    register(Target("kubeconfig", lambda: mutated(KUBECONFIG_SEEDS), _kubeconfig, 3000))
    register(Target("config-raw", lambda: raw_text(text_seeds()), _config_cmd("validate"), 5000))
    register(Target("simulate-objects", _objects, _simulate, 2000, quick=40))
    register(Target("simulate-raw", _raw_objects, _simulate, 1500, quick=30))
    register(Target("quantity", lambda: quantity_text, _quantity, 10000, quick=300))
    register(Target("duration", lambda: duration_text, _duration, 10000, quick=300))


_builtin_targets()


# ------------------------------------------------------------------------------------------ driver


@dataclass
class Report:
    name: str
    runs: int = 0
    codes: Counter = field(default_factory=Counter)
    failures: list[tuple[str, Any]] = field(default_factory=list)
    max_cpu: float = 0.0
    peak_rss: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return len(self.failures)


def fuzz(target: Target, examples: int, work: Path, seed: int | None = None) -> Report:
    """Run `examples` generated inputs of `target`; never raises on a bad input, records it instead."""
    import logging

    logging.disable(logging.CRITICAL)  # a config warning per input would drown the figures
    rep = Report(target.name)
    base = _rss()
    t0 = time.monotonic()

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=seed is not None)
    @given(target.strategy())
    def one(case: Any) -> None:
        before = _rss()
        out = target.run(case, work)
        rep.runs += 1
        rep.max_cpu = max(rep.max_cpu, out.cpu)
        grown = _rss() - max(before, base)
        if out.crash is None and grown > MEMORY_LIMIT:
            out.crash = f"memory: peak grew by {grown // 2**20} MB"
        rep.codes[out.code] += 1
        if out.crash is not None:
            rep.failures.append((out.crash, case))

    try:
        one()
    finally:
        logging.disable(logging.NOTSET)
    rep.seconds = time.monotonic() - t0
    rep.peak_rss = _rss()
    return rep


def _short(case: Any) -> str:
    text = repr(case)
    return text if len(text) < 600 else text[:600] + "..."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every target's budget")
    ap.add_argument("--only", default="", help="comma-separated target names")
    ap.add_argument("--show", type=int, default=5, help="failing inputs to print per target")
    opts = ap.parse_args(argv)
    names = [n for n in opts.only.split(",") if n] or list(TARGETS)
    total = Counter()
    bad = 0
    print(f"{'target':18} {'inputs':>7} {'ok':>7} {'exit1':>7} {'exit2':>7} {'crash':>6} {'hang':>5} "
          f"{'maxCPU s':>8} {'peakRSS MB':>10} {'wall s':>7}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ksched-fuzz-") as tmp:
        for name in names:
            target = TARGETS[name]
            rep = fuzz(target, max(1, int(target.budget * opts.scale)), Path(tmp))
            hangs = sum(1 for why, _ in rep.failures if why.startswith(("hang", "slow")))
            print(f"{name:18} {rep.runs:7} {rep.codes[0]:7} {rep.codes[1]:7} {rep.codes[2]:7} "
                  f"{rep.failed - hangs:6} {hangs:5} {rep.max_cpu:8.2f} {rep.peak_rss / 2**20:10.0f} "
                  f"{rep.seconds:7.0f}", flush=True)
            for why, case in rep.failures[: opts.show]:
                print(f"    {why}\n      input: {_short(case)}", flush=True)
            total["inputs"] += rep.runs
            total["failures"] += rep.failed
            bad += rep.failed
    print(f"total: {total['inputs']} inputs, {total['failures']} failures "
          f"(tracebacks, internal errors, multi-line errors, hangs, over-memory)")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())

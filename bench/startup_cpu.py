"""CPU seconds the kube-scheduler drop-in spends from exec to "caches synced" (ready to schedule).

Issue 14: startup is a third of ksched's CPU in the e2e bench. This runs the drop-in the way the e2e bench does
(`kube-scheduler --config=... --secure-port=0`) against a cluster the caller provides, in a child process that
reports its own user+sys CPU at three points: imports done (the runtime's modules), setup done (registry,
config, Runner: everything before `Runner.run`) and the informers' initial lists delivered. Reading the CPU
inside the process at the log record avoids the poll latency of /proc sampling, which charges the first
scheduling cycles to startup.

    python bench/startup_cpu.py --kubeconfig ~/.kube/config --runs 8
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from e2e_common import CONFIG

#: run in the child: the drop-in's entry point, with CPU checkpoints; `os._exit` at "caches synced"
CHILD = """
import logging, os, sys
def cpu():
    t = os.times()
    return t.user + t.system
marks = {}
class Ready(logging.Handler):
    def emit(self, record):
        if record.getMessage() == "caches synced":
            print("imports %.3f setup %.3f synced %.3f" % (marks["imports"], marks["setup"], cpu()), flush=True)
            os._exit(0)
logging.getLogger("ksched.app").addHandler(Ready())
from scheduler_runtime import gcpolicy
if hasattr(gcpolicy, "hold"):  # as run_on_cluster does before the runtime's imports (older trees: no hold)
    gcpolicy.hold()
from ksched_cli.kube_scheduler import main
import scheduler_runtime.app as app
import scheduler_runtime.options.resolve
marks["imports"] = cpu()
run = app.Runner.run
def timed_run(self):
    marks["setup"] = cpu()
    return run(self)
app.Runner.run = timed_run
sys.exit(main(sys.argv[1:]))
"""


def _row(v: list[float]) -> str:
    return f"imports {v[0]:.3f}  setup {v[1]:.3f}  initial lists {v[2]:.3f}  total {v[3]:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True, help="the cluster to list (its objects are the initial lists)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="checkout to run")
    args = ap.parse_args()
    for pkg in ("scheduler_runtime", "ksched_cli", "plugins"):  # as the e2e bench does (ensure_bytecode): a
        # start that compiles the source tree (PYTHONDONTWRITEBYTECODE, a fresh checkout) is not the one measured
        compileall.compile_dir(str(Path(args.tree) / pkg), quiet=1)
    rows: list[list[float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(CONFIG.format(kubeconfig=args.kubeconfig, qps=5000, burst=5000))
        env = dict(os.environ, PYTHONPATH=args.tree)
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", CHILD, f"--config={cfg}", "--secure-port=0"], env=env,
                                 cwd=tmp, capture_output=True, text=True, timeout=120)
            line = next((x for x in out.stdout.splitlines() if x.startswith("imports ")), None)
            if line is None:
                sys.exit(f"no 'caches synced' (exit {out.returncode}):\n{out.stderr[-2000:]}")
            vals = [float(v) for v in line.split()[1::2]]
            rows.append([vals[0], vals[1] - vals[0], vals[2] - vals[1], vals[2]])
            print(_row(rows[-1]), flush=True)
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print("median:", _row(med))


if __name__ == "__main__":
    main()

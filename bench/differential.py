"""Differential run against the real kube-scheduler over many seeds (long mode of tests/differential).

Starts its own control plane (etcd + kube-apiserver built for the tests), runs each seed's scenario with
kube-scheduler and then ksched (tests/differential/oracle.py), and prints the counts per kind of comparison
and every disagreement with its seed. A disagreeing seed's scenario is shrunk (delta debugging over the
pods to schedule, the bound pods and the nodes, rerunning both schedulers per trial) to those that still
reproduce the first disagreement, and printed as YAML (also written to `--repro DIR/seed-N.yaml`).

    python bench/differential.py --seeds 50 [--first 100] [--nodes 10] [--pods 40] [--shrink-trials 60]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_runtime.controlplane import ControlPlane  # noqa: E402
from tests.differential.oracle import compare, run_ksched, run_kube  # noqa: E402
from tests.differential.scenario import Scenario, generate  # noqa: E402
from tests.differential.shrink import scenario_yaml, shrink  # noqa: E402


def _reproduces(cp: ControlPlane, work: Path, kind: str, pod: str) -> Any:
    def still_fails(sc: Scenario) -> bool:
        kube = run_kube(cp.kubeconfig_path, cp.bin_dir, work, sc)
        cmp = compare(sc.seed, kube.decisions, run_ksched(sc, kube, work))
        return any(d["kind"] == kind and d["pod"] == pod for d in cmp.disagreements)
    return still_fails


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--pods", type=int, default=40)
    ap.add_argument("--repro", type=Path, default=None, help="write each shrunk reproduction there as YAML")
    ap.add_argument("--shrink-trials", type=int, default=60,
                    help="reruns allowed to shrink one disagreeing seed (0: print the whole scenario)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--budget", type=float, default=0.0,
                    help="stop starting new seeds after this many seconds (0: no limit); the summary still prints")
    a = ap.parse_args()
    # a SIGTERM (e.g. from timeout) unwinds through the finally below, so the control plane is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    done = 0
    totals: dict[str, list[int]] = {}
    notes: dict[str, int] = {}
    bad_seeds = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ksched-diff-") as tmp:
        work = Path(tmp)
        cp = ControlPlane(state_dir=work / "cp")
        cp.start()
        try:
            cp.start_controller_manager(("persistentvolume-binder-controller",))
            for seed in range(a.first, a.first + a.seeds):
                if a.budget and time.monotonic() - start > a.budget:
                    break
                done += 1
                sc = generate(seed, n_nodes=a.nodes, n_pods=a.pods)
                kube = run_kube(cp.kubeconfig_path, cp.bin_dir, work, sc)
                ours = run_ksched(sc, kube, work)
                cmp = compare(seed, kube.decisions, ours)
                for kind, (ok, bad) in cmp.counts.items():
                    row = totals.setdefault(kind, [0, 0])
                    row[0] += ok
                    row[1] += bad
                for k, v in cmp.notes.items():
                    notes[k] = notes.get(k, 0) + v
                if cmp.disagreements:
                    bad_seeds.append(seed)
                    for d in cmp.disagreements:
                        print(json.dumps(d), flush=True)
                    first = cmp.disagreements[0]
                    small = shrink(sc, first["pod"], _reproduces(cp, work, first["kind"], first["pod"]),
                                   trials=a.shrink_trials) if a.shrink_trials > 0 else sc
                    text = scenario_yaml(small, f"seed {seed}: {first['kind']} disagreement on pod {first['pod']}\n"
                                         f"{json.dumps(first['detail'])}\n{len(small.nodes)} nodes, "
                                         f"{len(small.bound)} bound pods, {len(small.pods)} pods to schedule")
                    print(f"--- minimal reproduction of seed {seed} ---\n{text}--- end of seed {seed} ---", flush=True)
                    if a.repro is not None:
                        a.repro.mkdir(parents=True, exist_ok=True)
                        (a.repro / f"seed-{seed}.yaml").write_text(text)
                if a.verbose:
                    print(json.dumps({"seed": seed, "counts": cmp.counts, "notes": cmp.notes}), flush=True)
        finally:
            cp.stop()
    print(f"\n{done} seeds x {a.pods} pods over {a.nodes} nodes in {time.monotonic() - start:.0f}s")
    print(f"{'comparison':12} {'agree':>7} {'disagree':>9}")
    for kind, (ok, bad) in sorted(totals.items()):
        print(f"{kind:12} {ok:7} {bad:9}")
    for k, v in sorted(notes.items()):
        print(f"note: {k}: {v}")
    print(f"seeds with disagreements: {bad_seeds or 'none'}")
    return 1 if bad_seeds else 0


if __name__ == "__main__":
    sys.exit(main())

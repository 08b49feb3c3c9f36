"""Harvest kube-scheduler's plugin test tables as data (JSON lines), from the pinned Kubernetes release.

For each plugin package: copy it to a scratch Go module, add dump_helper.go (writes every case a test
table loop visits) and a one-line call at the top of each table loop, run `go test`, and collect the
cases. The scratch copy is deleted; nothing of the upstream code is kept, only the cases' inputs and
expectations, which tests/data/upstream_tables/*.json hold (see tests/unit/test_upstream_tables.py).

Usage: python hack/upstream_tables/harvest.py PKG [PKG...]   (PKG like noderesources, tainttoleration)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KUBE = Path.home() / "go/pkg/mod/k8s.io/kubernetes@v1.36.3/pkg/scheduler/framework/plugins"
SCRATCH = Path(os.environ.get("KSCHED_TABLES_SCRATCH", "/tmp/ksched-upstream-tables"))
OUT = HERE / "raw"
LOOP = re.compile(r"^(\s*)for (\w+), (\w+) := range (\w+) \{\s*$")
FUNC = re.compile(r"^func ((?:Test|test)\w+)\((t \*testing\.T|tCtx ktesting\.TContext)\)")
#: objects a test function builds before its table loop and every case shares (volume plugins' listers):
#: dumped with each case as `fixtures`
FIXTURE = re.compile(r"^\t(\w+Lister) := ")
#: tests that build their fixtures inside the case loop: dumped at an anchor line after they exist, with
#: the given expressions, instead of at the top of the loop
HOOKS = {
    "TestCSILimits": ("_, gotPreFilterStatus := p.PreFilter(",
                      'test.test, &test, map[string]any{"node": node, "csiNode": csiNode, "pvs": p.pvLister, '
                      '"pvcs": p.pvcLister, "scs": p.scLister, "vas": func() any { l, _ := informerFactory.Storage().'
                      'V1().VolumeAttachments().Lister().List(labels.Everything()); return l }()}'),
    # its expectations depend on the CSIDriver of the outer loop, which only the run closure sees
    "TestFindPodVolumesWithProvisioning": ("podVolumes, reasons, err := findPodVolumes(",
                                           't.Name(), &scenario, map[string]any{"csiDriver": csiDriver}'),
    "TestCapacity": ("podVolumes, reasons, err := findPodVolumes(",
                     't.Name(), &scenario, map[string]any{"optIn": optIn}'),
}
TABLE_NAMES = {"tests", "testCases", "cases", "table", "tcs", "testcases", "tts", "scenarios", "enoughPodsTests",
               "notEnoughPodsTests", "storagePodsTests"}


def prepare_module() -> None:
    SCRATCH.mkdir(parents=True, exist_ok=True)
    gomod = (ROOT / "hack/controlplane/go.mod").read_text().replace(
        "module ksched.local/hack/controlplane", "module ksched.local/tables")
    (SCRATCH / "go.mod").write_text(gomod)
    shutil.copy(ROOT / "hack/controlplane/go.sum", SCRATCH / "go.sum")


def inject(pkg: str) -> Path:
    src = KUBE / pkg
    dst = SCRATCH / pkg
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    pkgname = ""
    for f in sorted(dst.glob("*_test.go")):
        lines = f.read_text().splitlines()
        m = next((re.match(r"^package (\w+)$", ln) for ln in lines if ln.startswith("package ")), None)
        if m is None or m.group(1).endswith("_test"):
            continue
        pkgname = m.group(1)
        fn = ""
        tvar = "t"
        fixtures: list[str] = []
        out = []
        for ln in lines:
            if ln.startswith("func "):
                fm = FUNC.match(ln)
                fn = fm.group(1) if fm else ""
                tvar = "t" if fm and fm.group(2).startswith("t ") else "tCtx"
                fixtures = []
            fx = FIXTURE.match(ln)
            if fx and fn:
                fixtures.append(fx.group(1))
            hook = HOOKS.get(fn)
            if hook is not None and hook[0] in ln:
                indent = ln[:len(ln) - len(ln.lstrip())]
                out.append(f'{indent}ksDumpWith({tvar}, "{fn}", {hook[1]})')
            out.append(ln)
            lm = LOOP.match(ln)
            if lm and fn and lm.group(4) in TABLE_NAMES and fn not in HOOKS:
                key = lm.group(2) if lm.group(2) != "_" else '""'
                fx_map = "map[string]any{" + ", ".join(f'"{n}": {n}' for n in fixtures) + "}"
                out.append(f'{lm.group(1)}\tksDumpWith({tvar}, "{fn}", {key}, &{lm.group(3)}, {fx_map})')
        f.write_text("\n".join(out) + "\n")
    helper = (HERE / "dump_helper.go.txt").read_text().replace("package PKGNAME", f"package {pkgname}")
    (dst / "zz_ksched_dump_test.go").write_text(helper)
    return dst


def harvest(pkg: str) -> Path:
    prepare_module()
    inject(pkg)
    OUT.mkdir(exist_ok=True)
    out = OUT / f"{pkg}.jsonl"
    if out.exists():
        out.unlink()
    env = {**os.environ, "KSCHED_TABLE_DUMP": str(out), "GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "test", "-count=1", "-run", ".", f"./{pkg}/"], cwd=SCRATCH, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        path = harvest(p)
        n = sum(1 for _ in path.open()) if path.exists() else 0
        print(f"{p}: {n} cases -> {path}")

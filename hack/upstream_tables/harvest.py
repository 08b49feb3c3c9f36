"""Harvest kube-scheduler's plugin test tables as data (JSON lines), from the pinned Kubernetes release.

For each plugin package: copy it to a scratch Go module, add dump_helper.go (writes every case a test
table loop visits) and a one-line call at the top of each table loop, run `go test`, and collect the
cases. The scratch copy is deleted; nothing of the upstream code is kept, only the cases' inputs and
expectations, which tests/data/upstream_tables/*.json hold (see tests/unit/test_upstream_tables.py).

Usage: python hack/upstream_tables/harvest.py [--kube-version 1.37.2] PKG [PKG...]
       (PKG like noderesources, tainttoleration; the version's source must be in the Go module cache, and one of
       hack/controlplane or hack/controlplane-prev must pin it: its go.mod gives the scratch module's staging
       versions). Raw cases go to raw/<version>/<pkg>.jsonl.
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
DEFAULT_VERSION = "1.37.2"
#: the Go modules that pin a Kubernetes release (their go.mod replaces the staging modules with that release's)
MODULES = ("hack/controlplane", "hack/controlplane-prev")
SCRATCH = Path(os.environ.get("KSCHED_TABLES_SCRATCH", "/tmp/ksched-upstream-tables"))
RAW = HERE / "raw"


def kube_source(version: str) -> Path:
    return Path.home() / f"go/pkg/mod/k8s.io/kubernetes@v{version}/pkg/scheduler/framework/plugins"


def module_for(version: str) -> Path:
    """The control-plane module whose go.mod requires k8s.io/kubernetes at `version`."""
    want = re.compile(rf"^\s*(?:require\s+)?k8s\.io/kubernetes v{re.escape(version)}\s*$", re.M)
    for m in MODULES:
        if want.search((ROOT / m / "go.mod").read_text()):
            return ROOT / m
    raise SystemExit(f"harvest.py: no module of {', '.join(MODULES)} pins k8s.io/kubernetes v{version}")
LOOP = re.compile(r"^(\s*)for (\w+), (\w+) := range (\w+) \{\s*$")
#: a loop over an inline table (`for _, tt := range []struct {` ... `} {`): dumped after the table's closing line
INLINE_LOOP = re.compile(r"^(\s*)for (\w+), (\w+) := range \[\]struct \{\s*$")
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
    # its CSIDriver lister (with or without preventPodSchedulingIfMissing) is built in the case loop
    "TestVolumeLimitScalingGate": ("_, preStatus := p.PreFilter(ctx, nil, newPod, nil)",
                                   'tt.name, &tt, map[string]any{"node": node, "csiNode": csiNode, "pvs": p.pvLister, '
                                   '"pvcs": p.pvcLister, "scs": p.scLister, "drivers": p.csiDriverLister, '
                                   '"pod": newPod}'),
    # its expectations depend on the CSIDriver of the outer loop, which only the run closure sees
    "TestFindPodVolumesWithProvisioning": ("podVolumes, reasons, err := findPodVolumes(",
                                           't.Name(), &scenario, map[string]any{"csiDriver": csiDriver}'),
    "TestCapacity": ("podVolumes, reasons, err := findPodVolumes(",
                     't.Name(), &scenario, map[string]any{"optIn": optIn}'),
}
TABLE_NAMES = {"tests", "testCases", "cases", "table", "tcs", "testcases", "tts", "scenarios", "enoughPodsTests",
               "notEnoughPodsTests", "storagePodsTests"}


def prepare_module(version: str) -> Path:
    """A scratch module per version (so two versions never share a go.mod); returns its directory."""
    mod = module_for(version)
    scratch = SCRATCH / version
    scratch.mkdir(parents=True, exist_ok=True)
    gomod = re.sub(r"^module .*$", "module ksched.local/tables", (mod / "go.mod").read_text(), count=1, flags=re.M)
    (scratch / "go.mod").write_text(gomod)
    shutil.copy(mod / "go.sum", scratch / "go.sum")
    return scratch


def inject(pkg: str, version: str, scratch: Path) -> Path:
    src = kube_source(version) / pkg
    dst = scratch / pkg
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
        inline: tuple[str, str, str] | None = None  # (indent, key, var) of an open inline-table loop
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
            if inline is not None and ln == f"{inline[0]}}} {{":
                key = inline[1] if inline[1] != "_" else '""'
                out.append(f'{inline[0]}\tksDumpWith({tvar}, "{fn}", {key}, &{inline[2]}, map[string]any{{}})')
                inline = None
            im = INLINE_LOOP.match(ln)
            if im and fn and fn not in HOOKS:
                inline = (im.group(1), im.group(2), im.group(3))
            lm = LOOP.match(ln)
            if lm and fn and lm.group(4) in TABLE_NAMES and fn not in HOOKS:
                key = lm.group(2) if lm.group(2) != "_" else '""'
                fx_map = "map[string]any{" + ", ".join(f'"{n}": {n}' for n in fixtures) + "}"
                out.append(f'{lm.group(1)}\tksDumpWith({tvar}, "{fn}", {key}, &{lm.group(3)}, {fx_map})')
        f.write_text("\n".join(out) + "\n")
    helper = (HERE / "dump_helper.go.txt").read_text().replace("package PKGNAME", f"package {pkgname}")
    (dst / "zz_ksched_dump_test.go").write_text(helper)
    return dst


def harvest(pkg: str, version: str = DEFAULT_VERSION) -> Path:
    scratch = prepare_module(version)
    inject(pkg, version, scratch)
    outdir = RAW / version
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / f"{pkg}.jsonl"
    if out.exists():
        out.unlink()
    env = {**os.environ, "KSCHED_TABLE_DUMP": str(out), "GOFLAGS": "-mod=mod"}
    res = subprocess.run(["go", "test", "-count=1", "-run", ".", f"./{pkg}/"], cwd=scratch, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if not out.exists():  # the package did not build: say why rather than report 0 cases
        sys.stderr.write(res.stderr.decode(errors="replace")[-4000:])
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="harvest kube-scheduler plugin test tables into raw/<version>/")
    ap.add_argument("--kube-version", default=DEFAULT_VERSION, help="Kubernetes release (default %(default)s)")
    ap.add_argument("packages", nargs="+")
    ns = ap.parse_args()
    for p in ns.packages:
        path = harvest(p, ns.kube_version)
        n = sum(1 for _ in path.open()) if path.exists() else 0
        print(f"{p}: {n} cases -> {path}")

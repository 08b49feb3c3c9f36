"""Harvest the feature gates a kube-scheduler binary registers, with kube's versioned specs, from the Go source.

kube-scheduler's gate set is the union of the maps its packages add to the default feature gate:
k8s.io/kubernetes pkg/features (which also re-lists the apiserver, apiextensions, controller-manager and z-pages
gates it uses), k8s.io/apiserver pkg/features, k8s.io/apiextensions-apiserver pkg/features, client-go's
features (through kube's adapter), and component-base's logs, metrics and z-pages gates (cmd/kube-scheduler
adds those). Each gate has a list of {Version, Default, PreRelease, LockToDefault, MinCompatibilityVersion};
the dependencies come from pkg/features' defaultKubernetesFeatureGateDependencies.

Usage:  python hack/featuregates/harvest.py 1.37.2 > scheduler_runtime/data/kube-feature-gates.json
The modules must be in the Go module cache (`go mod download -json k8s.io/kubernetes@v1.37.2` and the
staging modules at v0.37.2). Reads the Go text only; no Go code is run or copied.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

#: (module, file inside it, registered?) -- unregistered files only resolve constant names
FILES = [
    ("k8s.io/kubernetes@v1.{minor}", "pkg/features/kube_features.go", True),
    ("k8s.io/apiserver@v0.{minor}", "pkg/features/kube_features.go", True),
    ("k8s.io/apiextensions-apiserver@v0.{minor}", "pkg/features/kube_features.go", True),
    ("k8s.io/client-go@v0.{minor}", "features/known_features.go", True),
    ("k8s.io/component-base@v0.{minor}", "zpages/features/kube_features.go", True),
    ("k8s.io/component-base@v0.{minor}", "logs/api/v1/kube_features.go", True),
    ("k8s.io/component-base@v0.{minor}", "metrics/features/kube_features.go", True),
    ("k8s.io/controller-manager@v0.{minor}", "pkg/features/kube_features.go", False),
]
_CONST = re.compile(r'^\s*(\w+)\s+(?:featuregate\.)?Feature\s*=\s*"(\w+)"', re.M)
_SPECMAP = re.compile(r"map\[(?:featuregate\.)?Feature\](?:featuregate\.)?VersionedSpecs\{")
_DEPMAP = re.compile(r"map\[featuregate\.Feature\]\[\]featuregate\.Feature\{")
_KEY = re.compile(r"^\s*(?:\w+\.)?(\w+):\s*\{\s*(?://.*)?$")
_SPEC = re.compile(r"\{([^{}]*)\}")
_FIELD = re.compile(r'(\w+):\s*(version\.MustParse\("([\d.]+)"\)|true|false|(?:featuregate\.)?(\w+))')
STAGES = {"Alpha": "ALPHA", "Beta": "BETA", "GA": "", "Deprecated": "DEPRECATED", "PreAlpha": "PRE-ALPHA"}


def _block(text: str, start: int) -> str:
    """The text of the brace block opening at text[start - 1] == '{'."""
    depth, i = 1, start
    while depth:
        c = text[i]
        depth += c == "{"
        depth -= c == "}"
        i += 1
    return text[start:i - 1]


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def _specs(body: str, names: dict[str, str]) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        m = _KEY.match(lines[i])
        if not m:
            i += 1
            continue
        entry = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*\},?\s*$", lines[i]):
            entry.append(lines[i])
            i += 1
        specs = []
        for sm in _SPEC.finditer(" ".join(entry)):
            spec: dict[str, object] = {"lockToDefault": False, "minCompatibilityVersion": None}
            for f in _FIELD.finditer(sm.group(1)):
                key, raw, ver, ident = f.group(1), f.group(2), f.group(3), f.group(4)
                if key == "Version":
                    spec["version"] = ver
                elif key == "MinCompatibilityVersion":
                    spec["minCompatibilityVersion"] = ver
                elif key == "Default":
                    spec["default"] = raw == "true"
                elif key == "LockToDefault":
                    spec["lockToDefault"] = raw == "true"
                elif key == "PreRelease":
                    spec["preRelease"] = STAGES[ident]
            if not {"version", "default", "preRelease"} <= spec.keys():
                raise SystemExit(f"cannot read a spec of {m.group(1)}: {sm.group(0)}")
            specs.append(spec)
        if specs:  # the empty `X: {},` of the dependency-free listing are not specs
            out[names.get(m.group(1), m.group(1))] = specs
        i += 1
    return out


def harvest(version: str) -> dict[str, object]:
    minor = version.split(".", 1)[1]
    modcache = Path(subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    texts = []
    for mod, rel, registered in FILES:
        p = modcache / mod.format(minor=minor) / rel
        if not p.exists():
            raise SystemExit(f"{p} is missing: run `go mod download -json {mod.format(minor=minor)}`")
        texts.append((p, _strip_comments(p.read_text()), registered))
    names: dict[str, str] = {}
    for _p, text, _r in texts:
        for ident, value in _CONST.findall(text):
            names[ident] = value
    gates: dict[str, list[dict[str, object]]] = {}
    for p, text, registered in texts:
        if not registered:
            continue
        for m in _SPECMAP.finditer(text):
            for name, specs in _specs(_block(text, m.end()), names).items():
                if name in gates and gates[name] != specs:
                    raise SystemExit(f"{p}: {name} registered twice with different specs")
                gates[name] = specs
    deps: dict[str, list[str]] = {}
    kube = texts[0][1]
    m = _DEPMAP.search(kube)
    if m:
        for line in _block(kube, m.end()).split("\n"):
            dm = re.match(r"^\s*(?:\w+\.)?(\w+):\s*\{([^}]*)\},", line)
            if dm and dm.group(2).strip():
                # an entry is `Name`, `pkg.Name` or `featuregate.Feature(pkg.Name)`
                idents = [re.sub(r"^.*?(\w+)\)?$", r"\1", d.strip()) for d in dm.group(2).split(",") if d.strip()]
                deps[names.get(dm.group(1), dm.group(1))] = [names.get(i, i) for i in idents]
    # component-base featuregate's own generic gates
    gates["AllAlpha"] = [{"version": "0.0", "default": False, "preRelease": "ALPHA", "lockToDefault": False,
                          "minCompatibilityVersion": None}]
    gates["AllBeta"] = [{"version": "0.0", "default": False, "preRelease": "BETA", "lockToDefault": False,
                         "minCompatibilityVersion": None}]
    return {"kubernetes": version, "source": [f"{mod.format(minor=minor)}/{rel}" for mod, rel, _r in FILES],
            "gates": dict(sorted(gates.items())), "dependencies": dict(sorted(deps.items()))}


if __name__ == "__main__":
    if len(sys.argv) != 2 or not re.fullmatch(r"1\.\d+\.\d+", sys.argv[1]):
        raise SystemExit("usage: harvest.py 1.MINOR.PATCH")
    data = harvest(sys.argv[1])
    # one gate per line: reviewable diffs when the pinned release moves
    out = sys.stdout
    out.write("{\n" + f' "kubernetes": {json.dumps(data["kubernetes"])},\n "source": {json.dumps(data["source"])},\n')
    # a spec as [version, default, preRelease, lockToDefault, minCompatibilityVersion]
    data["gates"] = {name: [[s["version"], s["default"], s["preRelease"], s["lockToDefault"],
                             s["minCompatibilityVersion"]] for s in specs]
                     for name, specs in data["gates"].items()}  # type: ignore[attr-defined]
    for key in ("gates", "dependencies"):
        items = list(data[key].items())  # type: ignore[attr-defined]
        out.write(f' "{key}": {{\n')
        out.write(",\n".join(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in items))
        out.write("\n }" + (",\n" if key == "gates" else "\n"))
    out.write("}\n")

"""One fuzz case for `ksched deploy --static-pod`: a manifest's bytes in, the exit code and stderr out.

Reusable by a long-mode runner (bench/): `staticpod_case_problems(data, tmpdir)` runs one case in-process
(the real CLI function, the real registry and files) and lists every broken promise: an exit code outside
the documented set, a traceback or an `internal error`, more than one line on stderr, a refusal that left
anything written. `MANIFEST_SEEDS` and `manifest_bytes()` (hypothesis) generate inputs.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

import typer

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "tests" / "data" / "manifests"
IMAGE = "registry.example.com/team/ksched:v1.2.3"
#: documented in docs/deploy.md (3 is only for --second-scheduler --apply)
EXIT_CODES = {0, 1, 2}
CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
"""
MANIFEST_SEEDS = sorted(p.name for p in MANIFESTS.glob("*.yaml"))


def _node(tmpdir: Path) -> dict[str, Path]:
    etc = tmpdir / "etc-kubernetes"
    (etc / "manifests").mkdir(parents=True, exist_ok=True)
    os.chmod(tmpdir, 0o700)
    return {"manifest": etc / "manifests" / "kube-scheduler.yaml", "dest": etc / "ksched-config.yaml",
            "backups": etc / "ksched-backups", "cfg": tmpdir / "cfg.yaml"}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))}


def fuzz_staticpod_case(data: bytes, tmpdir: Path) -> tuple[int, str, bool]:
    """Write `data` as the manifest in a fresh fake node under `tmpdir` (empty) and run
    `ksched deploy --static-pod --yes` in-process.

    Returns (exit code, stderr, whether nothing under `tmpdir` changed)."""
    from ksched_cli.commands.deploy import deploy
    from ksched_cli.guard import error_boundary

    node = _node(tmpdir)
    node["manifest"].write_bytes(data)
    node["manifest"].chmod(0o600)
    node["cfg"].write_text(CONFIG)
    before = _snapshot(tmpdir)
    # strict UTF-8 streams, like a terminal's: printing something that is not Unicode text fails here too
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with error_boundary():  # the root group applies it to every command
                deploy(static_pod=True, config=node["cfg"], image=IMAGE, manifest=node["manifest"],
                       config_dest=node["dest"], backup_dir=node["backups"], yes=True)
        except typer.Exit as exc:
            code = exc.exit_code
        except BaseException as exc:  # what the CLI would show as a traceback
            import traceback

            code = -1
            err.write("Traceback (escaped the CLI):\n" + "".join(traceback.format_exception(exc)).encode(
                "utf-8", "backslashreplace").decode())
    return code, err.buffer.getvalue().decode(), _snapshot(tmpdir) == before  # type: ignore[attr-defined]


def staticpod_case_problems(data: bytes, tmpdir: Path) -> list[str]:
    """Every promise `deploy --static-pod` broke on this manifest (empty: it behaved)."""
    code, stderr, unchanged = fuzz_staticpod_case(data, tmpdir)
    problems = []
    if code not in EXIT_CODES:
        problems.append(f"exit code {code} not in {sorted(EXIT_CODES)}")
    if "Traceback" in stderr or "internal error" in stderr:
        problems.append(f"crash: {stderr.strip()[-2000:]}")
    if code != 0:
        lines = stderr.splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"stderr is not one `error:` line: {stderr!r}")
        elif str(tmpdir) not in lines[0] and not re.match(r"error: /[^:\s]*: ", lines[0]):
            # a manifest may point at a host path outside the test's folder (a mutated `--kubeconfig=/etc`)
            problems.append(f"the error names no file: {lines[0]!r}")
        if not unchanged:
            problems.append("a refusal wrote or changed files")
    return problems


# ------------------------------------------------------------------------------------------ generators


def seed_doc(name: str = "kubeadm-1.32.yaml") -> Any:
    import yaml

    return yaml.safe_load((MANIFESTS / name).read_text())


def field_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (mapping keys and list indexes) into `doc`, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += field_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += field_paths(v, (*prefix, i))
    return out


def replaced(doc: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    """A copy of `doc` with the value at `path` replaced (or deleted)."""
    import copy

    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def manifest_bytes() -> Any:
    """A hypothesis strategy of manifests: seeds with one field replaced by a value of another type or
    deleted, lists of non-mappings, YAML oddities (anchors, tags, duplicate keys, deep nesting), text and
    binary garbage, truncations."""
    import yaml
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                        st.text(max_size=20))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=12)

    @st.composite
    def mutated(draw: Any) -> bytes:
        doc = seed_doc(draw(st.sampled_from(MANIFEST_SEEDS)))
        for _ in range(draw(st.integers(1, 3))):
            paths = field_paths(doc)
            path = draw(st.sampled_from(paths))
            delete = bool(path) and draw(st.booleans()) and draw(st.booleans())
            doc = replaced(doc, path, None if delete else draw(values), delete)
        dump = draw(st.sampled_from(["yaml", "flow", "json"]))
        if dump == "json":
            import json

            return json.dumps(doc, default=str).encode()
        return yaml.safe_dump(doc, default_flow_style=(dump == "flow"), allow_unicode=True).encode()

    seed_text = st.sampled_from(MANIFEST_SEEDS).map(lambda n: (MANIFESTS / n).read_bytes())

    @st.composite
    def truncated(draw: Any) -> bytes:
        b = draw(seed_text)
        return b[:draw(st.integers(0, len(b)))]

    @st.composite
    def spliced(draw: Any) -> bytes:
        b = draw(seed_text)
        at = draw(st.integers(0, len(b)))
        junk = draw(st.sampled_from([b"&a ", b"*a", b"!!binary ", b"!!set ", b"!!python/object:os.system ", b"? ",
                                     b"!!omap ", b"!!int ", b"!!float ", b"!!bool ", b"!!timestamp ", b"!!map ",
                                     b"!!seq ", b"!!str ", b"\"\\ud800\" ",
                                     b"\t", b"\x00", b"\xff\xfe", b"{", b"]", b"- ", b": ", b"\n---\n", b"<<: *a\n",
                                     b"containers: 5\n", b"  spec:\n", b"'", b'"', b"%YAML 1.1\n", b"\xef\xbb\xbf"]))
        return b[:at] + junk + b[at:]

    special = st.sampled_from([
        b"", b"\n", b"~\n", b"null\n", b"[]\n", b"- 1\n- 2\n", b"just a string\n", b"42\n", b"{}\n",
        b"apiVersion: v1\nkind: Pod\n", b"apiVersion: v1\nkind: Pod\nspec: []\n",
        b"apiVersion: v1\nkind: Pod\nspec: {containers: []}\n",
        b"apiVersion: v1\nkind: Pod\nspec: {containers: [1, 'x', null, [], true]}\n",
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: kube-scheduler\n    command: kube-scheduler\n",
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: kube-scheduler, command: [kube-scheduler, 5]}\n",
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: kube-scheduler, volumeMounts: x}\n",
        b"apiVersion: v1\nkind: Pod\nspec:\n  volumes: [{name: 1}]\n  containers:\n  - {name: kube-scheduler}\n",
        b"apiVersion: v1\nkind: Pod\nkind: Pod\n", b"a: &a [*a]\n", b"? [a, b]\n: c\n", b"? {a: 1}\n: c\n",
        b"[" * 5000, b"- " * 3000 + b"x\n", b"a:\n" + b"  " * 2000 + b"b\n",
        b"x: " + b"a" * (70 << 10) + b"\n", b"\x89PNG\r\n\x1a\n\x00\x00", b"\xc3\x28",
    ])
    return st.one_of(mutated(), truncated(), spliced(), special, st.binary(max_size=300),
                     st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))

"""`ksched config validate` against the real kube-scheduler on the whole config corpus: the same verdict
for every file kube-scheduler can judge, and the same message wherever ksched does not deliberately say
more.

kube-scheduler is started with the config (pointing at an unreachable API server): an invalid config,
including the profile-build errors it reports only at start-up, makes it exit 1 at once with the reason;
a valid one is still running after a few seconds. Deliberate differences are listed with what
kube-scheduler says instead, so each one is still checked to be the same rejection.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests/data/configs").glob("*.yaml"))
OUT_OF_TREE = ("MyPreFilter", "NetworkTraffic", "NodeCRDResourceFit", "Coscheduling")
RUNNING = "still running"

#: file -> (why ksched's verdict differs, None) or (why ksched's wording differs, what kube-scheduler prints)
DIFFERENCES: dict[str, tuple[str, str | None]] = {
    "invalid-args-unknown-plugin.yaml": ("ksched reports args given to a plugin it does not know; "
                                         "kube-scheduler ignores them", None),
    "invalid-duplicate-profile.yaml": ("kube-scheduler prints the value as {}", 'Duplicate value: {}'),
    "invalid-unknown-plugin.yaml": ("ksched lists the known plugins", 'PreFilterPlugin "Foo" does not exist'),
    "invalid-unknown-profile-field.yaml": ("ksched puts the path first, like every other field error",
                                           'unknown field "profiles[0].plugin"'),
    "invalid-unknown-args-field.yaml": ("ksched gives the full path of the field",
                                        'decoding args for plugin InterPodAffinity: strict decoding error: '
                                        'unknown field "bogus"'),
    "invalid-args-kind-mismatch.yaml": ("ksched drops the API group from the kinds",
                                        "args for plugin NodeResourcesFit were not of type "
                                        "NodeResourcesFitArgs.kubescheduler.config.k8s.io, got "
                                        "InterPodAffinityArgs.kubescheduler.config.k8s.io"),
    "invalid-metadata.yaml": ("ksched explains that a config is not an API object", 'unknown field "metadata"'),
    "invalid-pod.yaml": ("ksched says what kind of file it got", 'no kind "Pod" is registered'),
    "invalid-policy.yaml": ("ksched says the Policy API was removed", 'no kind "Policy" is registered'),
}
for _f in CORPUS:
    _first = _f.read_text().splitlines()[0]
    if " was removed in Kubernetes 1." in _first:
        DIFFERENCES[_f.name] = ("ksched names the release that removed the apiVersion and the migrate command",
                                'no kind "KubeSchedulerConfiguration" is registered for version')


def _expectation(path: Path) -> str | None:
    first = path.read_text().splitlines()[0]
    return None if first.startswith("# expect: valid") else first.removeprefix("# expect-error: ")


def _judgeable(path: Path) -> bool:
    text = path.read_text()
    return not any(name in text for name in OUT_OF_TREE)


def _run_kube(binary: Path, path: Path, work: Path) -> tuple[int | str, str]:
    kc = work / "kubeconfig"
    text = path.read_text()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    cfg = work / path.name
    if isinstance(doc, dict) and doc.get("kind") == "KubeSchedulerConfiguration" and \
            isinstance(doc.get("clientConnection", {}), dict):
        doc.setdefault("clientConnection", {})["kubeconfig"] = str(kc)  # keep it from looking elsewhere
        cfg.write_text(yaml.safe_dump(doc))
    else:
        cfg.write_text(text)
    try:
        r = subprocess.run([str(binary), f"--config={cfg}", "--secure-port=0"], capture_output=True, text=True,
                           timeout=6)
    except subprocess.TimeoutExpired:
        return RUNNING, ""
    failed = [ln for ln in r.stderr.splitlines() if '"command failed"' in ln]
    return r.returncode, (failed[-1] if failed else r.stderr[-1500:])


@pytest.fixture(scope="module")
def kube_verdicts(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, str]]:
    work = tmp_path_factory.mktemp("verdicts")
    (work / "kubeconfig").write_text(DUMMY_KUBECONFIG)
    binary = control_plane.bin_dir / "kube-scheduler"
    files = [p for p in CORPUS if _judgeable(p)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda p: _run_kube(binary, p, work), files))
    return {p.name: r for p, r in zip(files, results, strict=True)}


def _unescape(text: str) -> str:
    return text.replace('\\"', '"')


@pytest.mark.parametrize("path", [p for p in CORPUS if _judgeable(p)], ids=lambda p: p.name)
def test_same_verdict_and_message_as_kube_scheduler(path: Path, kube_verdicts: dict[str, tuple[Any, str]]) -> None:
    rc, said = kube_verdicts[path.name]
    said = _unescape(said)
    expected = _expectation(path)
    why, kube_text = DIFFERENCES.get(path.name, ("", ""))
    if why and kube_text is None:
        assert rc == RUNNING, f"kube-scheduler now rejects {path.name} too ({said}); drop it from DIFFERENCES"
        return
    if expected is None:
        assert rc == RUNNING, f"ksched: valid; kube-scheduler exited {rc}: {said}"
        return
    assert rc == 1, f"ksched: invalid ({expected}); kube-scheduler: {rc} {said}"
    if kube_text:
        assert kube_text in said, f"{why}; expected kube-scheduler to say {kube_text!r}, it said {said!r}"
        return
    if "args.scoringStrategy" in expected:  # kube-scheduler checks Fit args when it builds the plugin
        expected = expected.split("args.", 1)[1]
        assert 'initializing plugin "NodeResourcesFit"' in said
    assert expected in said, f"ksched's expected error {expected!r} is not what kube-scheduler said: {said!r}"

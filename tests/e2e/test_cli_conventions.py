"""kubectl's conventions in every ksched command (issue 17): a closed pipe ends quietly, `-` reads standard
input, `-o` is a format (never a file), `ksched version`, shell completion, and `kubectl ksched` as a plugin.
Each test runs the real console entry points in a subprocess with real pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def ksched(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, input=stdin, timeout=120, env=ENV,
                          cwd=ROOT)


@pytest.mark.parametrize("args", [
    ["plugins", "list", "-o", "json"], ["plugins", "list"], ["config", "default"], ["--help"], ["version"],
    ["completion", "bash"], ["config", "explain", "NodeResourcesFit"],
])
def test_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    """`ksched ... | head`: the reader is gone before ksched writes; no traceback, no error line."""
    p = subprocess.Popen([str(KSCHED), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the only read end: every write ksched makes now fails with EPIPE
    err = p.stderr.read().decode()
    p.stderr.close()
    code = p.wait(timeout=120)
    assert err == "", err
    assert code == 1


def test_a_real_head_pipe_through_the_shell() -> None:
    r = subprocess.run(f"{KSCHED} config default | head -n 2", shell=True, capture_output=True, text=True,
                       timeout=120, env=ENV, cwd=ROOT)
    assert r.stdout.splitlines() == ["apiVersion: kubescheduler.config.k8s.io/v1", "clientConnection:"]
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_version_text_json_yaml() -> None:
    from scheduler_runtime import __version__
    from scheduler_runtime.app import KUBE_VERSION

    r = ksched("version")
    assert r.returncode == 0
    assert f"Client Version: ksched {__version__}" in r.stdout and f"v{KUBE_VERSION}" in r.stdout
    assert "Server Version" not in r.stdout
    j = json.loads(ksched("version", "-o", "json").stdout)
    assert j["clientVersion"]["ksched"] == __version__ and j["kubernetesVersion"] == f"v{KUBE_VERSION}"
    assert KUBE_VERSION == "1.37.2" and j["emulatableVersions"] == ["1.35", "1.36", "1.37"]
    assert "--emulated-version 1.35|1.36|1.37" in r.stdout
    assert yaml.safe_load(ksched("version", "-o", "yaml").stdout) == j


def test_version_names_a_missing_context() -> None:
    kc = ROOT / "tests" / "data"  # any folder: the kubeconfig is checked before a connection is tried
    r = ksched("version", "--kubeconfig", str(kc / "nope.kubeconfig"), "--context", "x")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "nope.kubeconfig" in r.stderr, r.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_that_completes(shell: str) -> None:
    r = ksched("completion", shell)
    assert r.returncode == 0 and "_KSCHED_COMPLETE" in r.stdout
    env = {**ENV, "_KSCHED_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env |= {"COMP_WORDS": "ksched config val", "COMP_CWORD": "2"}
    else:
        env |= {"_TYPER_COMPLETE_ARGS": "ksched config val", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    out = subprocess.run([str(KSCHED)], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "validate" in out, out


def test_completion_refuses_an_unknown_shell() -> None:
    r = ksched("completion", "tcsh")
    assert r.returncode == 2 and "bash, zsh, fish" in r.stderr


def test_kubectl_plugin_entry_point() -> None:
    """pyproject installs `kubectl-ksched`; kubectl runs it for `kubectl ksched ...` with the remaining args."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = scripts["kubectl-ksched"].split(":")
    code = f"import sys; from {module} import {func} as f; sys.argv[0] = 'kubectl-ksched'; f()"
    base = [sys.executable, "-c", code]
    h = subprocess.run([*base, "describe-pod", "--help"], capture_output=True, text=True, env=ENV, timeout=60)
    assert h.returncode == 0 and "Usage: kubectl ksched describe-pod" in h.stdout, h.stdout
    r = subprocess.run([*base, "describe-pod", "web-1", "-n", "shop", "--cluster", "examples/cluster", "--pods",
                        "examples/pods.yaml", "-o", "json"], capture_output=True, text=True, env=ENV, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == "web-1"


@pytest.mark.parametrize("args", [["plugins", "list"], ["config", "explain", "NodeAffinity"],
                                  ["describe-pod", "web-1", "-n", "shop", "--cluster", "examples/cluster",
                                   "--pods", "examples/pods.yaml"]])
def test_output_yaml_and_json_are_honoured(args: list[str]) -> None:
    j = ksched(*args, "-o", "json")
    y = ksched(*args, "-o", "yaml")
    assert j.returncode == 0 and y.returncode == 0, j.stderr + y.stderr
    fy, fj = yaml.safe_load(y.stdout), json.loads(j.stdout)
    if args[0] == "describe-pod":  # two runs: event and condition times differ
        assert fy["node"] == fj["node"] and set(fy) == set(fj)
    else:
        assert fy == fj


def test_plugins_list_name() -> None:
    r = ksched("plugins", "list", "-o", "name")
    assert r.returncode == 0 and "NodeResourcesFit" in r.stdout.split()


def test_old_output_file_form_is_a_clear_usage_error(tmp_path: Path) -> None:
    old = ROOT / "tests/data/configs"
    seed = sorted(old.glob("valid-*.yaml"))[0]
    out = tmp_path / "new.yaml"
    for args in (["config", "migrate", str(seed), "-o", str(out)], ["config", "render", "-o", str(out)]):
        r = ksched(*args)
        assert r.returncode == 2, r.stderr
        assert "--write-to" in r.stderr and "yaml, json" in r.stderr, r.stderr
        assert not out.exists()
    r = ksched("config", "render", "--write-to", str(out))
    assert r.returncode == 0 and out.read_text().startswith("#")


def test_dash_reads_standard_input(tmp_path: Path) -> None:
    cfg = (ROOT / "examples/configs/most-allocated.yaml").read_text()
    r = ksched("config", "validate", "-", stdin=cfg)
    assert r.returncode == 0 and r.stdout.startswith("-: valid"), r.stdout + r.stderr
    d = ksched("config", "default", "-", stdin=cfg)
    assert d.returncode == 0 and "MostAllocated" in d.stdout
    pods = (ROOT / "examples/pods.yaml").read_text()
    s = ksched("simulate", "--cluster", "examples/cluster", "--pods", "-", "-o", "json", stdin=pods)
    assert s.returncode == 0, s.stderr
    assert any(p["pod"] == "shop/web-1" for p in json.loads(s.stdout)["pods"])
    dep = ksched("deploy", "--second-scheduler", "--config", "-", "--image", "registry.example.com/k:v1", "-o",
                 "json", stdin="apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert dep.returncode == 0, dep.stderr
    assert json.loads(dep.stdout)["kind"] == "List"
    twice = ksched("simulate", "--cluster", "-", "--pods", "-", stdin=pods)
    assert twice.returncode == 2 and "only once" in twice.stderr


TYPO_PODS = """apiVersion: v1
kind: Pod
metadata: {name: typo, namespace: default}
spec:
  tolerattions: [{key: a, operator: Exists}]
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: packed, namespace: default}
spec:
  schedulerName: bin-packer
  containers: [{name: c, image: x}]
"""
NO_DEFAULT = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: bin-packer
"""


def test_unknown_fields_and_a_config_without_default_scheduler_are_said(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(TYPO_PODS)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(NO_DEFAULT)
    r = ksched("simulate", "--cluster", "examples/cluster", "--pods", str(pods), "--config", str(cfg),
               "--compare", "examples/configs/most-allocated.yaml")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines.count(f'warning: {pods}: unknown field "spec.tolerattions" in Pod default/typo') == 1, lines
    assert any(ln.startswith(f"warning: {cfg}: no profile is named default-scheduler (profiles: bin-packer)")
               for ln in lines), lines
    j = json.loads(ksched("simulate", "--cluster", "examples/cluster", "--pods", str(pods), "--config", str(cfg),
                          "-o", "json").stdout)
    by_pod = {p["pod"]: p for p in j["pods"]}
    assert by_pod["default/packed"].get("node")
    assert "no profile of this config serves" in by_pod["default/typo"]["message"]
    v = ksched("config", "validate", str(cfg))
    assert v.returncode == 0 and "no profile is named default-scheduler" in v.stderr
    e = ksched("run", "--config", str(cfg), "--pods", str(pods), "--cluster", "examples/cluster")
    assert e.returncode == 0 and "no profile is named default-scheduler" in e.stderr, e.stderr


def test_config_unknown_fields_stay_errors(tmp_path: Path) -> None:
    """kube-scheduler decodes its config strictly: an unknown field is an error naming it, not a warning."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(NO_DEFAULT + "  pluginz: {}\n")
    r = ksched("config", "validate", str(cfg))
    assert r.returncode == 1 and 'profiles[0].pluginz: unknown field' in r.stderr.replace('"', ""), r.stderr


def test_config_commands_take_input_as_kubectl_does_with_f() -> None:
    """`-f/--filename FILE` (and `-f -`) names the input of config validate/default/migrate, as kubectl's
    `-f` does; the positional form still works; giving none, or both, is a one-line usage error."""
    cfg = ROOT / "examples" / "configs" / "coscheduling.yaml"
    assert ksched("config", "validate", "-f", str(cfg)).stdout.strip() == f"{cfg}: valid"
    assert ksched("config", "validate", "--filename", "-", stdin=cfg.read_text()).stdout.strip() == "-: valid"
    assert ksched("config", "default", "-f", str(cfg)).stdout == ksched("config", "default", str(cfg)).stdout
    for args in (["config", "validate"], ["config", "migrate"], ["config", "default", str(cfg), "-f", str(cfg)]):
        p = ksched(*args)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("error: "), (args, p.stderr)
    v1beta3 = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
    p = ksched("config", "migrate", "-f", "-", stdin=v1beta3)
    assert p.returncode == 0 and "apiVersion: kubescheduler.config.k8s.io/v1\n" in p.stdout, p.stderr

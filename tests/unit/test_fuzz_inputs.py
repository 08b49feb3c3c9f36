"""Property-based fuzzing of every input ksched reads, bounded for the default run.

Each target (bench/fuzz_inputs.py: config files for validate/default/migrate, plugin args, render flags,
raw YAML, Pod/Node files for simulate, quantities, durations) runs a few hundred generated inputs
in-process; every one must end in success or a one-line error with exit code 0, 1 or 2, with no
traceback, within 2 s of CPU and 200 MB. `python bench/fuzz_inputs.py` is the long mode (>= 50,000).
The cases below the fuzz test are the crashes the fuzzer found, kept as plain regression tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import fuzz_inputs  # noqa: E402


@pytest.mark.parametrize("name", list(fuzz_inputs.TARGETS))
def test_generated_inputs_end_in_success_or_a_one_line_error(name: str, tmp_path: Path) -> None:
    target = fuzz_inputs.TARGETS[name]
    rep = fuzz_inputs.fuzz(target, target.quick, tmp_path)
    assert rep.runs > 0
    assert not rep.failures, "\n".join(f"{why}: {fuzz_inputs._short(case)}" for why, case in rep.failures[:5])
    assert set(rep.codes) <= {0, 1, 2}


def _cli(*args: str) -> fuzz_inputs.Outcome:
    return fuzz_inputs.run_cli(list(args))


def _config(tmp_path: Path, text: str) -> str:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    return str(f)


HEAD = "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize("body", [
    "apiVersion: 6\nkind: KubeSchedulerConfiguration\n",
    HEAD + "profiles: {a: 1}\n",
    HEAD + "profiles: [{plugins: [1]}]\n",
    HEAD + "profiles: [{plugins: {score: {enabled: [[1]]}}}]\n",
    HEAD + "profiles: [{plugins: {score: {enabled: [{name: [1]}]}}}]\n",
    HEAD + "profiles: [{plugins: {score: {enabled: 3}}}]\n",
    HEAD + "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: [1]}]}]\n",
    HEAD + "profiles: [{pluginConfig: {a: 1}}]\n",
])
def test_migrate_refuses_wrong_types_with_a_field_path(tmp_path: Path, body: str) -> None:
    """`config migrate` crashed (TypeError/AttributeError) on each of these."""
    out = _cli("config", "migrate", _config(tmp_path, body))
    assert out.crash is None, out.crash
    assert out.code == 1 and out.stderr.startswith("error: ")


@pytest.mark.parametrize(("pod", "field"), [
    ("spec: {containers: []}", "spec.containers: Required value"),
    ("spec: {}", "spec.containers: Required value"),
    ("spec: {containers: [{name: c, image: x}], tolerations: [[1]]}", "spec.tolerations[0]"),
    ("spec: {containers: [{name: c, image: x}], affinity: 3}", "spec.affinity"),
    ("metadata: {name: p, labels: [a]}\nspec: {containers: [{name: c, image: x}]}", "metadata.labels"),
    ("spec: {containers: [{name: c, image: x, resources: {requests: [cpu]}}]}", "spec.containers[0].resources"),
])
def test_simulate_refuses_objects_kube_apiserver_could_not_decode(tmp_path: Path, pod: str, field: str) -> None:
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "n.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
                                                 "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n")
    text = "apiVersion: v1\nkind: Pod\n" + ("" if pod.startswith("metadata") else "metadata: {name: p}\n") + pod
    pods = _config(tmp_path, text + "\n")
    out = _cli("simulate", "--cluster", str(tmp_path / "cluster"), "--pods", pods)
    assert out.crash is None, out.crash
    assert out.code == 1 and out.stderr.startswith(f"error: {pods}: {field}")


def test_a_newline_in_a_flag_value_stays_on_one_line() -> None:
    out = _cli("config", "render", "--args", "a\nb=1")
    assert out.crash is None and out.code == 2 and out.stderr.count("\n") == 1


def test_a_newline_in_an_unknown_key_stays_on_one_line(tmp_path: Path) -> None:
    f = _config(tmp_path, 'apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n'
                          'profiles: [{schedulerName: s, "a\\nb": 1}]\n')
    out = _cli("config", "default", f)
    assert out.crash is None and out.code == 1 and out.stderr.count("\n") == 1


@pytest.mark.parametrize("context", ["{cluster: [k], user: u}", "{cluster: {a: 1}, user: u}",
                                     "{cluster: k, user: [u]}"])
def test_a_kubeconfig_with_a_list_where_a_name_belongs_is_a_one_line_error(tmp_path: Path, context: str) -> None:
    """check_kubeconfig crashed with `unhashable type` on these."""
    from scheduler_runtime.cluster.kube import KubeConfigError, check_kubeconfig

    f = tmp_path / "kc"
    f.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                 "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
                 f"contexts: [{{name: c, context: {context}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n")
    with pytest.raises(KubeConfigError) as info:
        check_kubeconfig(str(f))
    assert info.value.exit_code == 1 and "contexts[0].context." in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("pod_spec", "node_spec"), [
    ("tolerations: [null]", ""),
    ("affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [null]}}}", ""),
    ("overhead: {cpu: null}", ""),
    ("", "status: {allocatable: {cpu: '4', pods: '110'}, conditions: [null], images: [null]}"),
])
def test_null_list_elements_decode_to_zero_values(tmp_path: Path, pod_spec: str, node_spec: str) -> None:
    """A null element (`tolerations: [null]`) is the zero value in Go; simulate crashed on it (AttributeError)."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "n.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        + (node_spec or "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}") + "\n")
    pods = _config(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                             f"  containers: [{{name: c, image: x}}]\n  {pod_spec}\n")
    out = _cli("simulate", "--cluster", str(tmp_path / "cluster"), "--pods", pods)
    assert out.crash is None, out.crash
    assert out.code == 0, out.stderr

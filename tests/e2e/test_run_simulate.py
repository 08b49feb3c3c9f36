"""`ksched run` and `ksched simulate` on examples/, as a newcomer runs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EX = REPO / "examples"


def test_version(ksched):
    r = ksched("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("ksched ")


def test_run_embedded_default_schedules_and_exits(ksched):
    r = ksched("run", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "embedded cluster: 6 nodes" in r.stdout
    assert "✓ shop/web-1" in r.stdout
    # the pod that fits nowhere is reported with kube-scheduler's message format
    assert "shop/huge" in r.stdout and "0/6 nodes are available:" in r.stdout
    assert "shop/gated" in r.stdout and "non-empty scheduling gates: example.com/quota-check" in r.stdout
    assert "done:" in r.stdout


def _simulate_json(ksched, *extra: str) -> dict:
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(EX / "pods.yaml"), "-o", "json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_simulate_same_seed_same_placements(ksched):
    a = _simulate_json(ksched, "--seed", "7")
    b = _simulate_json(ksched, "--seed", "7")
    assert a == b
    pods = {p["pod"]: p for p in a["pods"]}
    assert pods["shop/huge"]["node"] is None
    assert pods["shop/huge"]["message"].startswith("0/6 nodes are available: ")
    assert pods["shop/gated"]["node"] is None
    assert pods["shop/trainer"]["node"] == "node-gpu"
    assert pods["shop/search-index"]["node"] == "node-b2"
    # three api pods with hostname anti-affinity land on three different nodes
    api_nodes = {pods[f"shop/api-{i}"]["node"] for i in (1, 2, 3)}
    assert len(api_nodes) == 3 and None not in api_nodes
    # the two host-port pods cannot share a node
    assert pods["shop/ingress"]["node"] != pods["shop/ingress-2"]["node"]


def test_simulate_preemption_evicts_low_priority(ksched):
    a = _simulate_json(ksched, "--seed", "1")
    pods = {p["pod"]: p for p in a["pods"]}
    assert pods["shop/critical-zone-c"]["node"] == "node-c1"
    assert any(v.startswith("shop/batch-") for v in a["preempted"])


def test_simulate_table_and_compare(ksched):
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(EX / "pods.yaml"),
               "--config", str(EX / "configs" / "least-allocated.yaml"),
               "--compare", str(EX / "configs" / "most-allocated.yaml"), "--seed", "2")
    assert r.returncode == 0, r.stderr
    assert "placements differ" in r.stdout
    assert "node utilisation" in r.stdout


def test_plugins_list(ksched):
    r = ksched("plugins", "list", "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = {p["name"]: p for p in json.loads(r.stdout)}
    assert rows["NodeResourcesFit"]["source"] == "in-tree"
    assert "filter" in rows["NodeResourcesFit"]["extensionPoints"]
    assert rows["NodeResourcesFit"]["args"]["scoringStrategy"]["type"] == "LeastAllocated"
    assert "DefaultBinder" in rows


@pytest.mark.parametrize("content, expect", [
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1\n", "invalid YAML"),
    ("apiVersion: v1\nkind: Node\nmetadata: {}\n", "metadata.name"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 1.5.3Gi}}\n",
     "status.allocatable.cpu"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {memory: -1Gi}}\n",
     "status.allocatable.memory"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
     "Duplicate value"),
    ("- 1\n- 2\n", "expected a Kubernetes object"),
])
def test_bad_cluster_input_one_line_error(ksched, tmp_path: Path, content: str, expect: str):
    f = tmp_path / "cluster.yaml"
    f.write_text(content)
    r = ksched("simulate", "--cluster", str(f), "--pods", str(EX / "pods.yaml"))
    assert r.returncode != 0
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, r.stderr
    assert str(f) in err and expect in err


def test_bad_pod_quantity_names_file_and_field(ksched, tmp_path: Path):
    f = tmp_path / "pods.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                 "  - name: c\n    resources: {requests: {memory: 12XB}}\n")
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(f))
    assert r.returncode != 0
    assert str(f) in r.stderr and "spec.containers[0].resources.requests.memory" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_plugin_in_config(ksched, tmp_path: Path):
    f = tmp_path / "cfg.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                 "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n"
                 "      enabled: [{name: NoSuchPlugin}]\n")
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(EX / "pods.yaml"), "--config", str(f))
    assert r.returncode == 1
    assert "NoSuchPlugin" in r.stderr and "Traceback" not in r.stderr


def test_missing_file_exit_2(ksched, tmp_path: Path):
    r = ksched("simulate", "--cluster", str(tmp_path / "nope.yaml"), "--pods", str(EX / "pods.yaml"))
    assert r.returncode == 2
    assert "no such file" in r.stderr


def test_debug_shows_traceback(ksched, tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {}\n")
    r = ksched("--debug", "simulate", "--cluster", str(f), "--pods", str(EX / "pods.yaml"))
    assert r.returncode != 0 and "Traceback" in r.stderr


HANGING_PLUGIN = '''"""PreBind that never returns for pods named hang-*."""
import threading

from scheduler_runtime.framework.plugin import Plugin


class HangBind(Plugin):
    name = "HangBind"

    def pre_bind(self, state, pod, node_name):
        if pod.name.startswith("hang-"):
            threading.Event().wait()
        return None
'''


def test_run_and_simulate_go_on_past_a_hanging_prebind(ksched, tmp_path: Path):
    (tmp_path / "plugins" / "hangbind").mkdir(parents=True)
    (tmp_path / "plugins" / "hangbind" / "__init__.py").write_text(HANGING_PLUGIN)
    (tmp_path / "cfg.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled:\n      - name: HangBind\n")
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}}}\n"
           "spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]}}\n")
    (tmp_path / "pods.yaml").write_text("---\n".join(pod.format(n=n) for n in ("hang-1", "ok-1", "ok-2")))
    common = ["--cluster", str(REPO / "examples" / "cluster"), "--pods", "pods.yaml", "--config", "cfg.yaml",
              "--plugin-dir", "plugins", "--plugin-deadline", "1s"]
    r = ksched("run", *common, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "done: 2 scheduled" in r.stdout, r.stdout
    assert "still binding: default/hang-1 has been in plugin HangBind (pre_bind)" in r.stdout
    assert "HangBind (pre_bind)" in r.stderr
    s = ksched("simulate", *common, "-o", "json", cwd=tmp_path, timeout=60)
    assert s.returncode == 0, s.stderr
    pods = {p["pod"]: p for p in json.loads(s.stdout)["pods"]}
    assert pods["default/ok-1"]["node"] and pods["default/ok-2"]["node"]
    assert pods["default/hang-1"]["node"] is None
    assert "plugin HangBind (pre_bind)" in pods["default/hang-1"]["message"]
    bad = ksched("simulate", *common[:-1], "soon", cwd=tmp_path)
    assert bad.returncode != 0 and 'invalid argument "soon" for "--plugin-deadline"' in bad.stderr


def test_gated_pod_is_reported_as_kube_apiserver_marks_it(ksched):
    s = ksched("simulate", "--cluster", "examples/cluster", "--pods", "examples/pods.yaml", "-o", "json")
    assert s.returncode == 0, s.stderr
    gated = next(p for p in json.loads(s.stdout)["pods"] if p["pod"] == "shop/gated")
    assert gated["node"] is None
    assert gated["message"] == "Scheduling is blocked due to non-empty scheduling gates: example.com/quota-check"
    d = ksched("describe-pod", "gated", "-n", "shop", "--cluster", "examples/cluster", "--pods", "examples/pods.yaml")
    assert d.returncode == 0, d.stderr
    assert "SchedulingGated" in d.stdout and "(example.com/quota-check)" in d.stdout and "['" not in d.stdout


def test_run_and_simulate_explain_the_dra_example_in_plain_words(ksched):
    """examples/dra as a newcomer runs it: the same placements from `run` and `simulate`, and for each pending
    pod the plain-words reason describe-pod gives (devices short, a missing DeviceClass or template, with the
    field that names it) beside kube-scheduler's message."""
    args = ("--cluster", str(EX / "dra" / "cluster.yaml"), "--pods", str(EX / "dra" / "pods.yaml"))
    run = ksched("run", *args)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for pod, node in (("train-0", "gpu-1"), ("infer-0", "gpu-2"), ("flex-1", "gpu-2")):
        assert re.search(rf"✓ ml/{pod}\s+→ {node}", out), out
    assert "⏸ ml/typo-0" in out and "PreEnqueue plugin DynamicResources holds it back" in out
    assert 'why ml/train-big: ResourceClaim ml/train-big-gpu-' in out and "no node has 2 free devices of class " \
        "gpu.example.com" in out
    assert "why ml/fpga-0: ResourceClaim ml/fpga, request fpga: DeviceClass 'fpga.example.com' does not exist " \
        "(spec.devices.requests[0].exactly.deviceClassName)" in out
    assert "why ml/typo-0: Claim 'gpu': ResourceClaimTemplate ml/one-a10 does not exist " \
        "(spec.resourceClaims[0].resourceClaimTemplateName)" in out
    assert "done: 5 scheduled" in out and "3 pending" in out
    sim = ksched("simulate", *args, "-o", "json")
    assert sim.returncode == 0, sim.stderr
    pods = {p["pod"]: p for p in json.loads(sim.stdout)["pods"]}
    assert {k: p["node"] for k, p in pods.items() if p["node"]} == {
        "ml/train-0": "gpu-1", "ml/infer-0": "gpu-2", "ml/infer-1": "gpu-2", "ml/flex-0": "gpu-1", "ml/flex-1": "gpu-2"}
    assert pods["ml/fpga-0"]["explanation"] == [
        "ResourceClaim ml/fpga, request fpga: DeviceClass 'fpga.example.com' does not exist "
        "(spec.devices.requests[0].exactly.deviceClassName)."]
    assert pods["ml/train-big"]["explanation"][0].startswith("ResourceClaim ml/train-big-gpu-")
    assert "explanation" not in pods["ml/train-0"]
    table = ksched("simulate", *args)
    assert "why: ResourceClaimTemplate" not in table.stdout  # the template line starts with the claim's name
    assert "  why: Claim 'gpu': ResourceClaimTemplate ml/one-a10 does not exist" in table.stdout

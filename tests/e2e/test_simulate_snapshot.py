"""`ksched simulate --snapshot` on a `kubectl get nodes,pods -o yaml`-style List: bound pods stay, unbound ones
are scheduled, and what was done with each is said (scheduled / pending with the reason / preempted by whom /
not for this scheduler); the table shows preempted pods and --compare both variants' reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler_runtime.config import load_config
from scheduler_runtime.options.registry import load_registry
from scheduler_runtime.simulate import simulate


def _node(name: str, cpu: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone},
                         "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.36.3"}}}


def _pod(name: str, cpu: str, *, node: str = "", priority: int = 0, scheduler: str = "",
         phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app:1",
                                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
                            "priority": priority, "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}", "resourceVersion": "7"},
            "spec": spec, "status": {"phase": "Running" if node and phase == "Pending" else phase,
                                     "qosClass": "Burstable"}}


def _snapshot(tmp_path: Path) -> Path:
    items = [_node("n1", "4", "z1"), _node("n2", "2", "z2"),
             _pod("batch", "3", node="n1", priority=-10),  # bound: stays, unless preempted
             _pod("done", "4", node="n2", phase="Succeeded"),  # finished: holds nothing
             _pod("web", "1"),  # unbound: scheduled
             _pod("critical", "3", priority=1000),  # unbound: fits only by preempting batch
             _pod("huge", "64"),  # unbound: fits nowhere
             _pod("theirs", "1", scheduler="other-scheduler")]  # not ours
    f = tmp_path / "kubectl-get.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                 "items": items}))
    return f


def test_each_unbound_snapshot_pod_gets_an_outcome(tmp_path: Path) -> None:
    reg = load_registry(None)
    r = simulate([_snapshot(tmp_path)], [], load_config(None, reg), reg, seed=1)
    assert r.pods == ["prod/web", "prod/critical", "prod/huge", "prod/theirs"]
    assert r.from_snapshot == r.pods
    assert r.outcome("prod/web").status == "Scheduled"
    assert r.outcome("prod/critical") == r.outcome("prod/critical").__class__("Scheduled", "n1")
    huge = r.outcome("prod/huge")
    assert huge.status == "Pending" and huge.detail.startswith("0/2 nodes are available: 2 Insufficient cpu")
    theirs = r.outcome("prod/theirs")
    assert theirs.status == "Skipped" and "schedulerName=other-scheduler" in theirs.detail
    assert r.preempted == ["prod/batch"]
    batch = r.outcome("prod/batch")
    assert (batch.status, batch.by) == ("Preempted", "prod/critical") and batch.detail.endswith("on n1")
    # before: the bound batch pod on n1 (the Succeeded one holds nothing); after: critical replaced it
    before = {u.name: u for u in r.usage_before}
    assert before["n1"].requested["cpu"] == 3000 and before["n2"].requested.get("cpu", 0) == 0
    assert r.node_labels["n2"]["topology.kubernetes.io/zone"] == "z2"


def test_table_says_what_happened_and_json_too(ksched: Any, tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    r = ksched("simulate", "--snapshot", str(snap), "--seed", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "prod/batch" in out and "preempted by prod/critical" in out  # a bound victim has a row now
    assert "prod/huge: 0/2 nodes are available" in out
    assert "prod/theirs: not for this scheduler: schedulerName=other-scheduler" in out
    assert "4 pod(s) unbound in the snapshot were scheduled too" in out
    r = ksched("simulate", "--snapshot", str(snap), "--seed", "1", "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    pods = {p["pod"]: p for p in doc["pods"]}
    assert pods["prod/theirs"]["status"] == "Skipped" and pods["prod/web"]["source"] == "snapshot"
    assert doc["preemptions"] == [{"pod": "prod/batch", "by": "prod/critical", "node": "n1"}]
    before = {n["node"]: n for n in doc["nodesBefore"]}
    assert before["n1"]["cpu"]["requested"] == "3" and before["n2"]["pods"] == 0


def test_compare_shows_both_reasons(ksched: Any, tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    cfg = tmp_path / "no-preemption.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                   "- schedulerName: default-scheduler\n  plugins:\n    postFilter:\n      disabled:\n"
                   "      - name: DefaultPreemption\n")
    r = ksched("simulate", "--snapshot", str(snap), "--compare", str(cfg), "--seed", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    lines = out.splitlines()
    i = lines.index("prod/critical:")
    assert lines[i + 1].strip() == "A: scheduled to n1"
    assert lines[i + 2].strip().startswith("B: 0/2 nodes are available: 2 Insufficient cpu")
    i = lines.index("prod/batch:")
    assert lines[i + 1].strip() == "A: preempted by prod/critical on n1"
    assert lines[i + 2].strip() == "B: stays on n1 (bound in the snapshot)"
    assert "3 of 5 placements differ; pending: A 1, B 2; preempted: A 1, B 0" in out


def test_a_pod_held_at_preenqueue_says_which_plugin_holds_it() -> None:
    """examples/dra's typo-0 names a ResourceClaimTemplate that does not exist: it never reaches a cycle."""
    ex = Path(__file__).resolve().parents[2] / "examples" / "dra"
    reg = load_registry(None)
    r = simulate([ex / "cluster.yaml"], [ex / "pods.yaml"], load_config(None, reg), reg)
    oc = r.outcome("ml/typo-0")
    assert oc.status == "Pending"
    assert oc.detail == ('not attempted: PreEnqueue plugin DynamicResources holds it back: pod "ml/typo-0": '
                         "ResourceClaim not created yet")
    assert r.devices["gpu-2"].total == 4 and r.devices["gpu-2"].allocated_before == 0
    assert r.devices["gpu-2"].allocated >= 1

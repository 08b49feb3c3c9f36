"""NodeDeclaredFeatures (kube-scheduler v1.36.3): which pods need which node features, the Filter verdict and
reason, its gate, and status.declaredFeatures reaching the node the plugins see."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.config.loader import load_config
from scheduler_runtime.errors import InputError, UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import QUEUE, QUEUE_SKIP, NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.options.registry import load_registry
from scheduler_runtime.plugins.nodedeclaredfeatures import FeatureGate, NodeDeclaredFeatures
from scheduler_runtime.plugins.nodedeclaredfeatures.features import required_features

REASON = "node(s) didn't match Pod's required features"
OFF = ("NodeDeclaredFeatures=false,ExtendWebSocketsToKubelet=false,InPlacePodLevelResourcesVerticalScaling=false,"
       "InPlacePodVerticalScalingInitContainers=false,RestartAllContainersOnContainerExits=false")


def _pod(spec: dict[str, Any], uid: str = "u1") -> Pod:
    spec = {"containers": [{"name": "c", "image": "i"}], **spec}
    return Pod.from_dict({"metadata": {"name": "p", "namespace": "d", "uid": uid}, "spec": spec})


def _node(features: list[str] | None) -> Node:
    status: dict[str, Any] = {"allocatable": {"cpu": "1", "pods": "10"}}
    if features is not None:
        status["declaredFeatures"] = features
    return Node.from_dict({"metadata": {"name": "n"}, "status": status})


RESTART_ALL = {"containers": [{"name": "c", "image": "i", "restartPolicy": "Never", "restartPolicyRules": [
    {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]}


@pytest.mark.parametrize("spec, want", [
    ({}, set()),
    (RESTART_ALL, {"RestartAllContainersOnContainerExits"}),
    ({"initContainers": [{"name": "i", "image": "i", "restartPolicy": "Always", "restartPolicyRules": [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]}]},
     {"RestartAllContainersOnContainerExits"}),
    ({"containers": [{"name": "c", "image": "i", "restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]}]}, set()),
    ({"hostNetwork": True, "hostUsers": False}, {"UserNamespacesHostNetworkSupport"}),
    ({"hostNetwork": True}, set()),  # hostUsers unset is not a request for a user namespace
    ({"hostNetwork": False, "hostUsers": False}, set()),
    ({**RESTART_ALL, "hostNetwork": True, "hostUsers": False},
     {"RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport"}),
    # pod-level resources are inferred for resizes only, never for scheduling
    ({"resources": {"requests": {"cpu": "1"}}}, set()),
])
def test_inference_for_scheduling(spec: dict[str, Any], want: set[str]) -> None:
    assert required_features({"containers": [], **spec}) == want


def _run(plugin: NodeDeclaredFeatures, pod: Pod, node: Node) -> tuple[Any, Any]:
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, [])  # type: ignore[arg-type]
    if pre is not None and pre.code == Code.Skip:
        return pre, None
    return pre, plugin.filter(state, pod, NodeInfo(node))


def test_filter_needs_every_required_feature_declared() -> None:
    pl = NodeDeclaredFeatures()
    both = _pod({**RESTART_ALL, "hostNetwork": True, "hostUsers": False})
    pre, st = _run(pl, both, _node(["RestartAllContainersOnContainerExits"]))
    assert pre is None and st is not None
    assert st.code == Code.UnschedulableAndUnresolvable and st.reasons == [REASON]
    _, st = _run(pl, both, _node(["RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport"]))
    assert st is None
    # unknown names are dropped, they satisfy nothing
    _, st = _run(pl, _pod(RESTART_ALL), _node(["Acme", "Zeta"]))
    assert st is not None and st.reasons == [REASON]
    # no requirement: PreFilter skips, so Filter never runs
    pre, _ = _run(pl, _pod({}), _node(None))
    assert pre.code == Code.Skip


def test_gate_off_instance_does_nothing() -> None:
    pl = NodeDeclaredFeatures(FeatureGate(enabled=False))
    pre, _ = _run(pl, _pod(RESTART_ALL), _node(None))
    assert pre.code == Code.Skip
    assert pl.filter(CycleState(), _pod(RESTART_ALL), NodeInfo(_node(None))) is None
    assert pl.events_to_register() == []


def test_queueing_hints() -> None:
    pl = NodeDeclaredFeatures()
    node_hint, pod_hint = (e.hint for e in pl.events_to_register())
    pod = _pod(RESTART_ALL)
    assert node_hint(pod, None, _node([])) == QUEUE
    assert node_hint(pod, _node([]), _node(["RestartAllContainersOnContainerExits"])) == QUEUE
    assert node_hint(pod, _node(["X"]), _node(["X"])) == QUEUE_SKIP
    assert pod_hint(pod, _pod({}, uid="other"), _pod(RESTART_ALL, uid="other")) == QUEUE_SKIP
    assert pod_hint(pod, _pod(RESTART_ALL), _pod(RESTART_ALL)) == QUEUE_SKIP
    assert pod_hint(pod, _pod(RESTART_ALL), _pod({})) == QUEUE


def test_node_declared_features_are_read_and_validated_like_the_api_server() -> None:
    assert _node(["A", "B"]).declared_features == ("A", "B")
    assert _node(None).declared_features == ()
    with pytest.raises(InputError, match="list must be sorted alphabetically") as exc:
        _node(["B", "A"])
    assert exc.value.field == "status.declaredFeatures[1]"
    with pytest.raises(InputError, match="Duplicate value"):
        _node(["A", "A"])


def _plan(gates: dict[str, bool] | None, path: Any = None) -> list[str]:
    (prof,) = load_config(path, load_registry(None), feature_gates=gates).profiles
    return [n for n, _ in prof.plan["filter"]]


def test_default_profile_runs_it_last_and_its_gate_turns_it_off(tmp_path: Any) -> None:
    assert _plan(None)[-1] == "NodeDeclaredFeatures"
    assert "NodeDeclaredFeatures" not in _plan(parse_feature_gates([OFF], "1.36"))
    assert "NodeDeclaredFeatures" not in _plan(parse_feature_gates([], "1.35"))  # alpha, off, in 1.35
    # explicitly enabled while the gate is off: kube builds a plugin that does nothing
    f = tmp_path / "c.yaml"
    f.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
                 "- plugins:\n    filter:\n      enabled: [{name: NodeDeclaredFeatures}]\n")
    cfg = load_config(f, load_registry(None), feature_gates=parse_feature_gates([OFF], "1.36"))
    assert cfg.profiles[0].args["NodeDeclaredFeatures"] == FeatureGate(enabled=False)


def test_gate_dependencies_are_checked_like_kube() -> None:
    with pytest.raises(UsageError, match=r"RestartAllContainersOnContainerExits is enabled, but depends on "
                                         r"features that are disabled: \[NodeDeclaredFeatures\]"):
        parse_feature_gates(["NodeDeclaredFeatures=false"], "1.36")
    assert parse_feature_gates([OFF], "1.36")["NodeDeclaredFeatures"] is False
    with pytest.raises(UsageError, match="cannot set feature gate NodeDeclaredFeatures to false, feature is locked "
                                         "to true"):
        parse_feature_gates([OFF])  # GA and locked in 1.37


def test_config_default_output_validates_and_runs_the_plugin(tmp_path: Any) -> None:
    """`ksched config default` lists NodeDeclaredFeatures as kube does; ksched accepts its own output and
    the plugin in it keeps a pod that needs a feature off the node that does not declare it."""
    import subprocess
    import sys
    from pathlib import Path

    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.plugins.registry import build_registry
    from scheduler_runtime.results import ResultStore
    from scheduler_runtime.scheduler import Scheduler

    ksched = str(Path(sys.executable).parent / "ksched")
    out = subprocess.run([ksched, "config", "default"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "- name: NodeDeclaredFeatures" in out.stdout
    f = tmp_path / "default.yaml"
    f.write_text(out.stdout)
    v = subprocess.run([ksched, "config", "validate", str(f)], capture_output=True, text=True, timeout=60)
    assert v.returncode == 0, v.stderr

    reg = build_registry([])
    cluster = MemoryCluster()
    for name, feats in (("a-plain", None), ("b-feat", ["RestartAllContainersOnContainerExits"])):
        status: dict[str, Any] = {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                  "conditions": [{"type": "Ready", "status": "True"}]}
        if feats:
            status["declaredFeatures"] = feats
        cluster.create({"apiVersion": "v1", "kind": "Node", "status": status,
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}, emit=False)
    results = ResultStore()
    sched = Scheduler(cluster, load_config(f, reg), reg, seed=1, results=results)
    sched.start()
    for name, spec in (("needs", RESTART_ALL),
                       ("pinned", {**RESTART_ALL, "nodeSelector": {"kubernetes.io/hostname": "a-plain"}})):
        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                        "spec": spec})
    sched.run(until_idle=True)
    assert cluster.get_pod("default", "needs")["spec"].get("nodeName") == "b-feat"
    assert not cluster.get_pod("default", "pinned")["spec"].get("nodeName")
    r = results.get("default/pinned")
    assert r is not None and r.message.startswith(
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 " + REASON), \
        r.message


def test_a_node_that_starts_declaring_the_feature_requeues_the_pod() -> None:
    """The node update is seen as UpdateNodeDeclaredFeature, the event the plugin registered for."""
    from scheduler_runtime.cluster.memory import MemoryCluster
    from scheduler_runtime.plugins.registry import build_registry
    from scheduler_runtime.scheduler import Scheduler

    now = [0.0]
    reg = build_registry([])
    cluster = MemoryCluster()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"x": "y"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    cluster.create(node, emit=False)
    sched = Scheduler(cluster, load_config(None, reg), reg, seed=1, clock=lambda: now[0])
    sched.start()
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                    "spec": RESTART_ALL})
    sched.run(until_idle=True)
    assert not cluster.get_pod("default", "p")["spec"].get("nodeName")
    now[0] += 30.0  # past any backoff, well before the 5-minute flush of unschedulable pods
    cluster.update({**node, "status": {**node["status"], "declaredFeatures": ["RestartAllContainersOnContainerExits"]}})
    sched.run(until_idle=True)
    assert cluster.get_pod("default", "p")["spec"].get("nodeName") == "n1"

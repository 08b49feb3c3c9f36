"""Opportunistic batching (kube-scheduler 1.36, gate OpportunisticBatching) on the embedded cluster: which pods
are signed alike, when the next equivalent pod takes the cached ranking's next node, every flush reason, the
decisions with the gate on and off, and the user plugin API (`sign_pod`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler_runtime.api import CycleState, NodeInfo, Plugin, SignFragment, Status, signers
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.loader import build
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.metrics import SchedulerMetrics
from scheduler_runtime.objects import Pod
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

#: scheduler_perf's batching/scheduler-config-no-topology.yaml: no default spreading, so pods can be signed
NO_TOPOLOGY = {"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
    {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}]}]}


def node(name: str, cpu: str = "4") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}}


def pod(name: str, cpu: str = "100m", host_port: int | None = None, labels: dict | None = None,
        **spec: Any) -> dict:
    c: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}
    if host_port:
        c["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {"containers": [c], **spec}}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run(objs: list[dict], config: dict | None = NO_TOPOLOGY, gates: str = "", plugins: list[type] | None = None,
        between: Any = None, minor: int = 36) -> tuple[Scheduler, dict[str, str], dict[tuple[str, ...], float]]:
    """Schedule `objs`; returns the scheduler, pod -> node, and the batch counters by (family, label)."""
    cluster = MemoryCluster()
    for o in objs:
        cluster.create(o, emit=False)
    reg = build_registry([])
    for cls in plugins or []:
        reg.register(cls, "test")
    clock = Clock()
    metrics = SchedulerMetrics()
    cfg = build({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 **(config or {})}, reg)

    def observe(_d: Any) -> None:
        if between is not None:
            between(cluster, clock)

    s = Scheduler(cluster, cfg, reg, seed=7, metrics=metrics, clock=clock, observer=observe,
                  feature_gates=parse_feature_gates([gates] if gates else []), kube_minor=minor)
    s.start()
    s.run(until_idle=True)
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in cluster.list("pods")}
    counts: dict[tuple[str, ...], float] = {}
    names = {"scheduler_batch_attempts_total": ("attempt", "result"),
             "scheduler_batch_cache_flushed_total": ("flush", "reason"),
             "scheduler_get_node_hint_duration_seconds_count": ("hint_duration", "hinted"),
             "scheduler_store_schedule_results_duration_seconds_count": ("store_duration", ""),
             "scheduler_batch_rescore_attempts_total": ("rescore", ""),
             "scheduler_batch_rescore_duration_seconds_count": ("rescore_duration", "")}
    for fam in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for smp in fam.samples:
            if smp.name in names:  # summed over the profiles
                what, label = names[smp.name]
                key = (what, smp.labels[label]) if label else (what,)
                counts[key] = counts.get(key, 0) + smp.value
    return s, placed, counts


def graded_nodes(n: int) -> list[dict]:
    return [node(f"n{i}") for i in range(n)]


#: a preferred node affinity that ranks n0 < n1 < ... so that decisions do not depend on tie-breaking
RANKED = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": i + 1, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"n{i}"]}]}} for i in range(10)]}}


@pytest.mark.parametrize("kind", ["hostport", "saturation"])
def test_one_pod_per_node_workloads_are_batched_with_unbatched_decisions(kind: str) -> None:
    """scheduler_perf's HostPortConflict and ResourceSaturation: after the first pod, every equivalent pod
    takes the next node of the cached ranking, and lands where the full Filter+Score puts it."""
    nodes = graded_nodes(10) if kind == "hostport" else [node(f"n{i}", cpu="4") for i in range(10)]
    pods = [pod(f"p{i}", host_port=80, affinity=RANKED) if kind == "hostport" else pod(f"p{i}", cpu="3")
            for i in range(10)]
    s, on, counts = run(nodes + pods)
    _, off, off_counts = run(nodes + pods, gates="OpportunisticBatching=false")
    assert sorted(on.values()) == sorted(f"n{i}" for i in range(10))
    if kind == "hostport":  # distinct scores: the same node for every pod
        assert on == off == {f"p{i}": f"n{9 - i}" for i in range(10)}
    assert counts[("attempt", "no_hint")] == 1 and counts[("attempt", "hint_used")] == 9
    assert s.frameworks["default-scheduler"].batch.batched_pods == 9
    assert counts[("hint_duration", "hint")] == 9 and counts[("hint_duration", "no_hint")] == 1
    assert counts[("store_duration",)] == 10
    assert not [k for k in counts if k[0] == "flush"]  # the last hint emptied the cache: nothing to flush
    assert not off_counts  # gate off: no batching, no batch metrics
    assert s.frameworks["default-scheduler"].signer is not None


def test_default_profile_signs_nothing_system_spreading_refuses() -> None:
    """PodTopologySpread with system default constraints refuses every pod, as in kube: each cycle flushes
    with pod_not_batchable and no hint is ever given."""
    _, placed, counts = run(graded_nodes(3) + [pod(f"p{i}", host_port=80) for i in range(3)], config=None)
    assert all(placed.values())
    assert counts[("attempt", "no_hint")] == 3 and ("attempt", "hint_used") not in counts
    assert counts[("flush", "pod_not_batchable")] == 2  # the third pod had one feasible node: empty_list
    assert counts[("flush", "empty_list")] == 1


def test_node_not_full_flushes_when_the_next_pod_still_fits() -> None:
    _, placed, counts = run(graded_nodes(3) + [pod(f"p{i}") for i in range(4)])
    assert counts[("flush", "node_not_full")] == 3 and ("attempt", "hint_used") not in counts
    assert all(placed.values())


def test_kube_1_37_rescores_the_node_just_chosen_instead_of_flushing() -> None:
    """1.37: the next pod still fits the node just chosen: that node is scored again and competes for the
    hint; the pods spread as a full Filter+Score spreads them (LeastAllocated: 2 per node)."""
    pods = [pod(f"p{i}", cpu="1") for i in range(6)]
    _, on, counts = run(graded_nodes(3) + pods, minor=37)
    _, off, _ = run(graded_nodes(3) + pods, gates="OpportunisticBatching=false", minor=37)
    assert counts[("attempt", "no_hint")] == 1 and counts[("attempt", "hint_used")] == 5
    assert counts[("rescore",)] == 5 and counts[("rescore_duration",)] == 5
    assert not [k for k in counts if k[0] == "flush"]
    assert sorted(Counter(on.values()).values()) == sorted(Counter(off.values()).values()) == [2, 2, 2]
    # 1.36 drops the cache instead
    _, _, old = run(graded_nodes(3) + pods)
    assert old[("flush", "node_not_full")] == 5 and ("rescore",) not in old


def test_kube_1_37_does_not_batch_a_nominated_pod() -> None:
    objs = graded_nodes(3) + [pod("a", host_port=80), pod("b", host_port=80)]
    objs[-1]["status"] = {"nominatedNodeName": "n0"}
    _, placed, counts = run(objs, minor=37)
    assert counts[("flush", "pod_nominated")] == 1 and placed["b"] == "n0"


def test_different_labels_are_incompatible_and_failed_pod_skips() -> None:
    """InterPodAffinity signs the labels; a pod that fails in between leaves the cache a cycle behind."""
    objs = graded_nodes(4) + [pod("a", host_port=80, labels={"sig": "1"}),
                              pod("b", host_port=80, labels={"sig": "2"}),
                              pod("c", cpu="100", host_port=80, labels={"sig": "2"}),
                              pod("d", host_port=80, labels={"sig": "2"})]
    _, placed, counts = run(objs)
    assert placed["c"] == "" and placed["a"] and placed["b"] and placed["d"]
    # b after a (labels), c after b (requests); d comes the cycle after c's, which failed and stored nothing
    assert counts[("flush", "pod_incompatible")] == 2
    assert counts[("flush", "pod_skipped")] == 1
    assert ("attempt", "hint_used") not in counts


def test_expired_cache_is_not_used() -> None:
    def tick(_cluster: MemoryCluster, clock: Clock) -> None:
        clock.t += 0.6  # more than maxBatchAge between pods

    _, _, counts = run(graded_nodes(3) + [pod(f"p{i}", host_port=80) for i in range(3)], between=tick)
    assert counts[("flush", "expired")] == 2 and ("attempt", "hint_used") not in counts


def test_deleted_node_flushes_node_missing() -> None:
    def delete_chosen(cluster: MemoryCluster, _clock: Clock) -> None:
        nodes = {n["metadata"]["name"] for n in cluster.list("nodes")}
        for p in cluster.list("pods"):
            if p["spec"].get("nodeName") in nodes:
                cluster.delete("nodes", p["spec"]["nodeName"], None)

    objs = graded_nodes(4) + [pod(f"p{i}", host_port=80) for i in range(2)]
    _, _, counts = run(objs, between=delete_chosen)
    assert counts[("flush", "node_missing")] == 1


class Unsigned(Plugin):
    """A user Filter plugin that does not implement sign_pod."""

    name = "Unsigned"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None


class Signed(Unsigned):
    name = "Signed"

    def sign_pod(self, pod: Pod) -> list[SignFragment]:
        return [SignFragment(signers.HOST_PORTS, signers.host_ports(pod)), SignFragment("example.com/team",
                                                                                         pod.labels.get("team"))]


def _with(plugin: str) -> dict:
    return {"profiles": [{"schedulerName": "default-scheduler",
                          "plugins": {"filter": {"enabled": [{"name": plugin}]}},
                          "pluginConfig": NO_TOPOLOGY["profiles"][0]["pluginConfig"]}]}


def test_a_user_plugin_without_sign_pod_turns_batching_off_for_the_profile() -> None:
    objs = graded_nodes(3) + [pod(f"p{i}", host_port=80) for i in range(3)]
    s, _, counts = run(objs, config=_with("Unsigned"), plugins=[Unsigned])
    assert not s.frameworks["default-scheduler"].signer.enabled
    assert ("attempt", "hint_used") not in counts and counts[("flush", "pod_not_batchable")] == 2


def test_a_user_plugin_that_signs_keeps_batching_and_its_fragment_counts() -> None:
    objs = graded_nodes(3) + [pod(n, host_port=80, labels={"team": t}) for n, t in (("a", "x"), ("b", "x"), ("c", "y"))]
    _, _, counts = run(objs, config={"profiles": [{**_with("Signed")["profiles"][0], "pluginConfig": [
        *NO_TOPOLOGY["profiles"][0]["pluginConfig"],
        {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}]}]}, plugins=[Signed])
    # labels are not signed by InterPodAffinity here, so only Signed's team fragment tells c apart
    assert counts[("attempt", "hint_used")] == 1 and counts[("flush", "pod_incompatible")] == 1


def test_signatures_ignore_order_and_pod_specific_volumes() -> None:
    from scheduler_runtime.scheduler import build_frameworks

    reg = build_registry([])
    cfg = build({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 **NO_TOPOLOGY}, reg)
    s = Scheduler(MemoryCluster(), cfg, reg, seed=1)
    signer = s.frameworks["default-scheduler"].signer
    assert build_frameworks  # the signer is built per profile there

    def sig(**spec: Any) -> str | None:
        return signer.sign(Pod.from_dict(pod("x", **spec)))

    tol = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert sig(tolerations=tol) == sig(tolerations=list(reversed(tol)))
    assert sig(tolerations=tol) != sig()
    vols = [{"name": "cm-x", "configMap": {"name": "x"}}, {"name": "scratch-1", "emptyDir": {}}]
    assert sig(volumes=vols) == sig(volumes=[{"name": "scratch-2", "emptyDir": {}}])
    assert sig(volumes=vols) != sig()
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "z", "operator": "In", "values": ["b", "a"]}]}]}}}
    aff2 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a", "b"]}]}]}}}
    assert sig(affinity=aff) == sig(affinity=aff2) != sig()
    assert sig(affinity={"podAntiAffinity": {}}) is None  # InterPodAffinity refuses
    assert sig(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                           "whenUnsatisfiable": "DoNotSchedule"}]) is None
    assert sig(resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]) is None
    assert sig(nodeName="n1") != sig()


class Gate(Plugin):
    """Rejects every node until opened; registers no cluster event, so only the leftover flush retries."""

    name = "Gate"
    open = False

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None if Gate.open else Status.unschedulable("closed")

    def events_to_register(self) -> list:
        return []

    def sign_pod(self, pod: Pod) -> None:
        return None


def test_pod_scheduled_after_the_unschedulable_flush_is_counted() -> None:
    cluster = MemoryCluster()
    for o in [node("n0"), pod("p")]:
        cluster.create(o, emit=False)
    reg = build_registry([])
    reg.register(Gate, "test")
    clock, metrics = Clock(), SchedulerMetrics()
    s = Scheduler(cluster, build({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  **_with("Gate")}, reg), reg, seed=1, metrics=metrics, clock=clock)
    Gate.open = False
    s.start()
    s.run(until_idle=True)
    assert not cluster.get_pod("ns", "p")["spec"].get("nodeName")
    Gate.open = True
    clock.t += 301  # podMaxInUnschedulablePodsDuration is 5 minutes
    assert s.queue.flush_unschedulable_leftover() == 1
    s.run(until_idle=True)
    assert cluster.get_pod("ns", "p")["spec"]["nodeName"] == "n0"
    assert metrics.pod_scheduled_after_flush._value.get() == 1


class Raises(Unsigned):
    name = "Raises"

    def sign_pod(self, pod: Pod) -> list[SignFragment]:
        raise RuntimeError("cannot sign")


class Refuses(Unsigned):
    name = "Refuses"

    def sign_pod(self, pod: Pod) -> Status:
        return Status.unschedulable("not this one")


@pytest.mark.parametrize("plugin", [Raises, Refuses])
def test_a_plugin_that_raises_or_refuses_leaves_the_pod_unbatched(plugin: type,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    objs = graded_nodes(3) + [pod(f"p{i}", host_port=80) for i in range(3)]
    s, placed, counts = run(objs, config=_with(plugin.name), plugins=[plugin])
    assert s.frameworks["default-scheduler"].signer.enabled and all(placed.values())
    assert ("attempt", "hint_used") not in counts and counts[("flush", "pod_not_batchable")] == 2
    assert ("SignPod failed for plugin Raises" in caplog.text) == (plugin is Raises)


def test_extenders_turn_signatures_off_for_every_profile() -> None:
    reg = build_registry([])
    cfg = build({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "extenders": [{"urlPrefix": "http://127.0.0.1:9", "filterVerb": "filter"}],
                 "profiles": [{**NO_TOPOLOGY["profiles"][0]}, {**NO_TOPOLOGY["profiles"][0], "schedulerName": "b"}]},
                reg)
    s = Scheduler(MemoryCluster(), cfg, reg, seed=1)
    assert [fw.signer.enabled for fw in s.frameworks.values()] == [False, False]
    assert s.frameworks["b"].signer.sign(Pod.from_dict(pod("x"))) is None


def test_pods_of_another_profile_in_between_skip_the_cache() -> None:
    """The cycle count is the scheduler's: profile a's cache is a cycle behind after b's pod."""
    two = {"profiles": [NO_TOPOLOGY["profiles"][0], {**NO_TOPOLOGY["profiles"][0], "schedulerName": "b"}]}
    objs = graded_nodes(4) + [pod(f"p{i}", host_port=80, schedulerName="b" if i % 2 else "default-scheduler")
                              for i in range(4)]  # p0 (a), p1 (b), p2 (a), p3 (b)
    _, placed, counts = run(objs, config=two)
    assert all(placed.values())
    assert counts[("flush", "pod_skipped")] == 2 and ("attempt", "hint_used") not in counts


def test_the_batch_follows_the_emulated_minor_unless_told() -> None:
    """Without an explicit minor the cycle batches as the emulated kube-scheduler does: 1.37 (pinned) rescores
    the node just chosen, `--emulated-version 1.36` flushes as 1.36 did."""
    reg = build_registry([])
    cfg = build({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}, reg)
    for emulated, rescore in (("1.37", True), ("1.36", False)):
        s = Scheduler(MemoryCluster(), cfg, reg, seed=1, feature_gates=parse_feature_gates([], emulated=emulated))
        assert {fw.batch.rescore for fw in s.frameworks.values()} == {rescore}, emulated

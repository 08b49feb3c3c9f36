"""Queueing hints of NodeResourcesFit, InterPodAffinity, PodTopologySpread and VolumeBinding, through the scheduler.

The hint functions themselves are checked case by case by kube-scheduler's own tables
(tests/unit/test_upstream_tables.py); these tests check what the scheduler hands them: the events kube-scheduler
1.36 registers with queueing hints on, and the old and new objects of assigned-pod updates.
"""

from __future__ import annotations

from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler


def _node(name: str, cpu: str = "4", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, cpu: str = "100m", labels: dict[str, str] | None = None, node: str = "",
         affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i",
                                            "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}}, "spec": spec}


class _Harness:
    """A scheduler over an in-memory cluster whose clock only moves when told (no backoff flushes)."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.cluster = MemoryCluster()
        for n in nodes:
            self.cluster.create(n, emit=False)
        for p in pods:
            self.cluster.create(p, emit=False)
        reg = build_registry([])
        self.now = [0.0]
        self.sched = Scheduler(self.cluster, load_config(None, reg), reg, seed=1, clock=lambda: self.now[0])
        self.sched.start()

    def schedule(self, pod: dict[str, Any]) -> None:
        self.cluster.create(pod)
        self.sched.run(until_idle=True)
        assert self.where(pod["metadata"]["name"]) == "unschedulable"

    def where(self, name: str) -> str | None:
        for q in self.sched.queue.pods():
            if q.pod.name == name:
                return self.sched.queue.where(q.pod.uid)
        return None

    def update(self, obj: dict[str, Any]) -> None:
        self.cluster.update(obj)
        self.sched.drain_inbox()


def _affinity(kind: str, app: str) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}


def test_pod_affinity_ignores_an_unrelated_relabel_and_queues_a_matching_one() -> None:
    h = _Harness([_node("n1")], [_pod("other", labels={"app": "web"}, node="n1")])
    h.schedule(_pod("p", affinity=_affinity("podAffinity", "db")))
    other = h.cluster.get_pod("default", "other")
    h.update({**other, "metadata": {**other["metadata"], "labels": {"app": "web", "tier": "x"}}})
    assert h.where("p") == "unschedulable"  # QueueSkip: the pod's affinity still selects nothing
    other = h.cluster.get_pod("default", "other")
    h.update({**other, "metadata": {**other["metadata"], "labels": {"app": "db"}}})
    assert h.where("p") in ("active", "backoff")


def test_anti_affinity_hint_sees_the_old_labels_of_a_relabelled_pod() -> None:
    """The update is judged on (old, new): the old pod matched the anti-affinity, the new one does not. Handed
    only the new pod (an add), kube's hint would skip it."""
    h = _Harness([_node("n1")], [_pod("other", labels={"app": "db"}, node="n1")])
    h.schedule(_pod("p", affinity=_affinity("podAntiAffinity", "db")))
    other = h.cluster.get_pod("default", "other")
    h.update({**other, "metadata": {**other["metadata"], "labels": {"app": "web"}}})
    assert h.where("p") in ("active", "backoff")


def test_fit_hint_node_changes() -> None:
    """With queueing hints kube's NodeResourcesFit registers node additions and allocatable changes only, and
    requeues when the pod fits the node's allocatable and a resource it requests grew."""
    node = _node("n1", cpu="1")
    h = _Harness([node], [])
    h.schedule(_pod("p", cpu="2"))
    h.update({**node, "spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}})
    assert h.where("p") == "unschedulable"
    h.update({**node, "status": {**node["status"], "allocatable": {**node["status"]["allocatable"],
                                                                   "cpu": "1500m"}}})
    assert h.where("p") == "unschedulable"  # grew, but the pod still does not fit
    h.update({**node, "status": {**node["status"], "allocatable": {**node["status"]["allocatable"], "cpu": "3"}}})
    assert h.where("p") in ("active", "backoff")


def test_an_assigned_pod_scaling_down_requeues_a_pod_rejected_for_resources() -> None:
    h = _Harness([_node("n1", cpu="3")], [_pod("other", cpu="2", node="n1")])
    h.schedule(_pod("p", cpu="2"))
    other = h.cluster.get_pod("default", "other")
    spec = other["spec"]
    h.update({**other, "spec": {**spec, "containers": [{**spec["containers"][0],
                                                         "resources": {"requests": {"cpu": "1"}}}]}})
    assert h.where("p") in ("active", "backoff")


def test_event_lists_are_kube_1_36_with_queueing_hints_on() -> None:
    """EventsToRegister of kube-scheduler 1.36.3 with SchedulerQueueingHints and InPlacePodVerticalScaling on
    (locked), DRAExtendedResource's DeviceClass event aside: (resource, actions, has a hint function)."""
    from scheduler_runtime.framework.types import ActionType as A
    from scheduler_runtime.plugins import in_tree

    want = {
        "NodeResourcesFit": {("Pod", A.Delete | A.UpdatePodScaleDown, True),
                             ("Node", A.Add | A.UpdateNodeAllocatable, True)},
        "InterPodAffinity": {("Pod", A.Add | A.UpdatePodLabel | A.Delete, True),
                             ("Node", A.Add | A.UpdateNodeLabel, True)},
        "PodTopologySpread": {("Pod", A.Add | A.UpdatePodLabel | A.UpdatePodToleration | A.Delete, True),
                              ("Node", A.Add | A.Delete | A.UpdateNodeLabel | A.UpdateNodeTaint, True)},
        "VolumeBinding": {("storage.k8s.io/StorageClass", A.Add | A.Update, True),
                          ("PersistentVolumeClaim", A.Add | A.Update, True),
                          ("PersistentVolume", A.Add | A.Update, False),
                          ("Node", A.Add | A.UpdateNodeLabel, False),
                          ("storage.k8s.io/CSINode", A.Add | A.Update, True),
                          ("storage.k8s.io/CSIDriver", A.Update, True),
                          ("storage.k8s.io/CSIStorageCapacity", A.Add | A.Update, True)},
        "VolumeRestrictions": {("Pod", A.Delete, True), ("Node", A.Add, False),
                               ("PersistentVolumeClaim", A.Add, True)},
        "VolumeZone": {("storage.k8s.io/StorageClass", A.Add, True), ("Node", A.Add | A.UpdateNodeLabel, False),
                       ("PersistentVolumeClaim", A.Add | A.Update, True), ("PersistentVolume", A.Add | A.Update, True)},
        "NodeVolumeLimits": {("storage.k8s.io/CSINode", A.Add, False), ("storage.k8s.io/CSINode", A.Update, True),
                             ("Pod", A.Delete, True), ("PersistentVolumeClaim", A.Add, True),
                             ("storage.k8s.io/VolumeAttachment", A.Delete, True)},
    }
    plugins = {cls.name: cls for cls in in_tree()}
    for name, events in want.items():
        got = {(r.event.resource, r.event.action, r.hint is not None)
               for r in plugins[name](None, None).events_to_register()
               if r.event.resource != "resource.k8s.io/DeviceClass"}  # DRAExtendedResource's, checked with it
        assert got == events, name


def test_an_unschedulable_pod_changing_itself_moves_only_when_a_rejecting_plugins_hint_says_so() -> None:
    """kube with queueing hints: the pod's own update is a Pod event (one per kind of change, else a generic
    Update) run through the hints of the plugins that rejected it, not a requeue on any spec change."""
    h = _Harness([_node("n1", cpu="1")], [])
    h.schedule(_pod("p", cpu="2"))
    p = h.cluster.get_pod("default", "p")
    c = p["spec"]["containers"][0]
    h.update({**p, "spec": {**p["spec"], "containers": [{**c, "image": "other"}]}})
    assert h.where("p") == "unschedulable"  # a generic update: NodeResourcesFit does not register every update
    p = h.cluster.get_pod("default", "p")
    c = p["spec"]["containers"][0]
    h.update({**p, "spec": {**p["spec"], "containers": [{**c, "resources": {"requests": {"cpu": "500m"}}}]}})
    assert h.where("p") in ("active", "backoff")  # UpdatePodScaleDown of the pod itself


def test_an_unschedulable_pod_relabelled_requeues_for_inter_pod_affinity() -> None:
    h = _Harness([_node("n1")], [_pod("other", labels={"app": "web"}, node="n1")])
    h.schedule(_pod("p", labels={"v": "1"}, affinity=_affinity("podAffinity", "db")))
    p = h.cluster.get_pod("default", "p")
    h.update({**p, "metadata": {**p["metadata"], "labels": {"v": "2"}}})
    assert h.where("p") in ("active", "backoff")


def test_an_event_only_looks_at_pods_whose_rejecting_plugins_may_requeue_on_it() -> None:
    """Per-event cost: the pool is indexed by rejecting plugin, so an event runs no hint of, and does not even
    visit, pods rejected only by plugins that do not register it. Pods with no rejector, or one no profile
    knows, take every event of interest."""
    from scheduler_runtime.framework.types import QUEUE_SKIP, ActionType, ClusterEvent, ClusterEventWithHint
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.queue import SchedulingQueue

    calls: list[str] = []

    def hint(tag: str):  # noqa: ANN202
        def fn(pod: Pod, old: Any, new: Any) -> int:
            calls.append(f"{tag}:{pod.name}")
            return QUEUE_SKIP
        return fn

    regs = {"A": [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add), hint("A"))],
            "B": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), hint("B"))]}

    def plugins_for(ev: ClusterEvent) -> frozenset[str]:
        return frozenset(n for n, rs in regs.items() if any(r.event.matches(ev) for r in rs))

    q = SchedulingQueue(events_for=lambda profile, plugin: regs.get(plugin),
                        plugin_index=(plugins_for, frozenset(regs)))
    for name, rejectors in (("a", {"A"}), ("b", {"B"}), ("x", {"X"}), ("none", set())):
        q.add(Pod.from_dict({"metadata": {"name": name, "uid": name}}))
        got = q.pop(timeout=0)
        assert got is not None
        q.add_unschedulable_if_not_present(got, rejectors, pending=set() if rejectors else {"B"})
    visited: list[str] = []
    real = q._hint

    def spy(qpi: Any, ev: ClusterEvent, old: Any, new: Any) -> Any:
        visited.append(qpi.pod.name)
        return real(qpi, ev, old, new)
    q._hint = spy  # type: ignore[method-assign]
    moved = q.move_on_event(ClusterEvent("Node", ActionType.Add), None, None)
    assert calls == ["A:a"]
    assert sorted(visited) == ["a", "x"]  # "b" (B only) is not visited; "none" is pending on B
    assert moved == 1 and q.where("x") == "backoff" and q.where("a") == "unschedulable"


def test_anti_affinity_hint_needs_one_matching_term_from_1_37_and_every_term_before() -> None:
    """kube 1.37 (#139161): an assigned pod deleted that matches one of two anti-affinity terms may unblock the
    pod, since one matching term is enough to refuse it; 1.36's hint wanted both to match and skipped it."""
    from scheduler_runtime.featuregates import parse_feature_gates
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.plugins.interpodaffinity import InterPodAffinity

    def term(key: str, value: str) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": "kubernetes.io/hostname"}

    target = Pod.from_dict({"metadata": {"name": "t", "namespace": "default", "uid": "t"}, "spec": {
        "containers": [{"name": "c", "image": "i"}], "affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("app", "a"), term("team", "x")]}}}})
    gone = Pod.from_dict({"metadata": {"name": "g", "namespace": "default", "uid": "g", "labels": {"app": "a"}},
                          "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}})

    class Handle:
        def __init__(self, gates: Any) -> None:
            self.feature_gates = gates

    verdicts = {}
    for minor in ("1.36", "1.37"):
        plugin = InterPodAffinity(handle=Handle(parse_feature_gates([], emulated=minor)))
        hint = next(e.hint for e in plugin.events_to_register() if e.event.resource == "Pod")
        verdicts[minor] = hint(target, gone, None)
    from scheduler_runtime.framework.types import QUEUE, QUEUE_SKIP
    assert verdicts == {"1.36": QUEUE_SKIP, "1.37": QUEUE}


def test_dynamic_resources_registers_kubes_events_at_the_emulated_minor() -> None:
    """EventsToRegister of DynamicResources, kube-scheduler 1.36.3 and 1.37.2 (queueing hints on), each minor's
    default gates: (resource, actions, has a hint function). 1.37 adds ResourceClaim Delete; the pod's own
    update (1.37's TargetPod, 1.36's Pod) is ksched's Pod event. DeviceTaintRule is ksched's stand-in for the
    ResourceSlice updates kube's slice tracker sends on rule changes, so only with DRADeviceTaintRules (on from
    1.37). The hints' decisions are kube's tables, tests/data/dra_tables/hints.yaml."""
    from types import SimpleNamespace

    from scheduler_runtime.featuregates import default_gates
    from scheduler_runtime.framework.types import ActionType as A
    from scheduler_runtime.plugins.dynamicresources import DynamicResources, DynamicResourcesArgs
    from scheduler_runtime.plugins.gates import GATES_CONTEXT

    for minor, claim, rules in (("1.36", A.Add | A.Update, False), ("1.37", A.Add | A.Update | A.Delete, True)):
        gates = default_gates(minor)
        args = DynamicResourcesArgs.model_validate({}, context={GATES_CONTEXT: gates})
        plugin = DynamicResources(args, SimpleNamespace(feature_gates=gates))
        got = [(r.event.resource, r.event.action, r.hint is not None) for r in plugin.events_to_register()]
        want = {("Node", A.Add | A.UpdateNodeLabel | A.UpdateNodeAllocatable, False),
                ("resource.k8s.io/ResourceClaim", claim, True),
                ("Pod", A.UpdatePodGeneratedResourceClaim, True),
                ("resource.k8s.io/DeviceClass", A.Add | A.Update, False),
                ("resource.k8s.io/ResourceSlice", A.Add | A.Update, False)}
        if rules:
            want.add(("resource.k8s.io/DeviceTaintRule", A.Add | A.Update | A.Delete, True))
        assert len(got) == len(set(got)) and set(got) == want, minor


def test_an_event_looks_only_at_gated_pods_whose_gating_plugin_registers_it() -> None:
    """Gated pods are indexed by the PreEnqueue plugin holding them: a Node add visits none of the pods held by
    a plugin that registers only pod updates (SchedulingGates' shape), lifts those of a plugin that registers
    it once PreEnqueue passes, and follows a pod whose PreEnqueue now fails in another plugin."""
    from scheduler_runtime.framework.status import Status
    from scheduler_runtime.framework.types import QUEUE, ActionType, ClusterEvent, ClusterEventWithHint
    from scheduler_runtime.objects import Pod
    from scheduler_runtime.queue import SchedulingQueue

    holder = {"gates": "Gates", "claim": "Claims", "moving": "Claims"}  # pod -> plugin PreEnqueue stops it at

    def pre_enqueue(pod: Pod) -> Status | None:
        plugin = holder.get(pod.name)
        return Status.unschedulable("held").with_plugin(plugin) if plugin else None

    regs = {"Gates": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UpdatePodSchedulingGatesEliminated))],
            "Claims": [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add), lambda p, o, n: QUEUE)]}

    def plugins_for(ev: ClusterEvent) -> frozenset[str]:
        return frozenset(n for n, rs in regs.items() if any(r.event.matches(ev) for r in rs))

    q = SchedulingQueue(pre_enqueue=pre_enqueue, events_for=lambda profile, plugin: regs.get(plugin),
                        plugin_index=(plugins_for, frozenset(regs)))
    for name in ("gates", "claim", "moving"):
        q.add(Pod.from_dict({"metadata": {"name": name, "uid": name}}))
    assert {n: q.where(n) for n in holder} == {"gates": "gated", "claim": "gated", "moving": "gated"}
    visited: list[str] = []
    real = q._gate_lifted

    def spy(qpi: Any, ev: ClusterEvent, old: Any, new: Any) -> bool:
        visited.append(qpi.pod.name)
        return real(qpi, ev, old, new)
    q._gate_lifted = spy  # type: ignore[method-assign]
    holder.update(claim="", moving="Gates")  # the claim now exists; "moving" now waits on its gates
    assert q.move_on_event(ClusterEvent("Node", ActionType.Add)) == 1
    assert sorted(visited) == ["claim", "moving"]  # never "gates"
    assert q.where("claim") == "active" and q.where("moving") == "gated"
    visited.clear()
    assert q.move_on_event(ClusterEvent("Node", ActionType.Add)) == 0
    assert visited == []  # "moving" is now filed under Gates, which a Node add cannot lift
    q.delete(Pod.from_dict({"metadata": {"name": "moving", "uid": "moving"}}))
    assert q.where("moving") is None and q._gated == {"Gates": {"gates"}}

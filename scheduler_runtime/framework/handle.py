"""Handle: what the framework gives each plugin (snapshot, cluster client, waiting pods, events, logger)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..objects import Pod
from .snapshot import Snapshot
from .waiting import WaitingPod, WaitingPods


class Handle:
    """Per-profile services for plugins. Attributes are wired by the scheduler that owns the profile."""

    def __init__(self, snapshot: Snapshot, *, profile: str = "default-scheduler", cluster: Any = None,
                 parallelism: int = 16) -> None:
        self.snapshot = snapshot
        self.profile = profile
        #: cluster backend (memory or kube): list/get objects, CRD stores via `informer()`
        self.cluster = cluster
        self.parallelism = parallelism
        #: the effective feature gates the configuration was built with (featuregates.FeatureGates), or None for
        #: the pinned release's defaults; in-tree plugins that switch behaviour by gate read them
        self.feature_gates: Mapping[str, bool] | None = None
        #: the runtime.Framework this handle belongs to, set by it (typed loosely: handle.py must not import
        #: runtime.py, which imports this module); in-tree DefaultPreemption reaches it
        self.framework: Any = None
        self.logger = logging.getLogger(f"ksched.{profile}")
        #: called with pods to move to activeQ (e.g. a gang's siblings); set by the scheduler
        self.activate: Callable[[Iterable[Pod]], None] = lambda pods: None
        #: emits an event about an object: (obj_raw, type, reason, action, note)
        self.record_event: Callable[[Pod, str, str, str, str], None] = lambda *a: None
        #: nominated pods per node, for preemption-aware filtering; set by the scheduler
        self.nominated_pods_for_node: Callable[[str], list[Pod]] = lambda node: []
        #: names of nodes that have nominated pods (so filtering knows where the two-pass check is needed)
        self.nominated_node_names: Callable[[], set[str]] = lambda: set()
        #: every nominated node's pods at once (read only), what a scheduling cycle's Filter and a preemption dry
        #: run read; by default made of the two above, the scheduler sets its queue's one-lock answer
        self.nominated_pods_by_node: Callable[[], Mapping[str, list[Pod]]] = self._nominated_pods_by_node
        #: pods deleted as preemption victims go through this (graceful delete)
        self.delete_pod: Callable[[Pod], None] = lambda pod: None
        #: preemption victims chosen (scheduler_preemption_victims), counted when PostFilter picks them
        self.observe_victims: Callable[[int], None] = lambda n: None
        #: runs API work off the scheduling cycle (async preemption): the scheduler's binding workers when it
        #: binds asynchronously, else at once in the caller
        self.run_in_background: Callable[[Callable[[], None]], None] = lambda fn: fn()
        #: the pod as the cluster has it now (namespace, name), or None when it is gone
        self.get_pod: Callable[[str, str], Pod | None] = lambda ns, name: None
        #: whether that pod (namespace, name) is gone or being deleted, read without building a Pod: async
        #: preemption's PreEnqueue asks it of a preemptor's last victim on every event that would requeue it
        self.pod_gone_or_deleting: Callable[[str, str], bool] = self._gone_or_deleting
        #: whether the scheduler's cache still holds this assigned pod (by UID): its deletion event has not been
        #: handled yet. By default yes (no scheduler behind the handle: nothing to release)
        self.pod_cached: Callable[[str], bool] = lambda uid: True
        #: the scheduler's extenders (scheduler_runtime.extenders.ExtenderSet) or None; DefaultPreemption asks
        #: them about its candidates
        self.extenders: Any = None
        #: a ResourceClaim as a plugin's write returned it, from any thread (kube's assume cache Assume): the
        #: scheduler hands its queue the claim update that kube's assume cache emits then
        self.claim_assumed: Callable[[dict[str, Any]], None] = lambda claim: None

    def _nominated_pods_by_node(self) -> Mapping[str, list[Pod]]:
        return {node: self.nominated_pods_for_node(node) for node in self.nominated_node_names()}

    def _gone_or_deleting(self, namespace: str, name: str) -> bool:
        pod = self.get_pod(namespace, name)
        return pod is None or bool(pod.deletion_timestamp)

    # waiting pods (Permit) -------------------------------------------------------------
    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting_pods().get(uid)

    def iterate_waiting_pods(self) -> list[WaitingPod]:
        return self._waiting_pods().all()

    def _waiting_pods(self) -> WaitingPods:
        if self.framework is None:
            raise RuntimeError("this handle belongs to no framework yet")
        pods: WaitingPods = self.framework.waiting_pods
        return pods

    def reject_waiting_pod(self, uid: str) -> bool:
        wp = self.get_waiting_pod(uid)
        return wp.reject("", "removed") if wp is not None else False

    def informer(self, resource: str) -> Any:
        """A watched store of any resource (CRDs too): `.list()`, `.get(name, namespace)`, `.add_handler()`."""
        if self.cluster is None:
            raise RuntimeError("no cluster backend is attached to this framework")
        return self.cluster.informer(resource)


if TYPE_CHECKING:  # mypy checks that what plugins receive gives everything the public Protocols promise
    from .interface import Handle as HandleContract
    from .interface import NodeInfoView, WaitingPodView
    from .types import NodeInfo

    def _conforms(handle: Handle, node_info: NodeInfo,
                  waiting: WaitingPod) -> tuple[HandleContract, NodeInfoView, WaitingPodView]:
        return handle, node_info, waiting

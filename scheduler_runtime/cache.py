"""Scheduler cache: nodes and the pods on them (bound by anyone), with assume/forget for in-flight pods."""

from __future__ import annotations

from dataclasses import dataclass

from .framework.snapshot import Snapshot, same_accounting
from .framework.types import NodeInfo
from .objects import Node, Pod


@dataclass(slots=True)
class _PodState:
    pod: Pod
    node: str
    assumed: bool


class Cache:
    """Mutated only by the scheduling thread between cycles; the snapshot is its live view."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self._pods: dict[str, _PodState] = {}
        self._orphans: dict[str, NodeInfo] = {}  # pods bound to nodes we have not seen (yet)

    # ------------------------------------------------------------------ nodes
    def add_node(self, node: Node) -> None:
        existing = self.snapshot.get(node.name)
        if existing is not None:
            self.snapshot.update_node(existing, node)
            return
        info = self._orphans.pop(node.name, None) or NodeInfo(None, node.name)
        info.node = node
        info.name = node.name
        self.snapshot.add_node(info)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        info = self.snapshot.remove_node(name)
        if info is not None and info.pods:  # keep pods accounted in case the node comes back
            info.node = None
            self._orphans[name] = info

    def node_info(self, name: str) -> NodeInfo | None:
        return self.snapshot.get(name) or self._orphans.get(name)

    # ------------------------------------------------------------------ pods
    def _info_for(self, node: str) -> NodeInfo:
        info = self.snapshot.get(node)
        if info is None:
            info = self._orphans.get(node)
            if info is None:
                info = NodeInfo(None, node)
                self._orphans[node] = info
        return info

    def _place(self, pod: Pod, node: str) -> None:
        info = self.snapshot.get(node)
        if info is not None:
            self.snapshot.add_pod(info, pod)
        else:
            self._info_for(node).add_pod(pod)

    def _unplace(self, pod: Pod, node: str) -> None:
        info = self.snapshot.get(node)
        if info is not None:
            self.snapshot.remove_pod(info, pod)
            return
        orphan = self._orphans.get(node)
        if orphan is not None:
            orphan.remove_pod(pod)
            if not orphan.pods:
                del self._orphans[node]

    def _replace(self, old: Pod, new: Pod, node: str) -> bool:
        """Swap in `new` for an equally accounted `old` on `node` (a bind confirming its assumption, most
        often): the same end state as unplace then place, at a fraction of the cost. False: nothing done."""
        info = self.snapshot.get(node)
        if info is not None:
            return self.snapshot.replace_pod(info, old, new)
        orphan = self._orphans.get(node)
        return orphan is not None and orphan.replace_pod(old, new)

    def add_pod(self, pod: Pod) -> None:
        """A pod observed bound to a node (by us or anyone): confirm an assumption or account it."""
        if not pod.node_name or pod.terminated:
            return
        st = self._pods.get(pod.uid)
        if st is not None:
            if st.pod is not pod or st.assumed or st.node != pod.node_name:
                if not (st.node == pod.node_name and same_accounting(st.pod, pod)
                        and self._replace(st.pod, pod, st.node)):
                    self._unplace(st.pod, st.node)
                    self._place(pod, pod.node_name)
            st.pod, st.node, st.assumed = pod, pod.node_name, False
            return
        self._pods[pod.uid] = _PodState(pod, pod.node_name, False)
        self._place(pod, pod.node_name)

    def update_pod(self, pod: Pod) -> None:
        if pod.terminated:
            self.remove_pod(pod)
            return
        self.add_pod(pod)

    def remove_pod(self, pod: Pod) -> None:
        st = self._pods.pop(pod.uid, None)
        if st is not None:
            self._unplace(st.pod, st.node)

    def assume_pod(self, pod: Pod, node: str) -> None:
        """Account the pod on `node` before the bind lands, so the next cycle sees the room taken."""
        if pod.uid in self._pods:
            raise ValueError(f"pod {pod.key} is already in the cache")
        self._pods[pod.uid] = _PodState(pod, node, True)
        self._place(pod, node)

    def forget_pod(self, pod: Pod) -> None:
        st = self._pods.get(pod.uid)
        if st is not None and st.assumed:
            del self._pods[pod.uid]
            self._unplace(st.pod, st.node)

    def assumed_pod(self, uid: str) -> Pod | None:
        """The Pod assumed under `uid`, None when that pod is not assumed."""
        st = self._pods.get(uid)
        return st.pod if st is not None and st.assumed else None

    def is_assumed(self, uid: str) -> bool:
        st = self._pods.get(uid)
        return st is not None and st.assumed

    def pod_node(self, uid: str) -> str | None:
        st = self._pods.get(uid)
        return st.node if st is not None else None

    def pods(self) -> list[Pod]:
        return [s.pod for s in self._pods.values()]

    def set_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.snapshot.namespace_labels[name] = labels

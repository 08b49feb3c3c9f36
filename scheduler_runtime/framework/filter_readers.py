"""What some in-tree Filter plugins read, so a Filter outcome can be reused on nodes that are alike for them.

NodeUnschedulable, NodeName, TaintToleration and NodeAffinity decide from the pod and the Node object only;
NodeResourcesFit from the node's allocatable, its number of pods and their summed requests (kube-scheduler's
Fits). None of them writes to the CycleState. So while only these run and no PreFilter AddPod/RemovePod
extension changes the state, on nodes where the Node-only ones pass, the outcome of Filter (with or without
nominated pods added) is a function of `resource_key`. Only the in-tree classes are trusted with this, never
a plugin of the same name from elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..objects import Pod
from .types import NodeInfo

NODE_ONLY = frozenset({"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"})
READ_ONLY = NODE_ONLY | {"NodeResourcesFit"}
_MODULES = {"NodeUnschedulable": "nodeunschedulable", "NodeName": "nodename", "TaintToleration": "tainttoleration",
            "NodeAffinity": "nodeaffinity", "NodeResourcesFit": "noderesources"}
_PLUGINS_PACKAGE = __package__.rsplit(".", 1)[0] + ".plugins"


def in_tree(name: str, plugin: Any) -> bool:
    mod = _MODULES.get(name)
    return mod is not None and type(plugin).__name__ == name and type(plugin).__module__ == f"{_PLUGINS_PACKAGE}.{mod}"


def node_memo(ni: NodeInfo) -> dict[Any, Any]:
    """Values derived from `ni`'s pods and Node, kept until either changes: every pod added, removed or
    replaced moves `generation` on, and a Node update puts another Node object in place. A preemption wave
    asks the same nodes, unchanged, the same questions in cycle after cycle."""
    got = ni.derived
    if got is None or got[0] != ni.generation or got[1] is not ni.node:
        got = ni.derived = (ni.generation, ni.node, {})
    return got[2]


def resource_key(ni: NodeInfo, nominated: list[Pod]) -> tuple[Any, ...]:
    """What NodeResourcesFit reads of a node (with `nominated` added), as a hashable value. Equal keys mean
    equal inputs; the same inputs listed in another order give another key (a missed reuse, never a wrong
    one), so nothing is sorted: the requests dicts of one workload's pods list their resources alike."""
    node = ni.node
    assert node is not None
    memo = node_memo(ni)
    base = memo.get(_RESOURCES)
    if base is None:
        base = memo[_RESOURCES] = (tuple(node.allocatable.items()), len(ni.pods), tuple(ni.requested.items()))
    return (base, tuple([tuple(p.requests.items()) for p in nominated])) if nominated else (base,)


_RESOURCES = "resource_key"
_NOMINATED = "nominated resource_key"


def nominated_resource_key(ni: NodeInfo, nominated: list[Pod], pod: Pod) -> tuple[list[Pod], tuple[Any, ...]]:
    """The node's `nominated` pods that the two-pass filter adds for `pod` (priority at least pod's, not pod
    itself) and `resource_key` with them. Kept with the node for that list object and priority: the nominator
    hands out the same list until the node's nominations change, and every cycle of a preemption wave asks
    about each of hundreds of nominated nodes. Not kept when `pod` is among them."""
    memo = node_memo(ni)
    priority, uid = pod.priority, pod.uid
    got = memo.get((_NOMINATED, priority))
    if got is not None and got[0] is nominated and uid not in got[1]:
        return got[2], got[3]
    to_add = [p for p in nominated if p.priority >= priority and p.uid != uid]
    key = resource_key(ni, to_add)
    uids = frozenset([p.uid for p in nominated])
    if uid not in uids:
        memo[(_NOMINATED, priority)] = (nominated, uids, to_add, key)
    return to_add, key


class Replays:
    """The evaluation counts of reused outcomes, added up per outcome and counted once (`flush`): a preemption
    wave reuses one outcome on most of the nodes it looks at, and counting each plugin again per node was a
    fair share of a cycle. The totals are the same."""

    __slots__ = ("fw", "hits")

    def __init__(self, fw: Any) -> None:
        self.fw = fw
        self.hits: dict[int, tuple[list[tuple[str, str, int]], list[int]]] = {}

    def add(self, counted: list[tuple[str, str, int]]) -> None:
        """One more reuse of the outcome whose computation counted `counted` (kept referenced until `flush`)."""
        if counted:
            got = self.hits.get(id(counted))
            if got is None:
                self.hits[id(counted)] = (counted, [1])
            else:
                got[1][0] += 1

    def flush(self) -> None:
        evaluated = self.fw._evaluated
        for counted, (times,) in self.hits.values():
            for point, name, n in counted:
                evaluated(point, name, n * times)
        self.hits.clear()


def recording_evaluations(fw: Any, compute: Callable[[], Any]) -> tuple[Any, list[tuple[str, str, int]]]:
    """compute() and the scheduler_plugin_evaluation_total increments it made (when metrics are on), so that
    reusing its outcome can add them again."""
    counted: list[tuple[str, str, int]] = []
    if fw.metrics is None:
        return compute(), counted
    real = fw._evaluated

    def record(point: str, name: str, n: int = 1) -> None:
        counted.append((point, name, n))
        real(point, name, n)
    fw._evaluated = record
    try:
        return compute(), counted
    finally:
        del fw._evaluated

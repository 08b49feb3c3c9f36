"""Snapshot: the nodes and pods one scheduling cycle sees.

The scheduling loop is single-threaded and applies cluster events only between cycles, so the snapshot
is the cache's live structure rather than a per-cycle copy: no O(nodes) work per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

from ..objects import Node, Pod, PodAffinityTerm, Taint, normalized_image_name
from .node_table import NodeTable
from .podindex import MatchIndex, PodPredicate, TermIndex, Topology, TopologyIndex, term_key
from .types import NodeInfo

GroupKey = tuple[tuple[tuple[str, str], ...], tuple[Taint, ...], bool]

#: left out of equivalence groups: it is unique per node, and plugins that select on it go per node
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _terms_key(terms: tuple[PodAffinityTerm, ...]) -> list[tuple[Hashable, str, int]]:
    return [(term_key(t), t.topology_key, t.weight) for t in terms]


def same_accounting(a: Pod, b: Pod) -> bool:
    """Whether the snapshot would hold exactly the same state for `b` as for `a` (same UID): every Pod field
    that adding a pod reads. NodeInfo sums requests, non-zero requests and host ports and lists the pods with
    (required anti-)affinity terms; the node table sums requests and non-zero requests; TermIndex keys the
    pod's affinity terms by kind, `term_key`, topology key, weight and the pod's namespace; MatchIndex
    predicates (InterPodAffinity's terms, PodTopologySpread's selectors) read namespace, labels and
    deletionTimestamp. Terms are compared by those keys, since parsed selectors hold closures."""
    if not (a.uid == b.uid and a.namespace == b.namespace and a.labels == b.labels
            and a.deletion_timestamp == b.deletion_timestamp and a.requests == b.requests
            and a.non_zero_requests == b.non_zero_requests and a.host_ports == b.host_ports):
        return False
    for x, y in ((a.anti_affinity_required, b.anti_affinity_required), (a.affinity_required, b.affinity_required),
                 (a.affinity_preferred, b.affinity_preferred), (a.anti_affinity_preferred, b.anti_affinity_preferred)):
        if x is y:  # Pod.rebound carries the parsed terms over as they are
            continue
        if len(x) != len(y) or (x and _terms_key(x) != _terms_key(y)):
            return False
    return True


def _group_key(node: Node) -> GroupKey:
    labels = tuple(sorted(kv for kv in node.labels.items() if kv[0] != HOSTNAME_LABEL))
    return labels, node.taints, node.unschedulable


class _NamespaceLabels(dict[str, dict[str, str]]):
    """Namespace name -> labels; counts its changes so cached namespaceSelector matches know when to go."""

    version = 0

    def __init__(self, on_change: Callable[[], None]) -> None:
        super().__init__()
        self._on_change = on_change

    def _changed(self) -> None:
        self.version += 1
        self._on_change()

    def __setitem__(self, key: str, value: dict[str, str]) -> None:
        if self.get(key) != value:
            self._changed()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._changed()
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self._changed()
        return super().pop(key, *default)


class Snapshot:
    """Node list (row order), name index, numpy node table and equivalence groups of nodes."""

    def __init__(self) -> None:
        self.node_infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.table = NodeTable()
        self.group_keys: dict[GroupKey, int] = {}
        self.group_nodes: list[Node] = []  # a representative node per group (labels/taints/unschedulable)
        self.matches = MatchIndex()
        self.namespace_labels: dict[str, dict[str, str]] = _NamespaceLabels(self.matches.reset)
        self.pod_nodes: dict[str, NodeInfo] = {}  # uid -> the node it is on, for every pod in the snapshot
        self.topologies = TopologyIndex()
        self.terms = TermIndex()
        self._row_names: np.ndarray | None = None
        self.generation = 0
        self.num_affinity_pods = 0
        self.num_required_anti_affinity_pods = 0
        self._images: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    # ---------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self.node_infos)

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.node_infos)

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    def topology(self, key: str) -> Topology:
        """Domain id of every row for a node label key (see podindex)."""
        return self.topologies.get(key, self.node_infos)

    def match_counts(self, key: Hashable, pred: PodPredicate) -> np.ndarray:
        """Per row, the pods `pred` accepts; `key` names the predicate (see podindex.MatchIndex). A predicate
        may read namespace labels (a namespaceSelector): a label change drops every kept count (see
        _NamespaceLabels) rather than leave entries whose counts no longer follow their predicate."""
        return self.matches.counts(key, pred, self.node_infos)

    @property
    def namespace_version(self) -> int:
        return getattr(self.namespace_labels, "version", 0)

    def row_names(self) -> np.ndarray:
        """Node name of every row, as an object array (fancy-indexable by rows)."""
        if self._row_names is None:
            self._row_names = np.array([ni.name for ni in self.node_infos] or [""], dtype=object)[:len(self)]
        return self._row_names

    def node_names(self) -> list[str]:
        return [ni.name for ni in self.node_infos]

    def image_rows(self, image: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows of nodes that have the image, its size on each) for ImageLocality."""
        if self._images is None:
            acc: dict[str, tuple[list[int], list[int]]] = {}
            for ni in self.node_infos:
                assert ni.node is not None
                for names, size in ni.node.images:
                    for nm in {normalized_image_name(n) for n in names}:
                        rows, sizes = acc.setdefault(nm, ([], []))
                        rows.append(ni.row)
                        sizes.append(size)
            self._images = {k: (np.asarray(r, dtype=np.int64), np.asarray(s, dtype=np.int64))
                            for k, (r, s) in acc.items()}
        empty = np.zeros(0, dtype=np.int64)
        return self._images.get(normalized_image_name(image), (empty, empty))

    # ---------------------------------------------------------------- writes (cache only)
    def _group_of(self, node: Node) -> int:
        key = _group_key(node)
        gid = self.group_keys.get(key)
        if gid is None:
            gid = len(self.group_nodes)
            self.group_keys[key] = gid
            self.group_nodes.append(node)
        return gid

    def add_node(self, info: NodeInfo) -> None:
        assert info.node is not None
        row = self.table.add_row()
        info.row = row
        info.table = self.table
        self.table.set_allocatable(row, info.node)
        self.table.group[row] = self._group_of(info.node)
        self.node_infos.append(info)
        self.by_name[info.name] = info
        for p in info.pods:
            self.table.account_pod(row, p, 1)
            self._count_affinity(p, 1)
            self.pod_nodes[p.uid] = info
        if info.used_ports:
            self.table.add_ports(row, info.used_ports)
        self._rows_changed()
        self._changed(images=bool(info.node.images))

    def update_node(self, info: NodeInfo, node: Node) -> None:
        old = info.node
        info.node = node
        self.table.set_allocatable(info.row, node)
        self.table.group[info.row] = self._group_of(node)
        if old is None or old.labels != node.labels:
            self.topologies.reset()
        self._changed(images=old is None or old.images != node.images)

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self.by_name.pop(name, None)
        if info is None:
            return None
        row = info.row
        last = len(self.node_infos) - 1
        if info.used_ports:
            self.table.drop_ports(row, info.used_ports)
        if row != last:
            moved = self.node_infos[last]
            self.table.move_row(last, row)
            if moved.used_ports:
                self.table.drop_ports(last, moved.used_ports)
                self.table.add_ports(row, moved.used_ports)
            moved.row = row
            self.node_infos[row] = moved
        self.node_infos.pop()
        self.table.pop_row()
        info.row = -1
        info.table = None
        for p in info.pods:
            self._count_affinity(p, -1)
            self.pod_nodes.pop(p.uid, None)
        self._rows_changed()
        self._changed(images=True)
        return info

    def add_pod(self, info: NodeInfo, pod: Pod) -> None:
        info.add_pod(pod)
        self._count_affinity(pod, 1)
        self.pod_nodes[pod.uid] = info
        self.matches.on_pod(info.row, pod, 1)
        self.terms.on_pod(info.row, pod, 1)
        self.generation += 1

    def replace_pod(self, info: NodeInfo, old: Pod, new: Pod) -> bool:
        """`remove_pod(info, old)` then `add_pod(info, new)` for a pod whose accounted fields did not change
        (`same_accounting`): the counts, sums and indexes stay as they are. False when `old` is not stored
        on `info` (nothing done; the caller falls back to remove and add)."""
        if not info.replace_pod(old, new):
            return False
        self.pod_nodes.pop(new.uid, None)  # re-inserted last, as remove then add would
        self.pod_nodes[new.uid] = info
        # the term index keeps its version: its counts, all it versions, are the same (same_accounting)
        self.generation += 2
        return True

    def remove_pod(self, info: NodeInfo, pod: Pod) -> bool:
        stored = info.pods.get_uid(pod.uid)
        if stored is not None and info.remove_pod(stored):
            self._count_affinity(stored, -1)
            self.pod_nodes.pop(stored.uid, None)
            self.matches.on_pod(info.row, stored, -1)
            self.terms.on_pod(info.row, stored, -1)
            self.generation += 1
            return True
        return False

    def _rows_changed(self) -> None:
        """Rows were added or moved: per-row indexes are rebuilt on their next read."""
        self.topologies.reset()
        self.matches.reset()
        self.terms.reset()
        self._row_names = None

    def _count_affinity(self, pod: Pod, sign: int) -> None:
        if pod.has_pod_affinity:
            self.num_affinity_pods += sign
        if pod.anti_affinity_required:
            self.num_required_anti_affinity_pods += sign

    def _changed(self, images: bool) -> None:
        self.generation += 1
        if images:
            self._images = None

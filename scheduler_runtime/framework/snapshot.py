"""Snapshot: the nodes and pods one scheduling cycle sees.

The scheduling loop is single-threaded and applies cluster events only between cycles, so the snapshot
is the cache's live structure rather than a per-cycle copy: no O(nodes) work per pod.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..objects import Node, Pod, Taint, normalized_image_name
from .node_table import NodeTable
from .types import NodeInfo

GroupKey = tuple[tuple[tuple[str, str], ...], tuple[Taint, ...], bool]

#: left out of equivalence groups: it is unique per node, and plugins that select on it go per node
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _group_key(node: Node) -> GroupKey:
    labels = tuple(sorted(kv for kv in node.labels.items() if kv[0] != HOSTNAME_LABEL))
    return labels, node.taints, node.unschedulable


class Snapshot:
    """Node list (row order), name index, numpy node table and equivalence groups of nodes."""

    def __init__(self) -> None:
        self.node_infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.table = NodeTable()
        self.group_keys: dict[GroupKey, int] = {}
        self.group_nodes: list[Node] = []  # a representative node per group (labels/taints/unschedulable)
        self.namespace_labels: dict[str, dict[str, str]] = {}
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
        self._changed(images=bool(info.node.images))

    def update_node(self, info: NodeInfo, node: Node) -> None:
        old = info.node
        info.node = node
        self.table.set_allocatable(info.row, node)
        self.table.group[info.row] = self._group_of(node)
        self._changed(images=old is None or old.images != node.images)

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self.by_name.pop(name, None)
        if info is None:
            return None
        row = info.row
        last = len(self.node_infos) - 1
        if row != last:
            moved = self.node_infos[last]
            self.table.move_row(last, row)
            moved.row = row
            self.node_infos[row] = moved
        self.node_infos.pop()
        self.table.pop_row()
        info.row = -1
        info.table = None
        for p in info.pods:
            self._count_affinity(p, -1)
        self._changed(images=True)
        return info

    def add_pod(self, info: NodeInfo, pod: Pod) -> None:
        info.add_pod(pod)
        self._count_affinity(pod, 1)
        self.generation += 1

    def remove_pod(self, info: NodeInfo, pod: Pod) -> bool:
        if info.remove_pod(pod):
            self._count_affinity(pod, -1)
            self.generation += 1
            return True
        return False

    def _count_affinity(self, pod: Pod, sign: int) -> None:
        if pod.has_pod_affinity:
            self.num_affinity_pods += sign
        if pod.anti_affinity_required:
            self.num_required_anti_affinity_pods += sign

    def _changed(self, images: bool) -> None:
        self.generation += 1
        if images:
            self._images = None

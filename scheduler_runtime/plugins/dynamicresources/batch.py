"""DynamicResources' batch Filter: the devices of every node of the snapshot laid end to end in arrays, so that
for the common claim (one plain ExactCount request) every node's verdict comes from a few array operations
instead of one allocator search per node.

A node's verdict here is the one `Allocator._pick_plain` gives (the answer of the search): the node fails when
fewer of its devices are free than requested, or when every free device is known and too few are eligible; it
passes when every free device is known and enough are eligible and plain. Anything else (a device whose
eligibility is unknown or that needs `_allocate_device`'s checks, a node whose pools the search handles itself)
is left to the per-node Filter (`FilterBatch.pending`), which the framework asks in kube's walk order.

Upstream: kube-scheduler v1.37.2, pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go (Filter,
node by node: kube has no batch form; the verdicts here are that Filter's).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...objects import Node
from .allocator import ALLOCATION_RESULTS_MAX_SIZE, Allocator, DeviceID, SliceCaches
from .claims import AllocatedView

#: positions in the table at most (slices shared by many nodes repeat their devices on each)
MAX_POSITIONS = 500_000


class DeviceTable:
    """Every row's devices in search order (those `Allocator.node_devices` gives), while the slice caches and
    the node objects of the rows are the same; rows `node_devices` leaves out are `irregular`."""

    def __init__(self, a: Allocator, nodes: list[Node]) -> None:
        self.caches: SliceCaches = a.caches
        self.nodes = list(nodes)
        self.flat: list[tuple[DeviceID, dict[str, Any], dict[str, Any]]] = []
        self.records: list[Any] = []
        self.rows: list[int] = []  # the row of each position
        self.bounds = [0]  # where each row's positions start, then the end
        irregular = np.zeros(len(nodes), dtype=bool)
        per_node = [a.node_devices(node, a.pools_for(node)) for node in nodes]
        #: False when the table would be too large to be worth it: every node is then left to the search
        self.usable = sum(len(nd.flat) for nd in per_node if nd is not None) <= MAX_POSITIONS
        for row, nd in enumerate(per_node if self.usable else ()):
            if nd is None:
                irregular[row] = True
            else:
                self.flat.extend(nd.flat)
                self.records.extend(nd.records)
                self.rows.extend([row] * len(nd.flat))
            self.bounds.append(len(self.flat))
        self.row_of = np.asarray(self.rows, dtype=np.int64)
        #: how many devices each row has
        self.sizes = np.diff(np.asarray(self.bounds, dtype=np.int64))
        self.irregular = irregular
        #: device -> its positions (one per node that sees it)
        self.index: dict[DeviceID, list[int]] = {}
        for i, f in enumerate(self.flat):
            self.index.setdefault(f[0], []).append(i)
        #: per verdict key, each position's `Allocator.plain_verdict`, worked out on first use
        self.verdicts: dict[int, np.ndarray] = {}
        #: which positions the store's allocated claims hold (and how many per row), as of `log_seen` entries
        #: of the change log `log`
        self._held: np.ndarray | None = None
        self._held_rows: np.ndarray | None = None
        self._log: list[DeviceID] | None = None
        self._log_seen = 0

    def valid_for(self, a: Allocator, nodes: list[Node]) -> bool:
        """Whether the table still describes these rows: same slice caches, and each row's node the same or
        one whose devices are still the same objects in the same order (a node's status update, say)."""
        if a.caches is not self.caches or len(nodes) != len(self.nodes):
            return False
        if all(map(operator.is_, nodes, self.nodes)):
            return True
        if not self.usable:
            return False
        for row, node in enumerate(nodes):
            if node is self.nodes[row]:
                continue
            nd = a.node_devices(node, a.pools_for(node))
            if nd is None or self.irregular[row]:
                if nd is not None or not self.irregular[row]:
                    return False
            else:
                mine = self.flat[self.bounds[row]:self.bounds[row + 1]]
                if len(nd.flat) != len(mine) or not all(
                        f[1] is g[1] and f[2] is g[2] for f, g in zip(nd.flat, mine, strict=True)):
                    return False
            self.nodes[row] = node
        return True

    def free(self, allocated: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """Per position whether nobody holds the device, and per row how many of its devices are free; None when
        `allocated` is not the manager's view. Follows the manager's change log from the last call, so a cycle
        costs the devices that changed hands, not every device."""
        if not isinstance(allocated, AllocatedView) or allocated.log is None:
            return None
        counts = allocated.counts
        log, seen = allocated.log
        held, held_rows = self._held, self._held_rows
        if held is None or held_rows is None or log is not self._log or seen < self._log_seen:
            held = np.fromiter((f[0] in counts for f in self.flat), dtype=bool, count=len(self.flat))
            held_rows = np.bincount(self.row_of[held], minlength=len(self.nodes))
        else:
            index, rows = self.index, self.rows
            for did in log[self._log_seen:seen]:
                now = did in counts
                for i in index.get(did, ()):
                    if held[i] != now:
                        held[i] = now
                        held_rows[rows[i]] += 1 if now else -1
        self._held, self._held_rows, self._log, self._log_seen = held, held_rows, log, seen
        free = ~held
        n_free = self.sizes - held_rows
        for did in allocated.extra:
            for i in self.index.get(did, ()):
                if free[i]:
                    free[i] = False
                    n_free[self.rows[i]] -= 1
        return free, n_free

    def plain_verdicts(self, a: Allocator, vkey: int, rd: Any, claims: list[dict[str, Any]]
                       ) -> tuple[np.ndarray, np.ndarray | None, bool]:
        """Per position whether `Allocator.plain_verdict` is 1 (eligible and plain), whether it is unsure (2 or
        -1; None: no position is), and whether every position is plain; worked out once per table."""
        got = self.verdicts.get(vkey)
        if got is None:
            nodes = self.nodes
            v = np.fromiter((a.plain_verdict(rd, nodes[self.rows[i]], claims, f[0], self.records[i], f[2])
                             for i, f in enumerate(self.flat)), dtype=np.int8, count=len(self.flat))
            unsure = (v == 2) | (v < 0)
            got = self.verdicts[vkey] = (v == 1, unsure if unsure.any() else None, bool((v == 1).all()))
        return got

    def decide(self, a: Allocator, rd: Any, claims: list[dict[str, Any]], free: tuple[np.ndarray, np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray] | None:
        """(passing rows, failing rows) for the request; the other rows are left to the per-node Filter. None
        when `_pick_plain` would not decide this request on any node."""
        want = rd.num_devices
        if want > ALLOCATION_RESULTS_MAX_SIZE or (a.features.consumable_capacity and rd.request.amounts is not None):
            return None
        vkey = a.verdict_key(rd)
        if vkey is None:
            return None
        plain, unsure, all_plain = self.plain_verdicts(a, vkey, rd, claims)
        free_at, n_free = free
        n_ok: np.ndarray = n_free
        n_unsure: np.ndarray | int = 0
        if not all_plain:  # count per row (the common case, every device eligible and plain, needs no count)
            n = len(self.nodes)
            n_ok = np.bincount(self.row_of[free_at & plain], minlength=n)
            if unsure is not None:
                n_unsure = np.bincount(self.row_of[free_at & unsure], minlength=n)
        regular = ~self.irregular
        known = regular & (n_unsure == 0)
        fails = regular & ((n_free < want) | (known & (n_ok < want)))
        passes = known & (n_ok >= want) & ~fails
        return passes, fails


def table_for(a: Allocator, nodes: list[Node], kept: DeviceTable | None) -> DeviceTable:
    """`kept` while it still describes these nodes' devices, else a new table."""
    if kept is not None and kept.valid_for(a, nodes):
        return kept
    return DeviceTable(a, nodes)

"""The node table: allocatable and requested resources of every node as numpy arrays.

Fit checks and the resource scores become array expressions over all nodes at once; this is what
lets a Python scheduler keep up with kube-scheduler's Go loops. Rows follow the snapshot's node list.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from ..objects import Node, Pod

CPU, MEMORY, EPHEMERAL, PODS = 0, 1, 2, 3
_MAX_CHANGES = 1 << 16
_BASE_COLUMNS = {"cpu": CPU, "memory": MEMORY, "ephemeral-storage": EPHEMERAL, "pods": PODS}


class NodeTable:
    """Rows are nodes, columns resources. `nz` holds non-zero requests for cpu and memory only."""

    def __init__(self, capacity: int = 64) -> None:
        self.columns: dict[str, int] = dict(_BASE_COLUMNS)
        self.n = 0
        self.alloc = np.zeros((capacity, len(self.columns)), dtype=np.int64)
        self.req = np.zeros_like(self.alloc)
        self.nz = np.zeros((capacity, 2), dtype=np.int64)
        self.group = np.zeros(capacity, dtype=np.int32)
        #: rows whose allocatable or requests changed, in order (see RowValues); `epoch` moves when rows are
        #: added, moved or removed, or the log is cut, which makes every RowValues start over
        self.changes: list[int] = []
        self.epoch = 0
        #: the rows whose node has a host port in use, per (protocol, port, IP), and per (protocol, port, "")
        #: for any IP: NodePorts' batch filter reads a pod's few keys instead of asking every node
        self.port_rows: dict[tuple[str, int, str], set[int]] = {}

    # ---------------------------------------------------------------- shape
    def column(self, name: str) -> int:
        """Column index of a resource, adding one for a new extended resource."""
        col = self.columns.get(name)
        if col is None:
            col = len(self.columns)
            self.columns[name] = col
            if col == self.alloc.shape[1]:  # room for twice the columns: n new resources cost O(n) copies
                width = 2 * col
                for attr in ("alloc", "req"):
                    old = getattr(self, attr)
                    new = np.zeros((old.shape[0], width), dtype=np.int64)
                    new[:, :col] = old
                    setattr(self, attr, new)
        return col

    def _grow(self) -> None:
        cap = self.alloc.shape[0] * 2
        for attr in ("alloc", "req", "nz"):
            old = getattr(self, attr)
            new = np.zeros((cap, old.shape[1]), dtype=np.int64)
            new[: self.n] = old[: self.n]
            setattr(self, attr, new)
        g = np.zeros(cap, dtype=np.int32)
        g[: self.n] = self.group[: self.n]
        self.group = g

    # ---------------------------------------------------------------- rows
    def _changed(self, row: int) -> None:
        changes = self.changes
        changes.append(row)
        if len(changes) > _MAX_CHANGES:
            self._relaid()

    def _relaid(self) -> None:
        self.changes = []
        self.epoch += 1

    def add_row(self) -> int:
        self._relaid()
        if self.n == self.alloc.shape[0]:
            self._grow()
        row = self.n
        self.n += 1
        self.alloc[row] = 0
        self.req[row] = 0
        self.nz[row] = 0
        return row

    def set_allocatable(self, row: int, node: Node) -> None:
        self._changed(row)
        self.alloc[row] = 0
        for name, amount in node.allocatable.items():
            col = self.column(name)  # may grow the arrays: index only after
            self.alloc[row, col] = amount

    def move_row(self, src: int, dst: int) -> None:
        self._relaid()
        self.alloc[dst] = self.alloc[src]
        self.req[dst] = self.req[src]
        self.nz[dst] = self.nz[src]
        self.group[dst] = self.group[src]

    def pop_row(self) -> None:
        self._relaid()
        self.n -= 1

    def account_pod(self, row: int, pod: Pod, sign: int) -> None:
        self._changed(row)
        r = self.req[row]
        for name, amount in pod.requests.items():
            col = self.columns.get(name)
            if col is None:
                col = self.column(name)
                r = self.req[row]
            r[col] += sign * amount
        r[PODS] += sign
        nzr = self.nz[row]
        nzr[0] += sign * pod.non_zero_requests["cpu"]
        nzr[1] += sign * pod.non_zero_requests["memory"]

    def note_ports(self, row: int, protocol: str, port: int, ips: set[str] | None, ip: str) -> None:
        """Mirror one (protocol, port) of a node's used host ports after it changed: `ips` is the set of IPs
        now using it (None or empty: none), `ip` the one that was added or removed."""
        index = self.port_rows
        for key, present in (((protocol, port, ip), bool(ips) and ip in ips), ((protocol, port, ""), bool(ips))):
            rows = index.get(key)
            if present:
                if rows is None:
                    index[key] = {row}
                else:
                    rows.add(row)
            elif rows is not None:
                rows.discard(row)
                if not rows:
                    del index[key]

    def add_ports(self, row: int, used: dict[tuple[str, int], set[str]]) -> None:
        for (protocol, port), ips in used.items():
            for ip in ips:
                self.note_ports(row, protocol, port, ips, ip)

    def drop_ports(self, row: int, used: dict[tuple[str, int], set[str]]) -> None:
        for (protocol, port), ips in used.items():
            for ip in ips:
                self.note_ports(row, protocol, port, None, ip)

    # ---------------------------------------------------------------- views
    @property
    def allocatable(self) -> np.ndarray:
        return self.alloc[: self.n]

    @property
    def requested(self) -> np.ndarray:
        return self.req[: self.n]

    @property
    def non_zero(self) -> np.ndarray:
        return self.nz[: self.n]

    @property
    def groups(self) -> np.ndarray:
        return self.group[: self.n]


class RowValues:
    """One value per table row of a function of the row's resources and a key (a pod's requests, say), kept
    from cycle to cycle: pods alike are scored against nodes of which only the few that got or lost a pod since
    have changed, so only those rows are computed again (the same elementwise arithmetic, so the same values).
    Kept per key in a plugin's dict (`get`)."""

    __slots__ = ("table", "epoch", "seen", "values")

    def __init__(self, table: NodeTable, values: np.ndarray | None) -> None:
        self.table = table
        self.epoch = table.epoch
        self.seen = len(table.changes)
        #: None: `compute` could not (a node without some resource), so none are kept for this layout
        self.values = values

    @staticmethod
    def get(cache: dict[Hashable, RowValues], key: Hashable, table: NodeTable,
            compute: Callable[[np.ndarray], np.ndarray | None]) -> np.ndarray | None:
        """Every row's value for `key` (read-only), from `cache` brought up to date; `compute(rows)` gives the
        values of those rows, or None when it cannot (then None here too, until the table is laid out anew)."""
        e = cache.get(key)
        if e is None or e.table is not table or e.epoch != table.epoch:
            if e is None and len(cache) >= _MAX_KEYS:
                cache.clear()
            e = cache[key] = RowValues(table, compute(np.arange(table.n, dtype=np.int64)))
            return e.values
        if e.values is None:
            return None
        changes = table.changes
        if e.seen < len(changes):
            rows = np.fromiter(set(changes[e.seen:]), dtype=np.int64)
            got = compute(rows)
            if got is None:
                e.values = None
                return None
            e.values[rows] = got
            e.seen = len(changes)
        return e.values


_MAX_KEYS = 16

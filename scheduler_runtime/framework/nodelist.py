"""NodeList: a sequence of NodeInfos given by table rows, materialised only when a plugin indexes it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from .snapshot import Snapshot
from .types import NodeInfo


class NodeList(Sequence[NodeInfo]):
    """What PreFilter and PreScore receive: behaves like list[NodeInfo]; batch plugins use `.rows`."""

    __slots__ = ("snapshot", "_rows")

    def __init__(self, snapshot: Snapshot, rows: np.ndarray | None = None) -> None:
        self.snapshot = snapshot
        self._rows = rows  # None: every node, materialised only when asked for

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            self._rows = np.arange(len(self.snapshot), dtype=np.int64)
        return self._rows

    def __len__(self) -> int:
        return len(self.snapshot) if self._rows is None else len(self._rows)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...
    @overload
    def __getitem__(self, i: slice) -> list[NodeInfo]: ...

    def __getitem__(self, i: int | slice) -> NodeInfo | list[NodeInfo]:
        infos = self.snapshot.node_infos
        if isinstance(i, slice):
            return [infos[r] for r in self.rows[i].tolist()]
        return infos[int(self.rows[i])]

    def __iter__(self) -> Iterator[NodeInfo]:
        infos = self.snapshot.node_infos
        if self._rows is None:
            yield from list(infos)
            return
        for r in self._rows.tolist():
            yield infos[r]

    def names(self) -> list[str]:
        return [ni.name for ni in self]

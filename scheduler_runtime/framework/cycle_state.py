"""CycleState: per-pod scratch space shared by the plugins of one scheduling attempt."""

from __future__ import annotations

import copy
import threading
from typing import Any


class CycleState:
    """Key/value store; values should implement `clone()` when PreFilter extensions mutate them."""

    __slots__ = ("_data", "_lock", "skip_filter_plugins", "skip_score_plugins", "skip_pre_bind_plugins",
                 "parallel_pre_bind_plugins", "pre_bind_cancelled", "record_plugin_metrics")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        #: PreBind plugins whose PreBindPreFlight said Skip: not run at PreBind
        self.skip_pre_bind_plugins: frozenset[str] = frozenset()
        #: PreBind plugins whose PreBindPreFlight allowed running beside their neighbours (kube 1.37)
        self.parallel_pre_bind_plugins: frozenset[str] = frozenset()
        #: set while a group of PreBind plugins runs side by side and one of them has failed: the others stop
        #: waiting, as kube cancels their context
        self.pre_bind_cancelled: threading.Event | None = None
        self.record_plugin_metrics = False

    def read(self, key: str) -> Any:
        """Raises KeyError when absent, as Read returns ErrNotFound in Go."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        c = CycleState()
        for k, v in self._data.items():
            clone = getattr(v, "clone", None)
            c._data[k] = clone() if callable(clone) else copy.copy(v)
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.skip_pre_bind_plugins = self.skip_pre_bind_plugins
        c.parallel_pre_bind_plugins = self.parallel_pre_bind_plugins
        c.record_plugin_metrics = self.record_plugin_metrics
        return c

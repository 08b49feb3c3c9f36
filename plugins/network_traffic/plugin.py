"""NetworkTraffic: favour nodes that received fewer bytes, as measured by Prometheus.

The second seed tutorial's Score plugin, in Python, with the changes a production scheduler needs:

* PreScore makes ONE instant query per scheduling cycle for every node (the tutorial made one HTTP
  request per node per pod), grouped by a node label, and keeps the answer for `cacheSeconds`.
* Score returns the node's bytes (0 for a node without series); NormalizeScore is the tutorial's:
  `100 - score * 100 // highest`, in integer arithmetic, so more traffic gives a lower score.
* When Prometheus cannot answer, or knows no series at all, PreScore returns Skip: the plugin's Score is
  skipped for that pod, which is scheduled on the other plugins' scores. A warning is logged.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from scheduler_runtime.api import (
    MAX_SCORE,
    CycleState,
    NodeInfo,
    NodeList,
    NodeScore,
    Plugin,
    PluginArgs,
    Pod,
    Snapshot,
    Status,
)

from .prometheus import PrometheusClient, PrometheusError, build_query, bytes_by_node

log = logging.getLogger("ksched.plugins.NetworkTraffic")

STATE_KEY = "NetworkTraffic/bytesByNode"
#: a failed query is not retried sooner than this, so a dead Prometheus costs one timeout, not one per pod
MIN_FAILURE_HOLD_SECONDS = 5.0
#: while Prometheus stays unreachable, repeat the warning at most this often
WARN_EVERY_SECONDS = 60.0


class NetworkTrafficArgs(PluginArgs):
    """Where Prometheus is and what to ask it."""

    prometheus_address: str
    network_interface: str = "ens192"
    time_range_in_minutes: int = Field(5, gt=0, le=7 * 24 * 60)
    node_label: str = "kubernetes_node"
    query_mode: Literal["compat", "rate"] = "compat"
    cache_seconds: float = Field(5.0, ge=0, le=3600)
    query_timeout_seconds: float = Field(2.0, gt=0, le=60)

    @field_validator("prometheus_address")
    @classmethod
    def _http_url(cls, v: str) -> str:
        u = urllib.parse.urlsplit(v)
        if u.scheme not in ("http", "https") or not u.hostname or v != v.strip() or " " in v:
            raise ValueError(f"{v!r} is not an http(s) URL, e.g. http://prometheus.monitoring:9090")
        if u.query or u.fragment:
            raise ValueError(f"{v!r}: the address must not have a query or fragment")
        try:
            u.port  # noqa: B018 - validates the port number
        except ValueError as exc:
            raise ValueError(f"{v!r}: {exc}") from None
        return v

    @field_validator("network_interface")
    @classmethod
    def _iface(cls, v: str) -> str:
        if not v or not v.isprintable():
            raise ValueError("must be a non-empty interface name, e.g. ens192 or eth0")
        return v

    @field_validator("node_label")
    @classmethod
    def _label(cls, v: str) -> str:
        if not v or not (v[0].isascii() and (v[0].isalpha() or v[0] == "_")) \
                or not all(c.isascii() and (c.isalnum() or c == "_") for c in v):
            raise ValueError(f"{v!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        return v


def normalize(scores: list[int]) -> list[int]:
    """The tutorial's NormalizeScore: `100 - s*100/highest` with Go int64 (truncating) division.

    All-zero (or empty) input gives every node 100: no node is known to be busier than another.
    """
    highest = max(0, max(scores, default=0))
    if highest == 0:
        return [MAX_SCORE] * len(scores)
    return [MAX_SCORE - (max(s, 0) * MAX_SCORE // highest) for s in scores]


class NetworkTraffic(Plugin):
    """PreScore + Score + NormalizeScore on Prometheus' node_network_receive_bytes_total."""

    name = "NetworkTraffic"
    args_model = NetworkTrafficArgs
    rbac: ClassVar[list[dict[str, Any]]] = []  # talks to Prometheus only, not to the API server

    def __init__(self, args: NetworkTrafficArgs, handle: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if args is None:
            raise ValueError("NetworkTraffic needs args: prometheusAddress is required")
        super().__init__(args, handle)
        self.client = PrometheusClient(args.prometheus_address, args.query_timeout_seconds)
        self.query = build_query(args.query_mode, args.node_label, args.network_interface,
                                 args.time_range_in_minutes)
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: dict[str, int] | None = None
        self._error: str | None = None
        self._valid_until = float("-inf")
        self._last_warning = float("-inf")
        self.queries_sent = 0
        log.info("[NetworkTraffic] args: prometheusAddress=%s networkInterface=%s timeRangeInMinutes=%d "
                 "queryMode=%s nodeLabel=%s", args.prometheus_address, args.network_interface,
                 args.time_range_in_minutes, args.query_mode, args.node_label)

    # ------------------------------------------------------------------ Prometheus
    def traffic(self) -> dict[str, int]:
        """{node: bytes} for every node Prometheus knows, from the cache or one query; raises PrometheusError."""
        with self._lock:
            now = self._clock()
            if now >= self._valid_until:
                self._refresh(now)
            if self._error is not None:
                raise PrometheusError(self._error)
            assert self._cached is not None
            return self._cached

    def _refresh(self, now: float) -> None:
        self.queries_sent += 1
        try:
            result = bytes_by_node(self.client.instant_query(self.query), self.args.node_label)
        except PrometheusError as exc:
            failing_before = self._error is not None
            self._error = str(exc)
            self._cached = None
            self._valid_until = self._clock() + max(self.args.cache_seconds, MIN_FAILURE_HOLD_SECONDS)
            if not failing_before or now - self._last_warning >= WARN_EVERY_SECONDS:
                self._last_warning = now
                log.warning("[NetworkTraffic] %s; skipping NetworkTraffic scoring until Prometheus answers", exc)
            return
        if self._error is not None:
            log.info("[NetworkTraffic] Prometheus answers again (%d node series)", len(result))
        self._error = None
        self._cached = result
        self._valid_until = self._clock() + self.args.cache_seconds

    # ------------------------------------------------------------------ PreScore
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        try:
            traffic = self.traffic()
        except PrometheusError as exc:
            return Status.skip(str(exc))
        if not traffic:
            now = self._clock()
            if now - self._last_warning >= WARN_EVERY_SECONDS:
                self._last_warning = now
                log.warning("[NetworkTraffic] query %r returned no series with label %r; skipping NetworkTraffic "
                            "scoring (check networkInterface and nodeLabel)", self.query, self.args.node_label)
            return Status.skip("no network traffic series in Prometheus")
        state.write(STATE_KEY, traffic)
        return None

    def _state_traffic(self, state: CycleState) -> dict[str, int]:
        traffic: dict[str, int] | None = state.get(STATE_KEY)
        if traffic is None:  # Score enabled without PreScore: same single (cached) query
            try:
                traffic = self.traffic()
            except PrometheusError:
                traffic = {}
            state.write(STATE_KEY, traffic)
        return traffic

    # ------------------------------------------------------------------ Score
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        value = self._state_traffic(state).get(node_info.name, 0)
        log.debug("[NetworkTraffic] node '%s' bandwidth: %d", node_info.name, value)
        return value

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        traffic = self._state_traffic(state)
        infos = snapshot.node_infos
        return np.fromiter((traffic.get(infos[r].name, 0) for r in rows.tolist()), dtype=np.int64, count=len(rows))

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status | None:
        for ns, v in zip(scores, normalize([s.score for s in scores]), strict=True):
            ns.score = v
        if log.isEnabledFor(logging.DEBUG):
            log.debug("[NetworkTraffic] Nodes final score: %s", [(s.name, s.score) for s in scores])
        return None

    def normalize_score_batch(self, state: CycleState, pod: Pod, rows: np.ndarray,
                              scores: np.ndarray) -> np.ndarray:
        return np.asarray(normalize([int(s) for s in scores.tolist()]), dtype=np.int64)

"""NodeCRDResourceFit: filter and score nodes on per-node custom resources (seed tutorial 05).

Each node has one cluster-scoped `ClusterScopedResource` object named after it:

    spec:
      resourcesFilter: {<resource name>: true|false}   # which requested resources the node accepts
      resourcesScore:  {<resource name>: <int>}        # how good the node is for each resource

Filter: a node passes when its object exists and every resource the pod's containers request is
`true` in `resourcesFilter`. Score: the mean of `resourcesScore[r]` over the requested resources
(missing or negative -> 0, above 100 -> 100), rounded up. The objects come from a watched store
(`handle.informer`), indexed by name, so filtering a node costs a dict lookup and no API call.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, ClassVar

import numpy as np
from pydantic import field_validator

from scheduler_runtime.api import (
    MAX_SCORE,
    WILDCARD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    FilterBatch,
    NodeInfo,
    Plugin,
    PluginArgs,
    Pod,
    Snapshot,
    Status,
)

log = logging.getLogger("ksched.plugins.NodeCRDResourceFit")

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"
KIND = "ClusterScopedResource"
PLURAL = "clusterscopedresources"
RESOURCE = f"{PLURAL}.{GROUP}"
STATE_KEY = "NodeCRDResourceFit/requested"

MSG_NO_CR = "CRD for node not found"
MSG_NOT_ENABLED = "Node does not enable resource {}"


class NodeCRDResourceFitArgs(PluginArgs):
    """`resource`: the per-node CRD the plugin watches, as `plural.group`."""

    resource: str = RESOURCE

    @field_validator("resource")
    @classmethod
    def _plural_group(cls, v: str) -> str:
        plural, _, group = v.partition(".")
        if not plural or not group or not all(c.islower() or c.isdigit() or c in "-." for c in v):
            raise ValueError(f"{v!r} is not a lowercase plural.group resource name, e.g. {RESOURCE}")
        return v


class NodeResourceSpec:
    """The parsed spec of one node's object: the enabled resources and the clamped scores."""

    __slots__ = ("enabled", "score")

    def __init__(self, raw: dict[str, Any]) -> None:
        spec = raw.get("spec") or {}
        rf = spec.get("resourcesFilter") or {}
        rs = spec.get("resourcesScore") or {}
        #: resources whose resourcesFilter value is exactly true
        self.enabled: frozenset[str] = frozenset(str(k) for k, v in rf.items() if v is True) \
            if isinstance(rf, dict) else frozenset()
        #: resourcesScore clamped to 0..100; values that are not integers count as missing
        self.score: dict[str, int] = {}
        if isinstance(rs, dict):
            for k, v in rs.items():
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                    continue
                self.score[str(k)] = min(max(int(v), 0), MAX_SCORE)

    def first_disabled(self, requested: frozenset[str]) -> str | None:
        """The first requested resource (in name order) the node does not enable, or None."""
        missing = requested - self.enabled
        return min(missing) if missing else None

    def mean_score(self, requested: frozenset[str]) -> int:
        """Mean score over the requested resources, rounded up; 0 when nothing is requested."""
        if not requested:
            return 0
        total = sum(self.score.get(r, 0) for r in requested)
        return -(-total // len(requested))  # ceil, in exact integer arithmetic


class _NodeIndex:
    """Objects of the watched store by name, kept current by the store's event handler."""

    def __init__(self, store: Any) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, NodeResourceSpec] = {}
        store.add_handler(self._on_event)  # handler first, then the listing: no event falls in between
        for raw in store.list():
            self._put(raw)

    def _put(self, raw: dict[str, Any] | None) -> None:
        name = ((raw or {}).get("metadata") or {}).get("name")
        if name:
            spec = NodeResourceSpec(raw or {})
            with self._lock:
                self._by_name[name] = spec

    def _on_event(self, action: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if action == "DELETED":
            name = ((old or {}).get("metadata") or {}).get("name")
            if name:  # only named objects are stored (_put)
                with self._lock:
                    self._by_name.pop(name, None)
            return
        if old is not None and new is not None:
            old_name = (old.get("metadata") or {}).get("name")
            if old_name and old_name != (new.get("metadata") or {}).get("name"):
                with self._lock:
                    self._by_name.pop(old_name, None)
        self._put(new)

    def get(self, name: str) -> NodeResourceSpec | None:
        return self._by_name.get(name)

    @property
    def by_name(self) -> dict[str, NodeResourceSpec]:
        """The live name -> spec dict (read-only use; swapped entries are atomic under the GIL)."""
        return self._by_name

    def __len__(self) -> int:
        return len(self._by_name)


def requested_resources(pod: Pod) -> frozenset[str]:
    """Names of the resources any (regular) container of the pod requests, as the tutorial reads them."""
    names: set[str] = set()
    for c in (pod.raw.get("spec") or {}).get("containers") or []:
        names.update(((c.get("resources") or {}).get("requests") or {}).keys())
    return frozenset(names)


class NodeCRDResourceFit(Plugin):
    """Filter + Score from the per-node ClusterScopedResource objects."""

    name = "NodeCRDResourceFit"
    args_model = NodeCRDResourceFitArgs
    rbac: ClassVar[list[dict[str, Any]]] = [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
    ]

    def __init__(self, args: NodeCRDResourceFitArgs | None = None, handle: Any = None) -> None:
        super().__init__(args if args is not None else NodeCRDResourceFitArgs(), handle)
        self._index: _NodeIndex | None = None
        self._index_lock = threading.Lock()
        self._statuses: dict[str, Status] = {}
        if handle is not None and getattr(handle, "cluster", None) is not None:
            self._index = _NodeIndex(handle.informer(self.args.resource))

    def index(self) -> _NodeIndex:
        if self._index is None:
            with self._index_lock:
                if self._index is None:
                    if self.handle is None:
                        raise RuntimeError(f"{self.name} needs a framework handle with a cluster")
                    self._index = _NodeIndex(self.handle.informer(self.args.resource))
        return self._index

    def _requested(self, state: CycleState, pod: Pod) -> frozenset[str]:
        req: frozenset[str] | None = state.get(STATE_KEY)
        if req is None:
            req = requested_resources(pod)
            state.write(STATE_KEY, req)
        return req

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A node rejected here can pass after its object is added or changed, or when a node is added."""
        crd = f"{GROUP}/{KIND}" if self.args.resource == RESOURCE else WILDCARD
        return [ClusterEventWithHint(ClusterEvent(crd, ActionType.Add | ActionType.Update)),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))]

    # ------------------------------------------------------------------ Filter
    def _status(self, message: str) -> Status:
        st = self._statuses.get(message)
        if st is None:
            st = self._statuses[message] = Status.unresolvable(message)
        return st

    def _verdict(self, spec: NodeResourceSpec | None, requested: frozenset[str]) -> Status | None:
        if spec is None:
            return self._status(MSG_NO_CR)
        resource = spec.first_disabled(requested)
        return None if resource is None else self._status(MSG_NOT_ENABLED.format(resource))

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.node is None:
            return Status.as_error("node not found")
        st = self._verdict(self.index().get(node_info.name), self._requested(state, pod))
        if st is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("node %s: %s", node_info.name, st.message)
        return st

    def filter_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterBatch:
        """`filter` for every node of the table at once: same verdicts, same messages."""
        requested = self._requested(state, pod)
        by_name = self.index().by_name
        infos = snapshot.node_infos
        ok = np.fromiter(((s := by_name.get(ni.name)) is not None and requested <= s.enabled for ni in infos),
                         dtype=bool, count=len(infos))

        def status(row: int) -> Status:
            return self._verdict(by_name.get(infos[row].name), requested) or Status.as_error("inconsistent filter")
        return FilterBatch(ok, status)

    # ------------------------------------------------------------------ Score
    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        spec = self.index().get(node_info.name)
        score = 0 if spec is None else spec.mean_score(self._requested(state, pod))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Resources and score: pod=%s node=%s score=%d", pod.key, node_info.name, score)
        return score

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        requested = self._requested(state, pod)
        by_name = self.index().by_name
        infos = snapshot.node_infos
        return np.fromiter((0 if (s := by_name.get(infos[r].name)) is None else s.mean_score(requested)
                            for r in rows.tolist()), dtype=np.int64, count=len(rows))

"""What the framework's runs produce for the scheduling cycle: `Diagnosis`, `FitError` (kube's FailedScheduling
text), `ScoreResult`, and how many feasible nodes a search looks for.

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/types.go (Diagnosis, FitError.Error: "0/N nodes are
available: ..." with reasons counted and sorted) and pkg/scheduler/schedule_one.go (numFeasibleNodesToFind).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..objects import Pod
from .status import Status, distinct_statuses

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive percentageOfNodesToScore (int32 truncating arithmetic)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


#: how many of the nodes sharing one Status a tally names (describe-pod lists 20 per reason)
FIRST_NODES_KEPT = 20


@dataclass
class StatusTally:
    """One distinct Status of a Diagnosis: on how many nodes, and the first of them (position, name)."""

    status: Status
    nodes: int
    firsts: list[tuple[int, str]]


@dataclass
class Diagnosis:
    """Why a pod did not fit: per-node statuses, the plugins that rejected, PreFilter/PostFilter messages."""

    node_statuses: dict[str, Status] = field(default_factory=dict)
    absent_status: Status | None = None  # nodes outside a PreFilterResult
    num_absent: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    #: id(Status) -> StatusTally, in order of first record, kept by `record*`: the FailedScheduling message and
    #: the recorded result count reasons per distinct Status and name each one's first nodes, and a batch
    #: filter fails thousands of nodes with one or two Statuses, so tallying them as they are recorded saves a
    #: pass over every failed node per pod
    _tally: dict[int, StatusTally] = field(default_factory=dict, init=False, repr=False, compare=False)
    _tallied: int = field(default=0, init=False, repr=False, compare=False)  # -1 once a record replaced a node's Status

    def record(self, node: str, status: Status) -> None:
        """One node's Status."""
        statuses = self.node_statuses
        before = len(statuses)
        statuses[node] = status
        if len(statuses) == before:
            self._tallied = -1
        elif self._tallied >= 0:
            self._count(status, 1, [(before, node)])

    def record_many(self, nodes: list[str], status: Status) -> None:
        """Nodes that share one Status."""
        statuses = self.node_statuses
        before = len(statuses)
        statuses.update(dict.fromkeys(nodes, status))
        if len(statuses) != before + len(nodes):
            self._tallied = -1
        elif self._tallied >= 0:
            self._count(status, len(nodes), list(enumerate(nodes[:FIRST_NODES_KEPT], before)))

    def record_each(self, nodes: list[str], each: list[Status], shared: list[tuple[Status, int]]) -> None:
        """Node i gets `each[i]`; `shared` is each distinct one of them with how many nodes it has, in order of
        its first node."""
        statuses = self.node_statuses
        before = len(statuses)
        statuses.update(zip(nodes, each, strict=True))
        if len(statuses) != before + len(nodes):
            self._tallied = -1
        elif self._tallied >= 0:
            firsts: dict[int, list[tuple[int, str]]] = {id(st): [] for st, _ in shared}
            left = len(firsts)
            for i, st in enumerate(each):  # stops once every Status has its first nodes
                got = firsts[id(st)]
                if len(got) < FIRST_NODES_KEPT:
                    got.append((before + i, nodes[i]))
                    if len(got) == FIRST_NODES_KEPT:
                        left -= 1
                        if not left:
                            break
            for st, n in shared:
                self._count(st, n, firsts[id(st)])

    def _count(self, status: Status, n: int, firsts: list[tuple[int, str]]) -> None:
        entry = self._tally.get(id(status))
        if entry is None:
            self._tally[id(status)] = StatusTally(status, n, firsts)
        else:
            entry.nodes += n
            entry.firsts.extend(firsts[:FIRST_NODES_KEPT - len(entry.firsts)])
        self._tallied += n

    def tally(self) -> list[StatusTally] | None:
        """Each distinct Status with its nodes, in order of its first node; None when some node was not recorded
        through `record*` or was recorded twice."""
        if self._tallied == len(self.node_statuses):
            return list(self._tally.values())
        return None

    def status_counts(self) -> list[tuple[Status, int]]:
        """Each distinct Status (by identity) with its number of nodes, in the order of its first node."""
        tally = self.tally()
        if tally is not None:
            return [(t.status, t.nodes) for t in tally]
        return distinct_statuses(self.node_statuses.values())


class FitError(Exception):
    """No node fits; `message` is kube-scheduler's FailedScheduling text."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__()

    def __str__(self) -> str:
        # the message is built when read, not when raised: it counts every node's reasons, and the
        # scheduling cycle reads it once more after PostFilter added its part
        return self.message

    def reason_counts(self) -> dict[str, int]:
        """Each node's reasons counted. Batch filters share one Status among many nodes, so the reasons are
        read once per distinct Status (by identity) and counted as many times as it is shared."""
        counts: dict[str, int] = {}
        for st, n in self.diagnosis.status_counts():
            for r in st.all_reasons:
                counts[r] = counts.get(r, 0) + n
        if self.diagnosis.absent_status is not None and self.diagnosis.num_absent:
            for r in self.diagnosis.absent_status.all_reasons:
                counts[r] = counts.get(r, 0) + self.diagnosis.num_absent
        return counts

    @property
    def message(self) -> str:
        d = self.diagnosis
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            parts = sorted(f"{c} {r}" for r, c in self.reason_counts().items())
            msg += " " + ", ".join(parts) + "."
        if d.post_filter_msg:
            msg += " " + d.post_filter_msg
        return msg


@dataclass
class ScoreResult:
    """Scores of the feasible nodes: per plugin (raw, normalised) and weighted totals."""

    rows: np.ndarray
    names: list[str]
    totals: np.ndarray
    per_plugin: dict[str, tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict)

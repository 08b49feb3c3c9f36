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
        for st, n in distinct_statuses(self.diagnosis.node_statuses.values()):
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

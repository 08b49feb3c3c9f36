"""`--results=simulator`: per-pod annotations in kube-scheduler-simulator's format.

Teams that already read results with the simulator's UI or scripts can point them at ksched. The
simulator writes every value as a JSON string whose numbers are strings too; its per-node maps list all
nodes, so at thousands of nodes they are cut to fit the API server's 256 KiB annotation budget (the
failing nodes of each plugin and the best-scored nodes are kept; `ksched.io/simulator-truncated` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

PREFIX = "kube-scheduler-simulator.sigs.k8s.io/"
TRUNCATED = "ksched.io/simulator-truncated"
#: what one attempt may use (it is stored twice: its own keys and the newest history entry); older
#: history entries are dropped while everything stays under HISTORY_BUDGET, leaving room for other annotations
BUDGET = 100 * 1024
HISTORY_BUDGET = 220 * 1024
PASSED, SUCCESS, WAIT, VICTIM = "passed", "success", "wait", "preemption victim"


def _js(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass
class SimRecord:
    """Collected during one attempt by the scheduler, encoded once when the attempt ends."""

    prefilter_status: dict[str, str] = field(default_factory=dict)
    prefilter_result: dict[str, list[str]] = field(default_factory=dict)
    filter: dict[str, dict[str, str]] = field(default_factory=dict)
    postfilter: dict[str, dict[str, str]] = field(default_factory=dict)
    prescore: dict[str, str] = field(default_factory=dict)
    score: dict[str, dict[str, str]] = field(default_factory=dict)
    finalscore: dict[str, dict[str, str]] = field(default_factory=dict)
    reserve: dict[str, str] = field(default_factory=dict)
    permit: dict[str, str] = field(default_factory=dict)
    permit_timeout: dict[str, str] = field(default_factory=dict)
    prebind: dict[str, str] = field(default_factory=dict)
    bind: dict[str, str] = field(default_factory=dict)
    selected_node: str = ""
    truncated: bool = False
    #: verb -> extender URL -> its response (ExtenderRecord.raw); None when no extender is configured
    extenders: dict[str, dict[str, Any]] | None = None

    # ---------------------------------------------------------------- filled by the scheduler
    def prefilter(self, fw: Any, rejectors: set[str], message: str, node_names: set[str] | None) -> None:
        for cp in fw.pre_filter:
            self.prefilter_status[cp.name] = message if cp.name in rejectors else SUCCESS
        if node_names is not None and fw.pre_filter:
            self.prefilter_result[fw.pre_filter[0].name] = sorted(node_names)

    def filters(self, fw: Any, snapshot: Any, feasible: np.ndarray, node_statuses: dict[str, Any]) -> None:
        """Rejected nodes show the rejecting plugin's message and `passed` for the plugins before it. Past the
        budget, every rejecting plugin and the feasible nodes keep their first nodes in turn, so thousands of
        nodes failing one plugin (a nodeSelector) cannot crowd out the others or the nodes that passed."""
        names = [cp.name for cp in fw.filter]
        position = {n: i for i, n in enumerate(names)}
        groups: dict[str, list[str]] = {}
        for node, st in node_statuses.items():
            groups.setdefault(st.plugin, []).append(node)
        passed_nodes = [snapshot.node_infos[int(i)].name for i in feasible.tolist()]
        lanes = [*groups.values(), passed_nodes]
        costs = [40 + 24 * (position.get(plugin, len(names) - 1) + 1) for plugin in groups]
        costs.append(40 + 24 * len(names))
        budget = BUDGET // 2
        kept: set[str] = set()
        depth = 0
        while any(depth < len(lane) for lane in lanes):
            for lane, cost in zip(lanes, costs, strict=True):
                if depth < len(lane):
                    if budget < cost:
                        self.truncated = True
                        break
                    budget -= cost
                    kept.add(lane[depth])
            else:
                depth += 1
                continue
            break
        for node, st in node_statuses.items():
            if node in kept:
                row: dict[str, str] = {}
                for n in names:
                    if n == st.plugin:
                        row[n] = st.message
                        break
                    row[n] = PASSED
                self.filter[node] = row
        for node in passed_nodes:
            if node in kept:
                self.filter[node] = {n: PASSED for n in names}

    def scores(self, scores: Any, snapshot: Any) -> None:
        if not scores.per_plugin or not len(scores.totals):
            return
        per_node = 30 * len(scores.per_plugin) + 40
        keep = max(1, BUDGET // 4 // per_node)
        order = np.argsort(-scores.totals, kind="stable")
        if len(order) > keep:
            self.truncated = True
            order = order[:keep]
        for i in order.tolist():
            node = snapshot.node_infos[int(scores.rows[i])].name
            self.score[node] = {p: str(int(raw[i])) for p, (raw, _, _) in scores.per_plugin.items()}
            self.finalscore[node] = {p: str(int(norm[i]) * w) for p, (_, norm, w) in scores.per_plugin.items()}

    def outcome(self, fw: Any, point: str, message: str, failed: str = "") -> None:
        """reserve/permit/prebind/bind: `success` for each plugin that passed, the message for the one that
        failed (`failed`), and nothing for the plugins after it, which the framework never ran. Without a
        plugin name every plugin gets the message: the failure cannot be pinned on one."""
        plugins = {"reserve": fw.reserve, "permit": fw.permit, "prebind": fw.pre_bind, "bind": fw.bind}[point]
        target = {"reserve": self.reserve, "permit": self.permit, "prebind": self.prebind, "bind": self.bind}[point]
        names = [cp.name for cp in plugins]
        if message and failed in names:
            for name in names[:names.index(failed)]:
                target[name] = SUCCESS
            target[failed] = message
            return
        for name in names:
            target[name] = message if message else SUCCESS

    # ---------------------------------------------------------------- encoding
    def _encode(self) -> dict[str, str]:
        out = self._encode_plugins()
        if self.extenders is not None:  # the simulator's extender-<verb>-result: extender URL -> response
            for verb in ("filter", "prioritize", "preempt", "bind"):
                out[PREFIX + f"extender-{verb}-result"] = _js(self.extenders.get(verb) or {})
        return out

    def _encode_plugins(self) -> dict[str, str]:
        return {
            PREFIX + "prefilter-result-status": _js(self.prefilter_status),
            PREFIX + "prefilter-result": _js(self.prefilter_result),
            PREFIX + "filter-result": _js(self.filter),
            PREFIX + "postfilter-result": _js(self.postfilter),
            PREFIX + "prescore-result": _js(self.prescore),
            PREFIX + "score-result": _js(self.score),
            PREFIX + "finalscore-result": _js(self.finalscore),
            PREFIX + "reserve-result": _js(self.reserve),
            PREFIX + "permit-result": _js(self.permit),
            PREFIX + "permit-result-timeout": _js(self.permit_timeout),
            PREFIX + "prebind-result": _js(self.prebind),
            PREFIX + "bind-result": _js(self.bind),
            PREFIX + "selected-node": self.selected_node,
        }

    def _shrink(self) -> None:
        """Drop the later half of the per-node maps: passed nodes after rejected ones, worst scores first."""
        self.truncated = True
        for m in (self.filter, self.score, self.finalscore):
            keys = list(m)
            for k in keys[max(1, len(keys) // 2):]:
                del m[k]

    def annotations(self, previous_history: str | None) -> dict[str, str]:
        ann = self._encode()
        while sum(len(v) for v in ann.values()) > BUDGET and max(len(self.filter), len(self.score)) > 1:
            self._shrink()
            ann = self._encode()
        history: list[dict[str, str]] = []
        if previous_history:
            try:
                old = orjson.loads(previous_history)
                if isinstance(old, list):
                    history = [h for h in old if isinstance(h, dict)]
            except orjson.JSONDecodeError:
                history = []
        history.append(dict(ann))
        size = sum(len(v) for v in ann.values())
        encoded = _js(history)
        while len(history) > 1 and size + len(encoded) > HISTORY_BUDGET:
            history.pop(0)  # the oldest attempts go first, as the simulator trims its history
            encoded = _js(history)
        ann[PREFIX + "result-history"] = encoded
        ann[TRUNCATED] = "true" if self.truncated else None  # type: ignore[assignment]
        return ann

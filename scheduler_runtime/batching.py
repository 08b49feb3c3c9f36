"""Opportunistic batching of equivalent pods: kube-scheduler 1.36's OpportunisticBatching gate (beta, on).

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/runtime/batch.go and framework.go (SignPod,
computeBatchablePlugins) and the calls in schedule_one.go. A pod's signature joins the fragments of every
PreFilter/Filter/PreScore/Score plugin (`PodSigner`); none when a plugin refuses, when any of those plugins
cannot sign (a plugin without `sign_pod`) or when extenders are configured. After a full Filter+Score the
cycle stores the other feasible nodes, best first (`OpportunisticBatch.store`); the next pod, if it is the
very next cycle, has the same signature, comes within 500 ms and no longer fits the node just chosen (so
pods go one per node and the cached ranking still holds), takes the next node of that ranking as a hint,
which is filtered alone instead of searching all nodes. Every reason the cache is dropped is counted in
scheduler_batch_cache_flushed_total{reason}.

kube-scheduler 1.37 (`rescore=True`, v1.37.2 batch.go) no longer drops the cache when the next pod still fits
the node just chosen: that node is scored again for this pod (PreScore over the cached candidates and it, raw
Score on it alone, NormalizeScore over all with the cached raw scores) and competes for the hint; pods with a
nominated node are not batched.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .framework import signers
from .framework.interface import SignFragment
from .framework.invoke import ALL_CODES, CycleError, PluginError, call_plugin, failure, value_return, verdict
from .framework.nodelist import NodeList
from .framework.status import MAX_SCORE, MIN_SCORE, Code, Status
from .objects import Pod

if TYPE_CHECKING:
    from .framework.cycle_state import CycleState
    from .framework.invoke import ConfiguredPlugin
    from .framework.runtime import Framework

log = logging.getLogger("ksched.batching")

#: a cached ranking older than this is not reused (kube's maxBatchAge)
MAX_BATCH_AGE = 0.5

# scheduler_batch_attempts_total{result}
HINT_NO = "no_hint"
HINT_USED = "hint_used"
HINT_NOT_USED = "hint_not_used"
# scheduler_batch_cache_flushed_total{reason}
FLUSH_POD_FAILED = "pod_failed"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_NODE_NOT_FULL = "node_not_full"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"
# kube-scheduler 1.37 (rescore)
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_FILTER_ERROR = "filter_error"
FLUSH_PRESCORE_ERROR = "prescore_error"
FLUSH_RESCORE_ERROR = "rescore_error"
FLUSH_NORMALIZE_ERROR = "normalize_error"


_WHAT = "running Sign plugin {}"
#: the package of the in-tree plugins
_IN_TREE = f"{__package__}.plugins."


def _sign_return(ret: Any) -> tuple[Sequence[SignFragment] | None, Any]:
    frags, st = ret if isinstance(ret, tuple) and not isinstance(ret, SignFragment) else (
        (None, ret) if isinstance(ret, Status) else (ret, None))
    if frags is not None and not all(isinstance(f, SignFragment) for f in frags):
        raise PluginError("sign_pod returned something other than a list of SignFragment")
    return frags, st


class PodSigner:
    """A profile's signers, in kube's order (PreFilter, Filter, PreScore, Score plugins, each once)."""

    def __init__(self, fw: Framework, has_extenders: bool) -> None:
        self.fw = fw
        self.plugins: list[ConfiguredPlugin] = []
        seen: set[str] = set()
        unsupported: list[str] = []
        for cp in (*fw.pre_filter, *fw.filter, *fw.pre_score, *fw.score):
            if cp.name in seen:
                continue
            seen.add(cp.name)
            if callable(getattr(cp.plugin, "sign_pod", None)):
                self.plugins.append(cp)
            else:
                unsupported.append(cp.name)
        self.enabled = not has_extenders and not unsupported
        #: an in-tree plugin that refuses every pod (PodTopologySpread with default constraints, as in the
        #: default profile), when only in-tree plugins come before it: every signature is then None, and the
        #: calls before the refusal only feed metrics (kube times each SignPod), so without metrics they are
        #: not made
        self.refuses_all = self.enabled and _refuses_every_pod(self.plugins)
        if has_extenders:
            log.info("Disabling signatures for profile %s because it has extenders configured.", fw.profile_name)
        if unsupported:
            log.info("Disabling signatures for profile %s because plugins do not support it: %s",
                     fw.profile_name, ", ".join(unsupported))

    def sign(self, pod: Pod) -> str | None:
        """The pod's signature, or None when it cannot be batched."""
        metrics = self.fw.metrics
        if metrics is None:
            return None if self.refuses_all or not self.enabled else self._sign(pod)
        start = time.perf_counter()
        try:
            return self._sign(pod) if self.enabled else None
        finally:
            if metrics is not None:
                metrics.extension_point(self.fw.profile_name, "Sign", None, time.perf_counter() - start)

    def _sign(self, pod: Pod) -> str | None:
        metrics = self.fw.metrics
        sig: dict[str, Any] = {signers.SCHEDULER_NAME: pod.scheduler_name}
        for cp in self.plugins:
            t0 = time.perf_counter() if metrics is not None else 0.0
            st: Status | None = None
            frags: Sequence[SignFragment] | None = None
            try:  # the common case first: a list of fragments; anything else goes through call_plugin's rules
                ret = cp.plugin.sign_pod(pod)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - an Error status, as a raise from any plugin call
                st = failure(_WHAT, cp.name, exc)
            else:
                if ret.__class__ is list and all(f.__class__ is SignFragment for f in ret):
                    frags = ret
                elif ret.__class__ is Status:  # a refusal, as call_plugin would take it (any code passes)
                    st = verdict(_WHAT, cp.name, ret, ALL_CODES)
                elif ret is not None:
                    frags, st = call_plugin(_WHAT, cp.name, lambda r=ret: r, passes=ALL_CODES, unpack=_sign_return)
            if metrics is not None:
                metrics.child(metrics.plugin_duration, cp.name, "Sign", st.code.name if st is not None else "Success"
                              ).observe(time.perf_counter() - t0)
            if st is not None:
                if st.code == Code.Error:
                    log.error("SignPod failed for plugin %s: %s", cp.name, st.message)
                return None
            for f in frags or ():
                sig[f[0]] = f[1]
        try:
            return json.dumps(sig, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            log.error("SignPod failed to marshal signature object: %s", exc)
            return None


def _refuses_every_pod(plugins: list[ConfiguredPlugin]) -> bool:
    """Does an in-tree plugin that signs no pod at all come before any plugin from outside the tree (whose
    SignPod may have effects of its own)?"""
    for cp in plugins:
        if not type(cp.plugin).__module__.startswith(_IN_TREE):
            return False
        if getattr(cp.plugin, "signs_no_pod", False):
            return True
    return False


@dataclass
class Ranking:
    """The feasible nodes but the chosen one, best first: names, each score plugin's raw scores and the
    random tie-breakers, aligned."""

    nodes: list[str]
    raw: dict[str, np.ndarray]
    ties: np.ndarray


@dataclass
class _Cached:
    signature: str
    #: the remaining nodes, worst first (the next hint is popped from the end), with their raw scores and
    #: tie-breakers aligned (1.37's rescore normalises them again)
    nodes: list[str]
    raw: dict[str, np.ndarray]
    ties: np.ndarray
    created: float

    def pop(self) -> str:
        self.raw = {k: v[:-1] for k, v in self.raw.items()}
        self.ties = self.ties[:-1]
        return self.nodes.pop()


@dataclass
class _LastCycle:
    cycle: int = -1
    chosen: str = ""
    succeeded: bool = False


@dataclass
class OpportunisticBatch:
    """One profile's batch cache (kube's OpportunisticBatch)."""

    fw: Framework
    clock: Callable[[], float] = time.monotonic
    #: kube-scheduler 1.37's behaviour: rescore the node just chosen when the next pod still fits it
    rescore: bool = False
    state: _Cached | None = None
    last: _LastCycle = field(default_factory=_LastCycle)
    #: pods placed on a hint (kube's batchedPods, for tests)
    batched_pods: int = 0

    def _metric(self, name: str, *labels: str) -> None:
        m = self.fw.metrics
        if m is not None:
            getattr(m, name)(self.fw.profile_name, *labels)

    def _flush(self, reason: str) -> None:
        self._metric("batch_flushed", reason)
        log.debug("OpportunisticBatch found unusable state: profile=%s reason=%s", self.fw.profile_name, reason)

    def node_hint(self, state: CycleState, pod: Pod, signature: str | None, cycle: int) -> str:
        """The node the previous equivalent pod's ranking puts next, or "" (GetNodeHint)."""
        m = self.fw.metrics
        if m is None:  # every pod asks: no clock reads when nothing is timed
            return self._node_hint(state, pod, signature, cycle)
        start = time.perf_counter()
        hint = ""
        try:
            hint = self._node_hint(state, pod, signature, cycle)
            return hint
        finally:
            m.node_hint_duration("hint" if hint else "no_hint", self.fw.profile_name, time.perf_counter() - start)

    def _node_hint(self, state: CycleState, pod: Pod, signature: str | None, cycle: int) -> str:
        if not self._compatible(state, pod, signature, cycle):
            self._metric("batch_attempt", HINT_NO)
            return ""
        assert self.state is not None
        return self.state.pop()

    def store(self, signature: str | None, hinted: str, chosen: str, remaining: int,
              ranking: Callable[[], Ranking] | None, cycle: int) -> None:
        """After the cycle chose `chosen` (StoreScheduleResults): `remaining` feasible nodes are left and
        `ranking()` lists them best first; it is only called when they are kept."""
        m = self.fw.metrics
        if m is None:
            self._store(signature, hinted, chosen, remaining, ranking, cycle)
            return
        start = time.perf_counter()
        try:
            self._store(signature, hinted, chosen, remaining, ranking, cycle)
        finally:
            m.store_results_duration(self.fw.profile_name, time.perf_counter() - start)

    def _store(self, signature: str | None, hinted: str, chosen: str, remaining: int,
               ranking: Callable[[], Ranking] | None, cycle: int) -> None:
        last = self.last
        last.cycle, last.chosen, last.succeeded = cycle, chosen, True  # in place: one per pod
        if hinted and hinted == chosen:
            self._metric("batch_attempt", HINT_USED)
            self.batched_pods += 1
            return
        if hinted:
            self._metric("batch_attempt", HINT_NOT_USED)
        if signature is not None and remaining > 0 and ranking is not None:
            r = ranking()
            self.state = _Cached(signature, r.nodes[::-1], {k: v[::-1] for k, v in r.raw.items()}, r.ties[::-1],
                                 self.clock())
            return
        self._flush(FLUSH_EMPTY_LIST if remaining <= 0 else FLUSH_POD_NOT_BATCHABLE)
        self.state = None

    def _compatible(self, state: CycleState, pod: Pod, signature: str | None, cycle: int) -> bool:
        cached = self.state
        if cached is None or not cached.nodes:
            return False
        if cycle != self.last.cycle + 1:  # a pod in between failed, was skipped or belongs to another profile
            self._flush(FLUSH_POD_SKIPPED)
            return False
        if not self.last.succeeded:
            self._flush(FLUSH_POD_FAILED)
            return False
        if self.rescore and pod.nominated_node_name:
            self._flush(FLUSH_POD_NOMINATED)
            return False
        if signature is None or signature != cached.signature:
            self._flush(FLUSH_POD_INCOMPATIBLE)
            return False
        if self.clock() > cached.created + MAX_BATCH_AGE:
            self._flush(FLUSH_EXPIRED)
            return False
        # the ranking holds only if this pod no longer fits the node the previous one took: could it go
        # there too, that node's new score is unknown
        ni = self.fw.handle.snapshot.get(self.last.chosen)
        if ni is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        st = self.fw.run_filter(state, pod, ni)
        if self.rescore:
            if st is None:
                return self._rescore_last(state, pod, ni)
            if not st.is_rejected():
                self._flush(FLUSH_FILTER_ERROR)
                return False
            return True
        if st is None or not st.is_rejected():
            self._flush(FLUSH_NODE_NOT_FULL)
            return False
        return True

    def _rescore_last(self, state: CycleState, pod: Pod, last: Any) -> bool:
        """1.37: the node just chosen still fits: score it for this pod and put it back among the candidates
        (rescoreHintedNode)."""
        m = self.fw.metrics
        start = time.perf_counter()
        if m is not None:
            m.batch_rescore_attempt(self.fw.profile_name)
        try:
            return self._rescore(state, pod, last)
        finally:
            if m is not None:
                m.batch_rescore_duration(self.fw.profile_name, time.perf_counter() - start)

    def _rescore(self, state: CycleState, pod: Pod, last: Any) -> bool:
        fw, cached = self.fw, self.state
        assert cached is not None
        snap = fw.handle.snapshot
        found = [snap.get(n) for n in cached.nodes]
        if any(ni is None for ni in found):
            self._flush(FLUSH_NODE_MISSING)
            return False
        rows = np.fromiter((ni.row for ni in [*found, last]), dtype=np.int64, count=len(found) + 1)
        clone = state.clone()  # the rescore's PreScore state must not leak into this cycle's
        if fw.run_pre_score(clone, pod, NodeList(snap, rows)) is not None:
            self._flush(FLUSH_PRESCORE_ERROR)
            return False
        infos = snap.node_infos
        plugins = [cp for cp in fw.score if cp.name not in clone.skip_score_plugins]
        raw: dict[str, np.ndarray] = {}
        for cp in plugins:
            try:
                fresh, err = fw._invoke("Score", cp.name, fw._score_one, cp, clone, pod, snap, rows[-1:], infos,
                                        state=clone, timed=True, evaluations=1, unpack=value_return)
            except CycleError:
                err = Status.as_error("score failed")
            if err is not None:
                self._flush(FLUSH_RESCORE_ERROR)
                return False
            old = cached.raw.get(cp.name)
            raw[cp.name] = np.concatenate([old if old is not None else np.zeros(len(found), dtype=np.int64), fresh])
        totals = np.zeros(len(rows), dtype=np.int64)
        for cp in plugins:
            try:
                norm, err = fw._invoke("Score", cp.name, fw._normalize, cp, clone, pod, rows, raw[cp.name], infos,
                                       unpack=value_return)
            except CycleError:
                err = Status.as_error("normalize failed")
            if err is not None or (len(norm) and (int(norm.max()) > MAX_SCORE or int(norm.min()) < MIN_SCORE)):
                self._flush(FLUSH_NORMALIZE_ERROR)
                return False
            totals += norm * cp.weight
        # the node put back has no tie-breaker of its own (kube's zero Randomizer): it loses every tie
        ties = np.concatenate([cached.ties, np.asarray([-1.0])])
        order = np.lexsort((ties, totals))  # worst first
        names = [*cached.nodes, last.name]
        self.state = _Cached(cached.signature, [names[i] for i in order.tolist()],
                             {k: v[order] for k, v in raw.items()}, ties[order], cached.created)
        return True

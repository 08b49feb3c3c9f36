"""What a scheduling attempt leaves on its pod, chosen once at wiring time by `--results`.

The scheduling cycle (`schedule_one.py`) reports every step to one `AttemptRecorder` instead of testing the
results mode at each step:

- `KschedRecorder` (`--results=ksched`, the default): the `ksched.io/result` annotation `describe-pod` reads,
  staged on the binding when a pod is scheduled (one write), written on failures only when it changed (a pod
  pending for hours costs no write per retry and its FailedScheduling events aggregate into one series);
- `SimulatorRecorder` (`--results=simulator`): kube-scheduler-simulator's per-plugin annotations
  (`simresults.SimRecord`), written when the attempt ends;
- `NullRecorder` (`--results=off`): nothing.

Recorders are called from the scheduling loop and from binding workers; one pod's attempt is never in two
places at once, so per-pod state needs no lock beyond the dict's own atomic operations.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import numpy as np

from .cluster.base import ClusterBackend
from .describe import RESULT_ANNOTATION, encode_result
from .framework.cycle_state import CycleState
from .framework.status import Code, Status
from .objects import Pod
from .results import BIND_ANNOTATIONS, AttemptResult
from .simresults import PREFIX, SUCCESS, VICTIM, WAIT, SimRecord

log = logging.getLogger("ksched.scheduler")


class AttemptRecorder(Protocol):
    """The per-attempt record of a results mode; `fw` is the profile's Framework."""

    def begin(self, pod: Pod) -> None: ...
    def prefilter(self, fw: Any, pod: Pod, rejectors: set[str], message: str,
                  node_names: set[str] | None) -> None: ...
    def extenders(self, pod: Pod, raw: dict[str, dict[str, Any]]) -> None: ...
    def filters(self, fw: Any, pod: Pod, snapshot: Any, feasible: np.ndarray,
                node_statuses: dict[str, Any]) -> None: ...
    def prescore(self, fw: Any, pod: Pod, st: Status | None) -> None: ...
    def scores(self, pod: Pod, scores: Any, snapshot: Any) -> None: ...
    def selected(self, pod: Pod, node_name: str) -> None: ...
    def reserved(self, fw: Any, pod: Pod, st: Status | None) -> None: ...
    def permitted(self, fw: Any, pod: Pod, st: Status | None) -> None: ...
    def nominated(self, fw: Any, pod: Pod, node_name: str) -> None: ...
    def stage_binding(self, state: CycleState, pod: Pod, node_name: str, result: AttemptResult) -> None:
        """Right before PreBind/Bind: what should ride on the binding itself."""
    def bound(self, fw: Any, pod: Pod, st: Status | None) -> None:
        """After PreBind and Bind: `st` is the first failure, None when the pod is bound."""
    def finish(self, pod: Pod, result: AttemptResult, carried: bool) -> None:
        """The attempt ended (`carried`: the binding already wrote what `stage_binding` staged)."""
    def forget(self, pod: Pod) -> None:
        """The pod was bound or deleted: drop what is remembered about it."""


class NullRecorder:
    """`--results=off`: nothing is recorded on the pod."""

    def begin(self, pod: Pod) -> None:
        pass

    def prefilter(self, fw: Any, pod: Pod, rejectors: set[str], message: str, node_names: set[str] | None) -> None:
        pass

    def extenders(self, pod: Pod, raw: dict[str, dict[str, Any]]) -> None:
        pass

    def filters(self, fw: Any, pod: Pod, snapshot: Any, feasible: np.ndarray, node_statuses: dict[str, Any]) -> None:
        pass

    def prescore(self, fw: Any, pod: Pod, st: Status | None) -> None:
        pass

    def scores(self, pod: Pod, scores: Any, snapshot: Any) -> None:
        pass

    def selected(self, pod: Pod, node_name: str) -> None:
        pass

    def reserved(self, fw: Any, pod: Pod, st: Status | None) -> None:
        pass

    def permitted(self, fw: Any, pod: Pod, st: Status | None) -> None:
        pass

    def nominated(self, fw: Any, pod: Pod, node_name: str) -> None:
        pass

    def stage_binding(self, state: CycleState, pod: Pod, node_name: str, result: AttemptResult) -> None:
        pass

    def bound(self, fw: Any, pod: Pod, st: Status | None) -> None:
        pass

    def finish(self, pod: Pod, result: AttemptResult, carried: bool) -> None:
        pass

    def forget(self, pod: Pod) -> None:
        pass


class KschedRecorder(NullRecorder):
    """`--results=ksched`: the result annotation, on the binding or (failures) through the backend."""

    def __init__(self, cluster: ClusterBackend) -> None:
        self.cluster = cluster
        #: pod uid -> the result annotation last written for it (attempt number zeroed), while it is pending
        self.written: dict[str, str] = {}
        # describe-pod reads it from the API server; nothing reads it from the scheduler's cache
        cluster.uncache_pod_annotations((RESULT_ANNOTATION,))

    def stage_binding(self, state: CycleState, pod: Pod, node_name: str, result: AttemptResult) -> None:
        # the result as it will read once bound: its dict with the outcome and message set (what a
        # dataclasses.replace then to_dict gives, without building a second AttemptResult per pod)
        staged = result.to_dict()
        staged["outcome"] = "scheduled"
        staged["message"] = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        state.write(BIND_ANNOTATIONS, {RESULT_ANNOTATION: encode_result(staged)})

    def finish(self, pod: Pod, result: AttemptResult, carried: bool) -> None:
        if carried:
            return
        # a retry with the same result (but for its attempt number) leaves the pod alone: it keeps its
        # resourceVersion, so its FailedScheduling events aggregate into one EventSeries as
        # kube-scheduler's do, and a pod pending for hours costs no write per retry
        d = result.to_dict()
        sig = encode_result({**d, "attempt": 0})
        if result.outcome == "scheduled":
            self.written.pop(pod.uid, None)
        elif self.written.get(pod.uid) == sig:
            sig = ""
        else:
            self.written[pod.uid] = sig
        if sig:
            try:
                self.cluster.annotate_pod(pod, {RESULT_ANNOTATION: encode_result(d)})
            except Exception as exc:
                log.warning("could not record scheduling result on pod %s: %s", pod.key, exc)

    def forget(self, pod: Pod) -> None:
        self.written.pop(pod.uid, None)


class SimulatorRecorder(NullRecorder):
    """`--results=simulator`: one `SimRecord` per attempt, written as the simulator's annotations at its end."""

    def __init__(self, cluster: ClusterBackend) -> None:
        self.cluster = cluster
        #: pod uid -> what the current attempt recorded
        self.records: dict[str, SimRecord] = {}

    def begin(self, pod: Pod) -> None:
        self.records[pod.uid] = SimRecord()

    def prefilter(self, fw: Any, pod: Pod, rejectors: set[str], message: str, node_names: set[str] | None) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.prefilter(fw, rejectors, message, node_names)

    def extenders(self, pod: Pod, raw: dict[str, dict[str, Any]]) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.extenders = raw

    def filters(self, fw: Any, pod: Pod, snapshot: Any, feasible: np.ndarray, node_statuses: dict[str, Any]) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.filters(fw, snapshot, feasible, node_statuses)

    def prescore(self, fw: Any, pod: Pod, st: Status | None) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.prescore = {cp.name: st.message if st is not None and st.plugin == cp.name else SUCCESS
                            for cp in fw.pre_score}

    def scores(self, pod: Pod, scores: Any, snapshot: Any) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:  # plugins only: the simulator keeps extenders' answers apart
            sim.scores(scores, snapshot)

    def selected(self, pod: Pod, node_name: str) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.selected_node = node_name

    def reserved(self, fw: Any, pod: Pod, st: Status | None) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.outcome(fw, "reserve", st.message if st is not None else "", st.plugin if st is not None else "")

    def permitted(self, fw: Any, pod: Pod, st: Status | None) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.outcome(fw, "permit", WAIT if st is not None and st.code == Code.Wait else
                        (st.message if st is not None else ""),
                        st.plugin if st is not None and st.code != Code.Wait else "")

    def nominated(self, fw: Any, pod: Pod, node_name: str) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            sim.postfilter[node_name] = {cp.name: VICTIM for cp in fw.post_filter}

    def bound(self, fw: Any, pod: Pod, st: Status | None) -> None:
        sim = self.records.get(pod.uid)
        if sim is not None:
            pre_bind = {cp.name for cp in fw.pre_bind}
            sim.outcome(fw, "prebind", st.message if st is not None and st.plugin in pre_bind else "",
                        st.plugin if st is not None else "")
            if st is None or st.plugin not in pre_bind:
                sim.outcome(fw, "bind", st.message if st is not None else "", st.plugin if st is not None else "")

    def finish(self, pod: Pod, result: AttemptResult, carried: bool) -> None:
        sim = self.records.pop(pod.uid, None)
        if sim is not None:
            prev = ((pod.raw or {}).get("metadata") or {}).get("annotations") or {}
            try:
                self.cluster.annotate_pod(pod, sim.annotations(prev.get(PREFIX + "result-history")))
            except Exception as exc:
                log.warning("could not record scheduling result on pod %s: %s", pod.key, exc)


def recorder_for(results_mode: str, cluster: ClusterBackend) -> AttemptRecorder:
    """The recorder of a `--results` mode: ksched, simulator or off."""
    if results_mode == "simulator":
        return SimulatorRecorder(cluster)
    if results_mode == "ksched":
        return KschedRecorder(cluster)
    return NullRecorder()

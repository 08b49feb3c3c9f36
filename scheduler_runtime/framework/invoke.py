"""Calling a plugin: whatever it returns or raises becomes (value, Status | None) with kube-scheduler's rules.

Follows kube-scheduler v1.36.3 pkg/scheduler/framework/runtime/framework.go: a Success status is nil, the
codes an extension point passes on (Unschedulable, UnschedulableAndUnresolvable, Pending, and Skip/Wait where
the point allows them) keep the plugin's name, any other code becomes an Error `running <point> plugin "<name>":
<message>`; a raised exception is an Error too (Python's way of a plugin returning an error). `CycleError`
aborts a cycle with an Error status. `PluginCaller._invoke` is how the framework calls a plugin: `call_plugin`'s
rules plus the metrics of the call (written out without metrics, the hot path).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fielderrors import go_value
from .cycle_state import CycleState
from .plugin import FilterBatch, Plugin
from .status import Code, Status
from .types import PostFilterResult, PreFilterResult


class PluginError(Exception):
    """A plugin raised or returned something invalid; carries the plugin's name."""


def plugin_error(message: str, exc: BaseException) -> PluginError:
    """The one-line error for the pod, keeping the plugin's own exception (and its traceback) as the cause
    so the scheduler can log where in the plugin it was raised."""
    err = PluginError(message)
    err.__cause__ = exc
    return err


#: the codes most extension points pass on as they are; any other non-success code is turned into an Error
REJECTED = frozenset({Code.Unschedulable, Code.UnschedulableAndUnresolvable, Code.Pending})


def call_plugin(what: str, name: str, call: Callable[..., Any], *args: Any, passes: frozenset[Code] = REJECTED,
                unpack: Callable[[Any], tuple[Any, Any]] | None = None) -> tuple[Any, Status | None]:
    """Call one plugin method and turn whatever it did into (value, Status | None), through
    `Framework._invoke` (the per-node Filter and Score loops apply the same `failure` and `verdict` around a
    whole loop, so that a node costs no extra call).

    `what` names the call as kube-scheduler's messages do, `{}` standing for the quoted plugin name
    (`running Reserve plugin {}`; formatted only on failure). `unpack` splits a composite return into
    (value, status). A CycleError raised inside (a nested framework call) goes through unchanged."""
    try:
        ret = call(*args)
        value, st = (None, ret) if unpack is None else unpack(ret)
    except CycleError:
        raise
    except Exception as exc:
        return None, failure(what, name, exc)
    return value, verdict(what, name, st, passes)


def failure(what: str, name: str, exc: BaseException) -> Status:
    """A plugin raised: an Error status `<what>: <exception>` naming the plugin; the exception stays the
    cause, for the traceback in the log."""
    return Status.as_error(plugin_error(f"{what.format(go_value(name))}: {exc}", exc)).with_plugin(name)


def verdict(what: str, name: str, st: Any, passes: frozenset[Code] = REJECTED) -> Status | None:
    """A plugin's returned status as the framework takes it: None for Success; a code this point passes on
    (`passes`) as it is, with the plugin's name; any other code, or something not a Status, an Error."""
    if st is None:
        return None
    if not isinstance(st, Status):
        return Status.as_error(PluginError(f"{what.format(go_value(name))}: returned {type(st).__name__}, expected "
                                           "Status or None")).with_plugin(name)
    if st.code == Code.Success:
        return None
    st.plugin = name
    if st.code in passes:
        return st
    return Status.as_error(PluginError(f"{what.format(go_value(name))}: {st.message}")).with_plugin(name)


def pre_filter_return(ret: Any) -> tuple[PreFilterResult | None, Any]:
    if isinstance(ret, tuple):
        r, st = ret
    elif isinstance(ret, PreFilterResult):
        r, st = ret, None
    else:
        r, st = None, ret
    if r is not None and not isinstance(r, PreFilterResult):
        raise PluginError(f"returned {type(r).__name__}, expected PreFilterResult")
    return r, st


def post_filter_return(ret: Any) -> tuple[PostFilterResult | None, Any]:
    return ret if isinstance(ret, tuple) else (None, ret)


def permit_return(ret: Any) -> tuple[float, Any]:
    st, timeout = ret if isinstance(ret, tuple) else (ret, 0.0)
    return float(timeout or 0), st


def score_return(ret: Any) -> tuple[int, Any]:
    val, st = ret if isinstance(ret, tuple) else (ret, None)
    if isinstance(val, bool) or not isinstance(val, int | np.integer):
        raise PluginError(f"score returned {type(val).__name__}, expected int")
    return int(val), st


def filter_batch_return(ret: Any) -> tuple[FilterBatch, None]:
    if not isinstance(ret, FilterBatch):
        raise PluginError(f"filter_batch returned {type(ret).__name__}, expected FilterBatch")
    return ret, None


def value_return(ret: Any) -> tuple[Any, None]:
    """For a framework helper around plugin calls: the return is a value, never a status."""
    return ret, None


def ignored_return(ret: Any) -> tuple[None, None]:
    """Unreserve and PostBind return nothing the framework uses."""
    return None, None


ALL_CODES = frozenset(Code)


class CycleError(Exception):
    """Aborts the scheduling cycle with an Error status (a plugin failed, not a rejection)."""

    def __init__(self, status: Status) -> None:
        self.status = status
        super().__init__(status.message)


@dataclass(slots=True)
class ConfiguredPlugin:
    plugin: Plugin
    name: str
    weight: int = 0
    batch: bool = False


WHAT = {
    "PreEnqueue": "running PreEnqueue plugin {}", "PreFilter": "running PreFilter plugin {}",
    "AddPod": "running AddPod on PreFilter plugin {}", "RemovePod": "running RemovePod on PreFilter plugin {}",
    "Filter": "running {} filter plugin", "PostFilter": "running PostFilter plugin {}",
    "PreScore": "running PreScore plugin {}", "Score": "running Score plugin {}",
    "NormalizeScore": "running Normalize on Score plugin {}", "Reserve": "running Reserve plugin {}",
    "Unreserve": "running Unreserve plugin {}", "Permit": "running Permit plugin {}",
    "PreBindPreFlight": "running PreBindPreFlight {}", "PreBind": "running PreBind plugin {}",
    "Bind": "running Bind plugin {}", "PostBind": "running PostBind plugin {}",
}


class PluginCaller:
    """The framework's side of a plugin call: `_invoke` and the metrics it records (`metrics` may be None)."""

    profile_name: str
    metrics: Any
    #: evaluations counted while `evaluations_summed` runs, by (point, plugin), and the thread counting them
    _summed: dict[tuple[str, str], int] | None = None
    _summing_thread = 0

    @contextmanager
    def evaluations_summed(self) -> Iterator[None]:
        """scheduler_plugin_evaluation_total is added to once per (point, plugin) at the end, rather than per
        node: the preemption dry run and the nominated-pods checks count several plugins on hundreds of nodes
        per cycle, and each counter increment takes a lock. The totals are the same."""
        if self.metrics is None or self._summed is not None:
            yield
            return
        summed: dict[tuple[str, str], int] = {}
        self._summed, self._summing_thread = summed, threading.get_ident()
        try:
            yield
        finally:
            self._summed = None
            for (point, name), n in summed.items():
                self.metrics.plugin_evaluated(self.profile_name, point, name, n)

    def _observe(self, point: str, start: float, status: Status | None) -> None:
        if self.metrics is not None:
            self.metrics.extension_point(self.profile_name, point, status, time.perf_counter() - start)

    def _evaluated(self, point: str, name: str, n: int = 1) -> None:
        """scheduler_plugin_evaluation_total: kube counts a PreFilter/PreScore run unless it returned Skip,
        and a Filter/Score run per node it evaluated."""
        if self.metrics is not None and n:
            summed = self._summed
            if summed is not None and threading.get_ident() == self._summing_thread:
                key = (point, name)
                summed[key] = summed.get(key, 0) + n
                return
            self.metrics.plugin_evaluated(self.profile_name, point, name, n)

    def _timed(self, state: CycleState, point: str, name: str, start: float, status: Any) -> None:
        """scheduler_plugin_execution_duration_seconds, in the cycles kube samples (record_plugin_metrics)."""
        if self.metrics is not None and state.record_plugin_metrics:
            code = status.code.name if isinstance(status, Status) else "Success"
            self.metrics.child(self.metrics.plugin_duration, name, point, code).observe(time.perf_counter() - start)

    def _invoke(self, point: str, name: str, call: Callable[..., Any], *args: Any, state: CycleState | None = None,
                timed: bool = False, evaluations: int = 0, passes: frozenset[Code] = REJECTED,
                unpack: Callable[[Any], tuple[Any, Any]] | None = None) -> tuple[Any, Status | None]:
        """The one way the framework calls a plugin method (the per-node Filter and Score loops excepted, see
        `_walk_nodes` and `_score_one`): kube's message for a failure at `point`, `call_plugin`'s conversion,
        and the call's metrics: scheduler_plugin_execution_duration_seconds when `timed` (in the cycles kube
        samples, with the status code), scheduler_plugin_evaluation_total += `evaluations` (before the call;
        where the point lets a plugin Skip, after it and only if it did not)."""
        if self.metrics is None:  # call_plugin, written out: this runs some forty times per pod
            try:
                ret = call(*args)
                value, st = (None, ret) if unpack is None else unpack(ret)
            except CycleError:
                raise
            except Exception as exc:
                return None, failure(WHAT[point], name, exc)
            return value, (None if st is None else verdict(WHAT[point], name, st, passes))
        skippable = Code.Skip in passes
        if evaluations and not skippable:
            self._evaluated(point, name, evaluations)
        start = time.perf_counter()
        value, st = call_plugin(WHAT[point], name, call, *args, passes=passes, unpack=unpack)
        if timed and state is not None:
            self._timed(state, point, name, start, st)
        if evaluations and skippable and (st is None or st.code != Code.Skip):
            self._evaluated(point, name, evaluations)
        return value, st

"""Event aggregation into events.k8s.io/v1 EventSeries (client-go's events broadcaster), with a fake clock
and a fake API client: create -> PATCH series {count: 2} -> counted in memory -> refresh -> finish."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest

from scheduler_runtime.cluster.kube import (
    EVENT_MAX_TRIES,
    EVENT_SERIES_FINISH_TIME,
    ApiError,
    ApiUnreachableError,
    Response,
    _EventWriter,
    micro_time,
)

T0 = 1_700_000_000.0
BASE = "/apis/events.k8s.io/v1/namespaces/ns/events"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class FakeClient:
    """Answers like the API server: POST creates (409 if the name exists), PATCH merges `series`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.script: list[Any] = []  # queued answers (status code or exception) before the default one
        self.hook: Any = None
        self.delay = 0.0
        self.lock = threading.Lock()

    def request(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                timeout: float | None = None, **_: Any) -> Response:
        with self.lock:
            self.calls.append((method, path, body, content_type))
            scripted = self.script.pop(0) if self.script else None
        if self.hook is not None:
            self.hook(method, path, body)
        if self.delay:
            time.sleep(self.delay)
        if isinstance(scripted, Exception):
            raise scripted
        if scripted is not None:
            return Response(scripted, {}, b"{}")
        if method == "POST":
            name = body["metadata"]["name"]
            if name in self.stored:
                return Response(409, {}, b"{}")
            self.stored[name] = dict(body)
            return Response(201, {}, orjson.dumps(body))
        if method == "PATCH":
            name = path.rsplit("/", 1)[1]
            if name not in self.stored:
                return Response(404, {}, b"{}")
            self.stored[name] = {**self.stored[name], **body}
            return Response(200, {}, orjson.dumps(self.stored[name]))
        raise AssertionError(method)

    def error(self, resp: Response, method: str, path: str, query: Any = None) -> ApiError:
        return ApiError(f"{method} {path}: {resp.status}", status=resp.status)

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]


def event(name: str = "p.1", *, rv: str = "10", reason: str = "FailedScheduling", note: str = "0/3 nodes",
          type_: str = "Warning", instance: str = "default-scheduler-h1") -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "ns"}, "eventTime": micro_time(T0),
            "reportingController": "default-scheduler", "reportingInstance": instance,
            "action": "Scheduling", "reason": reason, "note": note, "type": type_,
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "p", "uid": "u1",
                          "resourceVersion": rv}}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api() -> FakeClient:
    return FakeClient()


@pytest.fixture
def writer(api: FakeClient, clock: Clock) -> Any:
    w = _EventWriter(api, clock=clock, housekeeping=False, retry_sleep=0.01)  # type: ignore[arg-type]
    yield w
    w.stop()


def test_create_then_series_patch_then_memory_then_refresh_then_finish(writer, api, clock) -> None:
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    assert api.calls == [("POST", BASE, event("p.1"), None)]
    assert "series" not in api.stored["p.1"]

    # the second isomorphic event (another name, another note: neither is part of the key) patches the first
    clock.now = T0 + 5
    writer.put("ns", event("p.2", note="0/4 nodes"))
    assert writer.flush(5)
    assert len(api.calls) == 2
    method, path, body, ctype = api.calls[1]
    assert (method, path, ctype) == ("PATCH", f"{BASE}/p.1", "application/strategic-merge-patch+json")
    assert body == {"series": {"count": 2, "lastObservedTime": micro_time(T0 + 5)}}
    assert api.stored["p.1"]["series"]["count"] == 2 and api.stored["p.1"]["note"] == "0/3 nodes"
    assert "p.2" not in api.stored

    # later ones are only counted
    for i in range(3):
        clock.now = T0 + 10 + i
        writer.put("ns", event(f"p.{3 + i}"))
    assert writer.flush(5)
    assert len(api.calls) == 2
    assert writer.series_count(event()) == 5 and writer.aggregated == 3

    # the periodic refresh writes the count reached
    assert writer.refresh_series() == 1
    assert api.calls[-1][:3] == ("PATCH", f"{BASE}/p.1", {"series": {"count": 5,
                                                                      "lastObservedTime": micro_time(T0 + 12)}})
    n = len(api.calls)

    # not finished while seen within the last 6 minutes
    clock.now = T0 + 12 + EVENT_SERIES_FINISH_TIME - 1
    assert writer.finish_series() == 0
    assert len(api.calls) == n and len(writer) == 1

    # finished: the final count is written and the series forgotten
    clock.now = T0 + 12 + EVENT_SERIES_FINISH_TIME + 1
    writer.put("ns", event("other.1", reason="Other"))  # a fresh singleton stays
    assert writer.flush(5)
    assert writer.finish_series() == 1
    assert api.calls[-1][:2] == ("PATCH", f"{BASE}/p.1")
    assert api.calls[-1][2]["series"]["count"] == 5
    assert len(writer) == 1 and writer.series_count(event()) == 0

    # the next isomorphic event starts over with a new Event
    writer.put("ns", event("p.9"))
    assert writer.flush(5)
    assert api.calls[-1][:2] == ("POST", BASE) and api.calls[-1][2]["metadata"]["name"] == "p.9"


def test_refresh_skips_singletons_and_singletons_are_forgotten_after_finish_time(writer, api, clock) -> None:
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    assert writer.refresh_series() == 0
    clock.now = T0 + EVENT_SERIES_FINISH_TIME + 1
    assert writer.finish_series() == 1
    assert api.methods() == ["POST"] and len(writer) == 0


@pytest.mark.parametrize("change", [{"rv": "11"}, {"reason": "Scheduled"}, {"type_": "Normal"},
                                    {"instance": "default-scheduler-h2"}])
def test_key_is_client_go_event_key(writer, api, change) -> None:
    writer.put("ns", event("p.1"))
    writer.put("ns", event("p.2", **change))
    assert writer.flush(5)
    assert api.methods() == ["POST", "POST"]
    assert writer.series_count(event()) == 1


def test_series_patch_on_a_vanished_event_creates_it_with_the_series(writer, api, clock) -> None:
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    del api.stored["p.1"]  # expired (events have a TTL)
    clock.now = T0 + 1
    writer.put("ns", event("p.2"))
    assert writer.flush(5)
    assert api.methods() == ["POST", "PATCH", "POST"]
    assert api.stored["p.1"]["series"] == {"count": 2, "lastObservedTime": micro_time(T0 + 1)}


def test_series_create_conflict_is_retried_as_a_patch(writer, api) -> None:
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    api.script = [404, 409]  # the create was not visible yet, then it was
    writer.put("ns", event("p.2"))
    assert writer.flush(5)
    assert api.methods() == ["POST", "PATCH", "POST", "PATCH"]
    assert api.stored["p.1"]["series"]["count"] == 2


def test_unreachable_server_is_retried_rejections_are_not(writer, api) -> None:
    api.script = [ApiUnreachableError("down"), 503]
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    assert api.methods() == ["POST"] * 3 and "p.1" in api.stored and writer.failed == 0
    api.script = [422]
    writer.put("ns", event("q.1", reason="Other"))
    assert writer.flush(5)
    assert api.methods() == ["POST"] * 4 and writer.failed == 1


def test_retries_give_up_after_max_tries(writer, api) -> None:
    api.script = [ApiUnreachableError("down")] * EVENT_MAX_TRIES
    writer.put("ns", event("p.1"))
    assert writer.flush(5)
    assert api.methods() == ["POST"] * EVENT_MAX_TRIES and writer.failed == 1


def test_cache_is_bounded_and_an_evicted_series_writes_its_count(api, clock) -> None:
    w = _EventWriter(api, clock=clock, housekeeping=False, cache_size=2)  # type: ignore[arg-type]
    try:
        for _ in range(3):
            w.put("ns", event("a.1", reason="A"))
        w.put("ns", event("b.1", reason="B"))
        w.put("ns", event("c.1", reason="C"))  # evicts A, the least recently seen
        assert w.flush(5)
        assert len(w) == 2 and w.series_count(event(reason="A")) == 0
        assert api.stored["a.1"]["series"]["count"] == 3
        w.put("ns", event("a.2", reason="A"))  # remembered no more: a new Event
        assert w.flush(5)
        assert "a.2" in api.stored
    finally:
        w.stop()


def test_put_never_waits_and_the_queue_is_bounded(api, clock) -> None:
    api.delay = 0.2
    w = _EventWriter(api, maxlen=5, workers=1, clock=clock, housekeeping=False)  # type: ignore[arg-type]
    try:
        t0 = time.monotonic()
        for i in range(50):
            w.put("ns", event(f"p{i}.1", rv=str(i)))
        assert time.monotonic() - t0 < 0.2
        assert w.dropped >= 40
    finally:
        w.stop(0.1)


def test_series_patch_never_overtakes_its_create(api, clock) -> None:
    api.delay = 0.05
    w = _EventWriter(api, workers=4, clock=clock, housekeeping=False)  # type: ignore[arg-type]
    try:
        for k in range(8):
            w.put("ns", event(f"p{k}.1", rv=str(k)))
            w.put("ns", event(f"p{k}.2", rv=str(k)))
        assert w.flush(10)
        assert api.methods().count("PATCH") == 8 and api.methods().count("POST") == 8
        assert all(api.stored[f"p{k}.1"]["series"]["count"] == 2 for k in range(8))
    finally:
        w.stop()


def test_a_series_seen_again_while_its_final_count_is_written_is_kept(writer, api, clock) -> None:
    writer.put("ns", event("p.1"))
    writer.put("ns", event("p.2"))
    assert writer.flush(5)
    clock.now = T0 + EVENT_SERIES_FINISH_TIME + 1

    def again(method: str, path: str, body: Any) -> None:
        if method == "PATCH":
            api.hook = None
            writer.put("ns", event("p.3"))

    api.hook = again
    assert writer.finish_series() == 0
    assert writer.series_count(event()) == 3


def test_housekeeping_thread_stops_promptly(api, clock) -> None:
    w = _EventWriter(api, clock=clock)  # type: ignore[arg-type]
    t0 = time.monotonic()
    w.stop()
    for t in w._threads:
        t.join(2)
        assert not t.is_alive()
    assert time.monotonic() - t0 < 2

"""The binding POST's retries as kube-scheduler 1.37.2 makes them (#138855): client-go's retry.DefaultBackoff
(4 tries) on 500 and 503, Retry-After honoured on 429/5xx, no retry on other errors. The API server is a scripted
stand-in here (a real one cannot be made to fail a binding on cue); the waits are recorded, not slept."""

from __future__ import annotations

import collections
from typing import Any

import orjson
import pytest

from scheduler_runtime.cluster.base import BindError
from scheduler_runtime.cluster.kube import binder
from scheduler_runtime.cluster.kube.rest import ApiError, Response
from scheduler_runtime.objects import Pod

POD = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"containers": []}})


class _Client:
    def error(self, resp: Response, method: str, path: str, query: Any = None) -> ApiError:
        return ApiError(f"{method} {path}: {resp.status} {resp.message()}", status=resp.status)

    def request(self, method: str, path: str, **kw: Any) -> Response:
        return Response(404, {}, b"")


class _Host:
    """Answers the binding POSTs with `answers` in turn."""

    def __init__(self, *answers: tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.posts = 0
        self.bind_retries = 3  # KubeCluster's default: 4 tries in all
        self.scheduler_name = "default-scheduler"
        self.stats: collections.Counter[str] = collections.Counter()
        self.client = _Client()

    def gated_write(self, method: str, path: str, **kw: Any) -> Response:
        self.posts += 1
        status, headers = self.answers.pop(0)
        return Response(status, headers, orjson.dumps({"message": f"answer {status}"}))


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    out: list[float] = []
    monkeypatch.setattr(binder.time, "sleep", out.append)
    return out


def test_internal_error_and_unavailable_are_retried_with_client_go_default_backoff(waits: list[float]) -> None:
    host = _Host((500, {}), (503, {}), (500, {}), (201, {}))
    binder.bind(host, POD, "n1")
    assert host.posts == 4 and host.stats["binds"] == 1
    for got, base in zip(waits, (0.01, 0.05, 0.25), strict=True):
        assert base <= got <= base * 1.1


def test_four_failed_tries_give_up(waits: list[float]) -> None:
    host = _Host(*[(500, {})] * 4)
    with pytest.raises(BindError, match="500"):
        binder.bind(host, POD, "n1")
    assert host.posts == 4 and len(waits) == 3


@pytest.mark.parametrize("status", [502, 504, 400, 403])
def test_other_errors_are_not_retried(waits: list[float], status: int) -> None:
    host = _Host((status, {}), (201, {}))
    with pytest.raises(BindError):
        binder.bind(host, POD, "n1")
    assert host.posts == 1 and waits == []


def test_retry_after_is_honoured_on_throttling(waits: list[float]) -> None:
    host = _Host((429, {"Retry-After": "2"}), (502, {"Retry-After": "1"}), (201, {}))
    binder.bind(host, POD, "n1")
    assert host.posts == 3 and waits == [2.0, 1.0]

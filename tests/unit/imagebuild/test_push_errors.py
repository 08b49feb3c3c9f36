"""Push failures are told apart by the engine's structured answer (HTTP status, errorDetail.code, the
registry's error code), never by searching the message: a digest that contains "403" is not a refusal.

The engine here is a small HTTP server speaking the Engine API's push endpoint, so the real docker SDK
decodes the stream and builds its real APIError from the real HTTP status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import docker
import pytest

from ksched_cli.imagebuild.engine import PushFailed, push, registry_refused_credentials, stream_error_is_auth
from ksched_cli.imagebuild.reference import parse_reference

DIGEST_WITH_403 = "sha256:" + "ab403c" * 10 + "d4"
REFUSED = (f"trying to reuse blob {DIGEST_WITH_403} at destination: pinging container registry 127.0.0.1:1: "
           'Get "https://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused')


class _Engine:
    """Answers POST /images/NAME/push with `status` and `lines` (JSON events, one per line)."""

    def __init__(self) -> None:
        self.status = 200
        self.lines: list[dict[str, Any]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(engine.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")  # as engines stream events
                self.end_headers()
                for event in engine.lines:
                    data = json.dumps(event).encode() + b"\n"
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=f"tcp://127.0.0.1:{self.server.server_address[1]}", version="1.41")


@pytest.fixture
def engine() -> Iterator[_Engine]:
    e = _Engine()
    e.thread.start()
    try:
        yield e
    finally:
        e.server.shutdown()
        e.server.server_close()
        e.thread.join(timeout=10)


def _push(engine: _Engine, tag: str = "127.0.0.1:1/ksched-test:push") -> PushFailed:
    client = engine.client()
    try:
        with pytest.raises(PushFailed) as err:
            push(client, parse_reference(tag, flag="--tag"), lambda _event: None)
    finally:
        client.close()
    return err.value


def test_connection_refused_with_403_in_a_digest_is_not_an_auth_error(engine: _Engine) -> None:
    engine.lines = [{"status": "The push refers to repository [127.0.0.1:1/ksched-test]"},
                    {"errorDetail": {"message": REFUSED}, "error": REFUSED}]
    exc = _push(engine)
    assert not exc.auth
    assert str(exc).startswith("push of 127.0.0.1:1/ksched-test:push to 127.0.0.1:1 failed: trying to reuse blob")
    assert exc.exit_code == 1


@pytest.mark.parametrize("event", [
    {"errorDetail": {"code": 401, "message": f"blob {DIGEST_WITH_403}: authentication failed"}, "error": "x"},
    {"errorDetail": {"code": 403, "message": "forbidden"}, "error": "forbidden"},
    {"errorDetail": {"message": "unauthorized: authentication required"}, "error": "unauthorized: ..."},
    {"errorDetail": {"message": "denied: requested access to the resource is denied"}, "error": "denied: ..."},
    {"errorDetail": {"message": f"writing blob: initiating layer upload to /v2/x/blobs/uploads/ in 127.0.0.1:1: "
                                f"unauthorized: {DIGEST_WITH_403}"}},
])
def test_a_structured_refusal_of_the_credentials_is_an_auth_error(engine: _Engine, event: dict[str, Any]) -> None:
    engine.lines = [event]
    exc = _push(engine)
    assert exc.auth and "log in first with `docker login 127.0.0.1:1`" in str(exc)


def test_a_stream_code_that_is_not_401_or_403_wins_over_the_words(engine: _Engine) -> None:
    engine.lines = [{"errorDetail": {"code": 500, "message": "unauthorized: but the code says 500"}}]
    assert not _push(engine).auth


@pytest.mark.parametrize("status,auth", [(401, True), (403, True), (404, False), (500, False)])
def test_the_engines_http_status_decides(engine: _Engine, status: int, auth: bool) -> None:
    engine.status = status
    engine.lines = [{"message": f"no such image {DIGEST_WITH_403} (403)"}]
    exc = _push(engine)
    assert exc.auth is auth


def test_a_lost_engine_connection_is_not_an_auth_error() -> None:
    client = docker.DockerClient(base_url="tcp://127.0.0.1:1", version="1.41")  # nothing listens on port 1
    try:
        with pytest.raises(PushFailed) as err:
            push(client, parse_reference("127.0.0.1:5000/x:403", flag="--tag"), lambda _e: None)
    finally:
        client.close()
    assert not err.value.auth and "lost the connection to the engine" in str(err.value)


@pytest.mark.parametrize("message,auth", [
    ("unauthorized: authentication required", True),
    ("denied: requested access to the resource is denied", True),
    ("trying to reuse blob sha256:1234: 401 Unauthorized", True),
    ("received unexpected HTTP status: 403 Forbidden", True),
    ("no basic auth credentials", True),
    ("dial tcp 127.0.0.1:1: connect: connection refused", False),
    (REFUSED, False),
    ("manifest invalid: manifest invalid", False),
    ("blob upload unknown: 403 bytes missing", False),
    ("Get https://registry-401.example.com/v2/: denied-host resolution failed", False),
    ("the request was unauthorized", False),
])
def test_registry_error_fields_are_read_at_their_boundaries(message: str, auth: bool) -> None:
    assert registry_refused_credentials(message) is auth
    assert stream_error_is_auth({"errorDetail": {"message": message}}) is auth

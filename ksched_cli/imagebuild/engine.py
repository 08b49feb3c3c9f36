"""The container engine behind the docker SDK: Docker, or podman's Docker-compatible API socket.

Every engine failure becomes a KschedError with one actionable line; the SDK's exceptions never reach the
user. Log and progress events go to callbacks so this module stays free of terminal concerns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from scheduler_runtime.errors import KschedError

from .reference import ImageRef
from .target import PROBE_SCRIPT, PythonTarget

PODMAN_SOCKET = "/run/ksched-podman/podman.sock"
CONNECT_TIMEOUT = 10.0
BUILD_TIMEOUT = 1800.0  # a silent RUN step (pip install of large wheels) must not trip the read timeout

#: HTTP statuses that mean the registry (or the engine on its behalf) refused the credentials
_AUTH_STATUSES = frozenset({401, 403})
#: the distribution spec's error codes for refused credentials, as engines print them ("code: message")
_AUTH_REGISTRY_CODES = frozenset({"unauthorized", "denied"})
#: Docker's sentinel error when it has no credentials for a registry that asks for them
_NO_CREDENTIALS = "no basic auth credentials"


class EngineUnavailable(KschedError):
    """No engine answers; the message says how to point DOCKER_HOST at one."""


class BuildFailed(KschedError):
    """A Dockerfile step failed; the message quotes the engine's error."""


class PushFailed(KschedError):
    """The registry refused or could not be reached."""

    def __init__(self, message: str, auth: bool) -> None:
        super().__init__(message, usage=False)
        self.auth = auth


def engine_hint() -> str:
    return (f"start Docker, or podman's Docker-compatible service: `podman system service --time=0 "
            f"unix://{PODMAN_SOCKET} &` and `export DOCKER_HOST=unix://{PODMAN_SOCKET}` "
            "(hack/install-podman.sh sets this up)")


def connect() -> docker.DockerClient:
    """A client for DOCKER_HOST (or the default socket) that has answered a ping."""
    where = os.environ.get("DOCKER_HOST") or "the default socket unix:///var/run/docker.sock"
    where = f"DOCKER_HOST={where}" if os.environ.get("DOCKER_HOST") else where
    try:
        client = docker.from_env(timeout=int(CONNECT_TIMEOUT))
        client.ping()
    except (docker.errors.DockerException, requests.RequestException, OSError, ValueError) as exc:
        reason = _short(str(exc)) or type(exc).__name__
        raise EngineUnavailable(f"no container engine reachable at {where} ({reason}): {engine_hint()}") from None
    client.api.timeout = BUILD_TIMEOUT
    return client


def describe(client: docker.DockerClient) -> str:
    """`podman 4.3.1 (API 1.41)` or `Docker 27.0.3 (API 1.46)`, for the log."""
    try:
        v = client.version()
    except docker.errors.DockerException:
        return "unknown engine"
    names = [c.get("Name", "") for c in v.get("Components") or []]
    kind = "podman" if any("podman" in n.lower() for n in names) else "Docker"
    return f"{kind} {v.get('Version', '?')} (API {v.get('ApiVersion', '?')}, {v.get('Os', '?')}/{v.get('Arch', '?')})"


def _short(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) < 300 else text[:297] + "..."


def _api_message(exc: docker.errors.APIError) -> str:
    return _short(str(exc.explanation or exc))


# ------------------------------------------------------------------------------------------------ base image


def ensure_image(client: docker.DockerClient, image: str, platform: str | None,
                 on_progress: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The base image's attributes; pulled (with progress events) when it is not on the engine yet."""
    try:
        return client.images.get(image).attrs
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        raise KschedError(f"base image {image}: {_api_message(exc)}", usage=False) from None
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
    try:
        stream = client.api.pull(repo, tag=tag or "latest", platform=platform, stream=True, decode=True)
        for event in stream:
            if "error" in event:
                raise KschedError(f"base image {image} is not on the engine and pulling it failed: "
                                  f"{_short(str(event['error']))} (pass --base-image with an image the engine has)",
                                  usage=False)
            on_progress(event)
        return client.images.get(image).attrs
    except docker.errors.APIError as exc:
        raise KschedError(f"base image {image} is not on the engine and pulling it failed: {_api_message(exc)} "
                          "(pass --base-image with an image the engine has)", usage=False) from None


def probe_python(client: docker.DockerClient, image: str, image_id: str, platform: str | None,
                 cache_dir: Path | None = None) -> PythonTarget:
    """Run PROBE_SCRIPT in the base image (offline) to learn its Python; cached per image ID."""
    cached = cache_dir / f"{image_id.replace(':', '_')}.json" if cache_dir else None
    if cached is not None and cached.is_file():
        return PythonTarget.from_probe(cached.read_text(), image)
    container = None
    try:
        # create/start/wait instead of run(remove=True): a container whose start fails must be removed too
        container = client.containers.create(image, entrypoint=["python3", "-c", PROBE_SCRIPT], command=[],
                                             network_mode="none", platform=platform, user="0")
        if has_executable(client, container, "python3") is False:
            raise KschedError(f"base image {image} has no python3: use an image with Python 3.11+ and the venv "
                              "module, e.g. python:3.11-slim-bookworm", usage=False)
        container.start()
        status = int(container.wait(timeout=120).get("StatusCode", 1))
        out = container.logs(stdout=True, stderr=False)
        if status != 0:
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            raise KschedError(f"base image {image}: running python3 in it failed (exit {status}): "
                              f"{_short(err) or 'no output'}: the base image needs python3 with the venv module",
                              usage=False)
    except docker.errors.APIError as exc:
        raise KschedError(f"base image {image}: cannot run a container to inspect its Python: {_api_message(exc)}",
                          usage=False) from None
    except requests.RequestException as exc:
        raise KschedError(f"base image {image}: python3 in it did not answer: {_short(str(exc))}",
                          usage=False) from None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
    text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
    target = PythonTarget.from_probe(text, image)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(target.to_json())
    return target


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def has_executable(client: docker.DockerClient, container: Any, name: str) -> bool | None:
    """Whether `name` is in one of the created (not started) container's PATH folders, asked through the
    archive API: 404 (docker.errors.NotFound) means absent. None when the engine cannot tell (then starting
    the container is the test). Engines report a missing executable at start only as text, so this asks
    before starting instead of reading that text."""
    env = (container.attrs.get("Config") or {}).get("Env") or []
    path = next((e.partition("=")[2] for e in env if e.startswith("PATH=")), DEFAULT_PATH)
    for folder in [f for f in path.split(":") if f.startswith("/")]:
        try:
            stream, _stat = client.api.get_archive(container.id, f"{folder.rstrip('/')}/{name}")
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError:
            return None
        stream.close()  # the stat answered; the file's bytes are not needed
        return True
    return False


# ------------------------------------------------------------------------------------------------------ build

_STEP = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: (?P<podman>.*)$|^Step \d+/\d+ : (?P<docker>.*)$")
_BUILT = re.compile(r"^Successfully built (?P<id>[0-9a-f]{12,64})\s*$")


@dataclass
class BuildEvent:
    """One line of the build log; `step` is set when the line starts a Dockerfile instruction."""

    line: str
    step: str | None = None


def parse_build_stream(chunks: Iterable[dict[str, Any]]) -> Iterator[BuildEvent | str]:
    """Turn the engine's JSON build stream into log events; the last item yielded is the image ID.

    Docker reports the ID in an `aux` message, podman's compat API in "Successfully built ID"; an `error`
    message (a failed RUN, a missing base) raises BuildFailed with the engine's words.
    """
    image_id: str | None = None
    pending = ""
    for chunk in chunks:
        if "error" in chunk or "errorDetail" in chunk:
            detail = chunk.get("errorDetail") or {}
            raise BuildFailed(_short(str(detail.get("message") or chunk.get("error") or "build failed")))
        aux = chunk.get("aux")
        if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
            image_id = aux["ID"]
        text = chunk.get("stream")
        if not isinstance(text, str):
            continue
        pending += text
        *lines, pending = pending.split("\n")
        for raw in lines:
            line = raw.rstrip("\r")
            m = _STEP.match(line)
            if m:
                yield BuildEvent(line, step=m.group("podman") or m.group("docker"))
                continue
            b = _BUILT.match(line)
            if b and image_id is None:
                image_id = b.group("id")
            if line.strip():
                yield BuildEvent(line)
    if pending.strip():
        yield BuildEvent(pending.rstrip())
    if image_id is None:
        raise BuildFailed("the engine finished without reporting an image ID")
    yield image_id


def build(client: docker.DockerClient, context: Path, tag: str, platform: str | None, no_cache: bool,
          on_event: Callable[[BuildEvent], None]) -> dict[str, Any]:
    """Build `context` offline (network_mode none) and return the tagged image's attributes."""
    try:
        stream = client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, nocache=no_cache,
                                  pull=False, network_mode="none", platform=platform, decode=True)
        image_id = None
        for item in parse_build_stream(stream):
            if isinstance(item, str):
                image_id = item
            else:
                on_event(item)
    except docker.errors.APIError as exc:
        raise BuildFailed(_api_message(exc)) from None
    except (requests.RequestException, docker.errors.DockerException) as exc:
        raise BuildFailed(f"lost the connection to the engine: {_short(str(exc))}") from None
    try:
        return client.images.get(tag).attrs
    except docker.errors.DockerException:
        return client.images.get(str(image_id)).attrs


# ------------------------------------------------------------------------------------------------------- push


def registry_refused_credentials(message: str) -> bool:
    """Whether an engine's flattened registry error is a refusal of the credentials.

    Engines turn the registry's structured error (`{"code": "UNAUTHORIZED", "message": ...}`) into
    `...: unauthorized: message`, and an HTTP status into `...: 401 Unauthorized`; this reads those fields
    back at their `: ` boundaries. It never searches the text: a digest or a host name containing "401" or
    "denied" is not a refusal."""
    parts = [p.strip() for p in message.split(": ")]
    for i, part in enumerate(parts):
        if i + 1 < len(parts) and part.lower() in _AUTH_REGISTRY_CODES:
            return True
        m = re.fullmatch(r"(\d{3}) ([A-Za-z ]+)", part)
        if m and int(m.group(1)) in _AUTH_STATUSES and m.group(2) == HTTPStatus(int(m.group(1))).phrase:
            return True
        if part == _NO_CREDENTIALS:
            return True
    return False


def stream_error_is_auth(event: dict[str, Any]) -> bool:
    """A push/pull stream's error event: its `errorDetail.code` (an HTTP status) decides when the engine set
    one; otherwise the registry's error code carried in `errorDetail.message`."""
    detail = event.get("errorDetail")
    detail = detail if isinstance(detail, dict) else {}
    code = detail.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and code:
        return code in _AUTH_STATUSES
    return registry_refused_credentials(str(detail.get("message") or event.get("error") or ""))


def api_error_is_auth(exc: docker.errors.APIError) -> bool:
    """An engine API call that failed with an HTTP status: 401/403 (the engine relays the registry's refusal
    as errdefs.Unauthorized/Forbidden), else the registry's error code in the explanation."""
    if exc.status_code is not None and exc.status_code in _AUTH_STATUSES:
        return True
    return registry_refused_credentials(str(exc.explanation or ""))


def push(client: docker.DockerClient, ref: ImageRef, on_progress: Callable[[dict[str, Any]], None]) -> str | None:
    """Push `ref` and return the digest the registry reported (None if it did not say)."""
    digest: str | None = None

    def refused(msg: str, auth: bool) -> PushFailed:
        if auth:
            return PushFailed(f"push of {ref} refused by {ref.registry}: {msg}: log in first with "
                              f"`docker login {ref.registry}` (the docker SDK reads ~/.docker/config.json; "
                              f"for podman's socket also `podman login {ref.registry}`)", auth=True)
        return PushFailed(f"push of {ref} to {ref.registry} failed: {msg}", auth=False)

    try:
        for event in client.api.push(ref.repository, tag=ref.tag or "latest", stream=True, decode=True):
            if "error" in event or "errorDetail" in event:
                detail = event.get("errorDetail") if isinstance(event.get("errorDetail"), dict) else {}
                raise refused(_short(str(detail.get("message") or event.get("error"))), stream_error_is_auth(event))
            aux = event.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = str(aux["Digest"])
            status = str(event.get("status") or "")
            m = re.search(r"digest: (sha256:[0-9a-f]{64})", status)
            if m:
                digest = m.group(1)
            on_progress(event)
    except docker.errors.APIError as exc:
        raise refused(_api_message(exc), api_error_is_auth(exc)) from None
    except (requests.RequestException, docker.errors.DockerException) as exc:
        # the connection to the engine itself broke: never a registry's refusal of the credentials
        raise PushFailed(f"push of {ref} to {ref.registry} failed: lost the connection to the engine: "
                         f"{_short(str(exc)) or type(exc).__name__}", auth=False) from None
    return digest


def image_summary(attrs: dict[str, Any]) -> tuple[str, int]:
    """(image ID, size in bytes) from an image's attributes."""
    return str(attrs.get("Id", "")), int(attrs.get("Size") or 0)

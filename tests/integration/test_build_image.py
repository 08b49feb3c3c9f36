"""`ksched build` for real: an image built from the bundled plugins on the local base image (made by
hack/install-podman.sh), then run: `ksched --version`, `ksched plugins list`, `kube-scheduler --help`.

The engine is DOCKER_HOST or the socket hack/install-podman.sh starts. With CI=true a missing engine or
base image fails the run; elsewhere those tests are skipped with the reason. The bad-input tests at the end
need no engine.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from docker.types import Ulimit

from ksched_cli.imagebuild.engine import PODMAN_SOCKET
from scheduler_runtime import __version__

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
BASE_IMAGE = os.environ.get("KSCHED_BASE_IMAGE", "localhost/ksched-base:bookworm")
SEEDS = {"Coscheduling": "coscheduling", "MyPreFilter": "my_prefilter", "NetworkTraffic": "network_traffic",
         "NodeCRDResourceFit": "node_crd_resource_fit"}
IN_CI = os.environ.get("CI") == "true"


def engine_url() -> str:
    return os.environ.get("DOCKER_HOST") or f"unix://{PODMAN_SOCKET}"


def ksched(*args: str, docker_host: str | None = None, timeout: float = 900,
           env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "DOCKER_HOST": docker_host or engine_url(),
           **(env_extra or {})}
    env.pop("KSCHED_BASE_IMAGE", None)
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=REPO)


def _unavailable(reason: str) -> None:
    msg = f"{reason}: run `make podman` (hack/install-podman.sh) or point DOCKER_HOST at an engine"
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


def ulimits() -> list[Ulimit]:
    """Limits within this host's hard limits: podman's default nofile=1048576 fails without CAP_SYS_RESOURCE
    (docs/build.md); nproc at most 32768, the most podman keeps for the runtime."""
    def hard(which: int, cap: int) -> int:
        value = resource.getrlimit(which)[1]
        return cap if value == resource.RLIM_INFINITY else min(value, cap)
    nofile, nproc = hard(resource.RLIMIT_NOFILE, 1048576), hard(resource.RLIMIT_NPROC, 32768)
    return [Ulimit(name="nofile", soft=nofile, hard=nofile), Ulimit(name="nproc", soft=nproc, hard=nproc)]


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    try:
        client = docker.DockerClient(base_url=engine_url(), timeout=120)
        client.ping()
    except Exception as exc:  # any failure to reach the engine means the same thing here
        _unavailable(f"no container engine at {engine_url()} ({type(exc).__name__}: {exc})")
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"base image {BASE_IMAGE} is not on the engine at {engine_url()}")
    yield client
    client.close()


def build(engine: docker.DockerClient, *extra: str, tag: str | None = None,
          env_extra: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, str]:
    tag = tag or f"localhost/ksched-test:{uuid.uuid4().hex[:10]}"
    proc = ksched("build", "--tag", tag, "--base-image", BASE_IMAGE, *extra, env_extra=env_extra)
    return proc, tag


def run(engine: docker.DockerClient, image: str, *command: str) -> str:
    """The command's output in a container of the image; it must exit 0. Podman may answer a logs call made
    right after the container exits before its log writer has flushed everything (seen on a loaded machine:
    a 5 KB JSON cut short), so the logs are read until two reads agree."""
    c = engine.containers.run(image, list(command) or None, detach=True, network_mode="none",
                              ulimits=ulimits(), environment={"COLUMNS": "200"})
    try:
        code = c.wait(timeout=300).get("StatusCode")
        out = c.logs(stdout=True, stderr=True)
        for _ in range(50):
            time.sleep(0.1)
            again = c.logs(stdout=True, stderr=True)
            if again == out:
                break
            out = again
    finally:
        c.remove(force=True)
    assert code == 0, f"{command} exited {code}:\n{out.decode(errors='replace')[-4000:]}"
    return out.decode()


@pytest.fixture(scope="module")
def image(engine: docker.DockerClient) -> Iterator[tuple[str, str]]:
    """The image of the bundled plugins; yields (tag, the CLI's stdout)."""
    proc, tag = build(engine, "--plugin-dir", str(REPO / "plugins"))
    assert proc.returncode == 0, f"ksched build failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    yield tag, proc.stdout
    try:
        engine.images.remove(tag, force=True)
    except docker.errors.APIError:
        pass


# ------------------------------------------------------------------------------------------- the built image


def test_cli_prints_the_image_id_and_size_the_engine_has(engine: docker.DockerClient, image: tuple[str, str]) -> None:
    tag, out = image
    attrs = engine.images.get(tag).attrs
    printed = dict(line.split(": ", 1) for line in out.strip().splitlines())
    assert printed["image"] == tag
    assert printed["id"].removeprefix("sha256:") == attrs["Id"].removeprefix("sha256:")
    assert printed["size"] == f"{attrs['Size'] / 1e6:.1f} MB" and attrs["Size"] > 100e6
    assert printed["plugins"] == ", ".join(sorted(SEEDS.values()))


def test_ksched_version_runs_in_the_image(engine: docker.DockerClient, image: tuple[str, str]) -> None:
    assert run(engine, image[0], "ksched", "--version").strip() == f"ksched {__version__}"
    assert run(engine, image[0], "--version").strip() == f"ksched {__version__}"  # entrypoint's default


def test_plugins_list_in_the_image_has_the_bundled_plugins(engine: docker.DockerClient,
                                                          image: tuple[str, str]) -> None:
    rows = json.loads(run(engine, image[0], "ksched", "plugins", "list", "-o", "json"))
    by_name = {r["name"]: r for r in rows}
    for name, folder in SEEDS.items():
        assert by_name[name]["source"] == f"plugins/{folder}", by_name.get(name)
    assert by_name["NodeResourcesFit"]["source"] == "in-tree"
    assert "preFilter" in by_name["MyPreFilter"]["extensionPoints"]
    table = run(engine, image[0], "plugins", "list")  # a bare subcommand goes to ksched
    assert "NodeCRDResourceFit" in table


def test_kube_scheduler_command_is_on_path(engine: docker.DockerClient, image: tuple[str, str]) -> None:
    help_text = run(engine, image[0], "kube-scheduler", "--help")
    assert help_text.startswith("Usage: kube-scheduler [flags]")
    assert "--config" in help_text and "--leader-elect" in help_text
    assert run(engine, image[0], "kube-scheduler", "--version").strip() == \
        f"Kubernetes v1.37.2-ksched.{__version__}"


def test_image_runs_as_65532_from_opt_ksched(engine: docker.DockerClient, image: tuple[str, str]) -> None:
    cfg = engine.images.get(image[0]).attrs["Config"]
    assert cfg["User"] == "65532:65532"
    assert cfg["WorkingDir"] == "/opt/ksched"
    assert cfg["Entrypoint"] == ["/usr/local/bin/ksched-entrypoint"]
    assert cfg["Labels"]["io.ksched.plugins"] == ",".join(sorted(SEEDS.values()))
    assert cfg["Labels"]["io.ksched.kubernetes-version"] == "v1.37.2"
    assert run(engine, image[0], "id", "-u").strip() == "65532"
    assert "Usage: ksched" in run(engine, image[0])  # no command: ksched --help
    # nothing the scheduler runs from is writable by its user
    probe = run(engine, image[0], "sh", "-c", "test -w /opt/ksched/venv/bin || test -w /opt/ksched/plugins "
                                              "&& echo writable || echo read-only")
    assert probe.strip() == "read-only"


def test_plugin_requirements_are_installed_and_a_broken_plugin_fails_the_build(
        engine: docker.DockerClient, tmp_path: Path) -> None:
    ok = tmp_path / "ok" / "needs_six"
    ok.mkdir(parents=True)
    (ok / "requirements.txt").write_text("six\n")
    (ok / "plugin.py").write_text(textwrap.dedent("""
        import six

        from scheduler_runtime.framework.plugin import Plugin
        from scheduler_runtime.framework.status import Status


        class NeedsSix(Plugin):
            name = "NeedsSix"

            def filter(self, state, pod, node_info):
                return Status.success() if six.PY3 else Status.error("python 2")
    """))
    proc, tag = build(engine, "--plugin-dir", str(tmp_path / "ok"))
    try:
        assert proc.returncode == 0, proc.stderr[-4000:]
        rows = json.loads(run(engine, tag, "ksched", "plugins", "list", "-o", "json"))
        assert {r["name"]: r["source"] for r in rows}["NeedsSix"] == "plugins/needs_six"
        assert run(engine, tag, "python", "-c", "import six; print(six.__name__)").strip() == "six"
    finally:
        engine.images.remove(tag, force=True)

    broken = tmp_path / "broken" / "broken_plugin"
    broken.mkdir(parents=True)
    (broken / "plugin.py").write_text("import module_that_is_nowhere_xyz\n")
    proc, tag = build(engine, "--plugin-dir", str(tmp_path / "broken"))
    assert proc.returncode == 1, proc.stdout
    assert "module_that_is_nowhere_xyz" in proc.stderr  # the build log shows why the plugin did not import
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in proc.stderr.strip().splitlines()[-1]
    with pytest.raises(docker.errors.ImageNotFound):
        engine.images.get(tag)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_push_to_an_unreachable_registry_is_a_clear_error(engine: docker.DockerClient,
                                                          image: tuple[str, str]) -> None:
    port = _closed_port()
    tag = f"127.0.0.1:{port}/ksched-test:push"
    proc, _ = build(engine, "--plugin-dir", str(REPO / "plugins"), "--push", tag=tag)
    try:
        assert proc.returncode == 4, proc.stderr[-3000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: push of {tag} to 127.0.0.1:{port} failed: "), last
        assert "Traceback" not in proc.stderr
        engine.images.get(tag)  # the image was built; only the push failed
    finally:
        try:
            engine.images.remove(tag, force=True)
        except docker.errors.APIError:
            pass


@pytest.mark.parametrize("remove,why", [
    ("/usr/bin/python3*", "has no python3: use an image with Python 3.11+"),
    ("/usr/lib/python3.*/ensurepip", "has python3 without the venv/ensurepip modules: install python3-venv"),
])
def test_unusable_base_image_is_refused_with_a_hint(engine: docker.DockerClient, remove: str, why: str) -> None:
    tag = f"localhost/ksched-test-base:{uuid.uuid4().hex[:8]}"
    dockerfile = f"FROM {BASE_IMAGE}\nRUN rm -rf {remove}\n".encode()
    engine.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, network_mode="none", rm=True)
    try:
        proc = ksched("build", "--base-image", tag, "--plugin-dir", str(REPO / "plugins"))
        assert proc.returncode == 1, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: base image {tag} {why}") and last.endswith("python:3.11-slim-bookworm"), last
        assert not engine.containers.list(all=True, filters={"ancestor": tag})  # the probe left nothing behind
    finally:
        engine.images.remove(tag, force=True)


def test_base_image_that_cannot_be_pulled_is_named(engine: docker.DockerClient) -> None:
    proc = ksched("build", "--base-image", "127.0.0.1:9/no/such-base:1", "--plugin-dir", str(REPO / "plugins"))
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: base image 127.0.0.1:9/no/such-base:1 is not on the engine and pulling it "
                           "failed: ") and last.endswith("(pass --base-image with an image the engine has)")


REGISTRY_PORT = int(os.environ.get("KSCHED_TEST_REGISTRY_PORT", "5056"))  # hack/install-podman.sh allows HTTP here
REGISTRY_USER, REGISTRY_PASSWORD = "ksched", "s3cret-for-tests"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, engine: docker.DockerClient) -> Iterator[str]:
    """A real registry (distribution's docker-registry) with htpasswd auth on 127.0.0.1:REGISTRY_PORT."""
    binary, htpasswd = shutil.which("docker-registry"), shutil.which("htpasswd")
    if not binary or not htpasswd:
        _unavailable("docker-registry or htpasswd is not installed")
    work = tmp_path_factory.mktemp("registry")
    users = subprocess.run([htpasswd, "-Bbn", REGISTRY_USER, REGISTRY_PASSWORD], capture_output=True, text=True,
                           check=True).stdout
    (work / "htpasswd").write_text(users)
    (work / "config.yml").write_text(textwrap.dedent(f"""
        version: 0.1
        log: {{level: warn}}
        storage: {{filesystem: {{rootdirectory: {work / "data"}}}}}
        http: {{addr: "127.0.0.1:{REGISTRY_PORT}"}}
        auth: {{htpasswd: {{realm: ksched-test, path: {work / "htpasswd"}}}}}
    """))
    proc = subprocess.Popen([binary, "serve", str(work / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=open(work / "registry.log", "w"))  # noqa: SIM115
    url = f"http://127.0.0.1:{REGISTRY_PORT}/v2/"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"docker-registry exited: {(work / 'registry.log').read_text()[-2000:]}")
            time.sleep(0.1)
        else:
            pytest.fail(f"docker-registry did not answer on {url}")
        yield f"127.0.0.1:{REGISTRY_PORT}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _docker_config(folder: Path, registry: str | None) -> dict[str, str]:
    """DOCKER_CONFIG for the CLI: empty (no login) or with the test user's credentials for `registry`."""
    folder.mkdir(parents=True, exist_ok=True)
    auths = {}
    if registry:
        token = base64.b64encode(f"{REGISTRY_USER}:{REGISTRY_PASSWORD}".encode()).decode()
        auths = {registry: {"auth": token}}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    return {"DOCKER_CONFIG": str(folder)}


def test_push_without_login_names_the_registry_and_how_to_log_in(engine: docker.DockerClient, registry: str,
                                                                 tmp_path: Path) -> None:
    tag = f"{registry}/team/ksched-test:noauth"
    proc, _ = build(engine, "--plugin-dir", str(REPO / "plugins"), "--push", tag=tag,
                    env_extra=_docker_config(tmp_path / "empty", None))
    try:
        assert proc.returncode == 4, proc.stderr[-3000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: push of {tag} refused by {registry}: "), last
        assert f"docker login {registry}" in last and "Traceback" not in proc.stderr
    finally:
        engine.images.remove(tag, force=True)


def test_push_with_login_reaches_the_registry(engine: docker.DockerClient, registry: str, tmp_path: Path) -> None:
    tag = f"{registry}/team/ksched-test:v1"
    proc, _ = build(engine, "--plugin-dir", str(REPO / "plugins"), "--push", tag=tag,
                    env_extra=_docker_config(tmp_path / "login", registry))
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        printed = dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines())
        req = urllib.request.Request(f"http://{registry}/v2/team/ksched-test/manifests/v1", method="HEAD", headers={
            "Authorization": "Basic " + base64.b64encode(f"{REGISTRY_USER}:{REGISTRY_PASSWORD}".encode()).decode(),
            "Accept": "application/vnd.oci.image.manifest.v1+json, "
                      "application/vnd.docker.distribution.manifest.v2+json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            assert printed["digest"] == resp.headers["Docker-Content-Digest"]
    finally:
        engine.images.remove(tag, force=True)


# ------------------------------------------------------------------------------- bad input (no engine needed)


@pytest.mark.parametrize("bogus", ["unix:///nonexistent/ksched-test.sock", "tcp://127.0.0.1:1"])
def test_no_engine_is_one_line_saying_how_to_point_docker_host_at_one(bogus: str) -> None:
    proc = ksched("build", "--base-image", BASE_IMAGE, docker_host=bogus, timeout=120)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: no container engine reachable at DOCKER_HOST={bogus}")
    assert "podman system service --time=0" in lines[0] and "export DOCKER_HOST=unix://" in lines[0]
    assert proc.stdout == ""


def test_debug_shows_the_traceback_of_a_missing_engine() -> None:
    env_host = "unix:///nonexistent/ksched-test.sock"
    proc = ksched("--debug", "build", "--base-image", BASE_IMAGE, docker_host=env_host, timeout=120)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "EngineUnavailable" in proc.stderr


def test_missing_plugin_folder_is_refused_before_the_engine_is_asked(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-plugins"
    proc = ksched("build", "--plugin-dir", str(missing), docker_host="unix:///nonexistent/x.sock")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"error: {missing}: --plugin-dir: plugin folder does not exist"


@pytest.mark.parametrize("tag,why", [
    ("KSched:v1", "repository names must be lowercase"),
    ("ksched:-v1", "a tag is 1-128"),
    ("ksched v1", "contains whitespace"),
])
def test_bad_tag_is_refused_before_the_engine_is_asked(tag: str, why: str) -> None:
    proc = ksched("build", "--tag", tag, docker_host="unix:///nonexistent/x.sock")
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(rf"error: --tag: invalid image reference '{re.escape(tag)}': .*{re.escape(why)}.*\n",
                        proc.stderr), proc.stderr


def test_bad_platform_is_refused() -> None:
    proc = ksched("build", "--platform", "windows/amd64", docker_host="unix:///nonexistent/x.sock")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --platform: unsupported platform 'windows/amd64'")

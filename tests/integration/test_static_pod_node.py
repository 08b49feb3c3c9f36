"""`ksched deploy --static-pod` under a real kubelet + containerd + runc (tests/integration/kubenode.py), against
the test control plane, on a kubeadm-shaped /etc/kubernetes.

The node starts with kube-scheduler's own static pod (the control-plane build's kube-scheduler in a locally
built image); `ksched build --load-into containerd` puts the ksched image into the node's containerd;
`ksched deploy --static-pod --wait` makes the kubelet replace kube-scheduler with it, and `--rollback` brings
kube-scheduler back. A second test deploys a config whose plugin is missing from the image: ksched exits at
start-up and deploy must notice the crash loop and say how to roll back.

Where the kubelet cannot run on this host (no cgroup access, ...), the same manifest runs under
`podman kube play` instead, which proves at least that the container starts with the manifest's mounts and
flags; each test prints which of the two it ran. KSCHED_NODE_TEST=podman forces the fallback. A missing
dependency (package, binary, image) fails the tests with CI=true and skips them elsewhere.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ksched_cli.imagebuild.engine import PODMAN_SOCKET
from scheduler_runtime.controlplane import ControlPlane
from tests.integration import kubenode

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KSCHED = Path(sys.executable).parent / "ksched"
IN_CI = os.environ.get("CI") == "true"
BASE_IMAGE = os.environ.get("KSCHED_BASE_IMAGE", "localhost/ksched-base:bookworm")
KSCHED_IMAGE = "localhost/ksched:node-e2e"
SCHED_IMAGE = "registry.k8s.io/kube-scheduler:v" + (REPO / "hack/controlplane/VERSION").read_text().strip()
#: a manifest change takes 22-33 s to a Ready container here (10-15 s static pod restart delay + 10 s startup
#: probe delay); generous, as the machine is shared
CHANGE_TIMEOUT = 150.0


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def run_ksched(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", **(env or {})}
    full.pop("KSCHED_BASE_IMAGE", None)
    return subprocess.run([str(KSCHED), *args], capture_output=True, text=True, timeout=timeout, env=full, cwd=REPO)


def kubeadm_manifest(etc: Path, port: int) -> str:
    """kubeadm's kube-scheduler manifest (v1.36), with this node's paths and a free secure port."""
    conf = etc / "scheduler.conf"

    def probe(path: str) -> str:
        return (f"      httpGet:\n        host: 127.0.0.1\n        path: {path}\n        port: {port}\n"
                f"        scheme: HTTPS\n")

    return (f"""apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    component: kube-scheduler
    tier: control-plane
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-scheduler
    - --authentication-kubeconfig={conf}
    - --authorization-kubeconfig={conf}
    - --bind-address=127.0.0.1
    - --kubeconfig={conf}
    - --leader-elect=true
    - --secure-port={port}
    image: {SCHED_IMAGE}
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
""" + probe("/livez") + """      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: kube-scheduler
    readinessProbe:
      failureThreshold: 3
""" + probe("/readyz") + """      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests:
        cpu: 100m
    startupProbe:
      failureThreshold: 24
""" + probe("/livez") + f"""      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: {conf}
      name: kubeconfig
      readOnly: true
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: {conf}
      type: FileOrCreate
    name: kubeconfig
status: {{}}
""")


@dataclass
class Setup:
    """What the tests run on: `mode` is "kubelet" (node set) or "podman" (why says why not the kubelet)."""

    mode: str
    why: str
    etc: Path
    port: int
    cp: ControlPlane
    node: kubenode.KubeNode | None = None

    @property
    def manifest(self) -> Path:
        return self.etc / "manifests" / "kube-scheduler.yaml"

    @property
    def original(self) -> Path:
        return self.etc.parent / "kube-scheduler.yaml.orig"

    def locations(self) -> list[str]:
        return ["--manifest", str(self.manifest), "--config-dest", str(self.etc / "ksched-config.yaml"),
                "--backup-dir", str(self.etc / "ksched-backups")]

    def wait_flags(self, seconds: float = CHANGE_TIMEOUT) -> list[str]:
        assert self.node is not None
        return ["--wait", f"{seconds:.0f}s", "--kubeconfig", str(self.cp.kubeconfig_path), "--node-name",
                self.node.name]

    def client(self) -> Any:
        from scheduler_runtime.cluster.kube import KubeClient, load_connection

        return KubeClient(load_connection(str(self.cp.kubeconfig_path)))


def _engine_ready() -> str:
    url = os.environ.get("DOCKER_HOST") or f"unix://{PODMAN_SOCKET}"
    r = subprocess.run(["podman", "--url", url, "image", "exists", BASE_IMAGE], capture_output=True, timeout=60) \
        if Path(PODMAN_SOCKET).exists() or os.environ.get("DOCKER_HOST") else None
    if r is None or r.returncode != 0:
        _unavailable(f"no podman service with {BASE_IMAGE} at {url}: run `make podman` (hack/install-podman.sh)")
    return url


def _delete_node_objects(s: Setup) -> None:
    """The Node and every pod bound to it, so later tests on the shared control plane never see them."""
    if s.node is None:
        return
    c = s.client()
    try:
        pods = c.call("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{s.node.name}").get("items", [])
        for p in pods:
            md = p["metadata"]
            c.call("DELETE", f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                   body={"gracePeriodSeconds": 0})
        c.call("DELETE", f"/api/v1/nodes/{s.node.name}")
    except Exception as exc:  # noqa: BLE001 - teardown reports, never hides the test's own failure
        print(f"node teardown: could not delete API objects of {s.node.name}: {exc}", file=sys.stderr)


@pytest.fixture(scope="module")
def setup(control_plane: ControlPlane) -> Iterator[Setup]:
    try:
        tools = kubenode.install()
    except kubenode.NodeUnavailable as exc:
        _unavailable(f"{exc}: run `make node` (hack/install-node.sh)")
    engine = _engine_ready()
    forced = os.environ.get("KSCHED_NODE_TEST") == "podman"
    node = kubenode.KubeNode(tools)
    etc = node.etc
    port = kubenode.free_port()
    s = Setup("kubelet", "", etc, port, control_plane, node)
    # kubeadm's files: scheduler.conf self-contained and 0600 root (as kubeadm writes it), the manifest 0600
    (etc / "scheduler.conf").write_text(kubenode.flatten_kubeconfig(control_plane.kubeconfig_path))
    (etc / "scheduler.conf").chmod(0o600)
    s.original.write_text(kubeadm_manifest(etc, port))
    try:
        try:
            if forced:
                raise kubenode.KubeletCannotRun("KSCHED_NODE_TEST=podman")
            node.start_containerd()
            for tar in (tools["pause"], tools["kube-scheduler"]):
                node.import_image(tar)
        except kubenode.KubeletCannotRun as exc:
            s.mode, s.why = "podman", str(exc)
        # the ksched image: built on podman and, with a node, loaded into its containerd by ksched itself
        args = ["build", "--base-image", BASE_IMAGE, "--tag", KSCHED_IMAGE]
        env = {"DOCKER_HOST": engine}
        if s.mode == "kubelet":
            args += ["--load-into", "containerd"]
            env["CONTAINERD_ADDRESS"] = str(node.sock)
        r = run_ksched(*args, env=env)
        assert r.returncode == 0, f"ksched build failed: {r.stdout[-1500:]} {r.stderr[-1500:]}"
        if s.mode == "kubelet":
            assert f"containerd: {KSCHED_IMAGE} (namespace k8s.io" in r.stdout, r.stdout
            assert f"{KSCHED_IMAGE}" in " ".join(node.images())
            s.manifest.write_text(s.original.read_text())
            s.manifest.chmod(0o600)
            try:
                node.start_kubelet(control_plane.kubeconfig_path)
            except kubenode.KubeletCannotRun as exc:  # containerd stays up until the teardown stops it
                s.mode, s.why = "podman", str(exc)
        print(f"\nstatic pod tests run under: {s.mode}" + (f" (the kubelet cannot run here: {s.why})" if s.why
                                                           else f" (node {node.name})"), file=sys.stderr)
        yield s
    finally:
        forced_steps = node.stop()  # first: a running kubelet would recreate its mirror pods
        if s.mode == "kubelet":
            _delete_node_objects(s)
        if forced_steps:
            print(f"node teardown had to force: {forced_steps}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------- helpers


def wait_for(what: str, check: Callable[[], Any], timeout: float, detail: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}: {detail()}")
        time.sleep(0.5)


def mirror_pod(s: Setup) -> dict[str, Any] | None:
    assert s.node is not None
    try:
        return s.client().call("GET", f"/api/v1/namespaces/kube-system/pods/kube-scheduler-{s.node.name}")
    except Exception:  # noqa: BLE001 - not there yet
        return None


def running_image(s: Setup, image: str) -> dict[str, Any] | None:
    """The mirror pod once it shows `image` with a ready container."""
    p = mirror_pod(s)
    if not p or p["spec"]["containers"][0]["image"] != image:
        return None
    st = (p.get("status", {}).get("containerStatuses") or [{}])[0]
    return p if st.get("ready") else None


def node_detail(s: Setup) -> Callable[[], str]:
    def f() -> str:
        assert s.node is not None
        p = mirror_pod(s)
        st = json.dumps((p or {}).get("status", {}).get("containerStatuses"))[:600]
        return f"mirror pod status: {st}; kubelet log: {s.node.tail('kubelet.log', errors=True)}"
    return f


def livez(port: int) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/livez", timeout=5, context=ctx) as r:
            return r.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        return f"error: {exc}"


def schedule_pod(s: Setup, namespace: str) -> dict[str, Any]:
    """A pod pinned to this node (the shared control plane has other tests' nodes), tolerating the not-ready
    taint (no CNI, no controller-manager here): returns it once bound."""
    assert s.node is not None
    c = s.client()
    name = f"sched-{uuid.uuid4().hex[:6]}"
    c.call("POST", f"/api/v1/namespaces/{namespace}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": s.node.name},
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                 "containers": [{"name": "c", "image": kubenode.PAUSE_IMAGE, "imagePullPolicy": "Never"}]}})

    def bound() -> dict[str, Any] | None:
        p = c.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        return p if p["spec"].get("nodeName") else None

    try:
        return wait_for(f"pod {name} to be bound", bound, 90, node_detail(s))
    finally:
        c.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0})


def ksched_config(path: Path, extra_plugin: str | None = None) -> Path:
    """A plugin config (MyPreFilter, shipped in the image) as the installed config; optionally one more plugin."""
    plugins = "\n".join(f"          - name: {p}" for p in ["MyPreFilter"] + ([extra_plugin] if extra_plugin else []))
    path.write_text(textwrap.dedent("""\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        leaderElection:
          leaderElect: false
        profiles:
          - schedulerName: default-scheduler
            plugins:
              multiPoint:
                enabled:
        PLUGINS
            pluginConfig:
              - name: MyPreFilter
                args:
                  annotationKeys: [mycompany.com/environment]
        """).replace("PLUGINS", textwrap.indent(plugins, "  ")))
    return path


# ---------------------------------------------------------------------------------------------- tests


def podman_play(s: Setup, tmp_path: Path) -> None:
    """The fallback: the patched manifest under `podman kube play` (as root, like the kubelet). podman's own pause
    image needs catatonit, so the pod's infra container uses the test pause image instead."""
    assert s.node is not None
    r = subprocess.run(["podman", "load", "-i", str(s.node.tools["pause"])], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    conf = tmp_path / "containers.conf"
    dropin = Path("/etc/containers/containers.conf.d/50-ksched.conf")  # runc + ulimits (hack/install-podman.sh)
    conf.write_text((dropin.read_text() if dropin.exists() else "[engine]\n")
                    + f'infra_image = "{kubenode.PAUSE_IMAGE}"\n')
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    r = subprocess.run(["podman", "kube", "play", "--replace", str(s.manifest)], capture_output=True, text=True,
                       timeout=300, env=env)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        name = "kube-scheduler-kube-scheduler"  # podman names a container <pod>-<container>

        def logs() -> str:
            return subprocess.run(["podman", "logs", "--tail", "5", name], capture_output=True, text=True,
                                  timeout=60).stdout

        wait_for("/livez of ksched under podman", lambda: livez(s.port) == "ok", 120, logs)
        info = json.loads(subprocess.run(["podman", "inspect", name], capture_output=True, text=True,
                                         timeout=60).stdout)[0]
        args = info["Config"]["Cmd"] or info["Args"]
        assert f"--config={s.etc / 'ksched-config.yaml'}" in args, args
        assert info["Config"]["User"].split(":")[0] == "65532", info["Config"]["User"]
        mounts = {m["Destination"] for m in info["Mounts"]}
        assert {str(s.etc / "ksched-config.yaml"), str(s.etc / "ksched-scheduler.conf")} <= mounts, mounts
    finally:
        subprocess.run(["podman", "kube", "down", str(s.manifest)], capture_output=True, timeout=300, env=env)


def test_deploy_replaces_kube_scheduler_and_rollback_restores_it(setup: Setup, namespace: str,
                                                                 tmp_path: Path) -> None:
    s = setup
    print(f"running under: {s.mode}" + (f" (the kubelet cannot run here: {s.why})" if s.why else ""))
    if s.mode == "podman":
        cfg = ksched_config(tmp_path / "cfg.yaml")
        s.manifest.write_text(s.original.read_text())
        r = run_ksched("deploy", "--static-pod", "--config", str(cfg), "--image", KSCHED_IMAGE, *s.locations(),
                       "--yes", "--plugin-dir", str(REPO / "plugins"))
        assert r.returncode == 0, r.stdout + r.stderr
        podman_play(s, tmp_path)
        r = run_ksched("deploy", "--static-pod", "--rollback", *s.locations(), "--yes")
        assert r.returncode == 0, r.stdout + r.stderr
        assert s.manifest.read_bytes() == s.original.read_bytes()
        return
    assert s.node is not None
    detail = node_detail(s)
    # before: kubeadm's kube-scheduler runs under the kubelet and schedules
    wait_for("kube-scheduler's mirror pod to be ready", lambda: running_image(s, SCHED_IMAGE), CHANGE_TIMEOUT, detail)
    assert "ksched.io/scheduling-result" not in (schedule_pod(s, namespace)["metadata"].get("annotations") or {})

    cfg = ksched_config(tmp_path / "cfg.yaml")
    r = run_ksched("deploy", "--static-pod", "--config", str(cfg), "--image", KSCHED_IMAGE, *s.locations(),
                   "--yes", "--plugin-dir", str(REPO / "plugins"), *s.wait_flags())
    assert r.returncode == 0, r.stdout + r.stderr
    # kubeadm's scheduler.conf is 0600 root: deploy gave the image's user a private copy, and left it alone
    private = s.etc / "ksched-scheduler.conf"
    assert f"installed {private} (mode 0600, owner 65532:65532)" in r.stdout, r.stdout
    assert (s.etc / "scheduler.conf").stat().st_mode & 0o777 == 0o600
    assert f"kube-system/kube-scheduler-{s.node.name} is ready" in r.stdout, r.stdout
    print(r.stdout[-800:])  # shown with -s: the wait's steps and how long the kubelet took
    p = wait_for("the ksched static pod to be ready", lambda: running_image(s, KSCHED_IMAGE), CHANGE_TIMEOUT, detail)
    assert p["metadata"]["annotations"].get("kubernetes.io/config.mirror"), "not a mirror pod"
    assert livez(s.port) == "ok"
    bound = schedule_pod(s, namespace)
    assert '"outcome":"scheduled"' in bound["metadata"].get("annotations", {}).get("ksched.io/scheduling-result",
                                                                                    "").replace(" ", "")

    r = run_ksched("deploy", "--static-pod", "--rollback", *s.locations(), "--yes", *s.wait_flags())
    assert r.returncode == 0, r.stdout + r.stderr
    assert s.manifest.read_bytes() == s.original.read_bytes()
    assert not private.exists(), "the rollback removes the private kubeconfig copy"
    wait_for("kube-scheduler to be back", lambda: running_image(s, SCHED_IMAGE), CHANGE_TIMEOUT, detail)
    assert "ksched.io/scheduling-result" not in (schedule_pod(s, namespace)["metadata"].get("annotations") or {})


def test_deploy_notices_a_crash_loop_and_says_how_to_roll_back(setup: Setup, tmp_path: Path) -> None:
    """A plugin that validates here but is missing from the image: ksched exits at start-up, the kubelet
    restarts it; deploy --wait says so (exit 3) with the command that rolls back, and that command works."""
    s = setup
    if s.mode == "podman":
        pytest.skip(f"needs the kubelet's restarts; the kubelet cannot run here: {s.why}")
    assert s.node is not None
    detail = node_detail(s)
    wait_for("kube-scheduler's mirror pod to be ready", lambda: running_image(s, SCHED_IMAGE), CHANGE_TIMEOUT, detail)
    plugins = tmp_path / "plugins"
    r = run_ksched("new-plugin", "NotInImage", "--dir", str(plugins))
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = ksched_config(tmp_path / "cfg.yaml", extra_plugin="NotInImage")
    r = run_ksched("deploy", "--static-pod", "--config", str(cfg), "--image", KSCHED_IMAGE, *s.locations(), "--yes",
                   "--plugin-dir", str(REPO / "plugins"), "--plugin-dir", str(plugins), *s.wait_flags())
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    print(out[-1500:])
    assert "the new scheduler container is crash-looping" in r.stderr, out
    undo = r.stderr.split("Roll back: ", 1)[1].strip()
    assert undo.startswith("sudo ksched deploy --static-pod --rollback --manifest " + str(s.manifest)), undo
    # the command it printed (minus sudo: we are root) brings kube-scheduler back
    r = run_ksched(*undo.split()[2:], "--yes", *s.wait_flags())
    assert r.returncode == 0, r.stdout + r.stderr
    assert s.manifest.read_bytes() == s.original.read_bytes()

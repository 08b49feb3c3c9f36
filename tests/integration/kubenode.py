"""A real Kubernetes node for tests: containerd + the kubelet, registered to the test control plane.

Everything lives in folders of its own (containerd root/state/socket, kubelet --root-dir, podLogsDir, a
kubeadm-shaped /etc/kubernetes), so nothing collides with another containerd or kubelet on the host. The
settings are those this kind of machine needs (hybrid cgroup v1, no systemd, no CAP_SYS_RESOURCE); see
docs/deploy.md "Testing on a real node". `stop()` undoes everything in the order that leaves nothing behind:
kubelet -> pod sandboxes -> containerd (and any shim of ours) -> mounts -> cgroups -> sysctls -> API objects.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
#: the kubelet, with protectKernelDefaults false, sets these on the host: saved before, written back after
SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
PAUSE_IMAGE = "localhost/ksched-test/pause:1"


class NodeUnavailable(Exception):
    """A dependency is missing (binary, package, image): the test fails in CI and is skipped elsewhere."""


class KubeletCannotRun(Exception):
    """Everything is installed but this host cannot run the kubelet or a pod sandbox (no cgroup access, ...)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install() -> dict[str, Path]:
    """Run hack/install-node.sh (idempotent, seconds when everything is there): binaries and image tarballs."""
    r = subprocess.run(["bash", str(REPO / "hack" / "install-node.sh")], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise NodeUnavailable(f"hack/install-node.sh failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    cache = Path(r.stdout.strip().splitlines()[-1])
    kubelet = subprocess.run(["bash", str(REPO / "hack" / "build-kubelet.sh")], capture_output=True, text=True,
                             timeout=1800).stdout.strip().splitlines()[-1]
    out = {"kubelet": Path(kubelet), "pause": cache / "images" / "pause.tar",
           "kube-scheduler": cache / "images" / "kube-scheduler.tar"}
    for tool in ("containerd", "ctr", "runc"):
        found = shutil.which(tool)
        if not found:
            raise NodeUnavailable(f"{tool} not on PATH after hack/install-node.sh")
        out[tool] = Path(found)
    crictl = cache / "bin" / "crictl"
    if crictl.exists():
        out["crictl"] = crictl
    return out


def flatten_kubeconfig(src: Path) -> str:
    """The kubeconfig with every referenced file inlined (the pod sees only what is mounted)."""
    doc = yaml.safe_load(src.read_text())
    base = src.parent

    def inline(d: dict[str, Any], key: str) -> None:
        if key in d:
            p = Path(d.pop(key))
            d[f"{key}-data"] = base64.b64encode((p if p.is_absolute() else base / p).read_bytes()).decode()

    for c in doc.get("clusters", []):
        inline(c["cluster"], "certificate-authority")
    for u in doc.get("users", []):
        inline(u["user"], "client-certificate")
        inline(u["user"], "client-key")
    return yaml.safe_dump(doc, sort_keys=False)


def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d}/stat").read_bytes()
        except OSError:
            continue
        ppid = int(raw[raw.rfind(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def _stop(proc: subprocess.Popen[bytes] | None, grace: float) -> None:
    """SIGTERM the process group, SIGKILL it after `grace` seconds."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


@dataclass
class KubeNode:
    """One node: call start(kubeconfig) then stop(); `manifests` is its static pod folder."""

    tools: dict[str, Path]
    name: str = field(default_factory=lambda: f"ksched-node-{uuid.uuid4().hex[:6]}")
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ksched-node-", dir="/var/tmp")))
    containerd: subprocess.Popen[bytes] | None = None
    kubelet: subprocess.Popen[bytes] | None = None
    sysctls: dict[str, str] = field(default_factory=dict)
    cgroups_before: set[str] = field(default_factory=set)
    kubelet_port: int = 0
    healthz_port: int = 0

    def __post_init__(self) -> None:
        self.state = Path(f"/run/{self.name}")  # socket path stays short (108 bytes at most)
        self.sock = self.state / "containerd.sock"
        self.kubelet_root = self.base / "kubelet"
        self.pod_logs = self.base / "pods"
        self.etc = self.base / "etc" / "kubernetes"  # kubeadm's layout
        self.manifests = self.etc / "manifests"
        self.logs = self.base / "logs"
        for d in (self.state, self.manifests, self.logs, self.pod_logs):
            d.mkdir(parents=True, exist_ok=True)
        self.etc.chmod(0o755)

    # ------------------------------------------------------------------------------------------ containerd
    def ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.tools["ctr"]), "--address", str(self.sock), "-n", "k8s.io", *args],
                              capture_output=True, text=True, timeout=timeout)

    def start_containerd(self) -> None:
        cfg = self.base / "containerd.toml"
        root = self.base / "containerd"
        cfg.write_text(f"""version = 2
root = "{root}"
state = "{self.state}"
[grpc]
  address = "{self.sock}"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{PAUSE_IMAGE}"
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "{self.base / 'cni'}"
  [plugins."io.containerd.internal.v1.opt"]
    path = "{root / 'opt'}"
""")
        self.cgroups_before = set(self._our_cgroups())
        self.containerd = subprocess.Popen(  # noqa: S603
            [str(self.tools["containerd"]), "--config", str(cfg)], stdin=subprocess.DEVNULL,
            stdout=open(self.logs / "containerd.log", "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
            start_new_session=True)
        deadline = time.monotonic() + 30
        while self.ctr("version", timeout=10).returncode != 0:
            if self.containerd.poll() is not None or time.monotonic() > deadline:
                raise KubeletCannotRun(f"containerd did not start: {self.tail('containerd.log')}")
            time.sleep(0.2)

    def import_image(self, tarball: Path) -> None:
        r = self.ctr("images", "import", str(tarball))
        if r.returncode != 0:
            raise RuntimeError(f"ctr images import {tarball}: {r.stderr.strip()}")

    def images(self) -> list[str]:
        return self.ctr("images", "list", "-q").stdout.split()

    # ------------------------------------------------------------------------------------------ kubelet
    def start_kubelet(self, kubeconfig: Path, timeout: float = 60) -> None:
        self.kubelet_port, self.healthz_port = free_port(), free_port()
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "staticPodPath": str(self.manifests), "fileCheckFrequency": "2s", "syncFrequency": "5s",
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [], "failSwapOn": False, "protectKernelDefaults": False, "oomScoreAdj": 0,
            "address": "127.0.0.1", "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": self.healthz_port,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"}, "resolvConf": "/etc/resolv.conf",
            "podLogsDir": str(self.pod_logs),
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        }
        (self.base / "kubelet.yaml").write_text(yaml.safe_dump(cfg))
        self.save_sysctls()
        self.kubelet = subprocess.Popen(  # noqa: S603
            [str(self.tools["kubelet"]), f"--config={self.base / 'kubelet.yaml'}",
             f"--root-dir={self.kubelet_root}", f"--cert-dir={self.kubelet_root / 'pki'}",
             f"--hostname-override={self.name}", f"--kubeconfig={kubeconfig}", "--v=2"],
            stdin=subprocess.DEVNULL, stdout=open(self.logs / "kubelet.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as r:
                    if r.read() == b"ok":
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.kubelet.poll() is not None or time.monotonic() > deadline:
                raise KubeletCannotRun(f"the kubelet did not become healthy: {self.tail('kubelet.log', errors=True)}")
            time.sleep(0.3)

    def save_sysctls(self) -> None:
        for key in SYSCTLS:
            p = Path("/proc/sys") / key.replace(".", "/")
            if p.exists() and key not in self.sysctls:
                self.sysctls[key] = p.read_text().strip()

    def restore_sysctls(self) -> None:
        for key, value in self.sysctls.items():
            p = Path("/proc/sys") / key.replace(".", "/")
            if p.read_text().strip() != value:
                p.write_text(value)

    def kubelet_pods(self) -> list[dict[str, Any]]:
        """The pods the kubelet runs, from its own API (static pods included, with their container status)."""
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        with urllib.request.urlopen(f"https://127.0.0.1:{self.kubelet_port}/pods", timeout=5, context=ctx) as r:
            return list(json.load(r).get("items", []))

    def tail(self, log: str, lines: int = 5, errors: bool = False) -> str:
        try:
            text = (self.logs / log).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        if errors:
            text = [ln for ln in text if ln.startswith(("E", "F")) or "error" in ln.lower()] or text
        return " | ".join(ln[:300] for ln in text[-lines:])

    # ------------------------------------------------------------------------------------------ teardown
    def _our_cgroups(self) -> list[str]:
        out = []
        for ctl in Path("/sys/fs/cgroup").glob("*/k8s.io"):
            out += [str(ctl)] + [str(p) for p in ctl.rglob("*") if p.is_dir()]
        return out

    def _our_shims(self) -> list[int]:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()
                and any(a == str(self.sock) or a.endswith(str(self.sock)) for a in _cmdline(int(d)))
                and "containerd-shim" in (_cmdline(int(d)) or [""])[0]]

    def _kill_tree(self, pid: int) -> None:
        kids = _proc_children()
        todo, seen = [pid], []
        while todo:
            p = todo.pop()
            seen.append(p)
            todo += kids.get(p, [])
        for p in seen:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove_pods(self) -> None:
        """Stop and remove every pod sandbox (containers, network namespaces) through the CRI, while containerd
        still runs: once containerd is gone its shims and containers would keep running."""
        if "crictl" in self.tools:
            subprocess.run([str(self.tools["crictl"]), "--runtime-endpoint", f"unix://{self.sock}", "rmp", "-fa"],
                           capture_output=True, timeout=120)
        for task in self.ctr("tasks", "list", "-q").stdout.split():  # without crictl, or what it left
            self.ctr("tasks", "kill", "-a", "-s", "SIGKILL", task, timeout=30)
            self.ctr("tasks", "delete", "-f", task, timeout=30)
        for c in self.ctr("containers", "list", "-q").stdout.split():
            self.ctr("containers", "delete", c, timeout=30)

    def mounts(self) -> list[str]:
        prefixes = (str(self.base), str(self.state))
        with open("/proc/mounts") as f:
            return [ln.split()[1] for ln in f if ln.split()[1].startswith(prefixes)]

    def stop(self) -> list[str]:
        """Tear everything down; returns what it had to force (empty when all went by the book)."""
        forced: list[str] = []
        _stop(self.kubelet, 15)
        if self.containerd is not None and self.containerd.poll() is None:
            try:
                self.remove_pods()
            except (subprocess.TimeoutExpired, OSError) as exc:
                forced.append(f"removing pods: {exc}")
        _stop(self.containerd, 15)
        for shim in self._our_shims():  # a shim (and its containers) outliving containerd
            forced.append(f"killed shim {shim}")
            self._kill_tree(shim)
        for m in sorted(self.mounts(), key=len, reverse=True):
            if subprocess.run(["umount", m], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True)
                forced.append(f"lazily unmounted {m}")
        for c in sorted(set(self._our_cgroups()) - self.cgroups_before, key=len, reverse=True):
            try:
                os.rmdir(c)
            except OSError:
                pass
        self.restore_sysctls()
        for link in Path("/var/log/containers").glob("*_*_*"):  # the kubelet's links into our podLogsDir
            try:
                if str(os.readlink(link)).startswith(str(self.pod_logs)):
                    link.unlink()
            except OSError:
                pass
        shutil.rmtree(self.state, ignore_errors=True)
        if not self.mounts():
            shutil.rmtree(self.base, ignore_errors=True)
        return forced

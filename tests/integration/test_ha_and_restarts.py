"""Two ksched replicas with leader election, a killed leader, an API server restart and an expired watch:
no pod is lost and none is bound twice."""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.testing.kube import create_node, wait_for

pytestmark = pytest.mark.integration
KSCHED = Path(sys.executable).parent / "ksched"


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> KubeClient:
    return KubeClient(load_connection(str(control_plane.kubeconfig_path)))


def make_node(admin: KubeClient, name: str, group: str, cpu: str = "64") -> None:
    create_node(admin, name, cpu=cpu, memory="256Gi", labels={"test-group": group})


def make_pods(admin: KubeClient, ns: str, names: list[str], group: str, scheduler: str) -> None:
    for name in names:
        admin.call("POST", f"/api/v1/namespaces/{ns}/pods", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeSelector": {"test-group": group}, "schedulerName": scheduler,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}})


def bound(admin: KubeClient, ns: str) -> dict[str, str]:
    items = admin.call("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in items}


def scheduled_events(admin: KubeClient, ns: str) -> dict[str, int]:
    items = admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events").get("items") or []
    out: dict[str, int] = {}
    for e in items:
        if e.get("reason") == "Scheduled":
            name = e["regarding"]["name"]
            out[name] = out.get(name, 0) + int((e.get("series") or {}).get("count") or 1)
    return out


def _config(tmp: Path, kubeconfig: str, scheduler: str, lease: str, leader_elect: bool) -> Path:
    f = tmp / f"{scheduler}.yaml"
    f.write_text(f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
leaderElection:
  leaderElect: {str(leader_elect).lower()}
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceName: {lease}
  resourceNamespace: default
profiles:
- schedulerName: {scheduler}
""")
    return f


class Replica:
    """`ksched run --config` as its own process, as a second replica in a Deployment would be."""

    def __init__(self, config: Path, name: str, log_dir: Path, *extra: str) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = self.log.open("wb")
        self.port = _free_port()
        self.proc = subprocess.Popen([str(KSCHED), "run", f"--config={config}", f"--secure-port={self.port}",
                                      "--bind-address=127.0.0.1", "-v=2", *extra],
                                     stdout=self._fh, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})

    def readyz(self) -> tuple[int, str]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/readyz?verbose", context=ctx,
                                        timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def leading(self) -> bool:
        return bool(re.search(r"became leader of lease", self.text()))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if not self._fh.closed:
            self._fh.close()
        return self.proc.returncode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_replicas_only_the_leader_binds_and_the_standby_takes_over(admin: KubeClient, control_plane: Any,
                                                                      namespace: str, tmp_path: Path) -> None:
    ns = group = namespace
    scheduler = f"ksched-ha-{uuid.uuid4().hex[:6]}"
    lease = f"{scheduler}-lease"
    for i in range(2):
        make_node(admin, f"{group}-n{i}", group)
    cfg = _config(tmp_path, str(control_plane.kubeconfig_path), scheduler, lease, True)
    a = Replica(cfg, "a", tmp_path)
    b: Replica | None = None
    try:
        wait_for(a.leading, what="replica a to lead")
        b = Replica(cfg, "b", tmp_path)
        wait_for(lambda: "is held by" in b.text(), timeout=20,
                 what="replica b to start as a standby")
        # a standby syncs its informers and is Ready, as kube-scheduler's standby is
        status = wait_for(lambda: (r := b.readyz())[0] == 200 and r, timeout=20, what="the standby's /readyz")
        assert "[+]informer-sync ok" in status[1], status
        first = [f"p{i}" for i in range(15)]
        make_pods(admin, ns, first, group, scheduler)
        wait_for(lambda: all(bound(admin, ns).get(n) for n in first), what="the leader to bind the first pods")
        assert not b.leading(), "the standby must not lead while the leader renews"
        assert "Successfully assigned" not in b.text()
        holder = admin.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")
        first_holder = holder["spec"]["holderIdentity"]
        a.kill()  # a crash: the lease is not released, the standby must wait for it to expire
        killed = time.monotonic()
        second = [f"q{i}" for i in range(15)]
        make_pods(admin, ns, second, group, scheduler)
        wait_for(b.leading, timeout=30, what="the standby to take over")
        took = time.monotonic() - killed
        wait_for(lambda: all(bound(admin, ns).get(n) for n in first + second), what="every pod bound")
        holder = admin.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")
        assert holder["spec"]["holderIdentity"] != first_holder
        assert holder["spec"]["leaseTransitions"] >= 1
        assert took >= 2.0, "the standby waited for the lease to expire"
        counts = wait_for(lambda: (c := scheduled_events(admin, ns)) and len(c) == 30 and c, what="30 events")
        assert set(counts.values()) == {1}, f"some pod was bound twice: {counts}"
        assert b.stop() == 0, b.text()[-2000:]  # SIGTERM is a clean exit, not a lost lease
        log = b.text()
        assert "Requested to terminate" in log and "leaderelection lost" not in log and "stuck" not in log, log
    finally:
        a.stop()
        if b is not None:
            b.stop()


def test_unreachable_api_server_at_start_is_retried_and_reported_in_readyz(tmp_path: Path) -> None:
    """A static pod can start before its API server: keep retrying with backoff, say why in /readyz."""
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                  "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
                  "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    r = Replica(_config(tmp_path, str(kc), "ksched-nowhere", "nowhere-lease", False), "nowhere", tmp_path)
    try:
        status = wait_for(lambda: (x := r.readyz())[0] == 500 and "cannot reach" in x[1] and x, timeout=30,
                          what="/readyz to say why")
        assert "[-]informer-sync failed: cannot reach the API server at https://127.0.0.1:1" in status[1], status
        wait_for(lambda: r.text().count("retrying in") >= 2, timeout=20, what="two retries")
        assert r.proc.poll() is None, r.text()
    finally:
        code = r.stop()
    assert code == 0, r.text()[-2000:]


@pytest.fixture
def runner(control_plane: Any, tmp_path: Path) -> Iterator[tuple[Runner, str]]:
    scheduler = f"ksched-rs-{uuid.uuid4().hex[:6]}"
    reg = build_registry([])
    cfg = load_config(_config(tmp_path, str(control_plane.kubeconfig_path), scheduler, scheduler, False), reg)
    r = Runner(cfg, reg, RunOptions(kubeconfig=str(control_plane.kubeconfig_path),
                                    keep_results=True, secure_port=0, seed=1))
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    wait_for(lambda: r._booted.is_set() and r.cluster.health()[0] and r._started, what="runner started")
    yield r, scheduler
    r.stop()
    t.join(60)


def test_apiserver_restart_and_expired_watch_lose_no_pod_and_bind_none_twice(
        admin: KubeClient, control_plane: Any, namespace: str, runner: tuple[Runner, str]) -> None:
    r, scheduler = runner
    ns = group = namespace
    make_node(admin, f"{group}-n0", group)
    before = [f"a{i}" for i in range(20)]
    make_pods(admin, ns, before, group, scheduler)
    wait_for(lambda: all(bound(admin, ns).get(n) for n in before), what="pods before the restart")
    control_plane.restart_apiserver()
    during = [f"b{i}" for i in range(20)]
    make_pods(admin, ns, during, group, scheduler)
    # and a watch that has to resume from a compacted resourceVersion: 410, re-list, diff
    pods_informer = r.cluster.informer("pods")
    relists = pods_informer.stats["relists"]
    pods_informer.pause()
    after = [f"c{i}" for i in range(20)]
    make_pods(admin, ns, after, group, scheduler)
    pods_informer.resume(resource_version="1")
    wait_for(lambda: pods_informer.stats["relists"] > relists, what="a re-list after 410")
    names = before + during + after
    wait_for(lambda: all(bound(admin, ns).get(n) for n in names), timeout=60, what="every pod bound")
    wait_for(lambda: r.cluster.health()[0], what="healthy after the restart")
    time.sleep(1.0)
    mine = [x for x in r.scheduler.results.all() if x.startswith(f"{ns}/")]
    assert sorted(mine) == sorted(f"{ns}/{n}" for n in names)
    scheduled = [x for x, res in r.scheduler.results.all().items() if x.startswith(f"{ns}/")
                 and res.outcome == "scheduled"]
    assert len(scheduled) == 60
    counts = wait_for(lambda: (c := scheduled_events(admin, ns)) and len(c) == 60 and c, what="60 events")
    assert set(counts.values()) == {1}, f"bound twice: {counts}"

"""Helpers for tests against a real kube-apiserver (ksched's integration tests use them too)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from .. import processes

#: a kubeconfig naming an unreachable server: for runs that only need the file to exist and parse
DUMMY_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def wait_for(cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.1) -> Any:
    """Poll until `cond()` is truthy and return it; an AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def create_node(client: Any, name: str, *, cpu: str = "8", memory: str = "32Gi", pods: str = "110",
                labels: dict[str, str] | None = None) -> None:
    """A Ready node on an API server without a kubelet. The NodeRestriction/TaintNodesByCondition admission
    adds a not-ready taint that no node controller lifts on a test control plane, so it is removed here."""
    client.call("POST", "/api/v1/nodes", body={
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                   "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
    client.call("PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": None}},
                content_type="application/merge-patch+json")


def create_capacity_storage_class(client: Any, driver: str, name: str) -> None:
    """A CSIDriver `driver` that publishes storage capacity, and a WaitForFirstConsumer StorageClass `name`
    it provisions (no CSI driver runs: tests post the CSIStorageCapacity objects themselves)."""
    client.call("POST", "/apis/storage.k8s.io/v1/csidrivers", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver},
        "spec": {"storageCapacity": True, "attachRequired": False}})
    client.call("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": driver, "volumeBindingMode": "WaitForFirstConsumer"})


def create_dra_nodes_and_class(client: Any, prefix: str, who: str, group: str) -> tuple[str, str, list[str]]:
    """One scheduler's DRA corner of a parity run: two nodes `<prefix>-<who>-<group>-<i>` labelled
    dra-group=<who>-<group> and a DeviceClass selecting that corner's own driver; (driver, class, nodes)."""
    driver = f"{who}-{group}.example.com"
    cls = f"gpu-{who}-{group}"
    nodes = [f"{prefix}-{who}-{group}-{i}" for i in range(2)]
    for n in nodes:
        create_node(client, n, labels={"dra-group": f"{who}-{group}"})
    client.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    return driver, cls, nodes


def create_resource_slice(client: Any, driver: str, node: str, devices: list[dict[str, Any]]) -> None:
    """The single ResourceSlice of `node`'s pool (named after the node) publishing `devices`."""
    client.call("POST", "/apis/resource.k8s.io/v1/resourceslices", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})


def put_node(client: Any, node: dict[str, Any]) -> dict[str, Any]:
    """Create `node` as written and return it as stored: the not-ready taint kube-apiserver's admission adds
    (no node controller lifts it on a test control plane) is replaced by the node's own taints."""
    client.call("POST", "/api/v1/nodes", body=node)
    return client.call("PATCH", f"/api/v1/nodes/{node['metadata']['name']}",
                       body={"spec": {"taints": (node.get("spec") or {}).get("taints") or None}},
                       content_type="application/merge-patch+json")


def scheduler_config(scheduler_name: str, kubeconfig: str | Path | None = None, extra: str = "") -> str:
    """A KubeSchedulerConfiguration with one profile named `scheduler_name` and no leader election; with
    `kubeconfig` (kube-scheduler's own connection), `extra`: more top-level YAML lines."""
    conn = f"clientConnection: {{kubeconfig: {kubeconfig}}}\n" if kubeconfig is not None else ""
    return (f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{conn}"
            f"leaderElection: {{leaderElect: false}}\n{extra}profiles:\n- schedulerName: {scheduler_name}\n")


@contextmanager
def kube_scheduler(bin_dir: str | Path, config: str | Path, log: str | Path, verbosity: int = 1,
                   args: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """The real kube-scheduler from `bin_dir` with `config`, its output in `log`, for the `with` block;
    stopped with SIGTERM, then SIGKILL after 30 s."""
    out = open(log, "ab")  # noqa: SIM115 - handed to the child process, closed below
    proc = subprocess.Popen([str(Path(bin_dir) / "kube-scheduler"), f"--config={config}", "--secure-port=0",
                             f"-v={verbosity}", *args], stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=processes.die_with_parent)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        out.close()


def pod_scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
                None)


def decision(client: Any, ns: str, name: str, need_message: bool = False) -> tuple[str, Any] | None:
    """("bound", node) once the pod is bound, ("pending", PodScheduled message) once a scheduler marked it
    unschedulable (a SchedulingGated condition is no verdict; `need_message`: wait for a message), else None."""
    got = client.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    if (got.get("spec") or {}).get("nodeName"):
        return ("bound", got["spec"]["nodeName"])
    cond = pod_scheduled_condition(got)
    if cond is not None and cond.get("status") == "False" and cond.get("reason") != "SchedulingGated" and \
            (cond.get("message") or not need_message):
        return ("pending", cond.get("message") or "")
    return None


def wait_decision(client: Any, ns: str, name: str, timeout: float = 60.0,
                  need_message: bool = False) -> tuple[str, Any]:
    """Poll `decision` until a scheduler has decided the pod."""
    return wait_for(lambda: decision(client, ns, name, need_message), timeout, f"a decision for {ns}/{name}",
                    interval=0.03)


@contextmanager
def ksched_runner(config: str | Path, kubeconfig: str | Path, seed: int = 1,
                  feature_gates: dict[str, bool] | None = None, batch_rescore: bool | None = None) -> Iterator[Any]:
    """ksched's scheduler (the Runner `ksched run` uses) with `config` against the API server of `kubeconfig`,
    in a thread for the `with` block; stopped and joined after it. `batch_rescore`, when given, makes every
    profile's opportunistic batching rescore (as 1.37) or flush (as 1.36) whatever the emulated minor."""
    import threading

    from ..app import Runner, RunOptions
    from ..config import load_config
    from ..plugins.registry import build_registry

    reg = build_registry([])
    runner = Runner(load_config(Path(config), reg, feature_gates=feature_gates), reg, RunOptions(
        kubeconfig=str(kubeconfig), secure_port=0, leader_overrides={"leader_elect": False}, seed=seed,
        feature_gates=dict(feature_gates or {})))
    if batch_rescore is not None:
        for fw in runner.scheduler.frameworks.values():
            fw.batch.rescore = batch_rescore
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    try:
        yield runner
    finally:
        runner.stop()
        t.join(30)


class Aligned(NamedTuple):
    """One pod of an aligned parity run: kube-scheduler's node, ksched's, ksched's message when it left the
    pod pending, and whether ksched's best score was unique (a tie may fairly go either way)."""

    name: str
    kube: str | None
    ours: str | None
    message: str
    unique: bool


def run_ksched_aligned(config: str | Path, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                       kube: dict[str, str | None], namespace: str, seed: int = 5) -> list[Aligned]:
    """Replay kube-scheduler's run through ksched in memory, one pod at a time, each pod then placed where
    kube-scheduler put it (`kube`: pod name -> node, None for pending) so the next decision starts from the
    same cluster state."""
    from ..cluster.memory import MemoryCluster
    from ..config import load_config
    from ..plugins.registry import build_registry
    from ..results import ResultStore
    from ..scheduler import Scheduler

    reg = build_registry([])
    cluster = MemoryCluster()
    for n in nodes:
        cluster.create(n, emit=False)
    results = ResultStore()
    sched = Scheduler(cluster, load_config(config, reg), reg, seed=seed, results=results)
    sched.start()
    out = []
    for p in pods:
        name = p["metadata"]["name"]
        cluster.create(p)
        sched.run(until_idle=True)
        ours = (cluster.get_pod(namespace, name).get("spec") or {}).get("nodeName")
        r = results.get(f"{namespace}/{name}")
        top = [s["total"] for s in (r.scores if r else [])]
        unique = ours is not None and (len(top) <= 1 or top[0] > top[1])
        out.append(Aligned(name, kube[name], ours, r.message if r and ours is None else "", unique))
        cluster.delete("pods", name, namespace)
        sched.drain_inbox()
        if kube[name] is not None:
            cluster.create({**p, "spec": {**p["spec"], "nodeName": kube[name]}})
            sched.drain_inbox()
    return out

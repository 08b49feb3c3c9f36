"""NetworkTraffic against a real Prometheus server (Debian's `prometheus` and `promtool` binaries).

The test writes OpenMetrics samples stamped a minute ago, turns them into a TSDB block with
`promtool tsdb create-blocks-from openmetrics`, starts `prometheus` on a free loopback port over that
TSDB, and checks the plugin's raw and normalised scores against the tutorial's worked example and log.

Without the binaries the test is skipped, or fails when CI=true (run hack/install-test-deps.sh).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scheduler_runtime.cache import Cache
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.registry import Registry, load_plugin_dir
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeScore
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.scheduler import Scheduler

REPO = Path(__file__).resolve().parents[2]

# The tutorial's worked example (bytes received by nodes a, b, c) and its result with int64 arithmetic.
WORKED = {"a": 1000000, "b": 1200000, "c": 1400000}
WORKED_SCORES = {"a": 29, "b": 15, "c": 0}
# The tutorial's log: per-node bandwidth and the "Nodes final score" line.
LOG = {"node5": 312528236767, "node3": 327333347411, "node1": 321718404122, "node4": 224935743744,
       "node6": 415270171795, "node2": 270270915134}
LOG_SCORES = {"node5": 25, "node6": 0, "node1": 23, "node3": 22, "node4": 46, "node2": 35}
# Counters for the rate mode on device eth9: bytes per second per node.
RATES = {"q1": 1000, "q2": 3000}


class _Binder(Plugin):
    """Binds through the cluster backend, as DefaultBinder does."""

    name = "TestBind"

    def bind(self, state, pod, node_name):  # noqa: ANN001, ANN201
        self.handle.cluster.bind(pod, node_name)
        return None


def _binaries() -> tuple[str, str]:
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    if prom and tool:
        return prom, tool
    msg = "prometheus/promtool not on PATH; run hack/install-test-deps.sh (apt-get install prometheus)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openmetrics(now: int) -> str:
    """Samples a minute old, plus series the plugin must ignore (other devices, no node label)."""
    t = now - 60
    lines = ["# TYPE node_network_receive_bytes counter"]
    for data in (WORKED, LOG):
        for n, v in data.items():
            lines.append(f'node_network_receive_bytes_total{{device="ens192",kubernetes_node="{n}",'
                         f'instance="{n}:9100",job="node-exporter"}} {v} {t}')
            lines.append(f'node_network_receive_bytes_total{{device="lo",kubernetes_node="{n}",'
                         f'instance="{n}:9100",job="node-exporter"}} 999999999999 {t}')
    lines.append(f'node_network_receive_bytes_total{{device="ens192",instance="stray:9100",job="other"}} 5 {t}')
    for n, per_second in RATES.items():
        for k in range(17):  # every 15 s over the last 4 minutes
            ts = now - 255 + 15 * k
            lines.append(f'node_network_receive_bytes_total{{device="eth9",kubernetes_node="{n}",'
                         f'instance="{n}:9100",job="node-exporter"}} {per_second * 15 * k} {ts}')
    # OpenMetrics wants a metric family's samples together and in time order: sort by series, then time
    body = sorted(lines[1:], key=lambda ln: (ln.rsplit(" ", 2)[0], int(ln.rsplit(" ", 1)[1])))
    return "\n".join([lines[0], *body, "# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    prom, tool = _binaries()
    work = tmp_path_factory.mktemp("prometheus")
    data = work / "data"
    om = work / "samples.om"
    om.write_text(openmetrics(int(time.time())))
    r = subprocess.run([tool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"promtool failed: {r.stdout}\n{r.stderr}"
    cfg = work / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1h\n")
    port = _free_port()
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen([prom, f"--config.file={cfg}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited with {proc.returncode}: {(work / 'prometheus.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not become ready in 60 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def cls():
    found = {c.name: c for c, _ in load_plugin_dir(REPO / "plugins")}
    return found["NetworkTraffic"]


def _plugin(cls, url: str, **kw):
    return cls(cls.args_model.model_validate({"prometheusAddress": url, **kw}), None)


def _snapshot(names):
    cache = Cache()
    for n in names:
        cache.add_node(Node.from_dict({"kind": "Node", "metadata": {"name": n},
                                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    return cache.snapshot


def _scores(plugin, names) -> tuple[dict[str, int], dict[str, int]]:
    snap = _snapshot(names)
    state = CycleState()
    pod = Pod.from_dict({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                         "spec": {"containers": [{"name": "c", "image": "x"}]}})
    st = plugin.pre_score(state, pod, NodeList(snap))
    assert st is None, st
    raw = {ni.name: plugin.score(state, pod, ni) for ni in snap}
    ns = [NodeScore(n, v) for n, v in raw.items()]
    plugin.normalize_score(state, pod, ns)
    batch = plugin.normalize_score_batch(state, pod, np.arange(len(names)),
                                         plugin.score_batch(state, pod, snap, np.arange(len(names))))
    assert batch.tolist() == [s.score for s in ns], "batch and per-node forms agree"
    return raw, {s.name: s.score for s in ns}


def test_worked_example_against_real_prometheus(prometheus, cls):
    raw, norm = _scores(_plugin(cls, prometheus), list(WORKED))
    assert raw == WORKED  # device="lo" and the stray series without kubernetes_node are left out
    assert norm == WORKED_SCORES


def test_tutorial_log_against_real_prometheus(prometheus, cls):
    raw, norm = _scores(_plugin(cls, prometheus), list(LOG))
    assert raw == LOG
    assert norm == LOG_SCORES


def test_batched_query_equals_tutorial_per_node_query(prometheus, cls):
    plugin = _plugin(cls, prometheus)
    batched = plugin.traffic()
    for n in [*WORKED, *LOG]:
        q = f'sum_over_time(node_network_receive_bytes_total{{kubernetes_node="{n}",device="ens192"}}[5m])'
        result = plugin.client.instant_query(q)
        assert len(result) == 1, "the tutorial's query wants exactly one sample"
        assert int(float(result[0]["value"][1])) == batched[n]
    assert plugin.queries_sent == 1


def test_rate_mode_against_real_prometheus(prometheus, cls):
    plugin = _plugin(cls, prometheus, queryMode="rate", networkInterface="eth9")
    raw, norm = _scores(plugin, list(RATES))
    for n, per_second in RATES.items():
        assert raw[n] == pytest.approx(per_second, rel=0.15), raw
    assert norm["q2"] == 0 and 60 <= norm["q1"] <= 72


def test_unknown_interface_skips(prometheus, cls):
    plugin = _plugin(cls, prometheus, networkInterface="does-not-exist")
    st = plugin.pre_score(CycleState(), None, NodeList(_snapshot(["a"])))
    assert st is not None and st.code == Code.Skip


def test_scheduler_binds_to_quietest_node(prometheus, cls):
    mc = MemoryCluster()
    for n in WORKED:
        mc.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    mc.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    reg = Registry()
    reg.register(cls, "plugins")
    reg.register(_Binder, "test")
    plan = {"preScore": [("NetworkTraffic", 0)], "score": [("NetworkTraffic", 1)], "bind": [("TestBind", 0)]}
    args = {"NetworkTraffic": cls.args_model.model_validate({"prometheusAddress": prometheus})}
    profile = SimpleNamespace(scheduler_name="default-scheduler", plan=plan, args=args,
                              percentage_of_nodes_to_score=None)
    cfg = SimpleNamespace(profiles=[profile], parallelism=16, percentage_of_nodes_to_score=None,
                          pod_initial_backoff_seconds=1, pod_max_backoff_seconds=10)
    sched = Scheduler(mc, cfg, reg, seed=1)
    sched.start()
    sched.run(until_idle=True)
    assert mc.bindings == [("default/web", "a")]
    breakdown = {s["node"]: s["plugins"]["NetworkTraffic"] for s in sched.results.get("default/web").scores}
    assert {n: b["raw"] for n, b in breakdown.items()} == WORKED
    assert {n: b["normalized"] for n, b in breakdown.items()} == WORKED_SCORES

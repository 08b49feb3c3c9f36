"""NetworkTraffic (seed tutorial 02): query building, arithmetic, caching and failure handling.

A real Prometheus is exercised in tests/integration/test_network_traffic_prometheus.py; here a stub HTTP
server stands in for the failure cases (HTTP errors, slow answers, garbage).
"""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading
import time
import urllib.parse

import numpy as np
import pydantic
import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeScore
from scheduler_runtime.scheduler import Scheduler

from .conftest import TestBinder, handle_for, node, parsed_pod, pod, registry_with, scheduler_config

# The tutorial's log: bandwidth per node and the final scores it printed.
TUTORIAL_LOG = {"node5": 312528236767, "node3": 327333347411, "node1": 321718404122, "node4": 224935743744,
                "node6": 415270171795, "node2": 270270915134}
TUTORIAL_FINAL = {"node5": 25, "node6": 0, "node1": 23, "node3": 22, "node4": 46, "node2": 35}


@pytest.fixture
def cls(plugin_classes):
    return plugin_classes["NetworkTraffic"]


@pytest.fixture
def mod(cls):
    import sys
    return sys.modules[cls.__module__]


def args(cls, **kw):
    base = {"prometheusAddress": "http://127.0.0.1:9"}
    base.update(kw)
    return cls.args_model.model_validate(base)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StubPrometheus:
    """Answers /api/v1/query with whatever `respond(query)` returns: (status, body bytes, delay)."""

    def __init__(self, respond) -> None:
        self.queries: list[str] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("query", [""])[0]
                outer.queries.append(q)
                status, body, delay = respond(q)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def vector(values: dict[str, float], label: str = "kubernetes_node") -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {label: k}, "value": [1700000000.0, str(v)]} for k, v in values.items()]}}).encode()


@pytest.fixture
def stub():
    servers = []

    def make(respond):
        s = StubPrometheus(respond)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


# --------------------------------------------------------------------------- arithmetic


def test_normalize_matches_tutorial_worked_example(mod):
    # a, b, c = 1.0, 1.2, 1.4 MB: the tutorial writes 28.58 / 14.29 / 0; Go's int64 division gives 29 / 15 / 0
    assert mod.normalize([1000000, 1200000, 1400000]) == [29, 15, 0]


def test_normalize_matches_tutorial_log(mod):
    names = list(TUTORIAL_LOG)
    got = dict(zip(names, mod.normalize([TUTORIAL_LOG[n] for n in names]), strict=True))
    assert got == TUTORIAL_FINAL


def test_normalize_all_zero_and_empty(mod):
    assert mod.normalize([0, 0, 0]) == [100, 100, 100]
    assert mod.normalize([]) == []
    assert mod.normalize([0, 5]) == [100, 0]


def test_normalize_score_in_place_and_batch_agree(cls):
    p = cls(args(cls), None)
    scores = [NodeScore(n, v) for n, v in TUTORIAL_LOG.items()]
    assert p.normalize_score(CycleState(), parsed_pod("x"), scores) is None
    assert {s.name: s.score for s in scores} == TUTORIAL_FINAL
    raw = np.array(list(TUTORIAL_LOG.values()), dtype=np.int64)
    out = p.normalize_score_batch(CycleState(), parsed_pod("x"), np.arange(6), raw)
    assert out.dtype == np.int64 and out.tolist() == list(TUTORIAL_FINAL[n] for n in TUTORIAL_LOG)


def test_huge_values_do_not_overflow(mod):
    big = mod.bytes_by_node([{"metric": {"kubernetes_node": "a"}, "value": [0, "1e30"]}], "kubernetes_node")
    assert big["a"] * 100 < 2**63
    assert mod.normalize([big["a"], big["a"] // 2]) == [0, 50]


def test_bytes_by_node_parsing(mod):
    result = [
        {"metric": {"kubernetes_node": "a"}, "value": [0, "1234.9"]},
        {"metric": {"kubernetes_node": "b"}, "value": [0, "NaN"]},
        {"metric": {"kubernetes_node": "c"}, "value": [0, "+Inf"]},
        {"metric": {}, "value": [0, "99"]},          # no node label: ignored
        {"metric": {"kubernetes_node": "d"}, "value": "bad"},
    ]
    assert mod.bytes_by_node(result, "kubernetes_node") == {"a": 1234, "b": 0, "c": 0}


# --------------------------------------------------------------------------- queries and args


def test_queries(mod, cls):
    assert mod.build_query("compat", "kubernetes_node", "ens192", 5) == (
        'sum by (kubernetes_node) (sum_over_time(node_network_receive_bytes_total{device="ens192"}[5m]))')
    assert mod.build_query("rate", "node", "eth0", 3) == (
        'sum by (node) (rate(node_network_receive_bytes_total{device="eth0"}[3m]))')
    assert mod.build_query("compat", "n", 'we"ird\\', 1).count('device="we\\"ird\\\\"') == 1
    p = cls(args(cls, networkInterface="eth1", timeRangeInMinutes=3, queryMode="rate", nodeLabel="node"), None)
    assert p.query == 'sum by (node) (rate(node_network_receive_bytes_total{device="eth1"}[3m]))'


def test_args_defaults_and_validation(cls):
    m = cls.args_model
    assert m.__name__ == "NetworkTrafficArgs"
    a = m.model_validate({"prometheusAddress": "https://prom.monitoring.svc:9090/prefix"})
    assert (a.network_interface, a.time_range_in_minutes, a.node_label, a.query_mode, a.cache_seconds) == \
        ("ens192", 5, "kubernetes_node", "compat", 5.0)
    for bad in ({}, {"prometheusAddress": "prom:9090"}, {"prometheusAddress": "ftp://x"},
                {"prometheusAddress": "http://"}, {"prometheusAddress": "http://x:99999"},
                {"prometheusAddress": "http://x/?q=1"},
                {"prometheusAddress": "http://x", "timeRangeInMinutes": 0},
                {"prometheusAddress": "http://x", "queryMode": "avg"},
                {"prometheusAddress": "http://x", "nodeLabel": "kubernetes-node"},
                {"prometheusAddress": "http://x", "networkInterface": ""},
                {"prometheusAddress": "http://x", "cacheSeconds": -1},
                {"prometheusAddress": "http://x", "address": "http://x"}):
        with pytest.raises(pydantic.ValidationError):
            m.model_validate(bad)
    with pytest.raises(ValueError):
        cls(None, None)
    assert cls.rbac == []


# --------------------------------------------------------------------------- PreScore / Score


def _handle(nodes=("node1", "node2", "node3")):
    mc = MemoryCluster()
    for n in nodes:
        mc.create(node(n))
    return handle_for(mc)[0]


def test_one_query_per_cycle_for_all_nodes_and_cache(cls, stub):
    srv = stub(lambda q: (200, vector({"node1": 100, "node2": 300}), 0))
    clock = [0.0]
    p = cls(args(cls, prometheusAddress=srv.url, cacheSeconds=5), None, clock=lambda: clock[0])
    h = _handle()
    nodes = NodeList(h.snapshot)
    state = CycleState()
    assert p.pre_score(state, parsed_pod("x"), nodes) is None
    assert [p.score(state, parsed_pod("x"), ni) for ni in nodes] == [100, 300, 0]  # node3 has no series
    rows = np.arange(3)
    assert p.score_batch(state, parsed_pod("x"), h.snapshot, rows).tolist() == [100, 300, 0]
    assert len(srv.queries) == 1
    for _ in range(50):  # 50 more pods within cacheSeconds: no new query
        assert p.pre_score(CycleState(), parsed_pod("y"), nodes) is None
    assert len(srv.queries) == 1
    clock[0] = 5.0
    p.pre_score(CycleState(), parsed_pod("z"), nodes)
    assert len(srv.queries) == 2
    assert srv.queries[0] == p.query


def test_prometheus_down_skips_quickly_and_logs_once(cls, caplog):
    clock = [0.0]
    p = cls(args(cls, prometheusAddress=f"http://127.0.0.1:{free_port()}", cacheSeconds=0), None,
            clock=lambda: clock[0])
    nodes = NodeList(_handle().snapshot)
    with caplog.at_level(logging.WARNING, logger="ksched.plugins.NetworkTraffic"):
        t0 = time.monotonic()
        for _ in range(20):
            st = p.pre_score(CycleState(), parsed_pod("x"), nodes)
            assert st is not None and st.code == Code.Skip
        assert time.monotonic() - t0 < 2
    assert p.queries_sent == 1, "a failure is remembered (>= 5 s) so each pod does not pay for it"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot reach Prometheus" in warnings[0].getMessage()
    clock[0] = 5.0
    p.pre_score(CycleState(), parsed_pod("x"), nodes)
    assert p.queries_sent == 2


def test_slow_prometheus_hits_timeout(cls, stub):
    srv = stub(lambda q: (200, vector({"node1": 1}), 2.0))
    p = cls(args(cls, prometheusAddress=srv.url, queryTimeoutSeconds=0.3), None)
    t0 = time.monotonic()
    st = p.pre_score(CycleState(), parsed_pod("x"), NodeList(_handle().snapshot))
    assert st.code == Code.Skip and time.monotonic() - t0 < 1.5


@pytest.mark.parametrize("status,body,fragment", [
    (400, b'{"status":"error","errorType":"bad_data","error":"parse error"}', "HTTP 400"),
    (503, b"oops", "HTTP 503"),
    (200, b"not json", "not JSON"),
    (200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "expected a vector"),
])
def test_bad_answers_skip(cls, stub, status, body, fragment):
    srv = stub(lambda q: (status, body, 0))
    p = cls(args(cls, prometheusAddress=srv.url), None)
    st = p.pre_score(CycleState(), parsed_pod("x"), NodeList(_handle().snapshot))
    assert st.code == Code.Skip and fragment in st.message


def test_empty_result_skips(cls, stub):
    srv = stub(lambda q: (200, vector({}), 0))
    p = cls(args(cls, prometheusAddress=srv.url), None)
    st = p.pre_score(CycleState(), parsed_pod("x"), NodeList(_handle().snapshot))
    assert st.code == Code.Skip and "no network traffic series" in st.message


def test_score_without_prescore_uses_the_same_single_query(cls, stub):
    srv = stub(lambda q: (200, vector({"node2": 7}), 0))
    p = cls(args(cls, prometheusAddress=srv.url), None)
    h = _handle()
    state = CycleState()
    assert [p.score(state, parsed_pod("x"), ni) for ni in h.snapshot] == [0, 7, 0]
    assert len(srv.queries) == 1


# --------------------------------------------------------------------------- the real scheduler


def _schedule(cls, url: str, names=("node1", "node2", "node3")):
    mc = MemoryCluster()
    for n in names:
        mc.create(node(n))
    mc.create(pod("web"))
    plan = {"preScore": [("NetworkTraffic", 0)], "score": [("NetworkTraffic", 1)], "bind": [("TestBinder", 0)]}
    cfg = scheduler_config(plan, {"NetworkTraffic": args(cls, prometheusAddress=url)})
    sched = Scheduler(mc, cfg, registry_with(cls, TestBinder), seed=3)
    sched.start()
    sched.run(until_idle=True)
    return mc, sched


def test_scheduler_prefers_quietest_node(cls, stub):
    srv = stub(lambda q: (200, vector({"node1": 900, "node2": 100, "node3": 500}), 0))
    mc, sched = _schedule(cls, srv.url)
    assert mc.bindings == [("default/web", "node2")]
    scores = sched.results.get("default/web").scores
    assert {s["node"]: s["plugins"]["NetworkTraffic"]["normalized"] for s in scores} == \
        {"node1": 0, "node2": 89, "node3": 45}


def test_scheduler_still_schedules_when_prometheus_is_down(cls):
    mc, _ = _schedule(cls, f"http://127.0.0.1:{free_port()}")
    assert len(mc.bindings) == 1


def test_example_config_with_the_default_profile(cls, stub, tmp_path):
    from .conftest import REPO, example_config

    srv = stub(lambda q: (200, vector({"node-a1": 9e9, "node-a2": 9e9, "node-b1": 9e9, "node-b2": 9e9,
                                      "node-c1": 1e3}), 0))
    cfg, reg = example_config("network-traffic.yaml", tmp_path, {"NetworkTraffic": {"prometheusAddress": srv.url}})
    mc = MemoryCluster.from_paths([REPO / "examples" / "cluster" / "nodes.yaml"])
    mc.create(pod("web", requests={"cpu": "100m", "memory": "64Mi"}))
    sched = Scheduler(mc, cfg, reg, seed=1)
    sched.start()
    sched.run(until_idle=True)
    assert mc.bindings == [("default/web", "node-c1")]  # the quiet node; the tainted GPU node is filtered out
    top = sched.results.get("default/web").scores[0]
    assert top["plugins"]["NetworkTraffic"] == {"raw": 1000, "normalized": 100, "weight": 2, "weighted": 200}
    assert len(srv.queries) == 1


def test_dns_lookup_that_never_answers_is_bounded(cls, mod):
    """Offline (or a cluster-only name outside the cluster) the system resolver can wait far past urlopen's
    timeout: the lookup is bounded by queryTimeoutSeconds and the message says what happened."""
    release = threading.Event()
    calls = []

    def unanswered(host, port, *rest):  # a DNS server that never replies: the call blocks
        calls.append(host)
        release.wait(60)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    p = cls(args(cls, prometheusAddress="http://prometheus-server.monitoring.svc:9090", cacheSeconds=0,
                 queryTimeoutSeconds=0.3), None)
    p.client = mod.PrometheusClient(p.args.prometheus_address, 0.3, resolve=unanswered)
    try:
        t0 = time.monotonic()
        with pytest.raises(mod.PrometheusError, match=r"cannot resolve prometheus-server\.monitoring\.svc within "
                                                      r"0\.3 s: no answer from DNS"):
            p.client.instant_query("up")
        assert time.monotonic() - t0 < 10  # generous: the point is that it returns, not hangs
        with pytest.raises(mod.PrometheusError, match="previous DNS lookup is still unanswered"):
            p.client.instant_query("up")
        assert calls == ["prometheus-server.monitoring.svc"], "a stuck lookup is not started again"
    finally:
        release.set()


def test_a_name_that_does_not_resolve_says_so(cls, mod):
    client = mod.PrometheusClient("http://no-such-prometheus.invalid:9090", 5.0)  # RFC 6761: never resolves
    with pytest.raises(mod.PrometheusError, match=r"cannot resolve no-such-prometheus\.invalid: "):
        client.instant_query("up")

"""kube-scheduler flags that reach behaviour: each test sets a flag and checks what it changes (the walker in
test_flag_and_field_coverage.py points at these by name)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ksched_cli import kube_scheduler
from scheduler_runtime.app import Runner, RunOptions
from scheduler_runtime.config import load_config
from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.options.flags import flagz, parse
from scheduler_runtime.options.resolve import JsonLogFormatter, leader_overrides, run_on_cluster
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.server.endpoints import Endpoints
from scheduler_runtime.server.serving import SecureServer, ServingOptions
from scheduler_runtime.testing.kube import DUMMY_KUBECONFIG


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    p = tmp_path / "kubeconfig"
    p.write_text(DUMMY_KUBECONFIG)
    return str(p)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """run_on_cluster up to the Runner: what it would run with."""
    import scheduler_runtime.app as app

    got: dict[str, Any] = {}

    class Capture:
        def __init__(self, cfg: Any, registry: Any, opts: RunOptions) -> None:
            got.update(cfg=cfg, opts=opts)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(app, "Runner", Capture)
    return got


def _run(flags: list[str], captured: dict[str, Any]) -> tuple[Any, RunOptions]:
    assert run_on_cluster(parse(flags), lambda w: None) == 0
    return captured["cfg"], captured["opts"]


def _runner(opts: RunOptions, raw: dict[str, Any] | None = None) -> Runner:
    reg = build_registry([])
    cfg = load_config(None, reg)
    cfg.raw.update(raw or {})
    return Runner(cfg, reg, opts)


def test_profiling_flags_configure_profiling_without_config(kubeconfig: str, captured: dict[str, Any],
                                                            tmp_path: Path) -> None:
    cfg, _ = _run([f"--kubeconfig={kubeconfig}", "--profiling=false"], captured)
    assert cfg.raw["enableProfiling"] is False
    cfg, _ = _run([f"--kubeconfig={kubeconfig}", "--contention-profiling=false"], captured)
    assert (cfg.raw["enableProfiling"], cfg.raw["enableContentionProfiling"]) == (True, False)
    conf = tmp_path / "c.yaml"  # with --config the file decides, as in kube-scheduler
    conf.write_text(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"clientConnection: {{kubeconfig: {kubeconfig}}}\nenableProfiling: true\n")
    cfg, _ = _run([f"--config={conf}", "--profiling=false"], captured)
    assert cfg.raw["enableProfiling"] is True


def test_enable_profiling_decides_whether_debug_pprof_is_served(kubeconfig: str) -> None:
    for raw, served, contention in (({"enableProfiling": True, "enableContentionProfiling": False}, True, False),
                                    ({"enableProfiling": False}, False, None)):
        r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0), raw)
        try:
            holder = type("S", (), {"endpoints": Endpoints()})()
            r._install_endpoints(holder)  # type: ignore[arg-type]
            assert (holder.endpoints.profiling is not None) == served
            if served:
                assert holder.endpoints.profiling.contention is contention
        finally:
            r.cluster.stop()


def test_feature_gates_switch_flagz_and_statusz(kubeconfig: str) -> None:
    gates = parse_feature_gates(["ComponentFlagz=false,ComponentStatusz=true"])
    r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0, feature_gates=gates))
    try:
        holder = type("S", (), {"endpoints": Endpoints()})()
        r._install_endpoints(holder)  # type: ignore[arg-type]
        assert holder.endpoints.zpages.flagz_enabled is False
        assert holder.endpoints.zpages.statusz_enabled is True
        assert holder.endpoints.zpages.emulation_version == "1.37"
    finally:
        r.cluster.stop()
    # /statusz names the emulated minor
    r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0, feature_gates=parse_feature_gates([], "1.36")))
    try:
        holder = type("S", (), {"endpoints": Endpoints()})()
        r._install_endpoints(holder)  # type: ignore[arg-type]
        assert holder.endpoints.zpages.emulation_version == "1.36"
        assert holder.endpoints.zpages.binary_version.startswith("1.37.2-ksched.")
    finally:
        r.cluster.stop()
    assert parse_feature_gates(["kube:ComponentFlagz=false"])["ComponentFlagz"] is False
    with pytest.raises(UsageError, match="unrecognized feature gate: Nope"):
        parse_feature_gates(["Nope=true"])
    with pytest.raises(UsageError, match="SchedulerPopFromBackoffQ=false is not supported by ksched"):
        parse_feature_gates(["SchedulerPopFromBackoffQ=false"])
    assert parse_feature_gates(["SchedulerAsyncPreemption=false"])["SchedulerAsyncPreemption"] is False  # honoured
    assert parse_feature_gates(["OpportunisticBatching=false"])["OpportunisticBatching"] is False  # honoured
    with pytest.raises(UsageError, match="do not mix use"):
        parse_feature_gates(["kube:ComponentFlagz=false,ComponentStatusz=false"])
    with pytest.raises(UsageError, match='strconv.ParseBool: parsing "maybe"'):
        parse_feature_gates(["ComponentFlagz=maybe"])


def test_flagz_lists_every_flag_with_its_value(kubeconfig: str, captured: dict[str, Any]) -> None:
    _, opts = _run([f"--kubeconfig={kubeconfig}", "--v=3", "--authorization-always-allow-paths=/a,/b"], captured)
    assert opts.flagz["v"] == "3" and opts.flagz["kubeconfig"] == kubeconfig
    assert opts.flagz["authorization-always-allow-paths"] == "[/a,/b]"
    assert opts.flagz["leader-elect-lease-duration"] == "15s" and opts.flagz["results"] == "ksched"
    assert flagz(parse([]))["tls-cipher-suites"] == "[]"


def test_master_overrides_the_kubeconfig_server(kubeconfig: str, captured: dict[str, Any]) -> None:
    _, opts = _run([f"--kubeconfig={kubeconfig}", "--master=https://10.0.0.9:6443"], captured)
    r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0, master=opts.master))
    try:
        assert r.cluster.connection.host == "https://10.0.0.9:6443"
    finally:
        r.cluster.stop()


def test_pod_max_in_unschedulable_pods_duration_reaches_the_queue(kubeconfig: str, captured: dict[str, Any]) -> None:
    _, opts = _run([f"--kubeconfig={kubeconfig}", "--pod-max-in-unschedulable-pods-duration=90s"], captured)
    assert opts.pod_max_in_unschedulable == 90.0
    r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0, pod_max_in_unschedulable=90.0))
    try:
        assert r.scheduler.queue.max_in_unschedulable == 90.0
    finally:
        r.cluster.stop()


def test_kube_api_qps_and_burst_without_config(kubeconfig: str, captured: dict[str, Any]) -> None:
    _, opts = _run([f"--kubeconfig={kubeconfig}", "--kube-api-qps=7", "--kube-api-burst=9"], captured)
    assert (opts.qps, opts.burst) == (7.0, 9)
    r = _runner(dataclasses.replace(opts, secure_port=0))  # never the default 10259 a real scheduler may hold
    try:
        assert (r.cluster.client.limiter.qps, r.cluster.client.limiter.burst) == (7.0, 9)
    finally:
        r.cluster.stop()


def test_disabled_metrics_reach_the_endpoints(kubeconfig: str, captured: dict[str, Any]) -> None:
    _, opts = _run([f"--kubeconfig={kubeconfig}", "--disabled-metrics=scheduler_pending_pods"], captured)
    r = _runner(RunOptions(kubeconfig=kubeconfig, secure_port=0, disabled_metrics=opts.disabled_metrics))
    try:
        holder = type("S", (), {"endpoints": Endpoints()})()
        r._install_endpoints(holder)  # type: ignore[arg-type]
        assert holder.endpoints.disabled_metrics == {"scheduler_pending_pods"}
    finally:
        r.cluster.stop()


def test_leader_election_flags_override_the_file() -> None:
    got = leader_overrides(parse(["--leader-elect=false", "--leader-elect-lease-duration=30s",
                                  "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=3s",
                                  "--leader-elect-resource-name=x", "--leader-elect-resource-namespace=y",
                                  "--leader-elect-resource-lock=leases"]))
    assert got == {"leader_elect": False, "lease_duration": 30.0, "renew_deadline": 20.0, "retry_period": 3.0,
                   "resource_name": "x", "resource_namespace": "y", "resource_lock": "leases"}
    with pytest.raises(UsageError, match='must be "leases"'):
        leader_overrides(parse(["--leader-elect-resource-lock=endpoints"]))


def test_port_sharing_flags() -> None:
    """--permit-port-sharing: a second listener on the same port works (SO_REUSEPORT); --permit-address-sharing:
    SO_REUSEADDR, which ksched's listener (like Go's) always sets."""
    a = SecureServer(ServingOptions(bind_address="127.0.0.1", port=0, reuse_port=True), lambda r: None)  # type: ignore
    try:
        assert a._sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        b = SecureServer(ServingOptions(bind_address="127.0.0.1", port=a.port, reuse_port=True), lambda r: None)  # type: ignore
        b.stop()
    finally:
        a.stop()


def test_http2_flags_hold_because_only_http11_is_served() -> None:
    """--disable-http2-serving and --http2-max-streams-per-connection: ksched negotiates http/1.1 only."""
    srv = SecureServer(ServingOptions(bind_address="127.0.0.1", port=0), lambda r: None).start()  # type: ignore
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.selected_alpn_protocol() == "http/1.1"
    finally:
        srv.stop()
    parse(["--disable-http2-serving", "--http2-max-streams-per-connection=100"])
    with pytest.raises(UsageError, match="http2-max-streams-per-connection"):
        parse(["--http2-max-streams-per-connection=x"])


def test_logging_flags() -> None:
    """-v sets the level, --logging-format=json writes kube's JSON lines, --log-flush-frequency is met by
    flushing every line (checked by reading the stream right after one record)."""
    code = ("from scheduler_runtime.options.resolve import setup_logging; import logging, sys; "
            "setup_logging(int(sys.argv[1]), sys.argv[2]); logging.getLogger('ksched.x').info('hello'); "
            "print(logging.getLogger().level)")
    out = subprocess.run([sys.executable, "-c", code, "4", "text"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(logging.DEBUG) and "hello" in out.stderr
    out = subprocess.run([sys.executable, "-c", code, "0", "json"], capture_output=True, text=True, timeout=60)
    line = json.loads(out.stderr.strip().splitlines()[-1])
    assert line["msg"] == "hello" and line["v"] == 0 and "ts" in line and "caller" in line
    stream = io.StringIO()
    h = logging.StreamHandler(stream)
    h.setFormatter(JsonLogFormatter())
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    h.emit(rec)
    assert json.loads(stream.getvalue())["msg"] == "boom"
    parse(["--log-flush-frequency=1s", "--logging-format=text"])
    with pytest.raises(UsageError, match='Unsupported log format "xml"'):
        parse(["--logging-format=xml"])
    with pytest.raises(UsageError, match="log-flush-frequency"):
        parse(["--log-flush-frequency=soon"])


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert kube_scheduler.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("Kubernetes v1.37.2-ksched.")
    assert kube_scheduler.main(["--version=raw"]) == 0
    assert capsys.readouterr().out.startswith('version.Info{Major:"1", Minor:"37.2"')
    assert kube_scheduler.main(["--version=v9.9.9"]) == 2
    assert kube_scheduler.main(["--help"]) == 0
    assert "Usage: kube-scheduler [flags]" in capsys.readouterr().out


def test_emulated_and_compatibility_versions_accept_what_ksched_carries() -> None:
    parse(["--emulated-version=1.36", "--min-compatibility-version=kube=1.35"])
    parse(["--emulated-version=kube=1.35"])
    parse(["--emulated-version=1.37", "--min-compatibility-version=1.37"])
    with pytest.raises(UsageError, match="carries the rules of kube 1.35, 1.36, 1.37 only"):
        parse(["--emulated-version=1.34"])  # kube-scheduler 1.37 takes it; ksched has no 1.34 rules
    with pytest.raises(UsageError, match=r"emulation version 1.38 is not between \[1.34, 1.37.0\]"):
        parse(["--emulated-version=1.38"])
    with pytest.raises(UsageError, match=r"minCompatibilityVersion version 1.36 is not between \[1.34, 1.35\]"):
        parse(["--emulated-version=1.35", "--min-compatibility-version=1.36"])


class _FakeAuthnClient:
    """Stands in for the authentication kubeconfig's client: counts ConfigMap reads, can fail them."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.reads = 0

    def call(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        from scheduler_runtime.cluster.kube import ApiError

        self.reads += 1
        if self.fail:
            raise ApiError("forbidden", status=403)
        return {"data": {}}

    def close(self) -> None:
        pass


def test_authentication_lookup_flags() -> None:
    """--authentication-skip-lookup: the extension-apiserver-authentication ConfigMap is not read;
    --authentication-tolerate-lookup-failure=false: a failed read stops start-up, true only logs."""
    from scheduler_runtime.server.auth import AuthConfigError, DelegatedAuthOptions, DelegatingAuth

    def start(**kw: Any) -> _FakeAuthnClient:
        client = _FakeAuthnClient(kw.pop("fail", False))
        auth = DelegatingAuth(DelegatedAuthOptions(**kw), authn_client=client, authz_client=client)
        auth.stop()
        return client

    assert start(skip_lookup=True).reads == 0
    assert start(skip_lookup=False).reads == 1
    assert start(fail=True, tolerate_lookup_failure=True).reads == 1
    with pytest.raises(AuthConfigError, match="authentication-tolerate-lookup-failure=false"):
        start(fail=True, tolerate_lookup_failure=False)


def test_always_allow_paths_flag(kubeconfig: str) -> None:
    """--authorization-always-allow-paths replaces the default list: a listed prefix answers anonymously,
    /healthz (no longer listed) does not."""
    from scheduler_runtime.options.resolve import auth_options
    from scheduler_runtime.server import DelegatedAuthOptions, HealthServer, ServingOptions

    opts = auth_options(parse(["--authorization-always-allow-paths=/livez*"]))
    assert opts.always_allow_paths == ["/livez*"]
    hs = HealthServer(ServingOptions(bind_address="127.0.0.1", port=0), None,
                      DelegatedAuthOptions(always_allow_paths=opts.always_allow_paths, skip_lookup=True)).start()
    try:
        hs.live_checks = {"ping": lambda: None}
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        import urllib.error
        import urllib.request

        def status(path: str) -> int:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{hs.port}{path}", context=ctx, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert status("/livez/ping") == 200 and status("/healthz") == 403
    finally:
        hs.stop()


def test_flags_fill_the_effective_configuration(kubeconfig: str, captured: dict[str, Any], tmp_path: Path) -> None:
    """/configz and --write-config-to show what kube-scheduler builds: the deprecated flags without --config,
    explicit leader-election flags over the file."""
    cfg, _ = _run([f"--kubeconfig={kubeconfig}", "--kube-api-qps=7", "--leader-elect-lease-duration=1m30s"], captured)
    assert cfg.raw["clientConnection"]["kubeconfig"] == kubeconfig and cfg.raw["clientConnection"]["qps"] == 7
    assert cfg.raw["leaderElection"]["leaseDuration"] == "1m30s"
    conf = tmp_path / "c.yaml"
    conf.write_text(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"clientConnection: {{kubeconfig: {kubeconfig}, qps: 20}}\n")
    cfg, _ = _run([f"--config={conf}", "--kube-api-qps=7", "--leader-elect=false"], captured)
    assert cfg.raw["clientConnection"]["qps"] == 20 and cfg.raw["leaderElection"]["leaderElect"] is False

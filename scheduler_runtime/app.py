"""Running against a real API server: backend, leader election, secure port, metrics, graceful stop.

This is what `ksched run --kubeconfig` and the image's `kube-scheduler` command execute; it stays in the
runtime so a container needs no CLI to schedule.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import gcpolicy
from .errors import KschedError
from .framework.registry import Registry
from .kubeversion import KUBE_VERSION  # the kube-scheduler release ksched follows (/statusz, --version)
from .metrics import SchedulerMetrics
from .results import ResultStore
from .scheduler import Scheduler
from .server import DelegatedAuthOptions, HealthServer, ServingOptions
from .watchdog import CycleWatchdog

log = logging.getLogger("ksched.app")


@dataclass
class RunOptions:
    #: the kubeconfig to read, None for the in-cluster account (never $KUBECONFIG: see kubeconfig_source.py)
    kubeconfig: str | None = None
    #: kube-scheduler's --master: overrides the kubeconfig's server
    master: str | None = None
    #: ksched's --context: the kubeconfig context to use instead of its current-context
    context: str | None = None
    bind_address: str = "0.0.0.0"
    secure_port: int = 10259
    cert_dir: str | None = None
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    tls_min_version: str | None = None
    tls_cipher_suites: list[str] = field(default_factory=list)
    #: delegated authentication/authorization on the secure port (kube-scheduler's defaults)
    auth: DelegatedAuthOptions = field(default_factory=DelegatedAuthOptions)
    results: str = "ksched"  # ksched | simulator | off
    bind_workers: int = 48
    seed: int | None = None
    #: set by explicit flags: override the config file's leaderElection (kube-scheduler precedence)
    leader_overrides: dict[str, Any] = field(default_factory=dict)
    qps: float | None = None
    burst: int | None = None
    hang_deadline: float = 30.0
    #: every command-line flag with its effective value, for /flagz
    flagz: dict[str, str] = field(default_factory=dict)
    #: effective feature gates (featuregates.parse_feature_gates); only the z-page gates change serving here
    feature_gates: dict[str, bool] = field(default_factory=dict)
    #: --permit-port-sharing: SO_REUSEPORT on the secure port
    permit_port_sharing: bool = False
    #: --pod-max-in-unschedulable-pods-duration (seconds)
    pod_max_in_unschedulable: float = 300.0
    #: --disabled-metrics
    disabled_metrics: set[str] = field(default_factory=set)
    #: keep each pod's last attempt in `Runner.scheduler.results`, for code that embeds the Runner and reads
    #: them (tests); off when serving a cluster, where the result is on the pod (annotation) and the store
    #: would hold every pod ever seen, deleted ones included, for the life of the process
    keep_results: bool = False


class Runner:
    """Owns the pieces of a running scheduler; `stop()` drains bindings before returning."""

    def __init__(self, config: Any, registry: Registry, opts: RunOptions) -> None:
        from .cluster.kube import KubeCluster, load_connection
        from .leaderelection import LeaderElector

        self.config = config
        self.opts = opts
        cc = config.client_connection
        qps = opts.qps if opts.qps is not None else cc.qps
        burst = opts.burst if opts.burst is not None else cc.burst
        connection = load_connection(opts.kubeconfig, opts.context, fallbacks=False, master=opts.master)
        self.cluster = KubeCluster(connection=connection, qps=qps, burst=burst, bind_workers=opts.bind_workers,
                                   user_agent=f"ksched/{socket.gethostname()}")
        self.metrics = SchedulerMetrics(
            dra_binding_conditions=(opts.feature_gates or {}).get("DRADeviceBindingConditions", True))
        self.watchdog = CycleWatchdog(opts.hang_deadline)
        self.scheduler = Scheduler(self.cluster, config, registry, seed=opts.seed, bind_async=True,
                                   bind_workers=opts.bind_workers, metrics=self.metrics, results_mode=opts.results,
                                   results=ResultStore(retain=opts.keep_results),
                                   watchdog=self.watchdog, bind_deadline=opts.hang_deadline,
                                   feature_gates=opts.feature_gates)
        self.scheduler.queue.max_in_unschedulable = opts.pod_max_in_unschedulable
        gcpolicy.tune()
        le = config.leader_election
        for k, v in opts.leader_overrides.items():
            setattr(le, k, v)
        self.leader_election = le
        self.elector = None
        if le.leader_elect:
            self.elector = LeaderElector(
                self.cluster, name=le.resource_name, namespace=le.resource_namespace,
                lease_duration=le.lease_duration, renew_deadline=le.renew_deadline, retry_period=le.retry_period,
                on_started_leading=self._start_scheduling, on_stopped_leading=self._lost_lease)
            # every write of a scheduling cycle (binding, PreBind patches, status, results, preemption) is
            # checked against the lease right before it is sent: binds queued when the lease is lost are dropped
            self.cluster.leader_gate = self._may_lead
        serving = ServingOptions(bind_address=opts.bind_address, port=opts.secure_port,
                                 cert_file=opts.tls_cert_file, key_file=opts.tls_private_key_file,
                                 cert_dir=opts.cert_dir, min_version=opts.tls_min_version,
                                 cipher_suites=list(opts.tls_cipher_suites),
                                 reuse_port=opts.permit_port_sharing)
        # --secure-port=0 turns serving off, as in kube-scheduler
        self.server = HealthServer(serving, self.metrics.registry, opts.auth) if opts.secure_port else None
        if self.server is not None:
            self._install_endpoints(self.server)
        self._stop = threading.Event()
        self._leading = threading.Event()  # set while this replica may schedule
        self._sched_thread: threading.Thread | None = None
        self._booted = threading.Event()  # informers synced, events flowing into the cache and queue
        self._boot_error: str | None = None
        self._started = False
        self._lost = False
        self._terminating = False
        #: delayCacheUntilActive with leader election: list and watch only once this replica leads, as kube does
        self._delay_cache = bool((getattr(config, "raw", None) or {}).get("delayCacheUntilActive")) \
            and self.elector is not None

    def _install_endpoints(self, server: HealthServer) -> None:
        """kube-scheduler's other secure-port paths: /metrics/resources, /metrics/slis, the z-pages, and
        /debug/pprof when the configuration's enableProfiling is on (`--profiling` without `--config`)."""
        from . import __version__
        from .server.profiling import Profiling
        from .server.resource_metrics import HealthSLIs, resources_registry
        from .server.zpages import ZPages

        ep = server.endpoints
        ep.resources = resources_registry(lambda: self.cluster.list("pods"))
        ep.slis = HealthSLIs()
        ep.disabled_metrics = set(self.opts.disabled_metrics)
        gates = self.opts.feature_gates
        raw = getattr(self.config, "raw", None) or {}
        ep.zpages = ZPages(raw, self.opts.flagz, f"{KUBE_VERSION}-ksched.{__version__}",
                           getattr(gates, "emulated", KUBE_VERSION.rsplit(".", 1)[0]),
                           flagz=gates.get("ComponentFlagz", True),
                           statusz=gates.get("ComponentStatusz", True))
        if raw.get("enableProfiling", True):
            ep.profiling = Profiling(bool(raw.get("enableContentionProfiling", True)))

    # ------------------------------------------------------------------ health
    def _ready(self) -> str | None:
        if not self._booted.is_set():
            return self._boot_error or "waiting for the initial list of every informer"
        h = getattr(self.cluster, "health", None)
        if callable(h):
            ok, reason = h()
            if not ok:
                return reason
        return None

    def _may_lead(self) -> bool:
        """Still the leader, by the elector's own clock (False on time even if its thread is stuck)."""
        return self._leading.is_set() and self.elector is not None and self.elector.is_leader

    def _leader_ok(self) -> str | None:
        if self._lost:
            return "lost the leader lease"
        return None

    # ------------------------------------------------------------------ lifecycle
    def _boot(self) -> None:
        """Reach the API server and sync the informers, retrying with backoff as kube-scheduler's informers
        do: a scheduler started before its API server (a static pod at control-plane boot), with a
        certificate or RBAC not in place yet, recovers by itself and says why in /readyz meanwhile."""
        from .cluster.kube import ApiError

        delay = 1.0
        self._boot_error = "connecting to the API server"
        while not self._stop.is_set():
            try:
                self.cluster.preflight()
                break
            except ApiError as exc:
                self._boot_error = str(exc)
                log.error("%s; retrying in %.0fs", exc, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 30.0)
        else:
            return
        self._boot_error = None
        log.info("waiting for the informers' initial lists")
        try:
            self.scheduler.start(timeout=None)
        except ApiError:
            if self._stop.is_set():
                return  # stopped while listing
            raise
        gcpolicy.freeze_synced_state()
        self._booted.set()
        log.info("caches synced")
        self._loop()

    def _start_scheduling(self) -> None:
        if self._started:
            return
        self._started = True
        log.info("starting to schedule pods")
        self._leading.set()
        if self._delay_cache and self._sched_thread is not None and not self._sched_thread.is_alive():
            log.info("delayCacheUntilActive: filling the informer caches now that this replica leads")
            self._sched_thread.start()

    def _loop(self) -> None:
        try:
            self.scheduler.run(until_idle=False, stop=self._stop, active=self._leading)
        except Exception:  # the loop must never die silently
            log.exception("scheduling loop failed")
            self._stop.set()

    def _lost_lease(self) -> None:
        self._leading.clear()
        if self._terminating:
            return  # releasing the lease on the way out is not a loss
        log.error("leaderelection lost: stopping scheduling")
        self._lost = True
        self._stop.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if not self._terminating:
            log.info("Requested to terminate, exiting (%s)", signal.Signals(signum).name)
        self._terminating = True
        self._stop.set()

    def run(self) -> int:
        gcpolicy.release(freeze=True)  # setup is over: its objects are long-lived (run_on_cluster held the GC)
        if self.server is not None:
            self.server.checks = {"ping": lambda: None, "informer-sync": self._ready,
                                  "leaderElection": self._leader_ok, "plugin-cycles": self.watchdog.readyz}
            self.server.live_checks = {"ping": lambda: None, "leaderElection": self._leader_ok}
            self.server.start()
            log.info("serving securely on %s:%d", self.opts.bind_address, self.server.port)
        prev = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                prev[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not on the main thread (tests)
                pass
        self.watchdog.start()
        try:
            self._sched_thread = threading.Thread(target=self._boot, name="scheduler", daemon=True)
            if not self._delay_cache:
                self._sched_thread.start()
            if self.elector is not None:
                self.elector.start()  # a standby keeps its informers and queue warm, as kube-scheduler does
            else:
                self._start_scheduling()
            while not self._stop.wait(0.5):
                pass
        finally:
            self.shutdown()
            for sig, handler in prev.items():
                signal.signal(sig, handler)
        return 1 if self._lost else 0

    def stop(self) -> None:
        self._terminating = True
        self._stop.set()

    def shutdown(self) -> None:
        if not self._lost:
            self._terminating = True
        self._stop.set()
        self.watchdog.stop()
        self.scheduler.queue.close()
        if self._sched_thread is not None and self._sched_thread.is_alive():
            self._sched_thread.join(timeout=60)  # run() drains binding workers before returning
        if self.elector is not None:
            self.elector.stop(release=not self._lost)
        self.cluster.stop()
        if self.server is not None:
            self.server.stop()


def wait_for_file(path: str, timeout: float = 0.0) -> None:
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() >= deadline:
            raise KschedError(f"{path}: no such file", usage=True)
        time.sleep(0.2)

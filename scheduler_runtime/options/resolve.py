"""kube-scheduler's flags -> config + RunOptions -> Runner, as cmd/kube-scheduler/app/options does upstream.

Shared by `ksched run --kubeconfig ...` and the image's `kube-scheduler` command; it lives in the runtime so
both reach it without the runtime ever importing the CLI."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from ..verbosity import klog_v, threshold
from .flags import KubeFlags, flagz, parse_go_duration

_LEADER_FLAGS = {
    "leader-elect": ("leader_elect", "bool"),
    "leader-elect-lease-duration": ("lease_duration", "duration"),
    "leader-elect-renew-deadline": ("renew_deadline", "duration"),
    "leader-elect-retry-period": ("retry_period", "duration"),
    "leader-elect-resource-lock": ("resource_lock", "str"),
    "leader-elect-resource-name": ("resource_name", "str"),
    "leader-elect-resource-namespace": ("resource_namespace", "str"),
}


def leader_overrides(flags: KubeFlags) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for flag, (attr, kind) in _LEADER_FLAGS.items():
        if flag not in flags.explicit:
            continue
        if kind == "bool":
            out[attr] = flags.bool(flag, True)
        elif kind == "duration":
            out[attr] = parse_go_duration(flags.get(flag), flag)
        else:
            out[attr] = flags.get(flag)
    if out.get("resource_lock", "leases") != "leases":
        raise UsageError('--leader-elect-resource-lock: resourceLock value must be "leases", '
                          f'got {out["resource_lock"]!r}')
    return out


def auth_options(flags: KubeFlags) -> Any:
    """--authentication-*, --authorization-*, --client-ca-file and --requestheader-* -> DelegatedAuthOptions."""
    from ..server import DelegatedAuthOptions
    from ..server.auth import PathAuthorizer

    d = DelegatedAuthOptions()
    ttl = {}
    for flag, default in (("authentication-token-webhook-cache-ttl", d.token_cache_ttl),
                          ("authorization-webhook-cache-authorized-ttl", d.authorized_ttl),
                          ("authorization-webhook-cache-unauthorized-ttl", d.unauthorized_ttl)):
        ttl[flag] = parse_go_duration(flags.get(flag), flag) if flags.get(flag) is not None else default
    opts = DelegatedAuthOptions(
        authentication_kubeconfig=flags.get("authentication-kubeconfig") or None,
        authorization_kubeconfig=flags.get("authorization-kubeconfig") or None,
        client_ca_file=flags.get("client-ca-file") or None,
        requestheader_client_ca_file=flags.get("requestheader-client-ca-file") or None,
        requestheader_allowed_names=flags.list("requestheader-allowed-names", d.requestheader_allowed_names),
        requestheader_username_headers=flags.list("requestheader-username-headers",
                                                  d.requestheader_username_headers),
        requestheader_group_headers=flags.list("requestheader-group-headers", d.requestheader_group_headers),
        requestheader_extra_headers_prefix=flags.list("requestheader-extra-headers-prefix",
                                                      d.requestheader_extra_headers_prefix),
        requestheader_uid_headers=flags.list("requestheader-uid-headers", d.requestheader_uid_headers),
        skip_lookup=flags.bool("authentication-skip-lookup", False),
        tolerate_lookup_failure=flags.bool("authentication-tolerate-lookup-failure", True),
        token_cache_ttl=ttl["authentication-token-webhook-cache-ttl"],
        authorized_ttl=ttl["authorization-webhook-cache-authorized-ttl"],
        unauthorized_ttl=ttl["authorization-webhook-cache-unauthorized-ttl"],
        always_allow_paths=flags.list("authorization-always-allow-paths", d.always_allow_paths),
    )
    PathAuthorizer(opts.always_allow_paths)  # a bad pattern is a usage error before anything starts
    if opts.requestheader_client_ca_file and not opts.requestheader_username_headers:
        raise UsageError("--requestheader-username-headers: required with --requestheader-client-ca-file")
    return opts


_LEADER_KEYS = {"leader-elect": "leaderElect", "leader-elect-lease-duration": "leaseDuration",
                "leader-elect-renew-deadline": "renewDeadline", "leader-elect-retry-period": "retryPeriod",
                "leader-elect-resource-lock": "resourceLock", "leader-elect-resource-name": "resourceName",
                "leader-elect-resource-namespace": "resourceNamespace"}


def _flags_into_raw(raw: dict[str, Any], flags: KubeFlags, has_config: bool) -> None:
    """The effective configuration (/configz, --write-config-to) as kube-scheduler builds it: without --config
    the deprecated flags fill it; explicitly set leader-election flags override the file either way."""
    from scheduler_runtime.config.loader import format_duration

    if not has_config:
        raw["enableProfiling"] = flags.bool("profiling", True)
        raw["enableContentionProfiling"] = flags.bool("contention-profiling", True)
        cc = raw.setdefault("clientConnection", {})
        cc["kubeconfig"] = flags.get("kubeconfig") or ""
        if flags.get("kube-api-qps"):
            qps = float(flags.get("kube-api-qps"))
            cc["qps"] = int(qps) if qps.is_integer() else qps
        if flags.get("kube-api-burst"):
            cc["burst"] = flags.int("kube-api-burst", 100)
    le = raw.setdefault("leaderElection", {})
    for flag, key in _LEADER_KEYS.items():
        if flag in flags.explicit:
            if flag == "leader-elect":
                le[key] = flags.bool(flag, True)
            elif key.endswith(("Duration", "Deadline", "Period")):
                le[key] = format_duration(parse_go_duration(flags.get(flag), flag))
            else:
                le[key] = flags.get(flag)


def setup_logging(verbosity: int, fmt: str = "text") -> None:
    """-v and --logging-format: text (klog-like) or json (one object a line: ts in ms, caller, msg, v, err)."""
    level = threshold(verbosity)
    if fmt == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonLogFormatter())
        logging.basicConfig(level=level, handlers=[handler])
        return
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s] %(message)s")


class JsonLogFormatter(logging.Formatter):
    """kube's JSON log line: `{"ts": <unix ms>, "caller": "file:line", "msg": ..., "v": 0}`, errors with `err`."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        out: dict[str, Any] = {"ts": record.created * 1000.0,
                               "caller": f"{record.module}.py:{record.lineno}", "msg": record.getMessage()}
        if record.levelno >= logging.ERROR:
            if record.exc_info:
                out["err"] = self.formatException(record.exc_info)
        else:
            out["v"] = klog_v(record.levelno)
        return json.dumps(out)


def run_on_cluster(flags: KubeFlags, warn: Callable[[str], None]) -> int:
    """kube-scheduler's precedence: with --config, --kubeconfig/--kube-api-* are ignored and only explicitly
    set leader-election flags override the file; $KUBECONFIG is never read (scheduler_runtime.kubeconfig_source).
    `warn` receives the plugin loader's warnings (the caller decides where they go)."""
    from .. import gcpolicy

    gcpolicy.hold()  # the runtime's imports and setup run without the collector (gcpolicy's docstring)
    try:
        return _run_on_cluster(flags, warn)
    finally:
        gcpolicy.release(freeze=False)  # Runner.run released it already, unless startup ended early


def _run_on_cluster(flags: KubeFlags, warn: Callable[[str], None]) -> int:
    from ..app import Runner, RunOptions
    from ..cluster.kube import in_cluster
    from ..config import load_config
    from ..kubeconfig_source import choose, require_usable
    from .registry import load_registry

    setup_logging(flags.int("v", 0), flags.get("logging-format", "text"))
    from ..featuregates import parse_feature_gates
    from .flags import emulated_and_min_compat

    emulated, min_compat = emulated_and_min_compat(flags)
    gates = parse_feature_gates([flags.get("feature-gates")] if flags.get("feature-gates") else [], emulated,
                                min_compat)
    config_path = flags.get("config")
    if config_path is not None and not Path(config_path).exists():
        raise InputError("no such file or directory", file=str(config_path), usage=True)
    plugin_dirs = [Path(p) for p in (flags.get("plugin-dir") or "").split(",") if p]
    registry = load_registry(plugin_dirs or None)
    for w in registry.warnings:
        warn(w)
    cfg = load_config(Path(config_path) if config_path else None, registry, feature_gates=gates)
    from ..config.profiles import no_default_profile_warning

    if (no_default := no_default_profile_warning(cfg)) is not None:
        warn(f"{config_path}: {no_default}")
    source = choose(config_file=config_path, config_kubeconfig=cfg.client_connection.kubeconfig,
                    flag_kubeconfig=flags.get("kubeconfig"), master=flags.get("master"),
                    context=flags.get("context") or None)
    if not flags.get("write-config-to"):
        require_usable(source, in_cluster(), config_file=config_path, flag_kubeconfig=flags.get("kubeconfig"))
        logging.getLogger("ksched").info("%s", source.describe())
    opts = RunOptions(
        kubeconfig=source.path,
        context=source.context,
        master=source.master,
        bind_address=flags.get("bind-address", "0.0.0.0"),
        secure_port=flags.int("secure-port", 10259),
        cert_dir=flags.get("cert-dir"),
        tls_cert_file=flags.get("tls-cert-file"),
        tls_private_key_file=flags.get("tls-private-key-file"),
        tls_min_version=flags.get("tls-min-version") or None,
        tls_cipher_suites=flags.list("tls-cipher-suites", []),
        auth=auth_options(flags),
        results=flags.get("results", "ksched"),
        seed=flags.int("seed", 0) if flags.get("seed") is not None else None,
        leader_overrides=leader_overrides(flags),
        qps=None if config_path else (float(flags.get("kube-api-qps")) if flags.get("kube-api-qps") else None),
        burst=None if config_path else (flags.int("kube-api-burst", 100) if flags.get("kube-api-burst") else None),
        hang_deadline=parse_go_duration(flags.get("plugin-deadline", "30s"), "plugin-deadline"),
        flagz=flagz(flags),
        feature_gates=gates,
        disabled_metrics=set(flags.list("disabled-metrics", [])),
        permit_port_sharing=flags.bool("permit-port-sharing", False),
        pod_max_in_unschedulable=parse_go_duration(flags.get("pod-max-in-unschedulable-pods-duration", "5m"),
                                                   "pod-max-in-unschedulable-pods-duration"),
    )
    _flags_into_raw(cfg.raw, flags, bool(config_path))
    if not 0 <= opts.secure_port <= 65535:
        raise UsageError(f"--secure-port: {opts.secure_port} must be between 0 and 65535, inclusive "
                         "(0 disables the secure port)")
    from ..server.serving import tls_settings

    tls_settings(opts.tls_min_version, opts.tls_cipher_suites)  # unknown names: a usage error up front
    if opts.results not in ("ksched", "simulator", "off"):
        raise UsageError(f"--results: unsupported value {opts.results!r} (ksched, simulator or off)")
    if flags.get("write-config-to"):
        from ..atomicfile import write_output
        from ..config.writeout import kube_yaml, written_document

        write_output(flags.get("write-config-to"), kube_yaml(written_document(cfg.raw, cfg.kube_minor)))
        return 0
    runner = Runner(cfg, registry, opts)
    return runner.run()

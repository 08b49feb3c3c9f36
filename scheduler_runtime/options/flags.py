"""kube-scheduler's command-line flags, parsed Go-style, so a kubeadm manifest's `command:` keeps working.

Go's flag package accepts `--flag=value`, `--flag value` and `-flag`; booleans take `--flag` or
`--flag=true|false`. Precedence follows kube-scheduler: with `--config`, `--kubeconfig` and the other
deprecated flags are ignored, and only leader-election flags set explicitly on the command line override
the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

#: every flag kube-scheduler v1.36.3 lists in --help (tests/data/kube-scheduler-1.36.3-help.txt) with the value its
#: /flagz shows by default; docs/deploy.md says what ksched does with each
KUBE_FLAG_DEFAULTS: dict[str, str] = {
    "allow-metric-labels": "[]", "allow-metric-labels-manifest": "", "authentication-kubeconfig": "",
    "authentication-skip-lookup": "false", "authentication-token-webhook-cache-ttl": "10s",
    "authentication-tolerate-lookup-failure": "true", "authorization-always-allow-paths": "[/healthz,/readyz,/livez]",
    "authorization-kubeconfig": "", "authorization-webhook-cache-authorized-ttl": "10s",
    "authorization-webhook-cache-unauthorized-ttl": "10s", "bind-address": "0.0.0.0", "cert-dir": "",
    "client-ca-file": "", "config": "", "contention-profiling": "true", "disable-http2-serving": "false",
    "disabled-metrics": "[]", "emulated-version": "[]", "feature-gates": "", "help": "false",
    "http2-max-streams-per-connection": "0", "kube-api-burst": "100",
    "kube-api-content-type": "application/vnd.kubernetes.protobuf", "kube-api-qps": "50", "kubeconfig": "",
    "leader-elect": "true", "leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s",
    "leader-elect-resource-lock": "leases", "leader-elect-resource-name": "kube-scheduler",
    "leader-elect-resource-namespace": "kube-system", "leader-elect-retry-period": "2s", "log-flush-frequency": "5s",
    "log-json-info-buffer-size": "0", "log-json-split-stream": "false", "log-text-info-buffer-size": "0",
    "log-text-split-stream": "false", "logging-format": "text", "master": "", "min-compatibility-version": "[]",
    "permit-address-sharing": "false", "permit-port-sharing": "false",
    "pod-max-in-unschedulable-pods-duration": "5m0s", "profiling": "true", "requestheader-allowed-names": "[]",
    "requestheader-client-ca-file": "", "requestheader-extra-headers-prefix": "[x-remote-extra-]",
    "requestheader-group-headers": "[x-remote-group]", "requestheader-uid-headers": "[]",
    "requestheader-username-headers": "[x-remote-user]", "secure-port": "10259", "show-hidden-metrics-for-version": "",
    "tls-cert-file": "", "tls-cipher-suites": "[]", "tls-curve-preferences": "[]", "tls-min-version": "",
    "tls-private-key-file": "", "tls-sni-cert-key": "[]", "v": "0", "version": "false", "vmodule": "",
    "write-config-to": "",
}
#: ksched's own flags beside kube-scheduler's
KSCHED_FLAG_DEFAULTS: dict[str, str] = {"results": "ksched", "plugin-dir": "", "seed": "", "plugin-deadline": "30s",
                                        "debug": "false", "watch": "false", "context": ""}
BOOL_FLAGS = {"leader-elect", "profiling", "contention-profiling", "authentication-skip-lookup",
              "authentication-tolerate-lookup-failure", "debug", "watch", "disable-http2-serving",
              "permit-address-sharing", "permit-port-sharing", "log-json-split-stream", "log-text-split-stream",
              "help", "version"}
VALUE_FLAGS = (set(KUBE_FLAG_DEFAULTS) | set(KSCHED_FLAG_DEFAULTS)) - BOOL_FLAGS
#: pflag string slices: a repeated flag appends (comma-separated values also split)
SLICE_FLAGS = {"authorization-always-allow-paths", "tls-cipher-suites", "requestheader-allowed-names",
               "requestheader-username-headers", "requestheader-group-headers",
               "requestheader-extra-headers-prefix", "requestheader-uid-headers", "feature-gates", "disabled-metrics",
               "emulated-version", "min-compatibility-version", "tls-curve-preferences", "tls-sni-cert-key",
               "allow-metric-labels"}


@dataclass
class KubeFlags:
    values: dict[str, str] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def bool(self, name: str, default: bool) -> bool:
        v = self.values.get(name)
        if v is None:
            return default
        return v.lower() in ("1", "t", "true")

    def list(self, name: str, default: list[str]) -> list[str]:
        """A pflag string slice: comma-separated, repeats appended; `--flag=` gives an empty list."""
        v = self.values.get(name)
        if v is None:
            return list(default)
        return [p.strip() for p in v.split(",") if p.strip()]

    def int(self, name: str, default: int) -> int:
        v = self.values.get(name)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise UsageError(f'invalid argument "{v}" for "--{name}" flag: parse error') from None


def parse_go_duration(text: str, flag: str) -> float:
    from ..goduration import parse_seconds

    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise UsageError(f'invalid argument "{text}" for "--{flag}" flag: {exc}') from None


def parse(argv: list[str]) -> KubeFlags:
    flags = KubeFlags()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            raise UsageError(f"unexpected argument {arg!r}: kube-scheduler takes only flags")
        body = arg.lstrip("-")
        name, eq, value = body.partition("=")
        if name in BOOL_FLAGS:
            if eq and value.lower() not in ("1", "0", "t", "f", "true", "false"):
                raise UsageError(f'invalid argument "{value}" for "--{name}" flag: strconv.ParseBool: '
                                  f'parsing "{value}": invalid syntax')
            flags.values[name] = value if eq else "true"
        elif name in VALUE_FLAGS:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"flag needs an argument: --{name}")
                value = argv[i]
            if name in SLICE_FLAGS and name in flags.explicit:
                flags.values[name] += "," + value
            else:
                flags.values[name] = value
        else:
            raise UsageError(f"unknown flag: --{name}")
        flags.explicit.add(name)
        i += 1
    for name in ("leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
                 "log-flush-frequency", "pod-max-in-unschedulable-pods-duration"):
        if name in flags.values:
            parse_go_duration(flags.values[name], name)
    check_honoured(flags)
    return flags


#: flags ksched refuses when set to anything but their default, and why (one line each)
REFUSED: dict[str, str] = {
    "tls-curve-preferences": "Python's ssl module cannot limit a server's key-exchange groups; leave it unset",
    "tls-sni-cert-key": "serving certificates by SNI name is not implemented; use --tls-cert-file/"
                        "--tls-private-key-file",
    "allow-metric-labels": "metric label allow-lists are not implemented",
    "allow-metric-labels-manifest": "metric label allow-lists are not implemented",
    "show-hidden-metrics-for-version": "ksched carries no metrics hidden in 1.37 to show again",
    "vmodule": "per-file log verbosity is not implemented; use -v",
    "log-json-info-buffer-size": "Forbidden: Feature LoggingAlphaOptions is disabled (ksched does not implement it)",
    "log-text-info-buffer-size": "Forbidden: Feature LoggingAlphaOptions is disabled (ksched does not implement it)",
    "log-json-split-stream": "Forbidden: Feature LoggingAlphaOptions is disabled (ksched does not implement it)",
    "log-text-split-stream": "Forbidden: Feature LoggingAlphaOptions is disabled (ksched does not implement it)",
}
#: values a refused flag may still be given: its default (and kube's spellings of it)
_ALLOWED = {"log-json-info-buffer-size": {"0"}, "log-text-info-buffer-size": {"0"},
            "log-json-split-stream": {"false", "0", "f"}, "log-text-split-stream": {"false", "0", "f"}}


def check_honoured(flags: KubeFlags) -> None:
    """A flag ksched would not honour is refused here, before anything starts (see REFUSED)."""
    for name, why in REFUSED.items():
        v = flags.values.get(name)
        if v is None or v.strip() == "" or v.strip().lower() in _ALLOWED.get(name, set()):
            continue
        if name in SLICE_FLAGS and all(p.strip().lower() in _ALLOWED.get(name, set()) for p in v.split(",")):
            continue
        raise UsageError(f"--{name}={v}: not supported by ksched: {why}")
    emulated_and_min_compat(flags)
    fmt = flags.values.get("logging-format")
    if fmt is not None and fmt not in ("text", "json"):
        raise UsageError(f'--logging-format: Unsupported log format "{fmt}": permitted formats are "json", "text"')
    v = flags.values.get("http2-max-streams-per-connection")
    if v is not None and (not v.lstrip("-").isdigit() or int(v) < 0):
        raise UsageError(f'invalid argument "{v}" for "--http2-max-streams-per-connection" flag: parse error')
    ct = flags.values.get("kube-api-content-type")
    if ct is not None and "config" not in flags.values and ct not in ("application/json", ""):
        raise UsageError(f"--kube-api-content-type={ct}: not supported by ksched: it talks application/json to the "
                         "API server (kube-scheduler ignores this flag with --config too)")


def emulated_and_min_compat(flags: KubeFlags) -> tuple[str, str]:
    """`--emulated-version` and `--min-compatibility-version` as kube-scheduler reads them (featuregates)."""
    from ..featuregates import resolve_versions

    return resolve_versions(flags.list("emulated-version", []), flags.list("min-compatibility-version", []))


def _flagz_value(name: str, value: str) -> str:
    if name in SLICE_FLAGS and name != "feature-gates":
        return "[" + ",".join(p.strip() for p in value.split(",") if p.strip()) + "]"
    return value


def flagz(flags: KubeFlags) -> dict[str, str]:
    """Every flag with its value as kube-scheduler's /flagz shows it (defaults overlaid with what was given)."""
    out = {**KUBE_FLAG_DEFAULTS, **KSCHED_FLAG_DEFAULTS}
    for name, value in flags.values.items():
        out[name] = _flagz_value(name, value)
    return out

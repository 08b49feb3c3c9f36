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

BOOL_FLAGS = {"leader-elect", "profiling", "contention-profiling", "authentication-skip-lookup",
              "authentication-tolerate-lookup-failure", "write-config-only", "debug", "watch"}
VALUE_FLAGS = {
    "config", "kubeconfig", "master", "authentication-kubeconfig", "authorization-kubeconfig", "bind-address",
    "secure-port", "cert-dir", "tls-cert-file", "tls-private-key-file", "client-ca-file",
    "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
    "leader-elect-resource-lock", "leader-elect-resource-name", "leader-elect-resource-namespace",
    "kube-api-qps", "kube-api-burst", "kube-api-content-type", "v", "feature-gates", "logging-format",
    "write-config-to", "results", "plugin-dir", "seed", "plugin-deadline", "pod-max-in-unschedulable-pods-duration",
    "authorization-always-allow-paths", "requestheader-client-ca-file", "tls-cipher-suites", "tls-min-version",
    "log-flush-frequency", "vmodule", "requestheader-allowed-names", "requestheader-username-headers",
    "requestheader-group-headers", "requestheader-extra-headers-prefix", "requestheader-uid-headers",
    "authentication-token-webhook-cache-ttl", "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
}
#: pflag string slices: a repeated flag appends (comma-separated values also split)
SLICE_FLAGS = {"authorization-always-allow-paths", "tls-cipher-suites", "requestheader-allowed-names",
               "requestheader-username-headers", "requestheader-group-headers",
               "requestheader-extra-headers-prefix", "requestheader-uid-headers"}
#: accepted for compatibility, no effect in ksched (documented in docs/deploy.md)
IGNORED = {"profiling", "contention-profiling", "feature-gates", "logging-format", "log-flush-frequency", "vmodule",
           "kube-api-content-type"}


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
    from ..config.loader import parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        raise UsageError(f'invalid argument "{text}" for "--{flag}" flag: time: invalid duration "{text}"') from None


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
    for name in ("leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"):
        if name in flags.values:
            parse_go_duration(flags.values[name], name)
    return flags

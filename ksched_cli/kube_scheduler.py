"""`kube-scheduler`: the image's drop-in command, accepting kube-scheduler's flags (kubeadm manifests)."""

from __future__ import annotations

import sys

from scheduler_runtime.options.flags import parse

#: the drop-in starts in every static pod: it leaves typer and rich (≈70 ms of imports) to the ksched CLI
DEBUG = {"on": False}


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def warn(message: str) -> None:
    """One `warning:` line on stderr, as the ksched CLI prints it."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "-help") for a in args):
        from scheduler_runtime.kubeversion import KUBE_VERSION
        from scheduler_runtime.options.flags import KSCHED_FLAG_DEFAULTS, KUBE_FLAG_DEFAULTS, REFUSED

        EMPTY = '""'  # noqa: N806

        lines = ["Usage: kube-scheduler [flags]", "",
                 f"ksched's drop-in for kube-scheduler v{KUBE_VERSION}: every flag of kube-scheduler's --help is "
                 "implemented",
                 "or refused with a one-line error (docs/deploy.md says which and why).", "", "Flags:"]
        for name, default in sorted(KUBE_FLAG_DEFAULTS.items()):
            note = "  [refused unless left at its default]" if name in REFUSED else ""
            lines.append(f"      --{name} (default {default or EMPTY}){note}")
        lines += ["", "ksched flags:"]
        lines += [f"      --{n} (default {d or EMPTY})" for n, d in KSCHED_FLAG_DEFAULTS.items()]
        print("\n".join(lines))
        return 0
    version = [a.split("=", 1)[1] if "=" in a else "true" for a in args if a.lstrip("-").split("=")[0] == "version"]
    if version and version[-1].lower() not in ("false", "0", "f"):
        from scheduler_runtime import __version__
        from scheduler_runtime.kubeversion import KUBE_VERSION

        if version[-1] == "raw":  # kube prints its version.Info struct
            print(f'version.Info{{Major:"1", Minor:"{KUBE_VERSION.split(".", 1)[1]}", '
                  f'GitVersion:"v{KUBE_VERSION}-ksched.{__version__}", Platform:"{sys.platform}"}}')
        elif version[-1].lower() in ("true", "1", "t"):
            print(f"Kubernetes v{KUBE_VERSION}-ksched.{__version__}")
        else:
            _err(f"E --version={version[-1]}: not supported by ksched (it reports its own version; "
                 "use --version or --version=raw)")
            return 2
        return 0
    from scheduler_runtime.errors import KschedError
    from scheduler_runtime.options.resolve import run_on_cluster

    try:
        flags = parse(args)
        DEBUG["on"] = flags.bool("debug", False)
        return run_on_cluster(flags, warn)
    except KschedError as exc:
        if DEBUG["on"]:
            raise
        _err(f"E {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())

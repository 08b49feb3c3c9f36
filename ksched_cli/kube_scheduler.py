"""`kube-scheduler`: the image's drop-in command, accepting kube-scheduler's flags (kubeadm manifests)."""

from __future__ import annotations

import sys

from scheduler_runtime.options.flags import parse

from .guard import DEBUG, err_console, warn


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "-help") for a in args):
        print("Usage: kube-scheduler [flags]\n\nksched's drop-in for kube-scheduler: the same flags as kubeadm's "
              "static pod passes (--config, --kubeconfig, --authentication-kubeconfig, --authorization-kubeconfig,\n"
              "--bind-address, --secure-port, --leader-elect and --leader-elect-*, -v), kube's serving and "
              "delegated-auth flags\n(--tls-*, --cert-dir, --client-ca-file, --requestheader-*, --authentication-*, "
              "--authorization-*; see docs/deploy.md), plus --plugin-dir and "
              "--results=ksched|simulator|off and --plugin-deadline=30s "
              "(a plugin stuck longer is named in the log and /readyz).")
        return 0
    if "--version" in args:
        from scheduler_runtime import __version__

        print(f"Kubernetes v1.36.3-ksched.{__version__}")
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
        err_console.print(f"E {exc}", markup=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())

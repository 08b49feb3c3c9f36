"""ksched scheduler runtime: a Python scheduling framework with kube-scheduler's semantics."""

__version__ = "0.1.0"

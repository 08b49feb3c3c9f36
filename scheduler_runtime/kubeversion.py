"""The kube-scheduler release whose behaviour ksched follows (in /statusz, `ksched version`, and the flags,
messages and defaults it reproduces). A module of its own so reading it imports nothing else."""

KUBE_VERSION = "1.36.3"

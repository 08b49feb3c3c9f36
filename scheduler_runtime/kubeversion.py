"""The kube-scheduler release whose behaviour ksched follows by default (in /statusz, `ksched version`, image
labels, and the flags, messages and defaults it reproduces). A module of its own so reading it imports nothing
else. `--emulated-version` switches to an earlier minor's gate defaults and configuration rules
(featuregates.EMULATABLE)."""

KUBE_VERSION = "1.37.2"
KUBE_MINOR = ".".join(KUBE_VERSION.split(".")[:2])

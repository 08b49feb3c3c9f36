"""Patch a kubeadm kube-scheduler static pod manifest so the kubelet runs a ksched image instead.

Everything is computed first (`plan`), shown as a diff, and only then written (`apply`): a refusal
writes nothing. The manifest is edited with ruamel.yaml's round-trip mode so comments, key order and
every field ksched does not own stay as they were; the indentation style is taken from the file.

The steps live in three modules: `manifest` (round-trip reading, shape checks, flags), `staticplan`
(`plan` and its checks) and `staticapply` (`apply`, `plan_rollback`, `apply_rollback`); this module
is the one name the deploy command and its tests use for all three.
"""

from __future__ import annotations

from .manifest import *  # noqa: F403
from .staticapply import *  # noqa: F403
from .staticplan import *  # noqa: F403

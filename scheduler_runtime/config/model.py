"""KubeSchedulerConfiguration v1 as the runtime holds it once loaded: the dataclasses, the known field sets,
the API version, and durations as kube-scheduler prints them.

Follows kube-scheduler v1.37.2 pkg/scheduler/apis/config/v1 (types: KubeSchedulerConfiguration,
LeaderElectionConfiguration, ClientConnectionConfiguration, KubeSchedulerProfile). The lowest module of
`config`: it imports nothing from its siblings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import goduration
from ..errors import KschedError
from ..framework.plugin import EXTENSION_POINTS

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
REMOVED_VERSIONS = {"v1beta1": "1.23", "v1beta2": "1.28", "v1beta3": "1.29", "v1alpha1": "1.21", "v1alpha2": "1.22"}
POINTS = list(EXTENSION_POINTS)  # preEnqueue ... postBind
ALL_POINTS = [*POINTS, "multiPoint"]

#: v1's fields (healthzBindAddress/metricsBindAddress are gone since v1beta3: kube's strict decoding refuses them)
TOP_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
              "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
              "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
LE_FIELDS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
             "resourceNamespace"}
CC_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
#: the PodGroup extension points of the Plugins struct ksched does not run, by the minor that added them
UNRUN_POINTS = {"placementGenerate": "1.36", "placementScore": "1.36", "podGroupPostFilter": "1.37"}
PLUGINS_FIELDS = set(ALL_POINTS) | set(UNRUN_POINTS)


def plugins_fields(minor: str) -> set[str]:
    """The Plugins struct's fields in kube-scheduler `minor` (1.35 has no PodGroup points, 1.36 adds the
    placement ones, 1.37 podGroupPostFilter)."""
    mm = tuple(int(p) for p in minor.split("."))
    return set(ALL_POINTS) | {p for p, since in UNRUN_POINTS.items()
                              if tuple(int(x) for x in since.split(".")) <= mm}


class ConfigError(KschedError):
    """All validation errors of one file; str() is one line."""

    def __init__(self, errors: list[str], file: str | None = None) -> None:
        # a key or value echoed from the file may hold a newline; each error must stay one line
        errors = [e.replace("\r", "\\r").replace("\n", "\\n") for e in errors]
        self.errors = errors
        self.file = file
        prefix = f"{file}: " if file else ""
        if len(errors) == 1:
            msg = prefix + errors[0]
        else:
            msg = prefix + errors[0] + f" (and {len(errors) - 1} more error(s): run `ksched config validate`)"
        super().__init__(msg)


def parse_duration(value: Any) -> float:
    """A metav1.Duration field in seconds: a Go duration string ("15s", "1m30s"); a bare number is refused
    as kube-scheduler's decoder refuses it (see `goduration`)."""
    return goduration.decode_field(value)


def zero_duration(value: Any) -> bool:
    """Absent or zero: Go's metav1.Duration cannot tell them apart, so defaulting fills both."""
    if value is None:
        return True
    try:
        return parse_duration(value) == 0
    except ValueError:
        return False


format_duration = goduration.format_seconds


@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass
class ClientConnection:
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = 100
    content_type: str = "application/vnd.kubernetes.protobuf"
    accept_content_types: str = ""


@dataclass
class Profile:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    plan: dict[str, list[tuple[str, int]]]
    args: dict[str, object]


@dataclass
class SchedulerConfiguration:
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    profiles: list[Profile] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    #: scheduler_runtime.extenders.ExtenderConfig, in file order
    extenders: list[Any] = field(default_factory=list)
    #: the kube-scheduler minor whose defaults and rules built this (featuregates.emulated_minor)
    kube_minor: str = ""
    #: the effective feature gates it was built with (featuregates.FeatureGates; None: the pinned defaults)
    feature_gates: dict[str, bool] | None = None



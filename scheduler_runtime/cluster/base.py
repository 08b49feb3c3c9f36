"""The backend interface the scheduler runs on: the embedded memory cluster or a real API server."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ..objects import Pod

#: handler(resource, action, old_raw, new_raw); action is ADDED, MODIFIED or DELETED
EventHandler = Callable[[str, str, dict[str, Any] | None, dict[str, Any] | None], None]

KIND_TO_RESOURCE = {
    "Pod": "pods", "Node": "nodes", "PodDisruptionBudget": "poddisruptionbudgets", "Service": "services",
    "ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "ReplicationController": "replicationcontrollers",
    "Namespace": "namespaces", "PriorityClass": "priorityclasses", "Deployment": "deployments",
    "PersistentVolumeClaim": "persistentvolumeclaims", "CustomResourceDefinition": "customresourcedefinitions",
}
CLUSTER_SCOPED = {"nodes", "namespaces", "priorityclasses", "customresourcedefinitions"}


def resource_of_kind(kind: str) -> str:
    return KIND_TO_RESOURCE.get(kind) or (kind.lower() + ("es" if kind.lower().endswith("s") else "s"))


class BindError(Exception):
    """Binding failed; `gone` says the pod is deleted or already bound, so retrying is pointless."""

    def __init__(self, message: str, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


class ClusterBackend(ABC):
    @abstractmethod
    def start(self, handler: EventHandler) -> None:
        """Deliver every current object as ADDED (nodes before pods), then changes as they happen."""

    @abstractmethod
    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        """Bind (raises BindError). `annotations` land on the pod in the same write as the binding."""

    @abstractmethod
    def record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                     reporting_controller: str = "default-scheduler") -> None: ...

    @abstractmethod
    def patch_pod_status(self, pod: Pod, condition: dict[str, Any] | None,
                         nominated_node_name: str | None = None) -> None: ...

    @abstractmethod
    def delete_pod(self, pod: Pod, reason: str = "") -> None: ...

    @abstractmethod
    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]: ...

    @abstractmethod
    def informer(self, resource: str) -> Any: ...

    def annotate_pod(self, pod: Pod, annotations: dict[str, str | None]) -> None:
        """Write (or remove, with None) annotations; used for scheduling results."""

    def stop(self) -> None:
        """Release connections and threads."""

"""The backend interface the scheduler runs on: the embedded memory cluster or a real API server."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from ..objects import Pod

#: handler(resource, action, old_raw, new_raw); action is ADDED, MODIFIED or DELETED
EventHandler = Callable[[str, str, dict[str, Any] | None, dict[str, Any] | None], None]

KIND_TO_RESOURCE = {
    "Pod": "pods", "Node": "nodes", "PodDisruptionBudget": "poddisruptionbudgets", "Service": "services",
    "ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "ReplicationController": "replicationcontrollers",
    "Namespace": "namespaces", "PriorityClass": "priorityclasses", "Deployment": "deployments",
    "PersistentVolumeClaim": "persistentvolumeclaims", "CustomResourceDefinition": "customresourcedefinitions",
    "PersistentVolume": "persistentvolumes", "StorageClass": "storageclasses", "CSINode": "csinodes",
    "CSIDriver": "csidrivers", "CSIStorageCapacity": "csistoragecapacities",
    "DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}
CLUSTER_SCOPED = {"nodes", "namespaces", "priorityclasses", "customresourcedefinitions", "persistentvolumes",
                  "storageclasses", "csinodes", "csidrivers", "volumeattachments", "deviceclasses", "resourceslices",
                  "devicetaintrules"}


def resource_of_kind(kind: str) -> str:
    return KIND_TO_RESOURCE.get(kind) or (kind.lower() + ("es" if kind.lower().endswith("s") else "s"))


class BindError(Exception):
    """Binding failed; `gone` says the pod is deleted or already bound, so retrying is pointless."""

    def __init__(self, message: str, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


#: why a write was not sent (LeadershipLost, logs)
NOT_LEADER = "this replica no longer holds the leader lease"


class LeadershipLost(BindError):
    """Not sent: the leader gate was closed at the moment of sending. The pod is left to the new leader."""


class PatchError(Exception):
    """patch_object failed: `status` is the HTTP-like code (404 not found, 409 conflict, ...)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: mappings merge recursively, None deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class ClusterBackend(ABC):
    #: while set and answering False, the backend sends no write of a scheduling cycle (binding, PreBind
    #: patches, pod status and results, preemption deletes): a replica that lost its lease writes nothing
    leader_gate: Callable[[], bool] | None = None
    #: whether deleting several pods at once is faster than one by one (an API server's round trips); the
    #: embedded cluster deletes at once, and keeping its deletions in order keeps its runs repeatable
    concurrent_deletes: bool = False

    def may_write(self) -> bool:
        gate = self.leader_gate
        return gate is None or bool(gate())

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

    def send_pod_writes(self, pod: Pod) -> None:
        """Send what `patch_pod_status` and `annotate_pod` queued for the pod before returning (a backend
        that writes at once has nothing left to send)."""

    def nominate_for_binding(self, pod: Pod, node_name: str) -> None:
        """Write status.nominatedNodeName = `node_name` before PreBind runs (kube's binding cycle, gate
        NominatedNodeNameForExpectation), and before the binding: the API server clears it when the pod binds,
        so it must not arrive after. A failure is logged by the caller, not fatal, as in kube."""
        self.patch_pod_status(pod, None, node_name)

    @abstractmethod
    def delete_pod(self, pod: Pod, reason: str = "", by: str = "") -> None:
        """Delete a pod; `reason` "preempted" marks it a DisruptionTarget first, whose message names `by`, the
        preemptor's scheduler (kube-scheduler's profile that preempted)."""

    @abstractmethod
    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]: ...

    @abstractmethod
    def informer(self, resource: str) -> Any: ...

    def annotate_pod(self, pod: Pod, annotations: dict[str, str | None]) -> None:
        """Write (or remove, with None) annotations; used for scheduling results."""

    def uncache_pod_annotations(self, keys: Iterable[str]) -> None:
        """Annotations the scheduler writes on pods and never reads back from its cache (the result
        annotation: a few KB on every pod): a backend caching an API server's pods may leave them out. The
        embedded cluster's pods are the cluster itself, so it keeps them."""

    def get_object(self, resource: str, name: str, namespace: str | None) -> dict[str, Any]:
        """The object as the API server holds it now, not as an informer last saw it: what a write that
        conflicted re-reads before retrying (kube's DynamicResources PreBind GETs the claim). Callers must not
        mutate it. Raises PatchError (`status` 404 when it does not exist)."""
        got: dict[str, Any] | None = self.informer(resource).get(name, namespace)
        if got is None:
            raise PatchError(f'{resource} "{name}" not found', status=404)
        return got

    def patch_object(self, resource: str, name: str, namespace: str | None,
                     patch: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of any object, as plugins' PreBind writes need (VolumeBinding sets a
        PV's claimRef, a PVC's selected-node annotation; DynamicResources a claim's status with
        `subresource="status"`). `patch.metadata.resourceVersion`, when given, is a precondition. Returns the
        updated object; raises PatchError (`status` 404 not found, 409 conflict)."""
        raise PatchError(f"{type(self).__name__} cannot patch {resource}", status=405)

    def create_object(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """Create any object (`metadata.generateName` gives it a generated name, as the API server does), as
        DynamicResources' PreBind creates the claim of a pod's extended resources. Returns the created object;
        raises PatchError (`status` as the API server answered)."""
        raise PatchError(f"{type(self).__name__} cannot create {resource}", status=405)

    def delete_object(self, resource: str, name: str, namespace: str | None) -> None:
        """Delete any object. Raises PatchError (`status` 404 when it does not exist)."""
        raise PatchError(f"{type(self).__name__} cannot delete {resource}", status=405)

    def stop(self) -> None:
        """Release connections and threads."""

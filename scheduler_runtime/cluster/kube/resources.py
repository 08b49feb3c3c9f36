"""Resource references (the built-in table, `parse_resource`) and metav1's wire formats for times.

Follows k8s.io/apimachinery v0.36.3 pkg/apis/meta/v1 (time.go, micro_time.go: RFC 3339, six fractional digits
for MicroTime) and client-go v0.36.3 discovery (group/version/resource to a REST path). Lowest module of the
kube package: it imports nothing from its siblings.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass

#: the field selector kube-scheduler's pod informer uses (pkg/scheduler/scheduler.go, v1.36.3)
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


class ResourceNotServed(Exception):
    """Discovery does not know the resource (CRD not installed yet)."""


def path_escape(s: str) -> str:
    """One path segment, escaped as Go's url.PathEscape would (nothing is safe)."""
    return urllib.parse.quote(s, safe="")


def micro_time(ts: float | None = None, *, ns: int | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fractional digits (the server rejects other forms)."""
    if ns is None:
        ns = time.time_ns() if ts is None else int(round(ts * 1_000_000)) * 1000
    secs, rem = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem // 1000:06d}Z"


def rfc3339(ts: float | None = None) -> str:
    """metav1.Time: RFC 3339 with whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


# ------------------------------------------------------------------------------------------ resources


@dataclass(frozen=True, slots=True)
class ResourceRef:
    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""

    @property
    def group_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{path_escape(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{path_escape(name)}"
        if sub:
            base += f"/{sub}"
        return base


_B = ResourceRef
BUILTIN: dict[str, ResourceRef] = {r.plural: r for r in (
    _B("", "v1", "pods", True, "Pod"), _B("", "v1", "nodes", False, "Node"),
    _B("", "v1", "namespaces", False, "Namespace"), _B("", "v1", "services", True, "Service"),
    _B("", "v1", "replicationcontrollers", True, "ReplicationController"),
    _B("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim"),
    _B("", "v1", "persistentvolumes", False, "PersistentVolume"), _B("", "v1", "configmaps", True, "ConfigMap"),
    _B("", "v1", "endpoints", True, "Endpoints"),
    _B("apps", "v1", "replicasets", True, "ReplicaSet"), _B("apps", "v1", "statefulsets", True, "StatefulSet"),
    _B("apps", "v1", "deployments", True, "Deployment"), _B("apps", "v1", "daemonsets", True, "DaemonSet"),
    _B("policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget"),
    _B("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass"),
    _B("storage.k8s.io", "v1", "storageclasses", False, "StorageClass"),
    _B("storage.k8s.io", "v1", "csinodes", False, "CSINode"),
    _B("storage.k8s.io", "v1", "csidrivers", False, "CSIDriver"),
    _B("storage.k8s.io", "v1", "csistoragecapacities", True, "CSIStorageCapacity"),
    _B("storage.k8s.io", "v1", "volumeattachments", False, "VolumeAttachment"),
    _B("resource.k8s.io", "v1", "deviceclasses", False, "DeviceClass"),
    _B("resource.k8s.io", "v1", "resourceslices", False, "ResourceSlice"),
    _B("resource.k8s.io", "v1", "devicetaintrules", False, "DeviceTaintRule"),
    _B("resource.k8s.io", "v1", "resourceclaims", True, "ResourceClaim"),
    _B("resource.k8s.io", "v1", "resourceclaimtemplates", True, "ResourceClaimTemplate"),
    _B("coordination.k8s.io", "v1", "leases", True, "Lease"),
    _B("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"),
)}

#: what kube-scheduler watches; start() waits for all of these
CORE_RESOURCES = ("namespaces", "nodes", "pods", "poddisruptionbudgets", "services", "replicasets",
                  "statefulsets")


def parse_resource(resource: str) -> tuple[str, str, str | None]:
    """'pods' | 'podgroups.scheduling.x-k8s.io' | 'scheduling.x-k8s.io/v1alpha1/podgroups' | 'v1/pods'
    -> (group, plural, version or None)."""
    resource = resource.strip().strip("/")
    if "/" in resource:
        parts = resource.split("/")
        if len(parts) == 2:  # "v1/pods" (core) ; "apps/deployments" is ambiguous, treat as group/plural
            if parts[0].startswith("v") and parts[0][1:2].isdigit():
                return "", parts[1], parts[0]
            return parts[0], parts[1], None
        if len(parts) == 3:
            return parts[0], parts[2], parts[1]
        raise ValueError(f"resource {resource!r}: expected plural, plural.group or group/version/plural")
    if "." in resource:
        plural, group = resource.split(".", 1)
        return group, plural, None
    b = BUILTIN.get(resource)
    return (b.group if b else ""), resource, None

"""Storage API conventions shared by the volume plugins and the embedded cluster's PV controller: the
annotations of binding and provisioning, and the storage class of a claim or volume.

Follows k8s.io/component-helpers v0.36.3 storage/volume/helpers.go (GetPersistentVolumeClaimClass,
GetPersistentVolumeClass: the beta annotation wins) and kube-controller-manager's pv_controller.go annotations.
Below both `plugins` and `cluster`, so neither imports the other for them.
"""

from __future__ import annotations

from typing import Any

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def meta(raw: dict[str, Any] | None) -> dict[str, Any]:
    return (raw or {}).get("metadata") or {}


def spec(raw: dict[str, Any] | None) -> dict[str, Any]:
    return (raw or {}).get("spec") or {}


def annotations(raw: dict[str, Any] | None) -> dict[str, str]:
    return meta(raw).get("annotations") or {}


def class_of(obj: dict[str, Any] | None) -> str:
    """GetPersistentVolumeClaimClass / GetPersistentVolumeClass: the beta annotation wins over
    spec.storageClassName."""
    ann = annotations(obj)
    if ANN_BETA_CLASS in ann:
        return ann[ANN_BETA_CLASS]
    return spec(obj).get("storageClassName") or ""

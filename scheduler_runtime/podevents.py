"""What kind of change a pod update is, as kube-scheduler names it (PodSchedulingPropertiesChange, v1.36.3
pkg/scheduler/framework/events.go): one event per kind, in kube's order, for the queue to run hints on."""

from __future__ import annotations

from .framework.types import ActionType
from .objects import Pod
from .podrequests import pod_requests


def _spec(p: Pod, field: str) -> list[object]:
    return (p.raw.get("spec") or {}).get(field) or []


def _status(p: Pod, field: str) -> object:
    return (p.raw.get("status") or {}).get(field) or None


def _own_requests(p: Pod) -> dict[str, int]:
    """The pod's requests from its spec: kube's scale-down check never counts what its DRA claims take of the node
    (DRANodeAllocatableResources), which an assigned pod's `requests` include."""
    if p.node_name and _status(p, "nodeAllocatableResourceClaimStatuses"):
        return pod_requests(p.raw.get("spec") or {})
    return p.requests


def pod_update_actions(old: Pod, new: Pod, dra: bool = True) -> list[ActionType]:
    """Labels changed; a request scaled down or removed (from the spec: kube also reads the resize status);
    every scheduling gate removed; tolerations added (kube compares their number, the API only allows
    additions); the pod's generated ResourceClaim statuses changed (`dra`). None of them: a generic Update."""
    out = []
    if old.labels != new.labels:
        out.append(ActionType.UpdatePodLabel)
    old_req, new_req = _own_requests(old), _own_requests(new)
    if any(k not in new_req or v > new_req[k] for k, v in old_req.items()):
        out.append(ActionType.UpdatePodScaleDown)
    if old.scheduling_gates and not new.scheduling_gates:
        out.append(ActionType.UpdatePodSchedulingGatesEliminated)
    if len(_spec(old, "tolerations")) != len(_spec(new, "tolerations")):
        out.append(ActionType.UpdatePodToleration)
    if dra and (_status(old, "resourceClaimStatuses") != _status(new, "resourceClaimStatuses")
                or _status(old, "extendedResourceClaimStatus") != _status(new, "extendedResourceClaimStatus")):
        out.append(ActionType.UpdatePodGeneratedResourceClaim)
    return out or [ActionType.Update]

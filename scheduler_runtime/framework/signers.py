"""Pod signature fragments: the keys and the shared signers plugins use to sign a pod for batching.

kube-scheduler 1.36 (KEP-5598, k8s.io/kube-scheduler/framework/signers.go) builds one signature per pod
from the fragments every Filter/Score plugin returns; two pods with equal signatures get the same filter
and score results on the same nodes, so the second may reuse the first's ranking. Only equality matters:
each signer returns a JSON-serialisable value in a canonical form (order-free lists sorted) so that pods
kube-scheduler would sign alike compare equal here too.
"""

from __future__ import annotations

import json
from typing import Any

from ..objects import Pod, normalized_image_name

DYNAMIC_RESOURCES = "v1.Pod.Spec.DynamicResources"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _spec(pod: Pod) -> dict[str, Any]:
    return (pod.raw or {}).get("spec") or {}


def host_ports(pod: Pod) -> list[int]:
    """The distinct non-zero host ports of the pod's containers and init containers, sorted."""
    spec = _spec(pod)
    ports = {int(p.get("hostPort") or 0) for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
             for p in c.get("ports") or []}
    ports.discard(0)
    return sorted(ports)


def _requirements(reqs: list[dict[str, Any]] | None) -> list[str]:
    out = []
    for r in reqs or []:
        out.append(_canon({"key": r.get("key", ""), "operator": r.get("operator", ""),
                           "values": sorted(r.get("values") or [])}))
    return sorted(out)


def _term(t: dict[str, Any] | None) -> dict[str, list[str]]:
    t = t or {}
    return {"MatchExpressions": _requirements(t.get("matchExpressions")),
            "MatchFields": _requirements(t.get("matchFields"))}


def node_affinity(pod: Pod) -> dict[str, list[str]] | None:
    """Required terms and preferred (weight, term) pairs, each canonical and sorted; None without a
    nodeAffinity (an empty one signs differently from none, as in kube)."""
    aff = (_spec(pod).get("affinity") or {}).get("nodeAffinity")
    if aff is None:
        return None
    pref = sorted(_canon({"Weight": int(p.get("weight") or 0), "Preference": _term(p.get("preference"))})
                  for p in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    required = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    req = sorted(_canon(_term(t)) for t in (required or {}).get("nodeSelectorTerms") or []) if required else []
    return {"Required": req, "Preferred": pref}


def node_selector(pod: Pod) -> dict[str, str] | None:
    return _spec(pod).get("nodeSelector")


def tolerations(pod: Pod) -> list[dict[str, Any]]:
    """The tolerations ordered by (key, value)."""
    return sorted(_spec(pod).get("tolerations") or [], key=lambda t: (t.get("key", ""), t.get("value", ""),
                                                                      _canon(t)))


#: the last pod `volumes` signed and its result: four volume plugins sign the same fragment of each pod in a row
_last_volumes: tuple[Pod | None, list[str]] = (None, [])


def volumes(pod: Pod) -> list[str]:
    """The volume sources other than ConfigMap and Secret (they never affect placement and are specific to
    each pod), without the volume names, sorted."""
    global _last_volumes
    last = _last_volumes
    if last[0] is pod:
        return last[1]
    out = []
    for vol in _spec(pod).get("volumes") or ():
        if "configMap" in vol or "secret" in vol:
            continue
        out.append(_canon({k: v for k, v in vol.items() if k != "name"}))
    out.sort()
    _last_volumes = (pod, out)
    return out


def image_names(pod: Pod) -> list[str]:
    """The normalised images of all containers and init containers, distinct and sorted."""
    return sorted({normalized_image_name(i) for i in (*pod.images, *pod.init_images)})


def resources(pod: Pod) -> list[tuple[str, int]]:
    """The pod's effective requests (containers, init containers, overhead, pod-level resources)."""
    return sorted(pod.requests.items())

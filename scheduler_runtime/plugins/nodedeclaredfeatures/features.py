"""The node-declared feature registry and what each feature asks of a pod being scheduled.

Upstream: kube-scheduler v1.36.3 through k8s.io/component-helpers v0.36.3, nodedeclaredfeatures/framework.go
(InferForPodScheduling, TryMap) and nodedeclaredfeatures/features/registry.go with the feature packages it
lists. A kubelet publishes the names in node.status.declaredFeatures (the API server keeps the list sorted
and unique); the scheduler maps only registered names and ignores the rest.

Of the five registered features only two are inferred from a pod spec at scheduling time; the other three
(ExtendWebSocketsToKubelet, and the two in-place resize features, inferred for pod updates only) never make a
pod unschedulable. No registered feature has a maximum version in 1.36.3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"


def _restart_all_containers(spec: Mapping[str, Any]) -> bool:
    """A regular or init container with a restart rule whose action restarts every container of the pod."""
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            if not isinstance(c, Mapping):
                continue
            for rule in c.get("restartPolicyRules") or ():
                if isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers":
                    return True
    return False


def _user_namespaces_host_network(spec: Mapping[str, Any]) -> bool:
    """A host-network pod that asks for its own user namespace (hostUsers explicitly false)."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def _never(spec: Mapping[str, Any]) -> bool:
    return False


#: every registered feature (sorted by name, as the upstream framework sorts its registry) and its
#: scheduling-time inference from the pod spec
REGISTRY: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "ExtendWebSocketsToKubelet": _never,
    "InPlacePodLevelResourcesVerticalScaling": _never,  # inferred for pod resizes only
    "InPlacePodVerticalScalingInitContainers": _never,  # inferred for pod resizes only
    RESTART_ALL_CONTAINERS: _restart_all_containers,
    USER_NAMESPACES_HOST_NETWORK: _user_namespaces_host_network,
}


def required_features(spec: Mapping[str, Any] | None) -> frozenset[str]:
    """The registered features a node must declare to run a pod with this spec."""
    if not isinstance(spec, Mapping):
        return frozenset()
    return frozenset(name for name, infer in REGISTRY.items() if infer(spec))


def known_features(declared: Iterable[str]) -> frozenset[str]:
    """The registered names among a node's declared features (unknown names are dropped, as TryMap does)."""
    return frozenset(f for f in declared if f in REGISTRY)

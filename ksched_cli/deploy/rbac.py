"""What a ksched scheduler may do: exactly the built-in `system:kube-scheduler` ClusterRole (plus
`system:volume-scheduler`, as kube-scheduler's own deployment binds), confined on pods.

The runtime needs no rule beyond those roles: bindings go through `pods/binding`, PodScheduled and
nominatedNodeName through `pods/status`, and the per-pod results annotation rides on the Binding (scheduled
pods) or on a `pods/status` patch (pending pods) -- never a `patch` on `pods`, which could change the image.
The API server lets a `pods/status` write change labels, annotations and finalizers too, and copies any
annotation of a Binding onto its pod; `podwrites-policy.yaml.j2` (a ValidatingAdmissionPolicy) narrows that
for a second scheduler's ServiceAccount to the pod's status and ksched's own annotations.
A lease other than `kube-scheduler` needs its own grant. Plugins declare their own rules in a `rbac` class
attribute (shown by `ksched config explain`).
"""

from __future__ import annotations

from typing import Any

from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.simresults import PREFIX as SIMULATOR_PREFIX

#: Rules the ksched runtime needs that system:kube-scheduler (checked against v1.36) does not grant: none.
RUNTIME_RULES: list[dict[str, Any]] = []

#: Annotation prefixes the runtime writes on pods (`--results=ksched` and `--results=simulator`).
ANNOTATION_PREFIXES: tuple[str, ...] = (RESULT_ANNOTATION.split("/", 1)[0] + "/", SIMULATOR_PREFIX)

#: The lease name system:kube-scheduler may get/update.
DEFAULT_LEASE = "kube-scheduler"


def service_account_user(namespace: str, name: str) -> str:
    """The user name the API server gives a ServiceAccount's tokens."""
    return f"system:serviceaccount:{namespace}:{name}"


def lease_rules(lease_name: str) -> list[dict[str, Any]]:
    """Rules for a leader-election lease; `create` cannot be limited by name."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease_name],
         "verbs": ["get", "list", "watch", "update", "patch"]},
    ]


def enabled_plugins(cfg: Any) -> list[str]:
    """Every plugin enabled in any profile of a built configuration, in first-seen order."""
    seen: dict[str, None] = {}
    for prof in cfg.profiles:
        for entries in prof.plan.values():
            for name, _ in entries:
                seen.setdefault(name, None)
    return list(seen)


def plugin_rules(cfg: Any, registry: Any) -> list[tuple[str, dict[str, Any]]]:
    """(plugin, rule) for each RBAC rule an enabled plugin declares."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name in enabled_plugins(cfg):
        spec = registry.get(name)
        for rule in list(getattr(spec.cls, "rbac", []) or []) if spec is not None else []:
            out.append((name, dict(rule)))
    return out

"""What a ksched scheduler may do beyond the built-in `system:kube-scheduler` ClusterRole.

kube-scheduler's bootstrap role covers binding, events, pod status and the informers kube-scheduler
itself runs. ksched's runtime also lists PriorityClasses (its informer set) and patches pods (per-pod
results annotations), and a lease with a name other than `kube-scheduler` needs its own grant. Plugins
declare their own rules in a `rbac` class attribute (shown by `ksched config explain`).
"""

from __future__ import annotations

from typing import Any

#: Rules the ksched runtime needs that system:kube-scheduler (checked against v1.36) does not grant.
RUNTIME_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
]

#: The lease name system:kube-scheduler may get/update.
DEFAULT_LEASE = "kube-scheduler"


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

"""Shared helpers for the seed plugin tests: objects, a handle over a MemoryCluster, and the plugin classes.

The plugins are loaded from the repo's plugins/ folder exactly as `--plugin-dir` loads a user's folder.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler_runtime.cache import Cache
from scheduler_runtime.cluster.base import BindError
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.plugin import Plugin
from scheduler_runtime.framework.registry import Registry, load_plugin_dir
from scheduler_runtime.framework.runtime import Framework
from scheduler_runtime.framework.status import Status
from scheduler_runtime.objects import Node, Pod

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "plugins"


def seed_plugins() -> dict[str, type[Plugin]]:
    return {cls.name: cls for cls, _ in load_plugin_dir(PLUGINS)}


@pytest.fixture(scope="session")
def plugin_classes() -> dict[str, type[Plugin]]:
    return seed_plugins()


# --------------------------------------------------------------------------- objects


def node(name: str, *, pods: int = 110, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None,
         extra: dict[str, str] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, requests: dict[str, str] | None = None, priority: int = 0,
        node_name: str = "", gates: list[str] | None = None, uid: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example.com/app:1"}
    if requests is not None:
        container["resources"] = {"requests": dict(requests)}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                            "annotations": dict(annotations or {})}
    if uid:
        meta["uid"] = uid
    spec: dict[str, Any] = {"containers": [container], "priority": priority}
    if node_name:
        spec["nodeName"] = node_name
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def parsed_pod(name: str, **kw: Any) -> Pod:
    kw.setdefault("uid", f"uid-{kw.get('namespace', 'default')}-{name}")
    return Pod.from_dict(pod(name, **kw))


# --------------------------------------------------------------------------- framework pieces


def handle_for(cluster: MemoryCluster) -> tuple[Handle, Cache]:
    """A handle whose snapshot holds the cluster's nodes and bound pods (as the scheduler's cache would)."""
    cache = Cache()
    for raw in cluster.list("nodes"):
        cache.add_node(Node.from_dict(raw))
    for raw in cluster.list("pods"):
        if (raw.get("spec") or {}).get("nodeName"):
            cache.add_pod(Pod.from_dict(raw))
    return Handle(cache.snapshot, cluster=cluster), cache


def framework_for(handle: Handle, plugins: dict[str, list[Plugin]]) -> Framework:
    plan = {point: [(p, 1 if point == "score" else 0) for p in lst] for point, lst in plugins.items()}
    return Framework("default-scheduler", handle, plan, rng=random.Random(0))


class PodCountFit(Plugin):
    """Test filter: a node holds at most `allocatable.pods` pods (the in-tree fit check, reduced)."""

    name = "TestPodCountFit"

    def filter(self, state, pod, node_info):  # noqa: ANN001, ANN201
        if len(node_info.pods) >= node_info.allocatable.get("pods", 0):
            return Status.unschedulable("Too many pods")
        return None


class TestBinder(Plugin):
    """Test binder: binds through the cluster backend, like DefaultBinder."""

    name = "TestBinder"
    __test__ = False

    def bind(self, state, pod, node_name):  # noqa: ANN001, ANN201
        try:
            self.handle.cluster.bind(pod, node_name)
        except BindError as exc:
            return Status.as_error(exc)
        return None


def scheduler_config(plan: dict[str, list[tuple[str, int]]], args: dict[str, Any]) -> SimpleNamespace:
    """The attributes Scheduler reads from a loaded configuration, for one default-scheduler profile."""
    profile = SimpleNamespace(scheduler_name="default-scheduler", plan=plan, args=args,
                              percentage_of_nodes_to_score=None)
    return SimpleNamespace(profiles=[profile], parallelism=16, percentage_of_nodes_to_score=None,
                           pod_initial_backoff_seconds=1, pod_max_backoff_seconds=10)


def registry_with(*classes: type[Plugin]) -> Registry:
    reg = Registry()
    for cls in classes:
        reg.register(cls, "test")
    return reg


def example_config(name: str, tmp_path: Path, args: dict[str, dict[str, Any]] | None = None) -> Any:
    """examples/configs/<name> through ksched's config loader, with some plugins' args replaced."""
    import yaml

    from scheduler_runtime.config import load_config
    from scheduler_runtime.plugins.registry import build_registry

    doc = yaml.safe_load((REPO / "examples" / "configs" / name).read_text())
    for prof in doc["profiles"]:
        for pc in prof.get("pluginConfig") or []:
            if args and pc["name"] in args:
                pc["args"] = {**(pc.get("args") or {}), **args[pc["name"]]}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    registry = build_registry([PLUGINS])
    return load_config(path, registry), registry

"""MyPreFilter: refuse to schedule pods that carry a forbidden annotation.

The first seed tutorial's plugin, in Python. PreFilter runs once per scheduling attempt before any node
is looked at, so a pod carrying one of the configured annotation keys is rejected for the whole cluster
in O(1), and no Filter plugin runs for it.

The rejection is `UnschedulableAndUnresolvable`: evicting other pods (preemption) cannot make an
annotation go away, so DefaultPreemption considers no node and evicts nothing for the pod.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from scheduler_runtime.api import CycleState, NodeList, Plugin, PluginArgs, Pod, Status

DEFAULT_ANNOTATION = "mycompany.com/environment"


class MyPreFilterArgs(PluginArgs):
    """`annotationKeys`: pods carrying any of these annotation keys are not scheduled."""

    annotation_keys: list[str] = Field(default_factory=lambda: [DEFAULT_ANNOTATION])

    @field_validator("annotation_keys")
    @classmethod
    def _keys_are_valid(cls, keys: list[str]) -> list[str]:
        for k in keys:
            name = k.rsplit("/", 1)[-1]
            if not k or not name or len(name) > 63 or k.count("/") > 1 or k != k.strip():
                raise ValueError(f"{k!r} is not a valid annotation key ([prefix/]name, name at most 63 characters)")
        if len(set(keys)) != len(keys):
            raise ValueError("annotation keys must be unique")
        return keys


class MyPreFilter(Plugin):
    """PreFilter: reject pods annotated with any of `annotationKeys`."""

    name = "MyPreFilter"
    args_model = MyPreFilterArgs
    rbac: ClassVar[list[dict[str, Any]]] = []  # reads only the pod being scheduled

    def __init__(self, args: MyPreFilterArgs | None = None, handle: Any = None) -> None:
        super().__init__(args if args is not None else MyPreFilterArgs(), handle)
        self._keys: tuple[str, ...] = tuple(self.args.annotation_keys)

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeList) -> Status | None:
        annotations = pod.annotations
        if not annotations:
            return None
        for key in self._keys:
            if key in annotations:
                return Status.unresolvable(f'pod has annotation "{key}", which {self.name} does not allow')
        return None

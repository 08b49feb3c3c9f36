"""The plugin API: subclass `Plugin`, set `name`, implement any extension point as a method.

Extension points are found by method name (snake_case of kube-scheduler's): `pre_enqueue, less,
pre_filter (+ add_pod / remove_pod), filter, post_filter, pre_score, score, normalize_score, reserve,
unreserve, permit, pre_bind, bind, post_bind, events_to_register`. A plugin may also offer batch forms
(`filter_batch`, `score_batch`, `normalize_score_batch`) that work on all nodes at once as numpy arrays;
the framework prefers them. See docs/plugin-api.md.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from .status import Status
from .types import FilterBatch

if TYPE_CHECKING:
    from .interface import Handle

__all__ = ["EXTENSION_POINTS", "FilterBatch", "Plugin", "PluginArgs", "extension_points_of", "implements"]


class PluginArgs(BaseModel):
    """Base for plugin args models: camelCase keys as in YAML, unknown keys rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              validate_assignment=True)


class Plugin:
    """Base class of every plugin. The constructor receives validated args and the framework handle."""

    name: ClassVar[str] = ""
    args_model: ClassVar[type[BaseModel] | None] = None
    #: documentation-only RBAC rules the plugin needs beyond system:kube-scheduler
    rbac: ClassVar[list[dict[str, Any]]] = []
    #: kube 1.37's PreBindPreFlightResult.AllowParallel: this plugin's PreBind may run at the same time as the
    #: neighbouring PreBind plugins that allow it too (each waiting on the API server, say), and must give up
    #: when `state.pre_bind_cancelled` is set because one of them failed. Read only when the plugin implements
    #: `pre_bind_pre_flight` (which runs with NominatedNodeNameForExpectation on).
    allow_parallel_pre_bind: ClassVar[bool] = False

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.args = args
        self.handle = handle

    @cached_property
    def skipped(self) -> Status:
        """This plugin's Skip (no reasons), made once: PreFilter/PreScore give one for most pods, and nothing
        changes a Skip but the framework stamping the plugin's name, always this instance's one."""
        return Status.skip()


# Extension points as kube-scheduler's config names them, with the method(s) that implement each.
EXTENSION_POINTS: dict[str, tuple[str, ...]] = {
    "preEnqueue": ("pre_enqueue",),
    "queueSort": ("less",),
    "preFilter": ("pre_filter",),
    "filter": ("filter", "filter_batch"),
    "postFilter": ("post_filter",),
    "preScore": ("pre_score",),
    "score": ("score", "score_batch"),
    "reserve": ("reserve",),
    "permit": ("permit",),
    "preBind": ("pre_bind",),
    "bind": ("bind",),
    "postBind": ("post_bind",),
}


def implements(cls: type, point: str) -> bool:
    return any(callable(getattr(cls, m, None)) for m in EXTENSION_POINTS[point])


def extension_points_of(cls: type) -> list[str]:
    return [p for p in EXTENSION_POINTS if implements(cls, p)]

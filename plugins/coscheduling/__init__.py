"""Coscheduling plugin folder (seed tutorial 04): gang scheduling with PodGroups."""

from .core import (
    POD_GROUP_LABEL,
    PodGroup,
    PodGroupManager,
    check_cluster_resource,
    wait_time_seconds,
)
from .plugin import Coscheduling, CoschedulingArgs

__all__ = ["POD_GROUP_LABEL", "Coscheduling", "CoschedulingArgs", "PodGroup", "PodGroupManager",
           "check_cluster_resource", "wait_time_seconds"]

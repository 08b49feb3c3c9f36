"""NodeCRDResourceFit plugin folder (seed tutorial 05)."""

from .plugin import (
    GROUP,
    KIND,
    RESOURCE,
    VERSION,
    NodeCRDResourceFit,
    NodeCRDResourceFitArgs,
    requested_resources,
)

__all__ = ["GROUP", "KIND", "RESOURCE", "VERSION", "NodeCRDResourceFit", "NodeCRDResourceFitArgs",
           "requested_resources"]

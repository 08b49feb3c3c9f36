"""Dynamic Resource Allocation: the DynamicResources plugin, its structured allocator and CEL selectors."""

from .plugin import DynamicResources, DynamicResourcesArgs

__all__ = ["DynamicResources", "DynamicResourcesArgs"]

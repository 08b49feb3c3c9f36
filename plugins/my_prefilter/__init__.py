"""MyPreFilter plugin folder (seed tutorial 01)."""

from .plugin import DEFAULT_ANNOTATION, MyPreFilter, MyPreFilterArgs

__all__ = ["DEFAULT_ANNOTATION", "MyPreFilter", "MyPreFilterArgs"]

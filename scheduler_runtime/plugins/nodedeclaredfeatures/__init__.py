"""NodeDeclaredFeatures: the plugin (`.plugin`) and the node-declared feature registry it infers from (`.features`)."""

from .plugin import FeatureGate, NodeDeclaredFeatures

__all__ = ["FeatureGate", "NodeDeclaredFeatures"]

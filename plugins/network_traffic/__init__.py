"""NetworkTraffic plugin folder (seed tutorial 02)."""

from .plugin import STATE_KEY, NetworkTraffic, NetworkTrafficArgs, normalize
from .prometheus import PrometheusClient, PrometheusError, build_query, bytes_by_node

__all__ = ["STATE_KEY", "NetworkTraffic", "NetworkTrafficArgs", "PrometheusClient", "PrometheusError",
           "build_query", "bytes_by_node", "normalize"]

"""KubeSchedulerConfiguration: load, default, validate and expand, with kube-scheduler's rules."""

from .loader import (
    API_VERSION,
    ConfigError,
    Profile,
    SchedulerConfiguration,
    default_config,
    default_document,
    load_config,
    parse_duration,
    read_document,
)

__all__ = ["API_VERSION", "ConfigError", "Profile", "SchedulerConfiguration", "default_config", "default_document",
           "load_config", "parse_duration", "read_document"]

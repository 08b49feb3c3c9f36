"""DynamicResourcesArgs: the plugin's two timeouts, validated and printed as kube-scheduler does.

Upstream: kube-scheduler v1.36.3, pkg/scheduler/apis/config/types_pluginargs.go (DynamicResourcesArgs) and
validation/validation_pluginargs.go (ValidateDynamicResourcesArgs).
"""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr, ValidationInfo, model_validator

from ... import goduration
from ...fielderrors import FieldErrorList, invalid
from ...framework.plugin import PluginArgs
from .. import gates


def decode_duration(v: Any) -> float:
    """A metav1.Duration field in seconds (a Go duration string)."""
    return goduration.decode_field(v)


class DynamicResourcesArgs(PluginArgs):
    """`filterTimeout` (default 10s; 0 disables) bounds Filter's search per node; `bindingTimeout` (default
    10m0s) bounds PreBind's wait for devices' binding conditions."""

    filter_timeout: str | None = "10s"
    binding_timeout: str | None = "10m0s"
    #: the DRADeviceTaintRules gate the args were validated with (kube hands the plugin its feature.Features)
    _taint_rules: bool = PrivateAttr(default=False)
    #: the DRAExtendedResource gate (on in 1.36, locked on in 1.37)
    _extended_resource: bool = PrivateAttr(default=True)

    @property
    def device_taint_rules(self) -> bool:
        return self._taint_rules

    @property
    def extended_resource(self) -> bool:
        return self._extended_resource

    @model_validator(mode="after")
    def _kube_rules(self, info: ValidationInfo) -> DynamicResourcesArgs:
        """kube-scheduler's ValidateDynamicResourcesArgs with v1.36's default gates."""
        errs = FieldErrorList()
        for fld, value, least, msg in (("filterTimeout", self.filter_timeout, 0.0, "must be zero or positive"),
                                       ("bindingTimeout", self.binding_timeout, 1.0, "must be at least 1 second")):
            if value is None:
                continue
            try:
                secs = decode_duration(value)
            except ValueError as exc:
                errs.add((fld,), invalid(value, str(exc)))
                continue
            if secs < least:
                errs.add((fld,), invalid(value, msg))
        errs.raise_if_any()
        # metav1.Duration is written back in Go's form ("600s" -> "10m0s"), as --write-config-to shows it
        for attr in ("filter_timeout", "binding_timeout"):
            v = getattr(self, attr)
            if v is not None and decode_duration(v) >= 0:
                formatted = goduration.format_ns(goduration.parse_ns(v))
                if formatted != v:
                    object.__setattr__(self, attr, formatted)
        self._taint_rules = gates.from_context("DRADeviceTaintRules", info.context)
        self._extended_resource = gates.from_context("DRAExtendedResource", info.context)
        return self

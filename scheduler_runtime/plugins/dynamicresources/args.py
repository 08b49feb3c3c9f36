"""DynamicResourcesArgs: the plugin's two timeouts, defaulted, validated and printed as kube-scheduler does.

Upstream: kube-scheduler v1.37.2, pkg/scheduler/apis/config/types_pluginargs.go (DynamicResourcesArgs),
v1/defaults.go (SetDefaults_DynamicResourcesArgs) and validation/validation_pluginargs.go
(ValidateDynamicResourcesArgs). Each timeout exists only with its gate on: `filterTimeout` with
DRASchedulerFilterTimeout, `bindingTimeout` with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus.
With the gate off kube leaves the field unset (--write-config-to shows `filterTimeout: null`, no bindingTimeout)
and refuses a value as Forbidden.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import PrivateAttr, ValidationInfo, model_validator

from ... import goduration
from ...fielderrors import FieldErrorList, forbidden, invalid
from ...framework.plugin import PluginArgs
from .. import gates


def decode_duration(v: Any) -> float:
    """A metav1.Duration field in seconds (a Go duration string)."""
    return goduration.decode_field(v)


#: kube's defaults (configv1.DynamicResourcesFilterTimeoutDefault / BindingTimeoutDefault), set when the gate is on
FILTER_TIMEOUT_DEFAULT = "10s"
BINDING_TIMEOUT_DEFAULT = "10m0s"
FILTER_TIMEOUT_GATE = "DRASchedulerFilterTimeout"
#: both must be on for binding conditions (kube checks the pair everywhere)
BINDING_GATES = ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")


class DynamicResourcesArgs(PluginArgs):
    """`filterTimeout` (default 10s; 0 disables) bounds Filter's search per node; `bindingTimeout` (default
    10m0s) bounds PreBind's wait for devices' binding conditions. None until defaulted: a value's presence is
    what kube's validation judges when the gate is off."""

    #: kube's v1 type has `json:"filterTimeout"` (no omitempty): unset, it is written as null
    WRITTEN_WHEN_NULL: ClassVar[tuple[str, ...]] = ("filterTimeout",)

    filter_timeout: str | None = None
    binding_timeout: str | None = None
    #: the DRADeviceTaintRules gate the args were validated with (kube hands the plugin its feature.Features)
    _taint_rules: bool = PrivateAttr(default=False)
    #: the DRAExtendedResource gate (on in 1.36, locked on in 1.37)
    _extended_resource: bool = PrivateAttr(default=True)
    #: the DRASchedulerFilterTimeout gate (beta, on): without it Filter's search has no time bound
    _filter_timeout_gate: bool = PrivateAttr(default=True)

    @property
    def device_taint_rules(self) -> bool:
        return self._taint_rules

    @property
    def extended_resource(self) -> bool:
        return self._extended_resource

    @property
    def filter_timeout_gate(self) -> bool:
        return self._filter_timeout_gate

    @model_validator(mode="after")
    def _kube_rules(self, info: ValidationInfo) -> DynamicResourcesArgs:
        """kube-scheduler's SetDefaults_DynamicResourcesArgs and ValidateDynamicResourcesArgs with the effective
        gates (the binary's defaults without a validation context)."""
        filter_gate = gates.from_context(FILTER_TIMEOUT_GATE, info.context)
        binding_gate = all(gates.from_context(g, info.context) for g in BINDING_GATES)
        if filter_gate and self.filter_timeout is None:
            object.__setattr__(self, "filter_timeout", FILTER_TIMEOUT_DEFAULT)
        if binding_gate and self.binding_timeout is None:
            object.__setattr__(self, "binding_timeout", BINDING_TIMEOUT_DEFAULT)
        errs = FieldErrorList()
        # kube's message names the gate DRASchedulingFilterTimeout (sic)
        for fld, value, on, least, msg, off_msg in (
                ("filterTimeout", self.filter_timeout, filter_gate, 0.0, "must be zero or positive",
                 "DRASchedulingFilterTimeout feature gate is disabled"),
                ("bindingTimeout", self.binding_timeout, binding_gate, 1.0, "must be at least 1 second",
                 "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled")):
            if value is None:
                continue
            try:  # a value that is no duration fails kube's decoding, before any gate is looked at
                secs = decode_duration(value)
            except ValueError as exc:
                errs.add((fld,), invalid(value, str(exc)))
                continue
            if not on:
                errs.add((fld,), forbidden(off_msg))
            elif secs < least:
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
        self._filter_timeout_gate = filter_gate
        return self

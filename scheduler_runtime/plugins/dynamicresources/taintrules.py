"""DeviceTaintRule objects: taints an administrator puts on devices from outside their ResourceSlices.

Upstream: kube-scheduler v1.37.2, pkg/scheduler/scheduler.go (the ResourceSlice tracker it starts with
DRADeviceTaintRules) and k8s.io/dynamic-resource-allocation v0.37.2 resourceslice/tracker/tracker.go
(applyPatches).

With the gate on, the scheduler sees every ResourceSlice with the taint of each rule whose `deviceSelector`
matches a device appended to that device's `taints`, exactly as if the driver had published it; the
allocator's toleration check then treats both alike. A rule without a selector matches nothing; each of
`driver`, `pool`, `device` that is set must equal the slice's driver, the slice's pool name and the device's
name. DeviceTaintRule is `resource.k8s.io/v1` in 1.37 (v1beta2 in 1.36).
"""

from __future__ import annotations

from typing import Any

#: the store of DeviceTaintRules (plural.group); claims.EV_TAINT_RULE names their cluster events
TAINT_RULES = "devicetaintrules.resource.k8s.io"
GATE = "DRADeviceTaintRules"


def _selects(sel: dict[str, Any], driver: str, pool: str) -> bool:
    return (sel.get("driver") is None or sel["driver"] == driver) and (sel.get("pool") is None or sel["pool"] == pool)


def apply_taint_rules(slice_: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
    """`slice_` with the rules' taints added to the devices they select; the same object when none applies
    (the slice itself is never modified)."""
    spec = slice_.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    devices = spec.get("devices") or []
    patched: list[dict[str, Any]] | None = None
    for rule in rules:
        rspec = rule.get("spec") or {}
        sel = rspec.get("deviceSelector")
        taint = rspec.get("taint")
        if not isinstance(sel, dict) or not isinstance(taint, dict) or not _selects(sel, driver, pool):
            continue
        want = sel.get("device")
        for i, dev in enumerate(devices):
            if want is not None and want != dev.get("name"):
                continue
            if patched is None:
                patched = list(devices)
            cur = patched[i]
            patched[i] = {**cur, "taints": [*(cur.get("taints") or []), taint]}
    if patched is None:
        return slice_
    return {**slice_, "spec": {**spec, "devices": patched}}

"""DRA devices per node for `ksched simulate`'s utilisation: what the ResourceSlices offer and what the
ResourceClaims' allocations hold, before and after a replay.

Only node-local slices (`spec.nodeName`) count towards a node; devices of slices for `allNodes` or a
`nodeSelector` belong to no single node and are left out. Within a pool only the newest generation's
slices count, as the allocator sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class DeviceUsage:
    total: int
    allocated_before: int
    allocated: int

    def to_dict(self) -> dict[str, int]:
        return {"total": self.total, "allocatedBefore": self.allocated_before, "allocated": self.allocated}


def _device_nodes(slices: list[dict[str, Any]]) -> tuple[dict[tuple[str, str, str], str], dict[str, int]]:
    """(driver, pool, device) -> node, and devices per node, from the newest generation of each pool."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        k = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        newest[k] = max(newest.get(k, 0), int(pool.get("generation") or 0))
    where: dict[tuple[str, str, str], str] = {}
    total: dict[str, int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        pool = spec.get("pool") or {}
        driver, pname = str(spec.get("driver") or ""), str(pool.get("name") or "")
        if not node or int(pool.get("generation") or 0) != newest[(driver, pname)]:
            continue
        for d in spec.get("devices") or []:
            if isinstance(d, dict) and d.get("name"):
                where[(driver, pname, str(d["name"]))] = str(node)
                total[str(node)] = total.get(str(node), 0) + 1
    return where, total


def _allocated(claims: list[dict[str, Any]], where: dict[tuple[str, str, str], str]) -> dict[str, int]:
    """Distinct devices held by allocated claims, per node (a device shared by claims counts once)."""
    held: set[tuple[str, str, str]] = set()
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in ((alloc.get("devices") or {}).get("results") or []):
            if isinstance(r, dict):
                held.add((str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or "")))
    out: dict[str, int] = {}
    for dev in held:
        node = where.get(dev)
        if node is not None:
            out[node] = out.get(node, 0) + 1
    return out


def device_usage(cluster: Any, before: dict[str, DeviceUsage] | None = None) -> dict[str, DeviceUsage]:
    """Per node with devices: total and allocated now; `allocated_before` from `before` (or now)."""
    where, total = _device_nodes(cluster.list("resourceslices"))
    now = _allocated(cluster.list("resourceclaims"), where)
    return {node: DeviceUsage(n, before[node].allocated if before and node in before else now.get(node, 0),
                              now.get(node, 0))
            for node, n in sorted(total.items())}

"""A pod's effective resource requests, as kube-scheduler sums them from its containers.

Follows k8s.io/component-helpers v0.36.3 resource/helpers.go (PodRequests: containers plus restartable init
containers (sidecars), max'd with each init container over the sidecars started before it, pod-level
requests, overhead) and kube-scheduler v1.36.3 pkg/scheduler/framework/types.go (the non-zero cpu/memory
defaults of scoring and of node accounting).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import ROUND_CEILING, Decimal, localcontext
from functools import partial
from typing import Any

from .quantity import parse_quantity, resource_amount

DEFAULT_MILLI_CPU_REQUEST = 100  # kube-scheduler's non-zero default for containers without requests
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def _add(into: dict[str, int], src: Mapping[str, int]) -> None:
    for k, v in src.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], src: Mapping[str, int]) -> None:
    for k, v in src.items():
        if v > into.get(k, 0):
            into[k] = v


def container_requests(c: Mapping[str, Any], path: str, defaults: Mapping[str, int] | None = None) -> dict[str, int]:
    """One container's requests; `defaults` fill only resources the container does not name at all.

    kube-scheduler's NonMissingContainerRequests: an explicit `cpu: "0"` stays zero, only an unset
    request gets the non-zero scoring default.
    """
    res = (c.get("resources") or {})
    reqs = res.get("requests")
    if reqs is None:
        reqs = res.get("limits") or {}  # API defaulting copies limits into missing requests
    else:
        lim = res.get("limits") or {}
        reqs = {**{k: v for k, v in lim.items() if k not in reqs}, **reqs}
    out = {str(k): resource_amount(str(k), v, f"{path}.resources.requests.{k}") for k, v in reqs.items()}
    if defaults:
        for k, v in defaults.items():
            if k not in out:
                out[k] = v
    return out


def _pod_level_supported(name: str) -> bool:
    """Resources a pod-level `spec.resources` may set (cpu, memory, hugepages-*)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests_set(spec: Mapping[str, Any]) -> bool:
    return any(_pod_level_supported(str(k)) for k in ((spec.get("resources") or {}).get("requests") or {}))


_NON_ZERO_DEFAULTS = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}
#: built once: pod_requests runs for every pod the scheduler parses
_non_zero_container_requests = partial(container_requests, defaults=_NON_ZERO_DEFAULTS)


def aggregate_containers(spec: Mapping[str, Any], amounts: Callable[[Mapping[str, Any], str], dict[str, int]],
                         path: str = "spec") -> dict[str, int]:
    """kube's container aggregation of `amounts` (one container's, given it and its field path, `path` being the
    spec's): containers plus sidecars, max'd with each init container plus the sidecars started before it."""
    total: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or []):
        _add(total, amounts(c, f"{path}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(spec.get("initContainers") or []):
        r = amounts(c, f"{path}.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            _add(total, r)
            _add(sidecars, r)
            _max(init_max, dict(sidecars))
        else:
            tmp = dict(r)
            _add(tmp, sidecars)
            _max(init_max, tmp)
    _max(total, init_max)
    return total


def pod_requests(spec: Mapping[str, Any], non_zero: bool | Mapping[str, int] = False,
                 path: str = "spec", claims: Mapping[str, int] | None = None) -> dict[str, int]:
    """Effective pod requests: containers + sidecars, max'd with init containers, pod-level, plus overhead.

    `non_zero` True uses kube-scheduler's cpu/memory defaults for containers that leave them unset;
    a mapping gives the defaults explicitly (an empty mapping means none). `claims`: what the pod's DRA claims
    take of node allocatable (DRANodeAllocatableResources, see `claim_resources`), added to the containers' sum
    before pod-level requests replace cpu and memory (component-helpers v0.37.2's order).
    """
    defaults: Mapping[str, int] | None = _NON_ZERO_DEFAULTS if non_zero is True else (non_zero or None)
    amounts = container_requests if defaults is None else (
        _non_zero_container_requests if defaults is _NON_ZERO_DEFAULTS else partial(container_requests,
                                                                                      defaults=defaults))
    total = aggregate_containers(spec, amounts, path)
    if claims:
        _add(total, claims)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for k, v in pod_level.items():
        if _pod_level_supported(str(k)):
            total[str(k)] = resource_amount(str(k), v, f"{path}.resources.requests.{k}")
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + resource_amount(k, v, f"{path}.overhead.{k}")
    return total


def non_zero_pod_requests(spec: Mapping[str, Any], requests: Mapping[str, int],
                          claims: Mapping[str, int] | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(node accounting, scoring) cpu/memory requests with kube-scheduler's non-zero defaults.

    Node accounting (PodInfo.CalculateResource) defaults only what neither the containers nor the
    pod-level requests set; the scorer (calculatePodResourceRequest) always defaults unset container
    requests. Both are identical unless pod-level requests are set or `claims` (what the pod's DRA claims take
    of node allocatable, counted by node accounting only) is given. Keys cpu and memory are always present.
    """
    scoring = pod_requests(spec, True)
    if pod_level_requests_set(spec):
        missing = {k: v for k, v in _NON_ZERO_DEFAULTS.items() if k not in requests}
        accounting = pod_requests(spec, missing, claims=claims) if missing else dict(requests)
    elif claims:
        accounting = pod_requests(spec, True, claims=claims)
    else:
        accounting = scoring
    for d in (accounting, scoring):
        d.setdefault("cpu", 0)
        d.setdefault("memory", 0)
    return accounting, scoring


#: DRANodeAllocatableResources: whether node accounting counts what an assigned pod's claims take of node
#: allocatable (its status.nodeAllocatableResourceClaimStatuses). Process-wide like kube's feature gate (kube reads
#: utilfeature.DefaultFeatureGate in PodInfo.CalculateResource); set by the Scheduler from its gates.
_count_claim_statuses = False


def count_claim_statuses(on: bool) -> None:
    """Set whether pods parsed from now on count their claims' node-allocatable statuses."""
    global _count_claim_statuses
    _count_claim_statuses = bool(on)


def counting_claim_statuses() -> bool:
    return _count_claim_statuses


def _units(name: str, value: Decimal) -> int:
    """Scheduler units, rounded up like Quantity.MilliValue() (cpu) and Value()."""
    if value <= 0:
        return 0
    with localcontext() as ctx:
        ctx.prec = 80
        return int((value * (1000 if name == "cpu" else 1)).to_integral_value(rounding=ROUND_CEILING))


def _overhead(o: Mapping[str, Any], containers: int | None) -> Decimal:
    """A claim status overhead entry: perPod, plus perContainer times `containers` (once when None)."""
    total = Decimal(0)
    if o.get("perPod") is not None:
        total += parse_quantity(str(o["perPod"]))
    if o.get("perContainer") is not None and (containers is None or containers > 0):
        total += parse_quantity(str(o["perContainer"])) * (1 if containers is None else containers)
    return total


def claim_resources(statuses: Iterable[Mapping[str, Any]], container: str | None = None) -> dict[str, int]:
    """What node-allocatable claim statuses add to a pod's requests, in scheduler units (component-helpers
    v0.37.2 addDRANodeAllocatableClaimResources: a per-container overhead counts once per container named).

    With `container`, only the statuses naming it, each overhead once (GetContainerDRAAllocations)."""
    sums: dict[str, Decimal] = {}
    for st in statuses:
        names = st.get("containers") or []
        if container is not None and container not in names:
            continue
        for m in st.get("mapping") or []:
            if m.get("quantity") is not None:
                k = str(m.get("name") or "")
                sums[k] = sums.get(k, Decimal(0)) + parse_quantity(str(m["quantity"]))
        for o in st.get("overhead") or []:
            k = str(o.get("name") or "")
            sums[k] = sums.get(k, Decimal(0)) + _overhead(o, None if container is not None else len(names))
    return {k: _units(k, v) for k, v in sums.items()}

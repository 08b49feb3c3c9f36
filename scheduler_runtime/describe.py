"""Explain a pod's placement: phase, conditions, events, and the recorded per-plugin results.

Works from what is on the cluster (the result annotation written by the scheduler, events, nodes), so
the same code serves the embedded cluster and a real API server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .objects import Node, Pod, tolerates_all
from .quantity import format_amount

RESULT_ANNOTATION = "ksched.io/scheduling-result"
#: what DynamicResources' PostFilter adds in front of the preemption message
DRA_POSTFILTER = ("no new claims to deallocate", "still not schedulable", "deallocation of ResourceClaim completed")
MAX_RESULT_BYTES = 32 * 1024


def _dumps(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def encode_result(result: dict[str, Any]) -> str:
    """JSON for the result annotation, trimmed to 32 KiB by dropping detail, never the verdict."""
    data = _dumps(result)
    if len(data) <= MAX_RESULT_BYTES:
        return data.decode()
    r = dict(result)
    reasons = r.get("filter_reasons") or {}
    r["filter_reasons"] = {k: {**v, "nodes": v.get("nodes", [])[:3]} for k, v in reasons.items()}
    r["scores"] = (r.get("scores") or [])[:2]
    data = _dumps(r)
    if len(data) <= MAX_RESULT_BYTES:
        return data.decode()
    r["filter_reasons"] = {k: {"count": v.get("count", 0)} for k, v in list(r["filter_reasons"].items())[:50]}
    r["scores"] = []
    r["message"] = (r.get("message") or "")[:4096]
    return _dumps(r).decode()


@dataclass
class PodDescription:
    name: str
    namespace: str
    phase: str
    node: str
    scheduler: str
    priority: int
    conditions: list[dict[str, Any]]
    events: list[dict[str, Any]]
    result: dict[str, Any] | None
    summary: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "phase": self.phase, "node": self.node,
                "schedulerName": self.scheduler, "priority": self.priority, "conditions": self.conditions,
                "events": self.events, "schedulingResult": self.result, "summary": self.summary}


#: short, unambiguous column headers for the score table (in-tree score plugins share long prefixes)
SHORT_PLUGIN_NAMES = {
    "ImageLocality": "Image", "InterPodAffinity": "PodAff", "NodeAffinity": "NodeAff",
    "NodeResourcesBalancedAllocation": "Balanced", "NodeResourcesFit": "Fit", "PodTopologySpread": "Spread",
    "TaintToleration": "Taint", "VolumeBinding": "Volume", "DynamicResources": "DRA",
}


def short_plugin_names(names: list[str], limit: int = 8) -> dict[str, str]:
    """name -> a distinct short header: the known abbreviation, the name when short, else its CamelCase
    initials; a number is appended where two would read the same."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        short = SHORT_PLUGIN_NAMES.get(name)
        if short is None and "://" in name:  # an extender, named by its URL
            short = "Ext"
        if short is None:
            short = name if len(name) <= limit else ("".join(re.findall(r"[A-Z0-9]", name)) or name[:limit])
        base, i = short, 2
        while short.lower() in used:
            short, i = f"{base}{i}", i + 1
        used.add(short.lower())
        out[name] = short
    return out


_ERROR_PREFIX = re.compile(r'^running (?:(?:\w+ on )?(?P<p1>\w+) plugin "[^"]*"|"[^"]*" (?P<p2>\w+) plugin): ')


def filtering_completed(result: dict[str, Any]) -> bool:
    """Whether the attempt got past Filter (so its feasible count means something): an attempt that ended
    in an error before a node was chosen never finished filtering."""
    return result.get("outcome") != "error" or bool(result.get("node")) or bool(result.get("feasible"))


def explain_error(result: dict[str, Any]) -> str:
    """Plain-language line for an attempt that ended in an error (a plugin raised or returned Error)."""
    msg = (result.get("message") or "").strip()
    plugin = result.get("plugin") or ""
    m = _ERROR_PREFIX.match(msg)
    point = ""
    if m is not None and plugin:
        point = m.group("p1") or m.group("p2") or ""
        point = f" at {point.capitalize() if point.islower() else point}"
        msg = msg[m.end():]
    msg = msg.rstrip(".") or "no message"
    who = f"Plugin {plugin} failed{point}" if plugin else "The scheduler hit an error"
    return f"{who}: {msg}; the pod is retried with backoff."


def extender_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(extender, filter, prioritize, preempt, bind) cells of what each extender said in the attempt."""

    def nodes(m: dict[str, str]) -> str:
        return "; ".join(f"{n} ({msg})" if msg else n for n, msg in m.items())

    def err(v: dict[str, Any]) -> str:
        return f"error: {v['error']}" + (" (ignorable: skipped)" if v.get("ignorable") else "")

    rows = []
    for url, verbs in (result.get("extenders") or {}).items():
        f = verbs.get("filter") or {}
        if "error" in f:
            fc = err(f)
        elif f:
            fc = f"kept {f.get('passed', 0)}"
            if f.get("failed"):
                fc += f"; failed: {nodes(f['failed'])}"
            if f.get("unresolvable"):
                fc += f"; unresolvable: {nodes(f['unresolvable'])}"
        else:
            fc = "-"
        p = verbs.get("prioritize") or {}
        if "error" in p:
            pc = err(p) + " (no scores from it)"
        elif p:
            pc = f"weight {p.get('weight')}: " + ", ".join(f"{n}={v}" for n, v in (p.get("scores") or {}).items())
        else:
            pc = "-"
        e = verbs.get("preempt") or {}
        ec = err(e) if "error" in e else (", ".join(f"{n}: {' '.join(v)}" for n, v in (e.get("nodes") or {}).items())
                                          or "no node left") if e else "-"
        b = verbs.get("bind") or {}
        bc = err(b) if "error" in b else (f"bound to {b['node']}" if b else "-")
        rows.append((url, fc, pc, ec, bc))
    return rows


def _fmt_taint(t: Any) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def explain_pending(pod: Pod, result: dict[str, Any], nodes: dict[str, Node]) -> list[str]:
    """Plain-language lines: what blocks the pod, and what would help."""
    lines: list[str] = []
    if result.get("outcome") == "error":
        lines.append(explain_error(result))
    reasons: dict[str, dict[str, Any]] = result.get("filter_reasons") or {}
    if result.get("prefilter_message"):
        lines.append(f"Rejected before any node was checked: {result['prefilter_message']}.")
    for reason, info in sorted(reasons.items(), key=lambda kv: -kv[1].get("count", 0)):
        count = info.get("count", 0)
        names = info.get("nodes") or []
        noun = "node" if count == 1 else "nodes"
        verb = {"lack": "lacks", "have": "has", "do": "does", "are": "is"} if count == 1 else {}
        if reason.startswith("Insufficient "):
            res = reason[len("Insufficient "):]
            want = pod.requests.get(res, 0)
            human = "CPU" if res == "cpu" else res
            amount = format_amount(res, want) if want else "the requested"
            free = []
            for n in names[:3]:
                node = nodes.get(n)
                if node is not None and res in node.allocatable:
                    free.append(f"{n} allocatable {format_amount(res, node.allocatable[res])}")
            extra = f" ({'; '.join(free)})" if free else ""
            lines.append(f"{count} {noun} {verb.get('lack', 'lack')} {amount} {human}{extra}: free capacity, "
                         f"a smaller request, or a bigger node would help.")
        elif reason == "node(s) had untolerated taint(s)":
            taints: dict[str, int] = {}
            for n in names:
                node = nodes.get(n)
                if node is None:
                    continue
                for t in node.taints:
                    if t.effect in ("NoSchedule", "NoExecute") and not tolerates_all(pod.tolerations, t):
                        taints[_fmt_taint(t)] = taints.get(_fmt_taint(t), 0) + 1
            if taints:
                desc = "; ".join(f"{k} on {v}" for k, v in taints.items())
                lines.append(f"{count} {noun} {verb.get('have', 'have')} taints the pod does not tolerate ({desc}): "
                             f"add a toleration "
                             f"or use other nodes.")
            else:
                lines.append(f"{count} {noun} {verb.get('have', 'have')} taints the pod does not tolerate.")
        elif "node affinity/selector" in reason:
            sel = ", ".join(f"{k}={v}" for k, v in pod.node_selector.items())
            lines.append(f"{count} {noun} {verb.get('do', 'do')} not match the pod's node selector/affinity"
                         f"{f' ({sel})' if sel else ''}: label nodes or relax the selector.")
        elif reason == "Too many pods":
            lines.append(f"{count} {noun} {verb.get('are', 'are')} at their pod limit (status.allocatable.pods).")
        elif "free ports" in reason:
            ports = ", ".join(str(p.port) for p in pod.host_ports)
            lines.append(f"{count} {noun} already {'uses' if count == 1 else 'use'} the host port(s) {ports}.")
        elif "were unschedulable" in reason:
            lines.append(f"{count} {noun} {verb.get('are', 'are')} cordoned (spec.unschedulable): "
                         f"uncordon to use.")
        elif "://" in (info.get("plugin") or ""):
            lines.append(f"{count} {noun} rejected by extender {info['plugin']}: {reason}.")
        else:
            lines.append(f"{count} {noun}: {reason}.")
    if result.get("postfilter_message"):
        msg = result["postfilter_message"]
        for dra in DRA_POSTFILTER:  # DynamicResources' part; the claims themselves are explained separately
            msg = msg.removeprefix(dra).removeprefix(", ")
        if msg:
            lines.append(f"Preemption cannot help: {msg.removeprefix('preemption: ')}")
    if pod.scheduling_gates:
        lines.insert(0, f"The pod has scheduling gates ({', '.join(pod.scheduling_gates)}): it is not attempted until "
                        f"they are removed.")
    return lines


def needs_device_explanation(pod_raw: dict[str, Any], pod: Pod | None = None) -> bool:
    """Whether a pending pod gets the DRA explanation: it has claims, or extended resources a DeviceClass
    may back."""
    if (pod_raw.get("spec") or {}).get("resourceClaims"):
        return True
    return any("/" in n for n in (pod or Pod.from_dict(pod_raw)).requests)


def describe(pod_raw: dict[str, Any], events: list[dict[str, Any]], nodes: dict[str, Node],
             list_objects: Callable[[str], list[dict[str, Any]]] | None = None) -> PodDescription:
    """`list_objects(plural)` (resourceclaims, resourceclaimtemplates, deviceclasses, resourceslices) lets a
    pending pod's ResourceClaims be explained."""
    pod = Pod.from_dict(pod_raw)
    status = pod_raw.get("status") or {}
    ann = (pod_raw.get("metadata") or {}).get("annotations") or {}
    result = None
    if RESULT_ANNOTATION in ann:
        try:
            result = json.loads(ann[RESULT_ANNOTATION])
        except ValueError:
            result = None
    d = PodDescription(pod.name, pod.namespace, status.get("phase") or "Pending", pod.node_name,
                       pod.scheduler_name, pod.priority, list(status.get("conditions") or []), events, result)
    if not pod.node_name:
        dra: list[str] = []
        if list_objects is not None and needs_device_explanation(pod_raw, pod):
            from .plugins.dynamicresources.explain import explain_claims

            dra = explain_claims(pod_raw, list_objects, nodes)  # never raises: a failure is a line of its own
        if result is not None:
            d.summary = explain_pending(pod, result, nodes) + dra
        elif dra:
            d.summary = dra
        elif pod.scheduling_gates:
            d.summary = [f"The pod has scheduling gates ({', '.join(pod.scheduling_gates)}): it is not attempted until "
                         f"they are removed."]
        else:
            d.summary = [f"No scheduling attempt recorded yet by a ksched scheduler named {pod.scheduler_name!r}."]
    return d

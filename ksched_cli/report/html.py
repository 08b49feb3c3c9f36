"""Render `ksched simulate --report`: one HTML file, charts included, that opens with no network.

Why plotly (offline output) and not altair/vega-lite: the figures here are a handful of grouped bars and
box plots built straight from Python lists, which plotly's graph objects express without a dataframe
library (plotly >= 6 needs no pandas; altair pulls in pandas-shaped data handling, jsonschema and three
separate JS bundles, vega + vega-lite + vega-embed, that would each have to be inlined by hand because
altair's own "inline" mode fetches them through an extra package). `to_html(include_plotlyjs=True)` embeds
plotly.js once; every later figure is a `<div>` plus a `Plotly.newPlot` call against it. The rest of the
page is plain HTML tables, escaped here, with no external stylesheet, font or script.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections import Counter
from typing import Any

from .compare import differs, keys

ZONE_LABEL = "topology.kubernetes.io/zone"
#: resources shown as "devices" besides DRA: extended resources (anything that is not one of these)
_NOT_DEVICES = {"cpu", "memory", "pods", "ephemeral-storage"}
_COLOURS = ["#9e9e9e", "#1f77b4", "#ff7f0e"]  # before, A, B
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.reason{max-width:560px}.pending{color:#b26a00}.preempted{color:#c62828}
.skipped{color:#777}.muted{color:#777}.summary td{font-weight:600}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell(r: Any, key: str) -> str:
    oc = r.outcome(key)
    if oc.status == "Scheduled":
        return _e(oc.node)
    cls = {"Preempted": "preempted", "Skipped": "skipped"}.get(oc.status, "pending")
    label = {"Preempted": "preempted", "Skipped": "not scheduled here"}.get(oc.status, "Pending")
    return f'<span class="{cls}">{_e(label)}</span>'


def _reason(r: Any, key: str) -> str:
    oc = r.outcome(key)
    return _e(f"scheduled to {oc.node}" if oc.status == "Scheduled" else oc.detail)


def _table(head: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{_e(empty)}</p>'
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


class _Figures:
    """Collects figures; the first one carries plotly.js, the rest only their div and newPlot call."""

    def __init__(self) -> None:
        self.count = 0

    def html(self, fig: Any, div_id: str) -> str:
        fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 60}, height=380)
        out = str(fig.to_html(full_html=False, include_plotlyjs=self.count == 0, div_id=div_id,
                              config={"displaylogo": False, "responsive": True}))
        self.count += 1
        return f'<div class="chart" data-chart="{_e(div_id)}">{out}</div>'


def _variant_names(results: list[Any]) -> list[str]:
    return [f"{'AB'[i]}: {r.label}" if len(results) > 1 else r.label for i, r in enumerate(results)]


def _utilisation(figs: _Figures, results: list[Any], names: list[str]) -> str:
    import plotly.graph_objects as go

    parts = []
    base = results[0]
    nodes = [u.name for u in base.usage]
    resources = ["cpu", "memory"]
    extended = sorted({k for r in results for u in r.usage for k in u.allocatable if k not in _NOT_DEVICES
                       and u.allocatable.get(k)})
    for res in [*resources, *extended]:
        fig = go.Figure()
        before = {u.name: u for u in base.usage_before}
        fig.add_bar(name="before (snapshot)", x=nodes, marker_color=_COLOURS[0],
                    y=[round(before[n].percent(res), 1) if n in before else 0 for n in nodes])
        for i, r in enumerate(results):
            fig.add_bar(name=f"after {names[i]}", x=nodes, y=[round(u.percent(res), 1) for u in r.usage],
                        marker_color=_COLOURS[1 + i])
        fig.update_layout(title=f"{res}: requested / allocatable per node (%)", barmode="group",
                          yaxis={"title": "%", "rangemode": "tozero"})
        parts.append(figs.html(fig, f"util-{res.replace('/', '-').replace('.', '-')}"))
    if any(r.devices for r in results):
        dnodes = sorted({n for r in results for n in r.devices})
        fig = go.Figure()
        first = results[0].devices
        fig.add_bar(name="before (snapshot)", x=dnodes, marker_color=_COLOURS[0],
                    y=[first[n].allocated_before if n in first else 0 for n in dnodes])
        for i, r in enumerate(results):
            fig.add_bar(name=f"after {names[i]}", x=dnodes, marker_color=_COLOURS[1 + i],
                        y=[r.devices[n].allocated if n in r.devices else 0 for n in dnodes])
        fig.add_scatter(name="devices offered", x=dnodes, mode="markers", marker={"symbol": "line-ew-open",
                                                                                 "size": 28, "color": "#000"},
                        y=[first[n].total if n in first else 0 for n in dnodes])
        fig.update_layout(title="DRA devices allocated per node (ResourceSlices' devices)", barmode="group",
                          yaxis={"title": "devices", "rangemode": "tozero"})
        parts.append(figs.html(fig, "util-dra-devices"))
    return "".join(parts)


def _zones(figs: _Figures, results: list[Any], names: list[str]) -> str:
    import plotly.graph_objects as go

    labels = results[0].node_labels

    def per_zone(usage: list[Any]) -> Counter[str]:
        c: Counter[str] = Counter()
        for u in usage:
            c[labels.get(u.name, {}).get(ZONE_LABEL, "(no zone label)")] += u.pods
        return c

    series = [("before (snapshot)", per_zone(results[0].usage_before))]
    series += [(f"after {names[i]}", per_zone(r.usage)) for i, r in enumerate(results)]
    zones = sorted({z for _, c in series for z in c})
    fig = go.Figure()
    for i, (name, c) in enumerate(series):
        fig.add_bar(name=name, x=zones, y=[c.get(z, 0) for z in zones], marker_color=_COLOURS[i])
    fig.update_layout(title=f"pods per zone ({ZONE_LABEL})", barmode="group",
                      yaxis={"title": "pods", "rangemode": "tozero"})
    return figs.html(fig, "zones")


def _scores(figs: _Figures, results: list[Any], names: list[str]) -> str:
    """Box plots of each score plugin's weighted score over the best-scored nodes recorded per attempt."""
    import plotly.graph_objects as go

    fig = go.Figure()
    drew = False
    for i, r in enumerate(results):
        xs: list[str] = []
        ys: list[int] = []
        for key in r.pods:
            res = r.results.get(key)
            for entry in (res.scores if res is not None else []):
                for plugin, s in (entry.get("plugins") or {}).items():
                    xs.append(plugin)
                    ys.append(int(s.get("weighted", 0)))
        if xs:
            drew = True
            fig.add_box(name=names[i], x=xs, y=ys, marker_color=_COLOURS[1 + i], boxpoints="outliers")
    if not drew:
        return '<p class="muted">No pod was scored (nothing scheduled, or a single feasible node each).</p>'
    fig.update_layout(title="weighted score per plugin (normalized score x weight), best-scored nodes of each "
                            "scheduled pod", boxmode="group", yaxis={"title": "weighted score"})
    return figs.html(fig, "scores")


def _placements(results: list[Any]) -> str:
    if len(results) == 1:
        r = results[0]
        rows = [[_e(k) + (" *" if k in r.from_snapshot else ""), _cell(r, k), _reason(r, k)] for k in keys(r, r)]
        return _table(["pod", "node", "what happened"], rows, "No pods to schedule.")
    a, b = results
    rows = [[_e(k) + (" *" if k in a.from_snapshot else ""), _cell(a, k), _cell(b, k)]
            for k in keys(a, b) if differs(a, b, k)]
    return _table(["pod", f"A: {a.label}", f"B: {b.label}"], rows, "No placement differs.")


def _pending_one_side(results: list[Any]) -> str:
    if len(results) == 1:
        r = results[0]
        rows = [[_e(k), _reason(r, k)] for k in r.pending if r.outcome(k).status == "Pending"]
        return _table(["pod", "reason"], rows, "No pod is pending.")
    a, b = results
    rows = []
    for k in keys(a, b):
        sa, sb = a.outcome(k).status, b.outcome(k).status
        if (sa == "Pending") != (sb == "Pending"):
            rows.append([_e(k), _reason(a, k), _reason(b, k)])
    return _table(["pod", f"A: {a.label}", f"B: {b.label}"], rows,
                  "No pod is pending in one variant and not in the other.")


def _pending_both(results: list[Any]) -> str:
    if len(results) == 1:
        return ""
    a, b = results
    rows = [[_e(k), _reason(a, k), _reason(b, k)] for k in keys(a, b)
            if a.outcome(k).status == "Pending" and b.outcome(k).status == "Pending"]
    if not rows:
        return ""
    return "<h3>Pending in both</h3>" + _table(["pod", f"A: {a.label}", f"B: {b.label}"], rows, "")


def _preemptions(results: list[Any], names: list[str]) -> str:
    rows = [[_e(names[i]), _e(p.victim), _e(p.by or "?"), _e(p.node or "?")]
            for i, r in enumerate(results) for p in r.preemptions]
    return _table(["variant", "preempted pod", "preempted by", "on node"], rows, "No pod was preempted.")


def _summary(results: list[Any], names: list[str]) -> str:
    rows = []
    for i, r in enumerate(results):
        st = Counter(r.outcome(k).status for k in r.pods)
        rows.append([_e(names[i]), str(len(r.pods)), str(st.get("Scheduled", 0)), str(st.get("Pending", 0)),
                     str(len(r.preempted)), str(st.get("Skipped", 0))])
    extra = ""
    if len(results) == 2:
        n = sum(differs(results[0], results[1], k) for k in keys(*results))
        extra = f'<p class="summary-line"><b>{n}</b> of {len(keys(*results))} pods are placed differently.</p>'
    return _table(["variant", "pods to schedule", "scheduled", "pending", "preempted", "not for this scheduler"],
                  rows, "") + extra


def render(results: list[Any]) -> str:
    """The report for one variant or two (A, B): one HTML document as a string."""
    names = _variant_names(results)
    figs = _Figures()
    snap = results[0].from_snapshot
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = [
        f"<h1>ksched what-if report</h1><p class='muted'>Generated {now}. "
        f"Variants: {', '.join(_e(n) for n in names)}. Pods bound in the snapshot stay where they are"
        + (f"; {len(snap)} unbound snapshot pod(s) were scheduled too (marked *)" if snap else "") + ".</p>",
        "<h2>Summary</h2>" + _summary(results, names),
        ("<h2>Placements that differ</h2>" if len(results) == 2 else "<h2>Placements</h2>") + _placements(results),
        ("<h2>Pending in one variant and not the other</h2>" if len(results) == 2 else "<h2>Pending pods</h2>")
        + _pending_one_side(results) + _pending_both(results),
        "<h2>Preemptions</h2>" + _preemptions(results, names),
        "<h2>Utilisation per node, before and after</h2>" + _utilisation(figs, results, names),
        "<h2>Spread of pods per zone</h2>" + _zones(figs, results, names),
        "<h2>Per-plugin score distributions</h2><p class='muted'>Over the best-scored nodes ksched records "
        "for each scheduled pod (up to five per pod).</p>" + _scores(figs, results, names),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>ksched what-if report</title>"
            f"<style>{_CSS}</style></head><body>" + "".join(f"<section>{s}</section>" for s in sections)
            + "</body></html>\n")

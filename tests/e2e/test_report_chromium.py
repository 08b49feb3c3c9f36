"""`ksched simulate --report`: the HTML file opens in headless Chromium with the network unreachable, with no
console message, and every chart drew (its plotly div holds an SVG with the traces)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.chromium import render

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"


def chart_segments(dom: str) -> dict[str, str]:
    """Each plotly chart's div id -> the DOM from that div to the next chart (the charts do not nest)."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'<div id="([\w-]+)" class="plotly-graph-div', dom)]
    return {name: dom[pos:(starts[i + 1][0] if i + 1 < len(starts) else len(dom))]
            for i, (pos, name) in enumerate(starts)}


def assert_drew(dom: str, expected: dict[str, str]) -> None:
    """`expected`: chart id -> the trace class it must contain (bars, boxes)."""
    charts = chart_segments(dom)
    assert set(expected) <= set(charts), (sorted(expected), sorted(charts))
    for name, trace in expected.items():
        seg = charts[name]
        assert '<svg class="main-svg"' in seg, f"{name}: plotly drew no SVG"
        assert f'class="trace {trace}"' in seg and 'class="point"' in seg, f"{name}: no {trace} drawn"


def test_detection_works_on_a_page_that_misbehaves(tmp_path: Path) -> None:
    """The checks below can fail: console errors, uncaught exceptions and network fetches are all seen."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><div id="plot"></div><script>console.error("boom");'
                   'fetch("https://example.com/x.js").catch(e => console.warn("offline: " + e));'
                   'throw new Error("uncaught");</script></body></html>')
    r = render(bad, tmp_path)
    text = "\n".join(r.console)
    assert "boom" in text and "Uncaught Error: uncaught" in text and "Failed to fetch" in text, r.stderr[-2000:]
    assert chart_segments(r.dom) == {}


def test_compare_report_renders_offline(ksched: Any, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(EX / "pods.yaml"), "--config",
               str(EX / "configs" / "least-allocated.yaml"), "--compare", str(EX / "configs" / "most-allocated.yaml"),
               "--seed", "2", "--report", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?:", html)
    rendered = render(out, tmp_path)
    assert rendered.console == [], rendered.console
    assert_drew(rendered.dom, {"util-cpu": "bars", "util-memory": "bars", "util-nvidia-com-gpu": "bars",
                               "zones": "bars", "scores": "boxes"})
    dom = rendered.dom
    for heading in ("Placements that differ", "Pending in one variant and not the other", "Preemptions",
                    "Utilisation per node, before and after", "Spread of pods per zone",
                    "Per-plugin score distributions"):
        assert f"<h2>{heading}</h2>" in dom, heading
    placements = dom[dom.index("<h2>Placements that differ</h2>"):dom.index("<h2>Pending in one")]
    assert placements.count("<tr>") > 1, placements  # most-allocated packs differently
    preemptions = dom[dom.index("<h2>Preemptions</h2>"):]
    assert "shop/batch-1" in preemptions and "shop/critical-zone-c" in preemptions
    assert "NodeResourcesFit" in chart_segments(dom)["scores"]  # the score plugins label the box plots


def test_single_variant_report_shows_dra_devices(ksched: Any, tmp_path: Path) -> None:
    out = tmp_path / "dra.html"
    r = ksched("simulate", "--cluster", str(EX / "dra" / "cluster.yaml"), "--pods", str(EX / "dra" / "pods.yaml"),
               "--report", str(out))
    assert r.returncode == 0, r.stderr
    rendered = render(out, tmp_path)
    assert rendered.console == [], rendered.console
    assert_drew(rendered.dom, {"util-cpu": "bars", "util-dra-devices": "bars", "zones": "bars"})
    assert "<h2>Placements</h2>" in rendered.dom


def test_report_path_checked_before_work(ksched: Any, tmp_path: Path) -> None:
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--pods", str(EX / "pods.yaml"),
               "--report", str(tmp_path / "missing-dir" / "r.html"))
    assert r.returncode == 2 and "no such directory" in r.stderr and "Traceback" not in r.stderr

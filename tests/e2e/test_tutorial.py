"""docs/tutorial.md, executed: every `$ ` command of its console blocks runs and succeeds, and its code blocks
are applied to the scaffolded plugin exactly as the reader is told to (replace `filter`, add the test)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from scheduler_runtime.controlplane import ControlPlaneUnavailable, find_binaries

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "tutorial.md"


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]


def run(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    return subprocess.run(shlex.split(cmd), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_tutorial_runs_end_to_end(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    plugin_py = tmp_path / "plugins/avoid_spot/plugin.py"
    test_py = tmp_path / "plugins/avoid_spot/test_avoid_spot.py"
    ran = 0
    code_blocks = 0
    compare_out = ""
    for lang, body in blocks(DOC.read_text()):
        if lang == "console":
            for line in body.splitlines():
                if not line.startswith("$ "):
                    continue
                r = run(line[2:], tmp_path)
                assert r.returncode == 0, f"{line}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
                ran += 1
                if " --compare " in line and "--report" not in line:
                    compare_out = r.stdout
        elif lang == "python" and body.lstrip().startswith("def filter"):
            src = plugin_py.read_text()
            new, n = re.subn(r"    def filter\(self.*?\n        return None\n", body.replace("\\", "\\\\"), src,
                             count=1, flags=re.S)
            assert n == 1, "the scaffold's filter method was not found"
            plugin_py.write_text(new)
            code_blocks += 1
        elif lang == "python" and body.startswith("def test_"):
            test_py.write_text(test_py.read_text() + "\n\n" + body)
            code_blocks += 1
    assert ran == 9 and code_blocks == 2
    # step 5 shows a real difference: AvoidSpot (B) keeps search-index off the only SSD node, a spot node,
    # and both variants' reasons are printed for it
    assert re.search(r"^[1-9]\d* of \d+ placements differ", compare_out, re.M), compare_out
    assert re.search(r"shop/search-index\s.*node-b2.*Pending", compare_out), compare_out
    reasons = compare_out[compare_out.index("shop/search-index:"):]
    assert "A: scheduled to node-b2" in reasons and "node is a spot node" in reasons.split("\n")[2], reasons
    assert re.search(r"shop/batch-1\s.*preempted by shop/critical-zone-c", compare_out), compare_out
    report = (tmp_path / "whatif.html").read_text()
    assert "shop/search-index" in report and "node is a spot node" in report
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']https?:", report)  # nothing fetched on open
    # and it opens in Chromium, offline, charts drawn, with the difference the tutorial describes
    from tests.chromium import render
    from tests.e2e.test_report_chromium import assert_drew

    shown = render(tmp_path / "whatif.html", tmp_path)
    assert shown.console == [], shown.console
    assert_drew(shown.dom, {"util-cpu": "bars", "util-memory": "bars", "zones": "bars", "scores": "boxes"})
    one_side = shown.dom[shown.dom.index("<h2>Pending in one variant"):shown.dom.index("<h2>Preemptions")]
    assert "shop/search-index" in one_side and "node is a spot node" in one_side, one_side
    # the policy really is in force: the added test ran (pytest above) and the plugin now filters spot nodes
    # the reader's test ran on both backends (the real API server only where its binaries are installed)
    r = run(f"pytest -q -rs {test_py} -k spot_nodes_only", tmp_path)
    try:
        find_binaries()
        expected = "2 passed"
    except ControlPlaneUnavailable:
        expected = "1 passed, 1 skipped"
    assert r.returncode == 0 and expected in r.stdout, r.stdout

"""Headless Chromium for tests: load a local HTML file with the network unreachable, return the DOM after
scripts ran and every console message the page produced.

Chromium's own flags do it, no driver or extra package: `--dump-dom` prints the DOM once the load event
has fired and `--virtual-time-budget` has let timers run, and `--enable-logging=stderr` logs each console
message (console.log/warn/error and uncaught exceptions alike) as `INFO:CONSOLE...] "text", source: ...`.
The proxy points at a closed port, so anything the page tried to fetch from the network fails (and a
`fetch` failure shows up in the console). Chromium is the Debian package `chromium` (`make testdeps`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_CONSOLE = re.compile(r':CONSOLE[:(]\d*\)?\] "(.*)", source: (.*)$')
NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str:
    """The browser on PATH; a missing one fails under CI=true and skips elsewhere."""
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    msg = "headless Chromium not found (install the Debian package chromium: make testdeps)"
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


@dataclass
class Rendered:
    dom: str
    console: list[str]  # "text (source)" of every console message
    stderr: str


def _run(args: list[str], timeout: float) -> tuple[str, str]:
    """Run Chromium in its own process group and kill whatever of the group is left when it is done."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # renderer/GPU/zygote children of the browser we started
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    return out, err


def _flags(profile: Path) -> list[str]:
    flags = ["--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
             "--virtual-time-budget=10000"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return flags


def render(html: Path, tmp: Path, timeout: float = 120) -> Rendered:
    browser = find_chromium()
    profile = tmp / "chromium-profile"
    out, err = _run([browser, *_flags(profile), "--enable-logging=stderr", "--v=0", "--dump-dom",
                     html.resolve().as_uri()], timeout)
    console = []
    for line in err.splitlines():
        m = _CONSOLE.search(line)
        if m:
            console.append(f"{m.group(1)} ({m.group(2)})")
    return Rendered(out, console, err)


def screenshot(html: Path, png: Path, tmp: Path, width: int = 1400, height: int = 5200, timeout: float = 120) -> None:
    browser = find_chromium()
    _run([browser, *_flags(tmp / "chromium-profile-shot"), f"--window-size={width},{height}",
          f"--screenshot={png}", html.resolve().as_uri()], timeout)

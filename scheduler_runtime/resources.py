"""Where ksched's jinja2 templates are: the checkout's `templates/`, or `<prefix>/share/ksched/templates`
where a wheel installs them (pyproject's data-files), e.g. inside an image built by `ksched build`."""

from __future__ import annotations

import site
import sys
from pathlib import Path

SOURCE_TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def templates_dir() -> Path:
    if SOURCE_TEMPLATES.is_dir():
        return SOURCE_TEMPLATES
    # a venv or system install: <prefix>/share; `pip install --target DIR`: DIR/share beside the packages
    for base in (sys.prefix, sys.base_prefix, site.USER_BASE or "", str(SOURCE_TEMPLATES.parent)):
        p = Path(base) / "share" / "ksched" / "templates"
        if p.is_dir():
            return p
    return SOURCE_TEMPLATES  # callers say it is missing

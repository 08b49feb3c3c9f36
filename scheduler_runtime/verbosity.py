"""klog's -v on Python logging: kube's V(1)..V(3) lines get levels of their own between INFO and DEBUG.

kube-scheduler logs a line per bound pod at -v=2 ("Successfully bound pod to node") and per attempt at -v=3;
operators raise -v to watch decisions. With only INFO and DEBUG those levels had nothing to map to, so -v=2
showed what -v=0 shows. V(4) and above stay Python's DEBUG, where plugins' `log.debug` lines go, so a plugin
author's -v=4 keeps meaning "everything".
"""

from __future__ import annotations

import logging

V1, V2, V3 = logging.INFO - 1, logging.INFO - 2, logging.INFO - 3
for _lvl in (V1, V2, V3):
    # "INFO<n>": the text format prints the first letter, as klog prints "I" for every V(n) line
    logging.addLevelName(_lvl, f"INFO{logging.INFO - _lvl}")


def threshold(verbosity: int) -> int:
    """The root logger's level for `-v verbosity` (negative: warnings and errors only, as before)."""
    if verbosity < 0:
        return logging.WARNING
    if verbosity >= 4:
        return logging.DEBUG
    return logging.INFO - verbosity


def klog_v(levelno: int) -> int:
    """The V a record was logged at (JSON's "v" field): 0 at INFO and above, 4 for DEBUG."""
    if levelno >= logging.INFO:
        return 0
    if levelno >= V3:
        return logging.INFO - levelno
    return 4

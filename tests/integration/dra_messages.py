"""How the DRA differential (test_dra_differential.py) compares FailedScheduling messages.

Byte for byte, except two kinds of Filter error. kube-scheduler runs Filter on many nodes in parallel and a
Filter error ends the cycle with whichever node's error arrives first (findNodesThatPassFilters: the first
SendWithCancel wins), so when several nodes fail with one, what the message says about the node varies from run
to run of kube itself:

- a selector failing at run time: the device named (its pool is the node) and the attribute values quoted from
  it are left out; the claim or class, the selector's index and the error itself (a parse error is not a
  missing key) still count;
- a `matchAttribute` constraint that an allocationMode All request cannot meet (the allocator's "cannot add
  device ... because a claim constraint would not be satisfied"): the device and the request are left out (on
  another node another All request of the claim may be the one that fails); the claim still counts.
"""

from __future__ import annotations

import re

#: `running "DynamicResources" filter plugin: <claim or class>: selector #<i> on device <id>: CEL runtime error: ..`
_RUNTIME_ERROR = re.compile(r'^(running "DynamicResources" filter plugin: .*: selector #\d+) on device \S+: '
                            r"CEL runtime error: (.*)$", re.DOTALL)
_QUOTED = re.compile(r'"[^"]*"')
#: `running "DynamicResources" filter plugin: claim <ns>/<name>, request <r>: cannot add device <id> because ..`
_CONSTRAINT_ERROR = re.compile(r'^(running "DynamicResources" filter plugin: claim \S+), request \S+: cannot add '
                               r"device \S+ (because a claim constraint would not be satisfied)$", re.DOTALL)


def comparable_message(msg: str) -> str:
    """The message as the differential compares it (see the module docstring)."""
    m = _CONSTRAINT_ERROR.match(msg)
    if m is not None:
        return f"{m[1]}, request <request>: cannot add device <device> {m[2]}"
    m = _RUNTIME_ERROR.match(msg)
    if m is None:
        return msg
    return f'{m[1]} on device <device>: CEL runtime error: {_QUOTED.sub("<value>", m[2])}'

"""How the DRA differential (test_dra_differential.py) compares FailedScheduling messages.

Byte for byte, except one kind: a selector failing at run time. kube-scheduler runs Filter on many nodes in
parallel and a Filter error ends the cycle with whichever node's error arrives first, so when the selector fails
on every node, the device named in the message (its pool is the node) and the attribute values quoted from it
vary from run to run of kube itself. For that kind only, the device and the quoted values are left out; the
claim or class, the selector's index and the error itself (a parse error is not a missing key) still count.
"""

from __future__ import annotations

import re

#: `running "DynamicResources" filter plugin: <claim or class>: selector #<i> on device <id>: CEL runtime error: ..`
_RUNTIME_ERROR = re.compile(r'^(running "DynamicResources" filter plugin: .*: selector #\d+) on device \S+: '
                            r"CEL runtime error: (.*)$", re.DOTALL)
_QUOTED = re.compile(r'"[^"]*"')


def comparable_message(msg: str) -> str:
    """The message as the differential compares it (see the module docstring)."""
    m = _RUNTIME_ERROR.match(msg)
    if m is None:
        return msg
    return f'{m[1]} on device <device>: CEL runtime error: {_QUOTED.sub("<value>", m[2])}'

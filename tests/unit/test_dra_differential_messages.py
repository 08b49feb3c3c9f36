"""The DRA differential's message comparison: only a selector's runtime error is compared without the device
kube-scheduler happened to report first (tests/integration/dra_messages.py); any other difference still counts."""

from __future__ import annotations

from tests.integration.dra_messages import comparable_message

PREFIX = 'running "DynamicResources" filter plugin: claim t-1/X-c0: selector #0'


def _runtime(device: str, value: str, selector: int = 0, claim: str = "claim t-1/X-c0") -> str:
    return (f'running "DynamicResources" filter plugin: {claim}: selector #{selector} on device {device}: CEL '
            f'runtime error: IP Address "{value}" parse error during conversion from string: ParseAddr("{value}"): '
            f"unable to parse IP")


def test_runtime_error_on_another_node_compares_equal() -> None:
    a = _runtime("X.example.com/drx-X-0/gpu-0", "t4")
    b = _runtime("X.example.com/drx-X-1/gpu-1", "a100")
    assert a != b and comparable_message(a) == comparable_message(b)


def test_a_genuinely_different_error_still_differs() -> None:
    base = _runtime("X.example.com/drx-X-0/gpu-0", "t4")
    others = [
        _runtime("X.example.com/drx-X-0/gpu-0", "t4", selector=1),  # another selector
        _runtime("X.example.com/drx-X-0/gpu-0", "t4", claim="claim t-1/X-c1"),  # another claim
        _runtime("X.example.com/drx-X-0/gpu-0", "t4", claim="class gpu-X"),  # the class's selector
        f"{PREFIX} on device X.example.com/drx-X-0/gpu-0: CEL runtime error: no such key: model",  # another error
        f"{PREFIX}: CEL compile error: undeclared reference to 'x'",  # not a runtime error
        "0/6 nodes are available: 3 cannot allocate all claims, 3 node(s) didn't match Pod's node "
        "affinity/selector.",
    ]
    for other in others:
        assert comparable_message(other) != comparable_message(base), other


def test_other_messages_are_compared_byte_for_byte() -> None:
    msg = "0/6 nodes are available: 3 cannot allocate all claims, 3 node(s) didn't match Pod's node affinity/selector."
    assert comparable_message(msg) == msg
    assert comparable_message(msg) != comparable_message(msg.replace("3 cannot", "2 cannot"))


def _constraint(device: str, request: str = "r1", claim: str = "t-1/X-m0") -> str:
    return (f'running "DynamicResources" filter plugin: claim {claim}, request {request}: cannot add device '
            f"{device} because a claim constraint would not be satisfied")


def test_constraint_error_on_another_node_compares_equal() -> None:
    """An All request under matchAttribute fails on several nodes: kube reports whichever node's error came first,
    and on another node another All request of the claim may be the one that fails."""
    a = _constraint("X.example.com/drx-X-1/gpu-0")
    b = _constraint("X.example.com/drx-X-2/gpu-3", request="r0")
    assert a != b and comparable_message(a) == comparable_message(b)


def test_constraint_error_of_another_claim_or_kind_still_differs() -> None:
    base = comparable_message(_constraint("X.example.com/drx-X-1/gpu-0"))
    assert comparable_message(_constraint("X.example.com/drx-X-1/gpu-0", claim="t-1/X-m1")) != base
    assert comparable_message(_runtime("X.example.com/drx-X-1/gpu-0", "t4")) != base
    assert comparable_message(_constraint("X.example.com/drx-X-1/gpu-0").replace("claim constraint", "x")) != base

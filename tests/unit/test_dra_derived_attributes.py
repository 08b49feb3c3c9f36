"""DRADerivedAttributes (alpha, off by default in 1.37) on the embedded cluster, and kube's compile and evaluation
cases for derived attribute expressions.

A request's `derivedAttributes` are CEL expressions evaluated per candidate device; a constraint naming one
compares its values instead of the device attribute of that name. With the gate on kube runs its experimental
allocator; with it off every allocator refuses a request declaring derived attributes (the API server may have
stored them with its own gate on), which the pod's status reports while the scheduler keeps going."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.featuregates import parse_feature_gates
from scheduler_runtime.plugins.dynamicresources import cel
from scheduler_runtime.plugins.dynamicresources.allocator import Features

from .test_dra_consumable import NS, _message, _node, _pod, _run, _where
from .test_dra_gates import _devices

GATE = "DRADerivedAttributes"
ON = parse_feature_gates([f"{GATE}=true"], "1.37")
GPU, NIC = "gpu.example.com", "nic.example.com"
INDEX = "numa.example.com/index"


def _class(name: str, driver: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def _slice(driver: str, node: str, devices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`devices`: name -> attributes."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": n, "attributes": a} for n, a in devices.items()]}}


def _numa_index(driver: str, attr: str) -> str:
    """The NUMA node number after the dash of a string attribute such as `numa-1`."""
    return f'int(device.attributes["{driver}"].{attr}.split("-")[1])'


def _claim(name: str, requests: list[tuple[str, str, str | None]], kind: str = "matchAttribute",
           count: int = 1) -> dict[str, Any]:
    """`requests`: (name, class, derived index expression or None)."""
    reqs = []
    for rname, cls, expr in requests:
        body: dict[str, Any] = {"deviceClassName": cls, "count": count}
        if expr is not None:
            body["derivedAttributes"] = [{"name": INDEX, "expression": expr}]
        reqs.append({"name": rname, "exactly": body})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": reqs, "constraints": [{kind: INDEX}]}}}


def _cluster(gpu_numa: list[str], nic_numa: list[str]) -> list[dict[str, Any]]:
    """Node n1 with GPUs whose `numa` and NICs whose `numaNode` are the given strings."""
    return [_node("n1"), _class("gpu", GPU), _class("nic", NIC),
            _slice(GPU, "n1", {f"gpu-{i}": {"numa": {"string": v}} for i, v in enumerate(gpu_numa)}),
            _slice(NIC, "n1", {f"nic-{i}": {"numaNode": {"string": v}} for i, v in enumerate(nic_numa)})]


ALIGNED = [("gpu", "gpu", _numa_index(GPU, "numa")), ("nic", "nic", _numa_index(NIC, "numaNode"))]


def test_the_gate_is_taken_at_emulated_1_37() -> None:
    assert ON[GATE] is True
    f = Features.from_gates(ON)
    assert f.derived_attributes and f.experimental_allocator and not f.stable_allocator
    assert not Features.from_gates(parse_feature_gates([], "1.37")).derived_attributes
    with pytest.raises(UsageError, match="feature is PreAlpha at emulated version 1.36"):
        parse_feature_gates([f"{GATE}=true"], "1.36")


def test_match_attribute_aligns_devices_of_two_drivers_on_a_derived_numa_index() -> None:
    """gpu-0 is on NUMA node 0, gpu-1 on 1, the only NIC on 1: the derived index (parsed from attributes of
    different names and drivers) makes the search backtrack from gpu-0 to gpu-1."""
    m = _run([*_cluster(["numa-0", "numa-1"], ["numa-1"]), _claim("c", ALIGNED)], [_pod("a", "c")], ON)
    assert (_where(m, "a"), _devices(m, "c")) == ("n1", ["gpu-1", "nic-0"])


def test_no_common_derived_value_leaves_the_pod_pending() -> None:
    m = _run([*_cluster(["numa-0"], ["numa-1"]), _claim("c", ALIGNED)], [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    assert "cannot allocate all claims" in _message(m, "a")


def test_distinct_attribute_over_a_derived_value() -> None:
    claim = _claim("c", [("gpu", "gpu", _numa_index(GPU, "numa"))], "distinctAttribute", count=2)
    m = _run([*_cluster(["numa-0", "numa-0", "numa-1"], []), claim], [_pod("a", "c")], ON)
    assert _devices(m, "c") == ["gpu-0", "gpu-2"]


def test_a_derived_attribute_failing_on_a_device_is_the_pods_error_and_the_scheduler_goes_on() -> None:
    """gpu-1 has no `numa`: kube stops the allocation with the evaluation's error (a scheduling error, not
    unschedulable); the next pod, whose claim has no derived attributes, still gets scheduled."""
    objects = [_node("n1"), _class("gpu", GPU),
               _slice(GPU, "n1", {"gpu-0": {"other": {"string": "x"}}, "gpu-1": {"other": {"string": "y"}}}),
               _claim("c", [("gpu", "gpu", _numa_index(GPU, "numa"))]),
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "plain",
                                                                                         "namespace": NS},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}]
    m = _run(objects, [_pod("a", "c"), _pod("b", "plain")], ON)
    assert _where(m, "a") == ""
    assert (f"evaluate derived attribute {INDEX} on device {GPU}/n1/gpu-0 failed: no such key: numa"
            in _message(m, "a"))
    assert _where(m, "b") == "n1"


@pytest.mark.parametrize(("expression", "error"), [
    ('device.attributes["gpu.example.com"].numa +', "compilation failed: ERROR: <input>:1:"),
    ('device.attributes["gpu.example.com"].numa + 0.5', "must evaluate to a primitive scalar (string, integer, "
                                                        "boolean, semver) or a list of these scalars, not double")])
def test_an_expression_that_does_not_compile(expression: str, error: str) -> None:
    """The API server refuses such claims; one that got stored anyway fails as kube's allocator fails it."""
    m = _run([*_cluster(["numa-0"], []), _claim("c", [("gpu", "gpu", expression)])], [_pod("a", "c")], ON)
    assert _where(m, "a") == ""
    assert f"compile derived attribute {INDEX} failed: {error}" in _message(m, "a")


def test_with_the_gate_off_a_request_with_derived_attributes_is_refused() -> None:
    """kube's stable and incubating allocators (gate off) refuse such a request rather than ignore the
    constraint, whatever the devices."""
    m = _run([*_cluster(["numa-1"], ["numa-1"]), _claim("c", ALIGNED)], [_pod("a", "c")])
    assert _where(m, "a") == ""
    assert (f"claim {NS}/c, request gpu: cannot handle request with derived attributes, the feature is disabled"
            in _message(m, "a"))


def test_a_derived_attribute_overrides_the_devices_own_for_its_request_only() -> None:
    """Both GPUs carry `numa`; request `a` derives it as "numa-1" for every device, request `b` reads the
    device's own value, so `b` must get gpu-1 while `a` may take gpu-0."""
    name = f"{GPU}/numa"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": NS},
             "spec": {"devices": {"requests": [
                 {"name": "a", "exactly": {"deviceClassName": "gpu",
                                           "derivedAttributes": [{"name": name, "expression": '"numa-1"'}]}},
                 {"name": "b", "exactly": {"deviceClassName": "gpu"}}],
                 "constraints": [{"matchAttribute": name}]}}}
    m = _run([*_cluster(["numa-0", "numa-1"], []), claim], [_pod("a", "c")], ON)
    assert _devices(m, "c") == ["gpu-0", "gpu-1"]


# ------------------------------------------------------------------------------------ kube's CEL cases
# k8s.io/dynamic-resource-allocation v0.37.2 cel/compile_test.go, TestCompileDerivedAttributes (the scheduler
# compiles in the StoredExpressions environment, where lists are allowed whatever DRAListTypeAttributes: the
# list-gated cases apply as valid) and TestEvaluateDerivedAttributes.
COMPILES = ["true", "[true, false]", "1", "[1, 2, 3]", '"fish"', '["a", "b"]', 'semver("1.0.0")',
            '[semver("1.0.0"), semver("2.0.0")]', 'device.attributes["dra.example.com"]["numa"]',
            '[device.attributes["dra.example.com"]["numa"]]', 'dyn("foo")', '[dyn("foo"), dyn(1)]']
#: kube's invalid-null-literal, then ksched's own
COMPILE_ERRORS = {"null": "not null_type", "1.5": "not double", '{"a": 1}': "not map(string, int)",
                  "[[1]]": "not list(list(int))", 'quantity("1")': "not kubernetes.Quantity"}
DEVICE = cel.DeviceInput("driver-a", {"attributes": {
    "bool-attr": {"bool": True}, "int-attr": {"int": 42}, "str-attr": {"string": "hello"},
    "ver-attr": {"version": "1.0.0"}, "bool-list-attr": {"bools": [True, False]},
    "int-list-attr": {"ints": [1, 2, 3]}, "str-list-attr": {"strings": ["hello", "world"]},
    "ver-list-attr": {"versions": ["1.0.0", "2.0.0"]}}})
A = 'device.attributes["driver-a"]'
EVALUATES = {
    "true": {"bool": True}, "42": {"int": 42}, '"hello"': {"string": "hello"},
    'semver("1.0.0")': {"version": "1.0.0"},
    f'{A}["bool-attr"]': {"bool": True}, f'{A}["int-attr"]': {"int": 42}, f'{A}["str-attr"]': {"string": "hello"},
    f'{A}["ver-attr"]': {"version": "1.0.0"},
    "[true, false]": {"bools": [True, False]}, "[1, 2, 3]": {"ints": [1, 2, 3]},
    '["hello", "world"]': {"strings": ["hello", "world"]},
    '[semver("1.0.0"), semver("2.0.0")]': {"versions": ["1.0.0", "2.0.0"]},
    f'{A}["bool-list-attr"]': {"bools": [True, False]}, f'{A}["int-list-attr"]': {"ints": [1, 2, 3]},
    f'{A}["str-list-attr"]': {"strings": ["hello", "world"]},
    f'{A}["ver-list-attr"]': {"versions": ["1.0.0", "2.0.0"]},
    "[]": {"strings": []},
}
EVALUATION_ERRORS = {
    f'[dyn({A}["ver-attr"]), dyn({A}["str-attr"])]': "expected list element at index 1 to be semver, got string",
    f'[dyn({A}["bool-attr"]), dyn({A}["str-attr"])]': "expected list element at index 1 to be bool, got string",
    f'[dyn({A}["int-attr"]), dyn({A}["str-attr"])]': "expected list element at index 1 to be int, got string",
    f'[dyn({A}["str-attr"]), dyn({A}["int-attr"])]': "expected list element at index 1 to be string, got int64",
    f'{A}["non-existent-attr"]': "no such key",
    f'{A}["int-attr"] + "hello"': "no such overload",
    "dyn(null)": "unsupported CEL return type: structpb.NullValue",
    # kube refuses these two when compiling (invalid-map, invalid-list-of-maps); ksched's device is untyped
    "device.attributes": "unsupported CEL return type: map[ref.Val]ref.Val",
    "[device.attributes]": "unsupported list element type: map[ref.Val]ref.Val",
}


@pytest.mark.parametrize("expression", COMPILES)
def test_kube_derived_attribute_compiles(expression: str) -> None:
    assert cel.compile_expression(expression, derived=True).error is None


@pytest.mark.parametrize(("expression", "error"), COMPILE_ERRORS.items())
def test_kube_derived_attribute_compile_errors(expression: str, error: str) -> None:
    got = cel.compile_expression(expression, derived=True).error or ""
    assert got == ("must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these "
                   f"scalars, {error}")


@pytest.mark.parametrize(("expression", "attribute"), EVALUATES.items())
def test_kube_derived_attribute_values(expression: str, attribute: dict[str, Any]) -> None:
    assert cel.compile_expression(expression, derived=True).derive(DEVICE) == attribute


@pytest.mark.parametrize(("expression", "error"), EVALUATION_ERRORS.items())
def test_kube_derived_attribute_evaluation_errors(expression: str, error: str) -> None:
    compiled = cel.compile_expression(expression, derived=True)
    assert compiled.error is None
    with pytest.raises(cel.CelError) as exc:
        compiled.derive(DEVICE)
    assert error in str(exc.value)


def test_selectors_and_derived_attributes_are_cached_apart() -> None:
    """kube's cache keys the two kinds apart: `1` is a valid derived attribute and an invalid selector."""
    cache = cel.CelCache()
    assert cache.get_or_compile_derived("1").error is None
    assert "must evaluate to bool" in (cache.get_or_compile("1").error or "")

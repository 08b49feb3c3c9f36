"""Numbers in configs and objects: plugin weights (int32, the total-score overflow check) and quantities."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_runtime.config import default_config
from scheduler_runtime.config.loader import ConfigError, build
from scheduler_runtime.errors import InputError
from scheduler_runtime.framework.registry import Registry
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.quantity import QuantityTooLarge, resource_amount
from scheduler_runtime.simulate import simulate


def _cfg(weight: object, name: str = "TaintToleration") -> dict:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler",
                          "plugins": {"multiPoint": {"enabled": [{"name": name, "weight": weight}]}}}]}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry([])


@pytest.mark.parametrize("weight", [10**20, 92_000_000_000_000_000, 2**31, -(2**31) - 1])
def test_a_weight_outside_int32_is_a_decoding_error(registry: Registry, weight: int) -> None:
    with pytest.raises(ConfigError) as info:
        build(_cfg(weight), registry)
    assert str(info.value) == (f"profiles[0].plugins.multiPoint.enabled[0].weight: Invalid value: {weight}: out of "
                               f"range of int32 (json: cannot unmarshal number {weight} into a field of type int32)")


def test_a_negative_weight_before_another_score_plugin_overflows_as_in_kube(registry: Registry) -> None:
    """kube's getScoreWeights computes MaxInt64 - total in int64: a negative total wraps it negative,
    so the next score plugin fails the check."""
    with pytest.raises(ConfigError, match="total score of Score plugins could overflow"):
        build(_cfg(-1), registry)


def test_int32_extremes_that_kube_accepts_are_accepted(registry: Registry) -> None:
    cfg = build(_cfg(2**31 - 1), registry)
    assert ("TaintToleration", 2**31 - 1) in cfg.profiles[0].plan["score"]


@pytest.mark.parametrize(("text", "cpu", "memory"), [
    ("1.", 1000, 1), (".5", 500, 1), ("+1", 1000, 1), ("-0", 0, 0), ("1e-400", 1, 1), ("0.1m", 1, 1),
    ("1.5Ki", 1536000, 1536), ("1e+1", 10000, 10), ("7Ei", None, 7 * 2**60), ("1E", None, 10**18),
])
def test_quantities_parse_like_resource_parse_quantity(text: str, cpu: int | None, memory: int) -> None:
    if cpu is None:
        with pytest.raises(QuantityTooLarge):
            resource_amount("cpu", text, "f")
    else:
        assert resource_amount("cpu", text, "f") == cpu
    assert resource_amount("memory", text, "f") == memory


@pytest.mark.parametrize("text", ["1e400", "9999999Ei", "99999999999999999999999", "8Ei", "1e2147483647",
                                  "1" + "0" * 5000, 10**30])
def test_quantities_beyond_int64_are_refused_without_computing_them(text: object) -> None:
    with pytest.raises(QuantityTooLarge) as info:
        resource_amount("memory", text, "spec.x")
    assert info.value.exit_code == 1 and "too large" in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize(("text", "what"), [("1K", "suffix"), ("1e", "suffix"), ("1Mi5", "suffix"),
                                            (" 1", "regular expression"), ("", "regular expression"),
                                            (True, "regular expression")])
def test_malformed_quantities(text: object, what: str) -> None:
    with pytest.raises(InputError, match=what):
        resource_amount("cpu", text, "f")


@pytest.mark.parametrize("value", ["1E", "1e400", "9999999Ei", "1e2147483647"])
def test_simulate_refuses_a_pod_file_with_an_oversized_quantity(tmp_path: Path, value: str) -> None:
    """Used to be a traceback (decimal.Overflow) or a pod left pending with exit 0."""
    (tmp_path / "nodes.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
                                         "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n")
    pods = tmp_path / "pods.yaml"
    pods.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
                    f"spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: '{value}'}}}}}}]}}\n")
    with pytest.raises(InputError) as info:
        reg = build_registry([])
        simulate([tmp_path / "nodes.yaml"], [pods], default_config(reg), reg)
    msg = str(info.value)
    assert msg.startswith(f"{pods}: spec.containers[0].resources.requests.cpu: quantity '{value}' is too large")
    assert info.value.exit_code == 1


def test_resource_amount_remembers_valid_text_but_refuses_bad_text_every_time() -> None:
    import pytest as _pytest

    from scheduler_runtime import quantity
    from scheduler_runtime.errors import InputError

    quantity._AMOUNTS.clear()
    assert quantity.resource_amount("cpu", "250m") == 250
    assert quantity.resource_amount("memory", "250m") == 1  # same text, other unit: not the cpu entry
    assert quantity._AMOUNTS == {(True, "250m"): 250, (False, "250m"): 1}
    for field in ("a.cpu", "b.cpu"):
        with _pytest.raises(InputError) as err:
            quantity.resource_amount("cpu", "12x", field)
        assert field in str(err.value.field or err.value)

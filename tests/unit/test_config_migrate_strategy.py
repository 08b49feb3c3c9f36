"""`ksched config migrate` keeps a v1beta1 MostAllocated scoring choice (issue 17): v1 has no
NodeResourcesMostAllocated plugin, so the choice moves to NodeResourcesFit's scoringStrategy, as
kube's own move of those plugins into NodeResourcesFit did."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.config.loader import build
from scheduler_runtime.config.migrate import migrate
from scheduler_runtime.options.registry import load_registry

V1BETA1 = "kubescheduler.config.k8s.io/v1beta1"


def _doc(plugins: dict[str, Any], plugin_config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    prof: dict[str, Any] = {"schedulerName": "default-scheduler", "plugins": plugins}
    if plugin_config is not None:
        prof["pluginConfig"] = plugin_config
    return {"apiVersion": V1BETA1, "kind": "KubeSchedulerConfiguration", "profiles": [prof]}


def _fit(cfg_doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [pc for pc in cfg_doc["profiles"][0].get("pluginConfig") or [] if pc["name"] == "NodeResourcesFit"]


@pytest.mark.parametrize("plugin_config", [None, []])
def test_most_allocated_enabled_without_args_keeps_the_strategy(plugin_config: Any) -> None:
    m = migrate(_doc({"score": {"enabled": [{"name": "NodeResourcesMostAllocated", "weight": 3}],
                                "disabled": [{"name": "NodeResourcesLeastAllocated"}]}}, plugin_config))
    fit = _fit(m.doc)
    assert len(fit) == 1 and fit[0]["args"]["scoringStrategy"]["type"] == "MostAllocated"
    cfg = build(m.doc, load_registry(None))  # the defaulted v1 config scores with MostAllocated
    strategy = next(pc for pc in cfg.raw["profiles"][0]["pluginConfig"] if pc["name"] == "NodeResourcesFit")
    assert strategy["args"]["scoringStrategy"]["type"] == "MostAllocated"
    assert any("scoringStrategy.type set to MostAllocated" in c for c in m.changes)


def test_most_allocated_args_merge_into_an_existing_fit_entry() -> None:
    m = migrate(_doc({"score": {"enabled": [{"name": "NodeResourcesMostAllocated"}]}}, [
        {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}},
        {"name": "NodeResourcesMostAllocated", "args": {"resources": [{"name": "cpu", "weight": 2}]}},
    ]))
    fit = _fit(m.doc)
    assert len(fit) == 1, "one NodeResourcesFit entry (two are a Duplicate value error)"
    assert fit[0]["args"] == {"ignoredResources": ["example.com/foo"],
                              "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]}}
    build(m.doc, load_registry(None))  # valid v1


def test_strategy_args_before_the_fit_entry_merge_too() -> None:
    m = migrate(_doc({"score": {"enabled": [{"name": "NodeResourcesMostAllocated"}]}}, [
        {"name": "NodeResourcesMostAllocated", "args": {"resources": [{"name": "memory", "weight": 1}]}},
        {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}},
    ]))
    fit = _fit(m.doc)
    assert len(fit) == 1 and fit[0]["args"]["scoringStrategy"]["type"] == "MostAllocated"
    assert fit[0]["args"]["ignoredResources"] == ["example.com/foo"]
    build(m.doc, load_registry(None))

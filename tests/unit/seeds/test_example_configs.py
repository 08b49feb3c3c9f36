"""examples/configs/<seed plugin>.yaml: valid v1 KubeSchedulerConfigurations whose args the plugins accept."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from scheduler_runtime.plugins import DEFAULT_MULTIPOINT

from .conftest import PLUGINS, REPO

CONFIGS = {
    "my-prefilter.yaml": "MyPreFilter",
    "network-traffic.yaml": "NetworkTraffic",
    "node-crd-resource-fit.yaml": "NodeCRDResourceFit",
    "coscheduling.yaml": "Coscheduling",
}
POINTS = {"multiPoint", "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
          "reserve", "permit", "preBind", "bind", "postBind"}
IN_TREE = {name for name, _ in DEFAULT_MULTIPOINT}


def _load(name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((REPO / "examples" / "configs" / name).read_text()) if d is not None]
    assert len(docs) == 1
    return docs[0]


@pytest.mark.parametrize("name,plugin", sorted(CONFIGS.items()))
def test_config_shape_and_args(name, plugin, plugin_classes):
    cfg = _load(name)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    enabled_somewhere = False
    for prof in cfg["profiles"]:
        for point, sets in (prof.get("plugins") or {}).items():
            assert point in POINTS, point
            for key, entries in sets.items():
                assert key in ("enabled", "disabled")
                for e in entries:
                    assert set(e) <= {"name", "weight"}
                    known = e["name"] in plugin_classes or e["name"] in IN_TREE
                    assert known or (key == "disabled" and e["name"] == "*"), e
                    enabled_somewhere |= key == "enabled" and e["name"] == plugin
        for pc in prof.get("pluginConfig") or []:
            cls = plugin_classes.get(pc["name"])
            if cls is not None:
                cls.args_model.model_validate(pc.get("args") or {})  # raises if the plugin would refuse it
    assert enabled_somewhere


def test_coscheduling_is_the_only_queue_sort():
    prof = _load("coscheduling.yaml")["profiles"][0]
    qs = prof["plugins"]["queueSort"]
    assert qs["enabled"] == [{"name": "Coscheduling"}] and qs["disabled"] == [{"name": "*"}]
    assert {"name": "Coscheduling"} in prof["plugins"]["multiPoint"]["enabled"]


def _loader():
    try:
        mod = importlib.import_module("scheduler_runtime.config")
    except ImportError:
        return None
    return getattr(mod, "load_config", None)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_configs_load_with_the_ksched_loader(name):
    load_config = _loader()
    if load_config is None:
        pytest.skip("scheduler_runtime.config.load_config is not available yet")
    from scheduler_runtime.plugins.registry import build_registry

    cfg = load_config(Path(REPO / "examples" / "configs" / name), build_registry([PLUGINS]))
    plugin = CONFIGS[name]
    assert any(plugin in {n for entries in prof.plan.values() for n, _ in entries} for prof in cfg.profiles)

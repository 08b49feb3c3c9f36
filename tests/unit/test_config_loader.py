"""KubeSchedulerConfiguration loading: defaults, multiPoint expansion, weights, args, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_runtime.config import ConfigError, load_config
from scheduler_runtime.errors import InputError
from scheduler_runtime.plugins.noderesources import NodeResourcesFitArgs
from scheduler_runtime.plugins.registry import build_registry

REG = build_registry([])
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def load(tmp_path: Path, body: str):
    f = tmp_path / "c.yaml"
    f.write_text(HEAD + body)
    return load_config(f, REG)


def errors(tmp_path: Path, body: str, head: str = HEAD) -> list[str]:
    f = tmp_path / "c.yaml"
    f.write_text(head + body)
    with pytest.raises(ConfigError) as exc:
        load_config(f, REG)
    return exc.value.errors


def test_default_profile_plan_and_weights():
    cfg = load_config(None, REG)
    (prof,) = cfg.profiles
    assert prof.scheduler_name == "default-scheduler"
    assert prof.plan["queueSort"] == [("PrioritySort", 0)]
    assert prof.plan["bind"] == [("DefaultBinder", 0)]
    assert [n for n, _ in prof.plan["filter"]] == ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
                                                   "NodePorts", "NodeResourcesFit", "VolumeRestrictions",
                                                   "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
                                                   "PodTopologySpread", "InterPodAffinity", "DynamicResources",
                                                   "NodeDeclaredFeatures"]
    # VolumeBinding implements Score (StorageCapacityScoring), so kube expands it into score with weight 1
    assert dict(prof.plan["score"]) == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                        "VolumeBinding": 1, "PodTopologySpread": 2, "InterPodAffinity": 2,
                                        "DynamicResources": 2,
                                        "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
    # DynamicResources comes first (kube 1.36's "no new claims to deallocate" led the PostFilter message)
    assert prof.plan["postFilter"] == [("DynamicResources", 0), ("DefaultPreemption", 0)]
    assert isinstance(prof.args["NodeResourcesFit"], NodeResourcesFitArgs)
    assert cfg.pod_initial_backoff_seconds == 1 and cfg.pod_max_backoff_seconds == 10
    assert cfg.leader_election.lease_duration == 15 and cfg.leader_election.resource_name == "kube-scheduler"


def test_specific_point_overrides_multipoint_weight_and_order(tmp_path):
    cfg = load(tmp_path, """profiles:
- schedulerName: s
  plugins:
    score:
      enabled: [{name: ImageLocality, weight: 5}]
      disabled: [{name: NodeResourcesBalancedAllocation}]
""")
    score = cfg.profiles[0].plan["score"]
    assert score[0] == ("ImageLocality", 5)  # overrides come first
    assert "NodeResourcesBalancedAllocation" not in dict(score)


def test_disable_star_and_custom_set(tmp_path):
    cfg = load(tmp_path, """profiles:
- schedulerName: s
  plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled: [{name: PrioritySort}, {name: NodeResourcesFit, weight: 4}, {name: DefaultBinder}]
""")
    plan = cfg.profiles[0].plan
    assert plan["filter"] == [("NodeResourcesFit", 0)] and plan["score"] == [("NodeResourcesFit", 4)]


def test_plugin_args_are_validated_and_defaulted(tmp_path):
    cfg = load(tmp_path, """profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
""")
    args = cfg.profiles[0].args["NodeResourcesFit"]
    assert args.scoring_strategy.type == "MostAllocated"
    assert [r.name for r in args.scoring_strategy.resources] == ["cpu", "memory"]
    errs = errors(tmp_path, """profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Bogus}}
""")
    assert any("profiles[0].pluginConfig[0].args.scoringStrategy.type" in e for e in errs)


@pytest.mark.parametrize("body, expect", [
    ("profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: NoSuchPlugin}]\n",
     'plugin "NoSuchPlugin" does not exist'),
    ("profiles:\n- plugins:\n    filter:\n      enabled: [{name: TopologyPlacement}]\n",
     "not supported by ksched yet"),
    ("profiles:\n- plugins:\n    filter:\n      enabled: [{name: EBSLimits}]\n", 'was invalid in version "v1"'),
    ("profiles:\n- plugins:\n    filter:\n      enabled: [{name: ImageLocality}]\n",
     'plugin "ImageLocality" does not extend FilterPlugin plugin'),
    ("percentageOfNodesToScore: 101\n", "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
    ("profiles:\n- schedulerName: a\n- schedulerName: a\n", 'profiles[1].schedulerName: Duplicate value: "a"'),
    ("parallelism: 0\n", "parallelism: Invalid value: 0: should be an integer value greater than zero"),
    ("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n", "podMaxBackoffSeconds: Invalid value: 2"),
    ("bogusField: 1\n", 'bogusField: unknown field "bogusField"'),
    ("profiles:\n- schedulerName: a\n  plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n",
     "only one queue sort plugin required"),
    ("profiles:\n- schedulerName: a\n  plugins:\n    bind:\n      disabled: [{name: '*'}]\n",
     "at least one bind plugin is needed"),
])
def test_refusals(tmp_path, body: str, expect: str):
    errs = errors(tmp_path, body)
    assert any(expect in e for e in errs), errs


def test_removed_api_version_points_to_migrate(tmp_path):
    errs = errors(tmp_path, "profiles: []\n", head="apiVersion: kubescheduler.config.k8s.io/v1beta3\n"
                                                   "kind: KubeSchedulerConfiguration\n")
    assert "removed in Kubernetes 1.29" in errs[0] and "ksched config migrate" in errs[0]


def test_not_a_scheduler_config(tmp_path):
    errs = errors(tmp_path, "metadata: {name: x}\n", head="apiVersion: v1\nkind: Pod\n")
    assert "not a KubeSchedulerConfiguration" in errs[0]


def test_bad_files(tmp_path):
    with pytest.raises(InputError, match="empty file"):
        (tmp_path / "e.yaml").write_text("")
        load_config(tmp_path / "e.yaml", REG)
    with pytest.raises(InputError, match="duplicate key"):
        (tmp_path / "d.yaml").write_text(HEAD + "parallelism: 1\nparallelism: 2\n")
        load_config(tmp_path / "d.yaml", REG)
    with pytest.raises(InputError, match="YAML bomb"):
        (tmp_path / "b.yaml").write_text("a: &a [x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20))
            + "z: [" + ", ".join(["*u"] * 1200) + "]\n")
        load_config(tmp_path / "b.yaml", REG)
    with pytest.raises(InputError, match="is a directory"):
        load_config(tmp_path, REG)
    with pytest.raises(InputError, match="binary file"):
        (tmp_path / "bin.yaml").write_bytes(b"\x00\x01\x02")
        load_config(tmp_path / "bin.yaml", REG)

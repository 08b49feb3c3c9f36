"""Validation errors worded as kube-scheduler words them: every problem at its own field path, values Go-style.

One test per reviewed defect; messages are checked whole against pkg/scheduler/apis/config/validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import Field

from scheduler_runtime.config import ConfigError
from scheduler_runtime.config.loader import build, default_document
from scheduler_runtime.config.render import check_values, profile_from_values
from scheduler_runtime.errors import InputError
from scheduler_runtime.fielderrors import go_value
from scheduler_runtime.framework.plugin import Plugin, PluginArgs
from scheduler_runtime.labelsel import label_key_errors
from scheduler_runtime.plugins.registry import build_registry

REPO = Path(__file__).resolve().parents[2]
REG = build_registry([REPO / "plugins"])
HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
ARGS = "profiles[0].pluginConfig[0].args"


def errors_of(body: str, reg: Any = REG) -> list[str]:
    doc = {**HEAD, **yaml.safe_load(body)}
    with pytest.raises(ConfigError) as exc:
        build(doc, reg)
    return exc.value.errors


def args_errors(plugin: str, args: str, reg: Any = REG) -> list[str]:
    return errors_of(f"profiles:\n- pluginConfig:\n  - name: {plugin}\n    args: {args}\n", reg)


# ------------------------------------------------------------------- 1. rules kube-scheduler has


def test_spread_default_constraints_all_rules_at_once():
    errs = args_errors("PodTopologySpread", """
      defaultingType: List
      defaultConstraints:
      - {maxSkew: -1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}
      - {maxSkew: 0, whenUnsatisfiable: Bogus, labelSelector: {matchLabels: {a: b}}}
      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}
      - {maxSkew: 1, topologyKey: "bad key!", whenUnsatisfiable: ""}
""")
    dc = f"{ARGS}.defaultConstraints"
    assert errs[:7] == [
        f"{dc}[0].maxSkew: Invalid value: -1: not in valid range (0, inf)",
        f"{dc}[1].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        f"{dc}[1].topologyKey: Required value: can not be empty",
        f'{dc}[1].whenUnsatisfiable: Unsupported value: "Bogus": supported values: "DoNotSchedule", '
        f'"ScheduleAnyway"',
        f"{dc}[1].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod",
        f'{dc}[2]: Duplicate value: "{{zone, ScheduleAnyway}}"',
        f'{dc}[3].topologyKey: Invalid value: "bad key!": name part must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]
    assert errs[7:] == [f"{dc}[3].whenUnsatisfiable: Required value: can not be empty"]


@pytest.mark.parametrize("defaulting", ["defaultingType: System\n      ", ""])
def test_spread_system_defaulting_with_constraints_is_refused(defaulting: str):
    # an absent defaultingType is defaulted to System, so constraints without `defaultingType: List` fail too
    errs = args_errors("PodTopologySpread", f"""
      {defaulting}defaultConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}}]
""")
    assert errs == [f'{ARGS}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty']


def test_spread_list_defaulting_is_valid_and_runs_with_the_constraints():
    doc = {**HEAD, **yaml.safe_load("""profiles:
- pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: [{maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: null}]
""")}
    args = build(doc, REG).profiles[0].args["PodTopologySpread"]
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in args.default_constraints] == [
        ("zone", 2, "DoNotSchedule")]


def test_explicit_empty_scheduler_name_is_kept_and_refused():
    assert errors_of('profiles:\n- schedulerName: ""\n') == ["profiles[0].schedulerName: Required value"]
    d = default_document({**HEAD, "profiles": [{"schedulerName": ""}]}, REG)
    assert d["profiles"][0]["schedulerName"] == ""
    # absent (or null, which Go decodes as absent) is defaulted
    for prof in ({}, {"schedulerName": None}):
        assert build({**HEAD, "profiles": [prof]}, REG).profiles[0].scheduler_name == "default-scheduler"


# ------------------------------------------------------------------- 2. NodeResourcesFit / RTCR


def test_fit_resource_weight_names_the_resource_at_its_index():
    errs = args_errors("NodeResourcesFit", "{scoringStrategy: {type: MostAllocated, resources: "
                                           "[{name: memory, weight: 5}, {name: cpu, weight: -1}]}}")
    assert errs == [f"{ARGS}.scoringStrategy.resources[1].weight: Invalid value: -1: resource weight of cpu not in "
                    "valid range (0, 100]"]


def test_rtcr_shape_reports_every_problem_at_its_point():
    errs = args_errors("NodeResourcesFit", """
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 101}]
        requestedToCapacityRatio:
          shape: [{utilization: 50, score: 11}, {utilization: 40, score: -1}, {utilization: 101, score: 2}]
""")
    shape = f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape"
    assert errs == [
        f"{ARGS}.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid "
        "range (0, 100]",
        f"{shape}[1].utilization: Invalid value: 40: values must be sorted in increasing order",
        f"{shape}[0].score: Invalid value: 11: not in valid range [0, 10]",
        f"{shape}[1].score: Invalid value: -1: not in valid range [0, 10]",
        f"{shape}[2].utilization: Invalid value: 101: not in valid range [0, 100]",
    ]


def test_fit_strategy_presence_rules():
    assert args_errors("NodeResourcesFit", "{scoringStrategy: {type: RequestedToCapacityRatio}}") == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is "
        "RequestedToCapacityRatio"]
    assert args_errors("NodeResourcesFit", "{scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: "
                                           "{shape: [{utilization: 0, score: 0}]}}}") == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not "
        "RequestedToCapacityRatio"]
    # kube-scheduler defaults the type only when scoringStrategy is absent
    assert args_errors("NodeResourcesFit", "{scoringStrategy: {resources: [{name: cpu}]}}") == [
        f'{ARGS}.scoringStrategy.type: Unsupported value: "": supported values: "LeastAllocated", '
        '"MostAllocated", "RequestedToCapacityRatio"']


# ------------------------------------------------------------------- 3. no pydantic wording


def test_in_tree_type_and_enum_errors_use_field_paths_and_go_values():
    errs = args_errors("PodTopologySpread", """
      defaultingType: List
      defaultConstraints: [{maxSkew: x, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]
""")
    assert errs == [f'{ARGS}.defaultConstraints[0].maxSkew: Invalid value: "x": expected integer']
    assert args_errors("NodeResourcesFit", "{scoringStrategy: {type: Bogus}}") == [
        f'{ARGS}.scoringStrategy.type: Unsupported value: "Bogus": supported values: "LeastAllocated", '
        '"MostAllocated", "RequestedToCapacityRatio"']
    assert args_errors("NodeResourcesFit", "{scoringStrategy: {type: LeastAllocated, resources: x}}") == [
        f'{ARGS}.scoringStrategy.resources: Invalid value: "x": expected array']
    assert args_errors("InterPodAffinity", "{hardPodAffinityWeight: 101}") == [
        f"{ARGS}.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"]
    assert args_errors("DefaultPreemption", "{minCandidateNodesPercentage: -1, minCandidateNodesAbsolute: -2}") == [
        f"{ARGS}.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]",
        f"{ARGS}.minCandidateNodesAbsolute: Invalid value: -2: not in valid range [0, inf)"]
    assert args_errors("NodeResourcesBalancedAllocation", "{resources: [{name: cpu}, {name: cpu, weight: 2}]}") == [
        f'{ARGS}.resources[1].name: Duplicate value: "cpu"',
        f"{ARGS}.resources[1].weight: Invalid value: 2: must be 1"]


def test_unknown_and_python_named_fields_are_unknown_fields():
    assert args_errors("PodTopologySpread", "{defaultingType: List, spotLabell: x}") == [
        f'{ARGS}.spotLabell: unknown field "spotLabell"']
    # kube's strict decoding knows only the camelCase names
    assert args_errors("InterPodAffinity", "{hard_pod_affinity_weight: 5}") == [
        f'{ARGS}.hard_pod_affinity_weight: unknown field "hard_pod_affinity_weight"']
    # bundled plugins too
    errs = args_errors("Coscheduling", "{permitWaitingTimeSeconds: -1, podGroupRejectPercentage: many, bogus: 1}")
    assert errs == [f"{ARGS}.permitWaitingTimeSeconds: Invalid value: -1: must be greater than or equal to 0",
                    f'{ARGS}.podGroupRejectPercentage: Invalid value: "many": expected integer',
                    f'{ARGS}.bogus: unknown field "bogus"']


class _Mode(PluginArgs):
    level: Literal["Low", "High"] = "Low"


class _UserArgs(PluginArgs):
    mode: Literal["Fast", "Slow"] = "Fast"
    ratio: float | str = 1.0
    modes: list[_Mode] = Field(default_factory=list)
    spot_label: str = "spot"


class _UserPlugin(Plugin):
    """A user's score plugin with its own args model."""

    name = "UserScore"
    args_model = _UserArgs

    def score(self, state: Any, pod: Any, node: Any) -> int:
        return 0


def test_user_args_errors_are_translated():
    reg = build_registry([REPO / "plugins"])
    reg.register(_UserPlugin, "dir:test")
    errs = args_errors("UserScore", "{mode: Bogus, ratio: [1], modes: [{level: x}], spotLabell: y}", reg)
    assert errs == [
        f'{ARGS}.mode: Unsupported value: "Bogus": supported values: "Fast", "Slow"',
        f"{ARGS}.ratio: Invalid value: [1]: expected number or string",
        f'{ARGS}.modes[0].level: Unsupported value: "x": supported values: "Low", "High"',
        f'{ARGS}.spotLabell: unknown field "spotLabell"',
    ]
    assert not any("'" in e or "Input should" in e or "Value error" in e for e in errs)


def test_go_style_values_and_quotes_in_plan_errors():
    assert [go_value(v) for v in ("a\"b", 3, 2.0, 0.5, True, None, [{"a": 1}])] == [
        '"a\\"b"', "3", "2", "0.5", "true", "null", '[{"a":1}]']
    errs = errors_of("profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeName}]\n")
    assert errs == ['profiles[0].plugins.score.enabled: Invalid value: "NodeName": plugin "NodeName" does not '
                    "extend ScorePlugin plugin"]
    assert label_key_errors("example.com/zone") == [] and label_key_errors("a/b/c")


# ------------------------------------------------------------------- 4. render --values and --plugin


@pytest.mark.parametrize("values, expect", [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}},
     'kind: Invalid value: "Pod": a Kubernetes object, not a scheduler-plugins values file'),
    ({"bogusKey": 1}, 'bogusKey: unknown field "bogusKey"'),
    ({"scheduler": {"leaderElect": "maybe"}}, 'scheduler.leaderElect: Invalid value: "maybe": expected boolean'),
    ({"plugins": {"enabled": [{"name": "A", "weight": "x"}]}},
     'plugins.enabled[0].weight: Invalid value: "x": expected integer'),
    ({"pluginConfig": [{"name": "Coscheduling", "arg": {}}]}, 'pluginConfig[0].arg: unknown field "arg"'),
])
def test_values_files_are_checked(values: dict[str, Any], expect: str):
    errs = check_values(values)
    assert errs and errs[0].startswith(expect), errs
    with pytest.raises(InputError) as exc:
        profile_from_values(values, "s", source="values.yaml")
    assert str(exc.value).startswith(f"values.yaml: {expect}") and "\n" not in str(exc.value)


def test_chart_values_are_accepted():
    values = {"scheduler": {"name": "sp", "image": "img", "command": ["/bin/kube-scheduler"], "replicaCount": 1,
                            "leaderElect": False, "priorityClassName": "", "resources": {}, "nodeSelector": {},
                            "affinity": {}, "tolerations": []},
              "controller": {"name": "c", "leaderElect": False},
              "plugins": {"enabled": ["Coscheduling"], "disabled": ["PrioritySort"]},
              "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]}
    assert check_values(values) == []
    assert profile_from_values(values, "s")["schedulerName"] == "sp"


def test_unknown_plugin_path_is_the_index_in_the_users_list():
    errs = errors_of("profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: ImageLocality}, "
                     "{name: NoSuch}]\n")
    assert len(errs) == 1 and errs[0].startswith(
        'profiles[0].plugins.multiPoint.enabled[1]: Invalid value: "NoSuch": plugin "NoSuch" does not exist')


# ------------------------------------------------------------------- 5. key order of `config default`


def test_default_document_keys_are_alphabetical_at_every_level():
    d = build(dict(HEAD), REG).raw

    def check(obj: Any, path: str = "") -> None:
        if isinstance(obj, dict):
            assert list(obj) == sorted(obj), path
            for k, v in obj.items():
                check(v, f"{path}.{k}")
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                check(v, f"{path}[{i}]")

    check(d)
    assert list(d)[:4] == ["apiVersion", "clientConnection", "enableContentionProfiling", "enableProfiling"]

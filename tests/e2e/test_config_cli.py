"""`ksched config` as a user runs it: exit codes, messages, and files written (or not)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "configs"


def test_validate_valid_and_invalid(ksched):
    r = ksched("config", "validate", str(CORPUS / "valid-two-profiles.yaml"))
    assert r.returncode == 0 and "valid" in r.stdout
    r = ksched("config", "validate", str(CORPUS / "invalid-duplicate-profile.yaml"),
               str(CORPUS / "invalid-percentage.yaml"))
    assert r.returncode == 1
    assert 'profiles[1].schedulerName: Duplicate value: "x"' in r.stderr
    assert "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]" in r.stderr
    r = ksched("config", "validate", str(CORPUS / "invalid-percentage.yaml"), "-o", "json")
    assert r.returncode == 1 and json.loads(r.stdout)[0]["valid"] is False


def test_validate_seed_points_to_migrate_and_version_rules(ksched):
    seed = CORPUS / "seed-04-coscheduling-v1beta2.yaml"
    r = ksched("config", "validate", str(seed))
    assert r.returncode == 1 and "ksched config migrate" in r.stderr and "1.28" in r.stderr
    r = ksched("config", "validate", str(CORPUS / "seed-01-prefilter-v1beta3.yaml"), "--kubernetes-version", "1.28")
    assert r.returncode == 0, r.stderr
    r = ksched("config", "validate", str(CORPUS / "valid-minimal.yaml"), "--kubernetes-version", "1.24")
    assert r.returncode == 1 and "does not serve v1" in r.stderr


@pytest.mark.parametrize("seed", sorted(p.name for p in CORPUS.glob("seed-*.yaml")))
def test_migrate_seed_then_validate(ksched, tmp_path: Path, seed: str):
    out = tmp_path / "migrated.yaml"
    r = ksched("config", "migrate", str(CORPUS / seed), "--write-to", str(out))
    assert r.returncode == 0, r.stderr
    assert "changed: apiVersion" in r.stderr
    if "coscheduling" in seed:
        assert "deniedPGExpirationTimeSeconds" in r.stderr and "podGroupBackoffSeconds" in r.stderr
    assert ksched("config", "validate", str(out)).returncode == 0


def test_default_and_expand(ksched):
    r = ksched("config", "default", str(CORPUS / "valid-minimal.yaml"), "--expand")
    assert r.returncode == 0, r.stderr
    docs = list(yaml.safe_load_all(r.stdout))
    d = docs[0]
    assert d["leaderElection"]["leaseDuration"] == "15s" and d["podMaxBackoffSeconds"] == 10
    names = [pc["name"] for pc in d["profiles"][0]["pluginConfig"]]
    assert {"NodeResourcesFit", "DefaultPreemption", "InterPodAffinity", "PodTopologySpread"} <= set(names)
    assert docs[1]["plan"]["default-scheduler"]["score"][0] == "TaintToleration (weight 3)"


def test_explain(ksched):
    r = ksched("config", "explain", "DefaultPreemption", "-o", "json")
    info = json.loads(r.stdout)
    assert info["extensionPoints"] == ["preEnqueue", "postFilter"]  # PreEnqueue holds a preemptor (async)
    args = {a["name"]: a for a in info["args"]}
    assert args["minCandidateNodesPercentage"]["default"] == 10
    assert args["minCandidateNodesPercentage"]["range"] == ">= 0, <= 100"
    r = ksched("config", "explain", "Coscheduling")
    assert r.returncode == 0 and "permitWaitingTimeSeconds" in r.stdout
    r = ksched("config", "explain", "Nope")
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_render_flags_values_and_check(ksched, tmp_path: Path):
    out = tmp_path / "cfg.yaml"
    args = ["config", "render", "--scheduler-name", "bin-packer", "--plugin", "ImageLocality:5",
            "--args", "NodeResourcesFit.scoringStrategy.type=MostAllocated", "--no-leader-elect",
            "--write-to", str(out)]
    r = ksched(*args)
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["profiles"][0]["schedulerName"] == "bin-packer" and doc["leaderElection"]["leaderElect"] is False
    assert ksched("config", "validate", str(out)).returncode == 0
    assert ksched(*args, "--check").returncode == 0
    out.write_text(out.read_text() + "# edited\n")
    assert ksched(*args, "--check").returncode == 1
    values = tmp_path / "values.yaml"
    values.write_text("scheduler:\n  name: sp\nplugins:\n  enabled: [Coscheduling]\n  disabled: [PrioritySort]\n"
                      "pluginConfig:\n- name: Coscheduling\n  args: {permitWaitingTimeSeconds: 10}\n")
    r = ksched("config", "render", "--values", str(values))
    assert r.returncode == 0, r.stderr and "Coscheduling" in r.stdout
    bad = tmp_path / "bad.yaml"
    r = ksched("config", "render", "--plugin", "NoSuch", "--write-to", str(bad))
    assert r.returncode == 1 and not bad.exists()


def test_bad_files_one_line_each(ksched, tmp_path: Path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x7fELF\x00\x00")
    bomb = tmp_path / "bomb.yaml"
    anchors = "".join(f"{c}: &{c} [*{p}, *{p}]\n" for p, c in zip("abcdefghij", "bcdefghijk", strict=True))
    bomb.write_text("a: &a [x, x]\n" + anchors + "z: [" + ", ".join(["*k"] * 1100) + "]\n")
    unreadable = tmp_path / "secret.yaml"
    unreadable.write_text("x: 1\n")
    unreadable.chmod(0)
    cases = [(empty, "empty file", 2), (binary, "binary file", 2), (bomb, "YAML bomb", 2),
             (tmp_path, "is a directory", 2), (tmp_path / "missing.yaml", "no such file", 2)]
    if os.geteuid() != 0:  # root reads anything
        cases.append((unreadable, "permission denied", 2))
    for path, text, code in cases:
        r = ksched("config", "validate", str(path))
        assert r.returncode == code, (path, r.stderr)
        assert text in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_validate_reports_kube_messages_for_args(ksched, tmp_path: Path):
    r = ksched("config", "validate", str(CORPUS / "invalid-spread-maxskew.yaml"),
               str(CORPUS / "invalid-fit-weight-negative.yaml"), str(CORPUS / "invalid-empty-scheduler-name.yaml"))
    assert r.returncode == 1 and r.stdout == ""
    assert ("profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: -1: "
            "not in valid range (0, inf)") in r.stderr
    assert ("profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: -1: "
            "resource weight of cpu not in valid range (0, 100]") in r.stderr
    assert "invalid-empty-scheduler-name.yaml: profiles[0].schedulerName: Required value" in r.stderr
    assert "Value error" not in r.stderr and "Input should" not in r.stderr and "'" not in r.stderr


def test_default_writes_keys_in_alphabetical_order(ksched):
    r = ksched("config", "default")
    assert r.returncode == 0, r.stderr
    top = [line.split(":")[0] for line in r.stdout.splitlines() if line and not line.startswith((" ", "-"))]
    assert top == ["apiVersion", "clientConnection", "enableContentionProfiling", "enableProfiling", "kind",
                   "leaderElection", "parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds",
                   "podMaxBackoffSeconds", "profiles"]
    assert list(yaml.safe_load(r.stdout)["profiles"][0]) == ["pluginConfig", "plugins", "schedulerName"]


def test_render_refuses_bad_values_files(ksched, tmp_path: Path):
    cases = {"pod.yaml": ("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n",
                          'kind: Invalid value: "Pod": a Kubernetes object'),
             "unknown.yaml": ("bogusKey: 1\n", 'bogusKey: unknown field "bogusKey"'),
             "type.yaml": ("scheduler:\n  leaderElect: maybe\n",
                           'scheduler.leaderElect: Invalid value: "maybe": expected boolean')}
    for name, (text, expect) in cases.items():
        values = tmp_path / name
        values.write_text(text)
        r = ksched("config", "render", "--values", str(values))
        assert r.returncode == 1 and r.stdout == "", (name, r.stdout)
        assert expect in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_render_error_path_matches_the_rendered_file(ksched):
    r = ksched("config", "render", "--plugin", "ImageLocality:2", "--plugin", "NoSuch")
    assert r.returncode == 1
    assert 'profiles[0].plugins.multiPoint.enabled[1]: Invalid value: "NoSuch"' in r.stderr


def test_render_check_without_output_is_a_usage_error(ksched):
    r = ksched("config", "render", "--check")
    assert r.returncode == 2 and "--check" in r.stderr


def test_render_values_errors_name_the_file_and_leader_elect_applies(ksched, tmp_path):
    bad = tmp_path / "values.yaml"
    bad.write_text("bogusKey: 1\n")
    r = ksched("config", "render", "--values", str(bad))
    assert r.returncode == 1 and r.stderr.startswith(f"error: {bad}"), r.stderr
    good = tmp_path / "good.yaml"
    good.write_text("scheduler:\n  leaderElect: false\nplugins:\n  enabled: [ImageLocality]\n")
    r = ksched("config", "render", "--values", str(good))
    assert r.returncode == 0, r.stderr
    assert "leaderElect: false" in r.stdout


def test_extenders_are_validated_defaulted_and_explained(ksched, tmp_path):
    cfg = tmp_path / "ext.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  filterVerb: filter\n")
    r = ksched("config", "validate", str(cfg))
    assert r.returncode == 0 and r.stdout.strip() == f"{cfg}: valid", r.stdout
    assert r.stderr == ""
    d = ksched("config", "default", str(cfg))
    assert d.returncode == 0
    assert "extenders:\n- filterVerb: filter\n  httpTimeout: 5s\n  urlPrefix: http://127.0.0.1:8888/\n" in d.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "extenders:\n- urlPrefix: http://e/\n  prioritizeVerb: p\n")
    b = ksched("config", "validate", str(bad))
    assert b.returncode == 1
    assert "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it" in b.stdout + b.stderr
    e = ksched("config", "explain", "extenders")
    assert e.returncode == 0 and "nodeCacheCapable" in e.stdout and "httpTimeout" in e.stdout


def test_render_values_that_are_not_a_mapping_is_a_parse_error(ksched, tmp_path):
    bad = tmp_path / "values.yaml"
    bad.write_text("- a\n- b\n")
    r = ksched("config", "render", "--values", str(bad))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"error: {bad}: expected a values mapping, got a list"

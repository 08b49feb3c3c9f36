"""`ksched config default` writes what kube-scheduler v1.37.2's --write-config-to writes, byte for byte, and with
`--emulated-version 1.36` what kube-scheduler v1.36.3 writes
(the live comparison with the binary is tests/integration/test_config_default_parity.py; this one checks
against the binary's checked-in output, so it runs everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler_runtime.config.loader import build
from scheduler_runtime.config.writeout import kube_yaml, written_document
from scheduler_runtime.controlplane import prev_version
from scheduler_runtime.featuregates import default_gates
from scheduler_runtime.kubeversion import KUBE_VERSION
from scheduler_runtime.options.registry import load_registry

PREV_VERSION = prev_version()

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("version", [KUBE_VERSION, PREV_VERSION])
def test_the_checked_in_write_config_to_output_is_reproduced(version: str) -> None:
    """The pinned release's output by default; the previous minor's (its own binary's) with that minor emulated."""
    kube_text = (DATA / f"kube-scheduler-{version}-write-config-to.yaml").read_text()
    # it was written for these two settings; every other value is a default
    given = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
             "leaderElection": {"leaderElect": False}}
    gates = default_gates(version.rsplit(".", 1)[0]) if version != KUBE_VERSION else None
    cfg = build(given, load_registry(None), feature_gates=gates)
    doc = written_document(cfg.raw, cfg.kube_minor)
    assert kube_yaml(doc) == kube_text


def test_go_yaml_quoting() -> None:
    text = kube_yaml({"a": "", "b": "*", "c": "true", "d": "10", "e": "plain", "f": [{"name": "*"}]})
    assert text == 'a: ""\nb: \'*\'\nc: "true"\nd: "10"\ne: plain\nf:\n- name: \'*\'\n'
    assert yaml.safe_load(text)["b"] == "*"

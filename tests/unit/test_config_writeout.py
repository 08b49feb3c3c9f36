"""`ksched config default` writes what kube-scheduler v1.36.3's --write-config-to writes, byte for byte
(the live comparison with the binary is tests/integration/test_config_default_parity.py; this one checks
against the binary's checked-in output, so it runs everywhere)."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler_runtime.config.loader import build
from scheduler_runtime.config.writeout import kube_yaml, written_document
from scheduler_runtime.options.registry import load_registry

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_checked_in_write_config_to_output_is_reproduced() -> None:
    kube_text = (DATA / "kube-scheduler-1.36.3-write-config-to.yaml").read_text()
    # it was written for these two settings; every other value is a default
    given = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
             "leaderElection": {"leaderElect": False}}
    cfg = build(given, load_registry(None))
    doc = written_document(cfg.raw)
    assert kube_yaml(doc) == kube_text


def test_go_yaml_quoting() -> None:
    text = kube_yaml({"a": "", "b": "*", "c": "true", "d": "10", "e": "plain", "f": [{"name": "*"}]})
    assert text == 'a: ""\nb: \'*\'\nc: "true"\nd: "10"\ne: plain\nf:\n- name: \'*\'\n'
    assert yaml.safe_load(text)["b"] == "*"

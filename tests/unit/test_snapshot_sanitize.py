"""What `ksched snapshot` strips from each object (scheduler_runtime.snapshot.sanitize), and that what is left
still loads into the embedded cluster and schedules the same way."""

from __future__ import annotations

import copy
import json
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.objects import Pod
from scheduler_runtime.snapshot import LAST_APPLIED, sanitize

SECRET = "hunter2-not-in-any-snapshot"


def _pod() -> dict[str, Any]:
    c = {"name": "main", "image": "app:1", "command": ["sh", "-c", f"echo {SECRET}"], "args": [SECRET],
         "env": [{"name": "A", "value": SECRET},
                 {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
         "envFrom": [{"secretRef": {"name": "s"}}], "workingDir": "/x",
         "livenessProbe": {"exec": {"command": [SECRET]}}, "lifecycle": {"preStop": {"exec": {"command": [SECRET]}}},
         "securityContext": {"runAsUser": 0}, "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
         "ports": [{"containerPort": 80, "hostPort": 8080}], "restartPolicy": "Always",
         "volumeMounts": [{"name": "s", "mountPath": "/s"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "managedFields": [{"manager": "kubectl"}],
                         "annotations": {LAST_APPLIED: json.dumps({"env": SECRET}), "team": "a"}},
            "spec": {"initContainers": [dict(c, name="init")], "containers": [c],
                     "ephemeralContainers": [dict(c, name="debug")],
                     "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k", "operator": "Exists"}],
                     "volumes": [
                         {"name": "s", "secret": {"secretName": "s", "items": [{"key": "k", "path": "p"}]}},
                         {"name": "cm", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p"}]}},
                         {"name": "pr", "projected": {"sources": [{"secret": {"name": "s"}}]}},
                         {"name": "csi", "csi": {"driver": "d.example.com", "volumeAttributes": {"token": SECRET},
                                                 "nodePublishSecretRef": {"name": "s"}}},
                         {"name": "flex", "flexVolume": {"driver": "f", "options": {"pw": SECRET}}},
                         {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
            "status": {"phase": "Pending", "podIP": "10.0.0.1", "message": SECRET,
                       "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                       "containerStatuses": [{"name": "main", "allocatedResources": {"cpu": "250m"},
                                              "state": {"waiting": {"message": SECRET}}}]}}


def test_pod_secrets_and_env_values_are_stripped() -> None:
    p = sanitize(_pod())
    text = json.dumps(p)
    assert SECRET not in text and "managedFields" not in text and LAST_APPLIED not in text
    assert p["metadata"]["annotations"] == {"team": "a"}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        c = p["spec"][key][0]
        assert c["env"] == [{"name": "A"}, {"name": "B"}]
        assert set(c) == {"name", "image", "env", "resources", "ports", "restartPolicy", "volumeMounts"}, c
    vols = {v["name"]: v for v in p["spec"]["volumes"]}
    assert vols["s"]["secret"] == {"secretName": "s"} and vols["cm"]["configMap"] == {"name": "cm"}
    assert vols["pr"]["projected"] == {} and vols["csi"]["csi"] == {"driver": "d.example.com"}
    assert vols["data"]["persistentVolumeClaim"] == {"claimName": "data"}  # what VolumeBinding reads stays
    assert p["status"] == {"phase": "Pending", "conditions": _pod()["status"]["conditions"],
                           "containerStatuses": [{"name": "main", "allocatedResources": {"cpu": "250m"}}]}
    assert p["spec"]["nodeSelector"] == {"disk": "ssd"} and p["spec"]["tolerations"]


def test_what_is_left_schedules_like_the_original() -> None:
    orig = _pod()
    clean = sanitize(copy.deepcopy(orig))
    a, b = Pod.from_dict(orig), Pod.from_dict(clean)
    assert a.requests == b.requests and a.node_selector == b.node_selector and a.tolerations == b.tolerations
    MemoryCluster().create(clean)  # loads as the embedded cluster loads snapshots


def test_workloads_keep_only_selectors() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "namespace": "ns"},
          "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}},
                   "template": {"spec": {"containers": [{"name": "c", "env": [{"name": "X", "value": SECRET}]}]}}},
          "status": {"replicas": 3}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
           "spec": {"selector": {"app": "a"}, "clusterIP": "10.0.0.9", "ports": [{"port": 80}]}}
    assert sanitize(rs)["spec"] == {"replicas": 3, "selector": {"matchLabels": {"app": "a"}}} and "status" not in rs
    assert sanitize(svc)["spec"] == {"selector": {"app": "a"}}


def test_persistent_volume_csi_attributes_are_dropped() -> None:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                   "csi": {"driver": "d", "volumeHandle": "h", "volumeAttributes": {"key": SECRET}},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}
    out = sanitize(pv)
    assert SECRET not in json.dumps(out) and out["spec"]["csi"] == {"driver": "d", "volumeHandle": "h"}
    assert out["spec"]["nodeAffinity"]  # what VolumeBinding and VolumeZone read stays

"""`ksched snapshot` against the real kube-apiserver, then `ksched simulate --snapshot` on what it wrote:
everything scheduling reads is captured, secrets and env values are not, bound pods stay, unbound ones are
scheduled and each is accounted for; a raw API List (what `kubectl get -o yaml` prints) loads too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from tests.e2e.conftest import run_ksched

SECRET = "s3cr3t-value-do-not-leak"


def _node(name: str, label: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "snap-test": label,
                                                  "topology.kubernetes.io/zone": "zone-s"}},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, label: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.example.com/app:1", "command": ["/bin/app", f"--token={SECRET}"],
                 "args": [f"--password={SECRET}"], "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                 "env": [{"name": "PLAIN", "value": SECRET},
                         {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}}],
                 "envFrom": [{"secretRef": {"name": "creds"}}],
                 "volumeMounts": [{"name": "creds", "mountPath": "/creds"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"env": SECRET}),
                "example.com/spot-ok": "true"}},
            # kube-apiserver's TaintNodesByCondition admission taints a new node not-ready; no kubelet here
            "spec": {"containers": [container], "nodeSelector": {"snap-test": label},
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                     "volumes": [{"name": "creds", "secret": {"secretName": "creds",
                                                              "items": [{"key": "pw", "path": "pw"}]}}],
                     **spec}}


def test_snapshot_then_simulate(control_plane: Any, namespace: str, tmp_path: Path) -> None:
    kc = str(control_plane.kubeconfig_path)
    client = KubeClient(load_connection(kc))
    ns = namespace
    gpu_request = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"{ns}-gpu"}}]}}
    label = ns  # nodes are cluster-scoped and the API server is shared: pods select this test's nodes
    try:
        for n in (f"{ns}-n1", f"{ns}-n2"):
            client.call("POST", "/api/v1/nodes", body=_node(n, label))
        client.call("POST", f"/api/v1/namespaces/{ns}/secrets", body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"pw": SECRET}})
        client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod("bound", label, nodeName=f"{ns}-n1"))
        client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod("unbound", label))
        client.call("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod("elsewhere", label,
                                                                       schedulerName="other-scheduler"))
        client.call("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": "none"}})
        client.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", body={
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}})
        client.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{ns}-high"},
            "value": 1000})
        client.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}})
        client.call("POST", "/apis/resource.k8s.io/v1/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-n2-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": f"{ns}-n2",
                     "pool": {"name": f"{ns}-n2", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}})
        client.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
            "spec": {"spec": gpu_request}})
        client.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "claim"},
            "spec": gpu_request})

        snap = tmp_path / "snap.yaml"
        r = run_ksched("snapshot", "--kubeconfig", kc, "--context", "ksched-dev", "-n", ns, "--write-to", str(snap))
        assert r.returncode == 0, r.stderr
        assert f"wrote {snap}:" in r.stdout and "3 Pod" in r.stdout and "2 pod(s) without a node" in r.stdout
        text = snap.read_text()
        assert text.startswith("# ksched snapshot of https://")
        assert SECRET not in text and "last-applied-configuration" not in text and "envFrom" not in text
        assert "managedFields" not in text and "kind: Secret" not in text and "secretKeyRef" not in text
        doc = yaml.safe_load(text)
        assert doc["kind"] == "List"
        by_kind: dict[str, list[str]] = {}
        for o in doc["items"]:
            by_kind.setdefault(o["kind"], []).append(o["metadata"]["name"])
        for kind in ("Namespace", "Node", "Pod", "PersistentVolumeClaim", "PodDisruptionBudget", "PriorityClass",
                     "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim"):
            assert kind in by_kind, (kind, sorted(by_kind))
        assert by_kind["Namespace"] == [ns]  # -n: the one namespace; cluster-scoped kinds are all captured
        assert {f"{ns}-n1", f"{ns}-n2"} <= set(by_kind["Node"]) and f"{ns}-high" in by_kind["PriorityClass"]
        pod = next(o for o in doc["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "bound")
        c = pod["spec"]["containers"][0]
        assert c["env"] == [{"name": "PLAIN"}, {"name": "FROM_SECRET"}] and "command" not in c and "args" not in c
        assert c["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
        assert pod["spec"]["volumes"] == [{"name": "creds", "secret": {"secretName": "creds"}}]
        assert pod["metadata"]["annotations"] == {"example.com/spot-ok": "true"}

        # the same snapshot, to stdout as JSON (-o is a format)
        r = run_ksched("snapshot", "--kubeconfig", kc, "-n", ns, "-o", "json")
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["items"]) == len(doc["items"])

        r = run_ksched("simulate", "--snapshot", str(snap), "-o", "json")
        assert r.returncode == 0, r.stderr
        out = {p["pod"]: p for p in json.loads(r.stdout)["pods"]}
        assert f"{ns}/bound" not in out  # bound pods stay where they are, they are not rescheduled
        assert out[f"{ns}/unbound"]["source"] == "snapshot"
        assert out[f"{ns}/unbound"]["node"] in (f"{ns}-n1", f"{ns}-n2"), out[f"{ns}/unbound"].get("message")
        assert out[f"{ns}/elsewhere"]["status"] == "Skipped"
        assert "schedulerName=other-scheduler" in out[f"{ns}/elsewhere"]["message"]

        # all namespaces (no -n): the default namespace's `kubernetes` Service comes too, and it all loads
        everything = tmp_path / "all.yaml"
        r = run_ksched("snapshot", "--kubeconfig", kc, "--write-to", str(everything))
        assert r.returncode == 0, r.stderr
        names = {(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load(everything.read_text())["items"]}
        assert ("Service", "kubernetes") in names and ("Namespace", "kube-system") in names
        r = run_ksched("simulate", "--snapshot", str(everything), "-o", "json")
        assert r.returncode == 0, r.stderr

        # what `kubectl get nodes,pods -o yaml` prints: a v1 List of the server's objects, nothing stripped
        raw_list = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": []}
        for path, kind in (("/api/v1/nodes", "Node"), (f"/api/v1/namespaces/{ns}/pods", "Pod")):
            for it in client.call("GET", path)["items"]:
                raw_list["items"].append({"apiVersion": "v1", "kind": kind, **it})
        kubectl_like = tmp_path / "kubectl-get.yaml"
        kubectl_like.write_text(yaml.safe_dump(raw_list))
        r = run_ksched("simulate", "--snapshot", str(kubectl_like))
        assert r.returncode == 0, r.stderr
        assert f"{ns}/unbound" in r.stdout and "not for this scheduler" in r.stdout
        assert f"{ns}/elsewhere: not for this scheduler: schedulerName=other-scheduler" in r.stdout
    finally:
        for path in (f"/api/v1/nodes/{ns}-n1", f"/api/v1/nodes/{ns}-n2",
                     f"/apis/scheduling.k8s.io/v1/priorityclasses/{ns}-high",
                     f"/apis/resource.k8s.io/v1/deviceclasses/{ns}-gpu",
                     f"/apis/resource.k8s.io/v1/resourceslices/{ns}-n2-gpu", f"/api/v1/namespaces/{ns}"):
            client.request("DELETE", path)
        client.close()

"""kube-scheduler vs ksched on a real kube-apiserver: pods with one ResourceClaim each (scheduler_perf's DRA
SchedulingWithResourceClaim shape, one device per claim).

One control plane; every node publishes one ResourceSlice per scheduler (drivers kube.test-driver /
ksched.test-driver, `--per-node` devices each) and each scheduler's claims use its own DeviceClass, so the two
runs do not take each other's devices yet see the same number of slices. For each scheduler in turn the claims
and pods are created first, then the scheduler starts; pods/s is first to last bind (see e2e_throughput.py).
Not a test: `python bench/dra_e2e.py [--nodes 100 --per-node 10 --pods 500]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import e2e_throughput as e2e  # noqa: E402
from simulate_throughput import node  # noqa: E402

from scheduler_runtime.cluster.kube import KubeClient, load_connection  # noqa: E402
from scheduler_runtime.controlplane import ControlPlane  # noqa: E402

RES = "/apis/resource.k8s.io/v1"
WHO = {"kube-scheduler": "kube", "ksched": "ksched"}


def setup(client: KubeClient, n_nodes: int, per_node: int) -> None:
    e2e.parallel(lambda i: client.call("POST", "/api/v1/nodes", body=node(i)), range(n_nodes))
    e2e.parallel(lambda i: client.call("PATCH", f"/api/v1/nodes/node-{i}", body={"spec": {"taints": None}},
                                       content_type="application/merge-patch+json"), range(n_nodes))
    for who in WHO.values():
        driver = f"{who}.test-driver.cdi.k8s.io"
        client.call("POST", f"{RES}/deviceclasses", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"class-{who}"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
        e2e.parallel(lambda i, driver=driver, who=who: client.call("POST", f"{RES}/resourceslices", body={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{i}-{who}"},
            "spec": {"driver": driver, "nodeName": f"node-{i}",
                     "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"item-{k}"} for k in range(per_node)]}}), range(n_nodes))


class _NamespaceExists:
    """The client, except that measure()'s namespace creation is skipped: the claims are already in it."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def __getattr__(self, name: str):  # noqa: ANN204 - delegate everything else
        return getattr(self._client, name)

    def call(self, method: str, path: str, **kw):  # noqa: ANN201
        if method == "POST" and path == "/api/v1/namespaces":
            return {}
        return self._client.call(method, path, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--per-node", type=int, default=10)
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--qps", type=int, default=5000)
    args = ap.parse_args()
    with ControlPlane() as cp:
        client = KubeClient(load_connection(str(cp.kubeconfig_path)), qps=5000, burst=5000, pool_size=32)
        setup(client, args.nodes, args.per_node)
        cfg = Path(tempfile.mkdtemp()) / "config.yaml"
        cfg.write_text(e2e.CONFIG.format(kubeconfig=cp.kubeconfig_path, qps=args.qps, burst=args.qps))
        cmds = {"kube-scheduler": [str(cp.bin_dir / "kube-scheduler"), f"--config={cfg}", "--secure-port=0"],
                "ksched": [str(Path(sys.executable).parent / "kube-scheduler"), f"--config={cfg}",
                           "--secure-port=0"]}
        rows = []
        for label, cmd in cmds.items():
            who, ns = WHO[label], f"bench-{WHO[label]}"
            client.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}})
            def claim(i: int, who: str = who, ns: str = ns) -> None:
                client.call("POST", f"{RES}/namespaces/{ns}/resourceclaims", body={
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"claim-{i}"},
                    "spec": {"devices": {"requests": [{"name": "req-0",
                                                       "exactly": {"deviceClassName": f"class-{who}"}}]}}})

            e2e.parallel(claim, range(args.pods))

            def pod(ns: str, i: int) -> dict:
                return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "namespace": ns},
                        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                                 "resources": {"claims": [{"name": "resource"}]}}],
                                 "resourceClaims": [{"name": "resource", "resourceClaimName": f"claim-{i}"}]}}

            e2e.pod = pod
            rows.append(e2e.measure(cp, _NamespaceExists(client), label, cmd, args.pods, ns))
    print(f"{'workload':<30}{'scheduler':<16}{'pods/s':>9}{'p50 s':>8}{'p99 s':>8}{'CPU s':>8}{'RSS MB':>8}")
    for r in rows:
        print(f"{f'{args.nodes} nodes/{args.pods} claims':<30}{r['label']:<16}{r['pods_per_second']:>9.0f}"
              f"{r['p50']:>8.2f}{r['p99']:>8.2f}{r['cpu']:>8.1f}{r['rss']:>8.0f}", flush=True)
    k, o = rows
    print(f"{'':<30}{'ratio ksched/kube':<16}{o['pods_per_second'] / k['pods_per_second']:>9.2f}{'':>16}"
          f"{o['cpu'] / max(k['cpu'], 0.01):>8.2f}{o['rss'] / max(k['rss'], 1):>8.2f}", flush=True)


if __name__ == "__main__":
    main()

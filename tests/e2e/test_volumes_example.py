"""`ksched simulate` on examples/volumes: StorageClasses, PVs and PVCs on the example cluster."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"


def test_simulate_volumes_example(ksched):
    r = ksched("simulate", "--cluster", str(EX / "cluster"), "--cluster", str(EX / "volumes" / "storage.yaml"),
               "--pods", str(EX / "volumes" / "pods.yaml"), "-o", "json", "--seed", "1")
    assert r.returncode == 0, r.stderr
    pods = {p["pod"]: p for p in json.loads(r.stdout)["pods"]}
    assert pods["shop/pg-0"]["node"] == "node-a1"  # the local PV's node (static binding)
    assert pods["shop/sessions-0"]["node"] in ("node-b1", "node-b2")  # provisioned in the class's zone
    assert pods["shop/archiver"]["node"] == "node-c1"  # the bound PV's zone label (node-gpu is tainted)
    assert pods["shop/pg-replica"]["node"] is None
    assert "node(s) didn't find available persistent volumes to bind" in pods["shop/pg-replica"]["message"]
    assert pods["shop/reporter"]["node"] is None
    assert pods["shop/reporter"]["message"].startswith(
        "0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims.")

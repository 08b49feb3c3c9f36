"""The storage part of a differential scenario: StorageClasses, PVs, PVCs and CSINodes, and the claims pods use.

Claims cover what kube-scheduler's volume plugins decide on: claims pre-bound to PVs pinned to one node
(VolumeBinding's PV node affinity), to PVs labelled with one zone (VolumeZone), a ReadWriteOncePod claim
(VolumeRestrictions, which preemption can resolve), unbound WaitForFirstConsumer claims that PVs pinned to
some nodes can satisfy (the binding happens in PreBind) or that nothing can, an unbound Immediate claim,
CSINode attach limits for the one CSI driver every PV uses (NodeVolumeLimits), and a claim to provision
through a driver that tracks storage capacity where no CSIStorageCapacity is large enough ("did not have
enough free storage"; none ever is, since nothing here would provision the volume kube-scheduler asks for).
"""

from __future__ import annotations

import random
from typing import Any

DRIVER = "csi.example.com"
WFFC, IMMEDIATE, CAPACITY = "diff-wffc", "diff-imm", "diff-cap"
CAP_DRIVER = "cap.example.com"
#: cluster-scoped and the same for every scenario (created once)
STORAGE_CLASSES = [
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": WFFC},
     "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": IMMEDIATE},
     "provisioner": DRIVER, "volumeBindingMode": "Immediate"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": CAPACITY},
     "provisioner": CAP_DRIVER, "volumeBindingMode": "WaitForFirstConsumer"},
]
#: cluster-scoped and the same for every scenario: the capacity-tracking driver of the CAPACITY class
CSI_DRIVERS = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": CAP_DRIVER},
                "spec": {"storageCapacity": True, "attachRequired": False}}]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _pv(name: str, size: str, modes: list[str], sc: str, *, node: str | None = None,
        zone: str | None = None, claim: tuple[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": modes, "storageClassName": sc,
                            "csi": {"driver": DRIVER, "volumeHandle": name}}
    if node is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [node]}]}]}}
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    meta: dict[str, Any] = {"name": name}
    if zone is not None:
        meta["labels"] = {ZONE: zone}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def _pvc(ns: str, name: str, size: str, modes: list[str], sc: str, volume: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    spec: dict[str, Any] = {"accessModes": modes, "storageClassName": sc, "resources": {"requests": {"storage": size}}}
    if volume is not None:  # pre-bound by its author; the PV controller completes the pair (uid, annotations)
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


class Storage:
    """One scenario's PVs, PVCs and CSINodes, and which claims a pod may use."""

    def __init__(self, rng: random.Random, prefix: str, ns: str, nodes: list[dict[str, Any]],
                 zones: list[str]) -> None:
        self.rng = rng
        self.pvs: list[dict[str, Any]] = []
        self.pvcs: list[dict[str, Any]] = []
        self.csinodes: list[dict[str, Any]] = []
        self.capacities: list[dict[str, Any]] = []
        self.local: dict[str, str] = {}  # node -> claim pinned to it
        self.zonal: dict[str, str] = {}  # zone -> claim
        self.wffc: list[str] = []
        rwo, rwx = ["ReadWriteOnce"], ["ReadWriteMany"]
        for n in nodes:
            name = n["metadata"]["name"]
            if rng.random() < 0.5:
                pv = f"{prefix}-local-{name}"
                self.pvs.append(_pv(pv, "10Gi", rwo, WFFC, node=name, claim=(ns, f"local-{name}")))
                self.pvcs.append(_pvc(ns, f"local-{name}", "10Gi", rwo, WFFC, volume=pv))
                self.local[name] = f"local-{name}"
            if rng.random() < 0.3:  # free for WaitForFirstConsumer claims to bind
                self.pvs.append(_pv(f"{prefix}-free-{name}", rng.choice(["2Gi", "5Gi"]), rwo, WFFC, node=name))
            if rng.random() < 0.5:
                self.csinodes.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                      "metadata": {"name": name},
                                      "spec": {"drivers": [{"name": DRIVER, "nodeID": name,
                                                            "allocatable": {"count": rng.choice([1, 2, 3])}}]}})
        for z in zones:
            pv = f"{prefix}-zonal-{z}"
            self.pvs.append(_pv(pv, "1Gi", rwx, "", zone=z, claim=(ns, f"zonal-{z}")))
            self.pvcs.append(_pvc(ns, f"zonal-{z}", "1Gi", rwx, "", volume=pv))
            self.zonal[z] = f"zonal-{z}"
        for j in range(3):
            self.pvcs.append(_pvc(ns, f"wffc-{j}", rng.choice(["1Gi", "2Gi", "4Gi"]), rwo, WFFC))
            self.wffc.append(f"wffc-{j}")
        self.pvcs.append(_pvc(ns, "wffc-big", "100Gi", rwo, WFFC))  # no PV is that large
        self.pvcs.append(_pvc(ns, "imm-unbound", "1Gi", rwo, IMMEDIATE))
        self.pvcs.append(_pvc(ns, "cap-0", "5Gi", rwo, CAPACITY))
        for i, z in enumerate(rng.sample(zones, k=rng.choice([0, 1, 2]))):  # all too small for cap-0
            self.capacities.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                                    "metadata": {"name": f"cap-{i}", "namespace": ns}, "storageClassName": CAPACITY,
                                    "capacity": rng.choice(["1Gi", "4Gi"]),
                                    "nodeTopology": {"matchLabels": {ZONE: z}}})
        pv = f"{prefix}-rwop"
        self.pvs.append(_pv(pv, "1Gi", ["ReadWriteOncePod"], "", claim=(ns, "rwop")))
        self.pvcs.append(_pvc(ns, "rwop", "1Gi", ["ReadWriteOncePod"], "", volume=pv))
        self.rwop_used = False

    def claims_for_bound(self, node: dict[str, Any]) -> list[str]:
        """Claims a pod already running on `node` may hold (only ones that fit that node)."""
        name, zone = node["metadata"]["name"], node["metadata"]["labels"][ZONE]
        out = []
        if name in self.local and self.rng.random() < 0.4:
            out.append(self.local[name])
        if self.rng.random() < 0.2:
            out.append(self.zonal[zone])
        if not self.rwop_used and self.rng.random() < 0.1:
            out.append("rwop")
            self.rwop_used = True
        return out

    def claims_for_pending(self) -> list[str]:
        r = self.rng.random()
        if r > 0.25:
            return []
        pool = (list(self.local.values()) * 2 + list(self.zonal.values()) * 2 + self.wffc * 2
                + ["wffc-big", "imm-unbound", "rwop", "cap-0"])
        return sorted(set(self.rng.sample(pool, k=min(len(pool), self.rng.choice([1, 1, 2])))))


def with_claims(pod: dict[str, Any], claims: list[str]) -> dict[str, Any]:
    if claims:
        pod["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                  for i, c in enumerate(claims)]
    return pod

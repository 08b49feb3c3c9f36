"""KWOK (sigs.k8s.io/kwok) for the dev cluster: the controller binary, its stage files, and the fake nodes it runs.

The `kwok` controller keeps nodes that carry the annotation `kwok.x-k8s.io/node: fake` Ready (status
conditions plus a Lease in kube-node-lease, the way a kubelet does) and moves pods bound to them to Running.
The controller embeds no stages: `hack/build-kwok.sh` copies the ones kwokctl uses by default (node
initialise, node heartbeat with lease, pod ready/complete/delete) from the same module into
`<cache>/kwok/<version>/stages/`, next to `bin/kwok`.
"""

from __future__ import annotations

import copy
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import KschedError

VERSION_FILE = Path(__file__).resolve().parents[1] / "hack" / "kwok" / "VERSION"
DEFAULT_VERSION = "0.8.0"
#: the annotation kwok's --manage-nodes-with-annotation-selector matches (kwokctl's convention)
NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
#: the stages kwokctl hands the controller when it is given none (pkg/kwokctl/runtime/cluster.go)
STAGES = ("node-initialize.yaml", "node-heartbeat-with-lease.yaml", "pod-ready.yaml", "pod-complete.yaml",
          "pod-delete.yaml")
#: kubelet's default lease duration; the heartbeat-with-lease stage relies on kwok renewing leases
LEASE_SECONDS = 40
#: taints the API server and the node lifecycle controller put on nodes that are not (yet) Ready; a node file
#: that carries them would keep the node unschedulable after KWOK made it Ready
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
ZONES = ("zone-a", "zone-b", "zone-c")
#: what `--nodes N` gives each node: a common mid-size VM
NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}


class KwokUnavailable(KschedError):
    """No kwok binary or stage files: says how to get them."""


def _version() -> str:
    try:
        return VERSION_FILE.read_text().strip()
    except OSError:
        return DEFAULT_VERSION


@dataclass(frozen=True)
class KwokAssets:
    """Where the controller and its stage files are."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "kwok"

    @property
    def stages(self) -> list[Path]:
        return [self.root / "stages" / s for s in STAGES]


def find_kwok() -> KwokAssets:
    """KSCHED_KWOK_DIR, else the cache `hack/build-kwok.sh` fills; KwokUnavailable says how to build it."""
    explicit = os.environ.get("KSCHED_KWOK_DIR")
    cache = Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched")) / "kwok" / _version()
    candidates = [Path(explicit)] if explicit else [cache]
    for c in candidates:
        a = KwokAssets(c)
        if a.binary.is_file() and all(s.is_file() for s in a.stages):
            return a
    raise KwokUnavailable(
        f"no kwok controller with its stage files in {candidates[0]} (bin/kwok, stages/{{{','.join(STAGES)}}}): "
        f"run `bash hack/build-kwok.sh` (builds kwok v{_version()} from Go modules) or set KSCHED_KWOK_DIR",
        usage=False)


def start_controller(assets: KwokAssets, kubeconfig: Path, workdir: Path, log: Path,
                     cidr: str = "10.244.0.0/16", node_ip: str = "127.0.0.1") -> subprocess.Popen[bytes]:
    """Start `kwok` in its own session against `kubeconfig`, managing the annotated nodes only. Pods get IPs
    from `cidr`; nodes without an InternalIP get `node_ip` (as kwokctl's binary runtime gives them its own).

    KWOK_WORKDIR points kwok at `workdir`, so a ~/.kwok/kwok.yaml of the user's is not read in."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = [str(assets.binary), f"--kubeconfig={kubeconfig}",
            *(f"--config={s}" for s in assets.stages),
            f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}", f"--cidr={cidr}", f"--node-ip={node_ip}"]
    env = {**os.environ, "KWOK_WORKDIR": str(workdir)}
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def fake_nodes(count: int, prefix: str = "kwok-node") -> list[dict[str, Any]]:
    """`count` KWOK nodes of NODE_CAPACITY spread round-robin over ZONES, labelled as a cloud node would be."""
    out = []
    for i in range(count):
        name = f"{prefix}-{i}"
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name,
                                 "annotations": {NODE_ANNOTATION: NODE_ANNOTATION_VALUE},
                                 "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                            "kubernetes.io/arch": "amd64", "type": "kwok",
                                            "node.kubernetes.io/instance-type": "kwok.8x32",
                                            "topology.kubernetes.io/region": "region-1",
                                            "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}},
                    "spec": {},
                    "status": {"capacity": dict(NODE_CAPACITY), "allocatable": dict(NODE_CAPACITY)}})
    return out


def as_kwok_node(raw: dict[str, Any]) -> dict[str, Any]:
    """A node from a user's file, marked for KWOK: annotated, without the conditions KWOK will set and without
    the not-ready/unreachable taints the node lifecycle controller manages. Capacity, labels, other taints and
    images are kept."""
    node = copy.deepcopy(raw)
    meta = node.setdefault("metadata", {})
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        meta.pop(k, None)
    meta["annotations"] = {**(meta.get("annotations") or {}), NODE_ANNOTATION: NODE_ANNOTATION_VALUE}
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if not (isinstance(t, dict) and t.get("key") in CONDITION_TAINTS)]
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    node["spec"] = spec
    status = dict(node.get("status") or {})
    for k in ("conditions", "phase"):
        status.pop(k, None)
    node["status"] = status
    return node


def node_ready(node: dict[str, Any]) -> bool:
    """Ready=True and none of the condition taints left: what a scheduler needs to place pods there."""
    conds = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds if isinstance(c, dict))
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(isinstance(t, dict) and t.get("key") in CONDITION_TAINTS for t in taints)


def is_kwok_node(node: dict[str, Any]) -> bool:
    ann = (node.get("metadata") or {}).get("annotations") or {}
    return ann.get(NODE_ANNOTATION) == NODE_ANNOTATION_VALUE

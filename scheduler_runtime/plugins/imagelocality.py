"""ImageLocality: prefer nodes that already have the pod's images, weighted by how widely they are spread.

Upstream: kube-scheduler v1.37.2, pkg/scheduler/framework/plugins/imagelocality/image_locality.go.

Since 1.37 (#138951, ungated) image volumes count in the pod's image count that scales the threshold, as its
containers do: a node holding a pod's image volume no longer scores above one holding an equal regular image.
"""

from __future__ import annotations

import numpy as np

from ..framework import signers
from ..framework.cycle_state import CycleState
from ..framework.interface import SignFragment
from ..framework.plugin import Plugin
from ..framework.snapshot import Snapshot
from ..framework.status import MAX_SCORE, Status
from ..framework.types import NodeInfo
from ..objects import Pod, normalized_image_name

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


class ImageLocality(Plugin):
    name = "ImageLocality"

    def sign_pod(self, pod: Pod) -> list[SignFragment] | Status | None:
        """Opportunistic batching: this plugin's part of the pod's signature (kube's SignPod)."""
        return [SignFragment(signers.IMAGE_NAMES, signers.image_names(pod))]

    def score_batch(self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: np.ndarray) -> np.ndarray:
        total_nodes = len(snapshot)
        images = _pod_images(pod)
        n_containers = _image_count(pod)
        sums: np.ndarray | None = None
        for image in images:
            img_rows, sizes = snapshot.image_rows(image)
            if not len(img_rows) or total_nodes == 0:
                continue
            if sums is None:
                sums = np.zeros(len(snapshot), dtype=np.int64)
            spread = len(img_rows) / total_nodes
            np.add.at(sums, img_rows, (sizes * spread).astype(np.int64))
        if sums is None:  # no node has any of the images: every sum is 0, below the threshold, so scores 0
            return np.zeros(len(rows), dtype=np.int64)
        return _scale(sums[rows], n_containers)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        snap = self.handle.snapshot if self.handle is not None else None
        total = len(snap) if snap is not None else 1
        n_containers = _image_count(pod)
        have = {}
        if node_info.node is not None:
            for names, size in node_info.node.images:
                for nm in names:
                    have[normalized_image_name(nm)] = size
        s = 0
        for image in _pod_images(pod):
            size = have.get(normalized_image_name(image))
            if size is None:
                continue
            num = len(snap.image_rows(image)[0]) if snap is not None else 1
            s += int(size * (num / total))
        return int(_scale(np.array([s], dtype=np.int64), n_containers)[0])


def _image_volumes(pod: Pod) -> list[dict]:
    return [v for v in (pod.raw.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and v.get("image") is not None]


def _pod_images(pod: Pod) -> list[str]:
    """Init containers', containers' and image volumes' images, as sumImageScores walks them."""
    vols = [str((v.get("image") or {}).get("reference") or "") for v in _image_volumes(pod)]
    return [*pod.init_images, *pod.images, *vols]


def _image_count(pod: Pod) -> int:
    """sumImageScores' image count (1.37): init containers, containers and image volumes."""
    spec = pod.raw.get("spec") or {}
    return len(spec.get("containers") or []) + len(spec.get("initContainers") or []) + len(_image_volumes(pod))


def _scale(sums: np.ndarray, n_containers: int) -> np.ndarray:
    max_threshold = MAX_CONTAINER_THRESHOLD * n_containers
    if max_threshold <= MIN_THRESHOLD:
        # no images at all: Go clamps below to the minimum first, else above to 0 -> 100
        return np.where(sums < MIN_THRESHOLD, 0, MAX_SCORE).astype(np.int64)
    clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
    return MAX_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)

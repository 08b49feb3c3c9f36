"""Embedded in-memory cluster: objects from YAML files, watch-like events, recorded bindings and events.

It is what `ksched run` uses without a kubeconfig and what `ksched simulate` replays; it implements the
same backend interface as the real API server backend, so the scheduler cannot tell them apart.
"""

from __future__ import annotations

import copy
import datetime as _dt
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import yamlio
from ..errors import InputError
from ..objects import Node, Pod, PodDisruptionBudget
from ..storageapi import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    class_of,
)
from . import apishape, fieldcheck
from .base import (
    CLUSTER_SCOPED,
    KIND_TO_RESOURCE,
    NOT_LEADER,
    BindError,
    ClusterBackend,
    EventHandler,
    LeadershipLost,
    PatchError,
    merge_patch,
    resource_of_kind,
)
from .draclaims import DRA_RESOURCES, PodClaimIndex, release_pod, sync_claims
from .objcopy import copy_object

_VOLUME_RESOURCES = ("persistentvolumes", "persistentvolumeclaims", "storageclasses")
_SINGULAR = {resource: kind.lower() for kind, resource in KIND_TO_RESOURCE.items()}
_KIND_OF = {resource: kind for kind, resource in KIND_TO_RESOURCE.items()}
#: the API server's generated-name alphabet (no vowels, no confusable characters)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def resource_singular(resource: str) -> str:
    """`persistentvolumeclaims` -> `persistentvolumeclaim`, as apimachinery's NotFound names resources."""
    return _SINGULAR.get(resource) or (resource[:-1] if resource.endswith("s") else resource)


@dataclass(slots=True)
class RecordedEvent:
    namespace: str
    name: str
    type: str
    reason: str
    action: str
    note: str
    reporting_controller: str
    time: str


#: (whole second, its RFC 3339 text): the stamps have one-second resolution, so one strftime per second will do
_last_stamp: tuple[int, str] = (-1, "")


def _now() -> str:
    global _last_stamp
    sec = int(time.time())
    last = _last_stamp
    if last[0] != sec:
        last = _last_stamp = (sec, _dt.datetime.fromtimestamp(sec, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return last[1]


def _key(resource: str, raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    if resource in CLUSTER_SCOPED:
        return meta["name"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


class Store:
    """A watched store of one resource, as `handle.informer(resource)` returns it."""

    def __init__(self, cluster: MemoryCluster, resource: str) -> None:
        self._cluster = cluster
        self.resource = resource
        self._handlers: list[Callable[[str, dict | None, dict | None], None]] = []

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._cluster.list(self.resource, namespace)

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        key = name if self.resource in CLUSTER_SCOPED or namespace is None else f"{namespace}/{name}"
        with self._cluster._lock:
            return self._cluster._objects.get(self.resource, {}).get(key)

    def add_handler(self, fn: Callable[[str, dict | None, dict | None], None]) -> None:
        self._handlers.append(fn)


class MemoryCluster(ClusterBackend):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, dict[str, dict[str, Any]]] = {}
        self._handlers: list[EventHandler] = []
        self._stores: dict[str, Store] = {}
        self._rv = 0
        #: generated names (generateName) come from a seeded generator, so a replay names objects the same
        self._names = random.Random(0)
        self._uid = 0
        self._syncing = False
        self._syncing_claims = False
        self._claim_index = PodClaimIndex()
        self.events: list[RecordedEvent] = []
        self.bindings: list[tuple[str, str]] = []
        self.deleted: list[str] = []

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_paths(cls, paths: Iterable[str | Path]) -> MemoryCluster:
        c = cls()
        for p in paths:
            for raw, where in load_objects(Path(p)):
                try:
                    c.create(raw, emit=False)
                except InputError as exc:
                    raise InputError(exc.detail, file=where, field=exc.field, usage=exc.usage) from None
        c.sync_volumes(emit=False)
        sync_claims(c, emit=False)
        return c

    # ------------------------------------------------------------------ writes
    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def create(self, raw: dict[str, Any], emit: bool = True) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise InputError("an object must be a mapping", usage=False)
        kind = raw.get("kind")
        if not kind or not isinstance(kind, str):
            raise InputError("Required value: kind is required", field="kind", usage=False)
        meta = raw.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError("Required value: name is required", field="metadata.name", usage=False)
        resource = resource_of_kind(kind)
        raw = copy_object(raw)
        meta = raw["metadata"]
        if resource not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        # Parse hot kinds now so bad input is reported at load time, with its field path.
        if kind == "Pod":
            Pod.from_dict(raw)
            _mark_scheduling_gated(raw)
        elif kind == "Node":
            Node.from_dict(raw)
        elif kind == "PodDisruptionBudget":
            PodDisruptionBudget.from_dict(raw)
        elif kind == "StorageClass":  # kube-apiserver's defaulting
            raw.setdefault("volumeBindingMode", "Immediate")
            raw.setdefault("reclaimPolicy", "Delete")
        with self._lock:
            bucket = self._objects.setdefault(resource, {})
            key = _key(resource, raw)
            if key in bucket:
                what = "name" if resource in CLUSTER_SCOPED else "namespace/name"
                raise InputError(f'Duplicate value: "{key}": a {kind} with this {what} already exists',
                                 field="metadata.name", usage=False)
            self._uid += 1
            meta.setdefault("uid", f"{resource[:-1]}-{self._uid:06d}")
            meta["resourceVersion"] = self._next_rv()
            meta.setdefault("creationTimestamp", _now())
            bucket[key] = raw
            if resource == "resourceclaims":
                self._claim_index.note(key, None, raw)
        if emit:
            self._emit(resource, "ADDED", None, raw)
            if resource in _VOLUME_RESOURCES:
                self.sync_volumes()
            if resource in DRA_RESOURCES and not self._syncing_claims:
                # a new pod gets its template claims; a new template may complete every waiting pod's (a new
                # claim completes none: the controller only creates claims, named from the pod and template)
                if resource == "pods":
                    self._sync_claims(raw)
                elif resource == "resourceclaimtemplates":
                    self._sync_claims(None)
        return raw

    def update(self, raw: dict[str, Any]) -> dict[str, Any]:
        resource = resource_of_kind(raw["kind"])
        with self._lock:
            old = self._objects.get(resource, {}).get(_key(resource, raw))
            if old is None:
                raise KeyError(_key(resource, raw))
            new = copy_object(raw)
            new["metadata"].setdefault("uid", old["metadata"].get("uid"))
        self._put(resource, new, emit=True, sync=True)
        return new

    def patch_object(self, resource: str, name: str, namespace: str | None,
                     patch: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        """Merge-patch an object (resourceVersion in the patch is a precondition), then let the embedded
        PV controller react (see `sync_volumes`). With `subresource="status"` only the status changes, as the
        API server's status subresource does."""
        if subresource == "status":
            patch = {k: v for k, v in patch.items() if k == "status"} | (
                {"metadata": {"resourceVersion": (patch.get("metadata") or {}).get("resourceVersion")}}
                if (patch.get("metadata") or {}).get("resourceVersion") else {})
        elif subresource is not None:
            raise PatchError(f"the embedded cluster has no {subresource} subresource", status=404)
        resource = self.informer(resource).resource
        key = name if resource in CLUSTER_SCOPED else f"{namespace or 'default'}/{name}"
        while True:
            with self._lock:
                old = self._objects.get(resource, {}).get(key)
                if old is None:
                    raise PatchError(f'{resource_singular(resource)} "{name}" not found', status=404)
                want_rv = ((patch.get("metadata") or {}).get("resourceVersion"))
                if want_rv and str(want_rv) != str(old["metadata"].get("resourceVersion")):
                    raise PatchError(f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
                                     f"modified; please apply your changes to the latest version and try again",
                                     status=409)
                new = merge_patch(copy_object(old), patch)
                new["metadata"]["uid"] = old["metadata"].get("uid")
            if self._put(resource, new, emit=True, sync=True, expect=old):
                return new
            # changed since the lookup: check and merge again against the current version

    def create_object(self, resource: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object, naming it from `metadata.generateName` when it has no name (the API server's
        name generator: the base cut to 58 characters and 5 random ones)."""
        resource = self.informer(resource).resource
        raw = dict(obj)  # `create` copies it deeply; only the top level and metadata are written here
        m = raw["metadata"] = dict(raw.get("metadata") or {})
        if resource not in CLUSTER_SCOPED:
            m["namespace"] = namespace or m.get("namespace") or "default"
        raw.setdefault("kind", _KIND_OF.get(resource, resource_singular(resource).capitalize()))
        base = m.get("generateName")
        for _ in range(8):
            if not m.get("name") and base:
                m["name"] = str(base)[:58] + "".join(self._names.choice(_NAME_CHARS) for _ in range(5))
            try:
                return self.create(raw)
            except InputError as exc:
                if not base or "already exists" not in str(exc):
                    raise PatchError(str(exc), status=422 if "Required" in str(exc) else 409) from None
                m["name"] = ""
        raise PatchError(f"{resource}: no free generated name for {base!r}", status=409)

    def delete_object(self, resource: str, name: str, namespace: str | None) -> None:
        resource = self.informer(resource).resource
        if self.informer(resource).get(name, namespace or "default") is None:
            raise PatchError(f'{resource} "{name}" not found', status=404)
        self.delete(resource, name, namespace)

    # ------------------------------------------------------------------ the embedded PV controller
    def _put(self, resource: str, new: dict[str, Any], emit: bool, sync: bool = False,
             expect: dict[str, Any] | None = None) -> bool:
        """Store `new` with the next resourceVersion, emit MODIFIED (when `emit`) and let the embedded PV
        controller react (when `sync`). With `expect`, nothing is written and False is returned unless the
        stored object is still `expect`."""
        key = _key(resource, new)
        with self._lock:
            bucket = self._objects.setdefault(resource, {})
            old = bucket.get(key)
            if expect is not None and old is not expect:
                return False
            new["metadata"]["resourceVersion"] = self._next_rv()
            bucket[key] = new
            if resource == "resourceclaims":
                self._claim_index.note(key, old, new)
        if emit:
            self._emit(resource, "MODIFIED", old, new)
        if sync and resource in _VOLUME_RESOURCES:
            self.sync_volumes()
        return True

    def _sync_claims(self, pod: dict[str, Any] | None = None) -> None:
        """The embedded resourceclaim controller (see draclaims): for a new pod, or for every pod."""
        self._syncing_claims = True
        try:
            sync_claims(self, emit=True, pod=pod)
        finally:
            self._syncing_claims = False

    def sync_volumes(self, emit: bool = True) -> None:
        """What kube-controller-manager's PV controller (and an external provisioner) would do, since the
        embedded cluster has neither, so `ksched simulate` and `ksched run` complete volume binding:

        - a PV without status.phase and without claimRef becomes Available;
        - a PV whose spec.claimRef names an existing PVC (the scheduler's static binding), or a PVC whose
          spec.volumeName names an existing PV (a pre-bound pair), becomes Bound: the PVC gets
          spec.volumeName, the pv.kubernetes.io/bind-completed annotation and status Bound;
        - an unbound PVC annotated volume.kubernetes.io/selected-node whose StorageClass has a provisioner
          (not kubernetes.io/no-provisioner) gets a PV `pvc-<uid>` provisioned and bound; the PV is pinned
          to the selected node's values of the keys the class's allowedTopologies use.

        Unbound PVCs of Immediate classes are not bound here (create their PVs pre-bound), so pods using
        them stay pending with kube-scheduler's "pod has unbound immediate PersistentVolumeClaims"."""
        if self._syncing:
            return
        self._syncing = True
        try:
            for _ in range(3):  # a provisioned PV binds on the next pass
                if not self._sync_volumes_once(emit):
                    break
        finally:
            self._syncing = False

    def _sync_volumes_once(self, emit: bool) -> bool:
        changed = False
        with self._lock:
            pvs = {k: v for k, v in self._objects.get("persistentvolumes", {}).items()}
            pvcs = {k: v for k, v in self._objects.get("persistentvolumeclaims", {}).items()}
        for pv in pvs.values():
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if not ref.get("name") and not (pv.get("status") or {}).get("phase"):
                new = copy_object(pv)
                new["status"] = {**(pv.get("status") or {}), "phase": "Available"}
                self._put("persistentvolumes", new, emit)
                changed = True
        for pvc in pvcs.values():
            ann = (pvc.get("metadata") or {}).get("annotations") or {}
            if ann.get(ANN_BIND_COMPLETED) and (pvc.get("spec") or {}).get("volumeName"):
                continue
            ns = pvc["metadata"].get("namespace") or "default"
            vname = (pvc.get("spec") or {}).get("volumeName")
            pv = pvs.get(vname) if vname else None
            if pv is None and not vname:
                for cand in pvs.values():
                    ref = (cand.get("spec") or {}).get("claimRef") or {}
                    if ref.get("name") == pvc["metadata"]["name"] and (ref.get("namespace") or "default") == ns \
                            and ref.get("uid", pvc["metadata"].get("uid")) == pvc["metadata"].get("uid"):
                        pv = cand
                        break
            if pv is None and not vname and ann.get(ANN_SELECTED_NODE):
                pv = self._provision(pvc, ann[ANN_SELECTED_NODE], emit)
                changed = changed or pv is not None
            if pv is None:
                continue
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref.get("name") and (ref.get("name") != pvc["metadata"]["name"] or
                                    (ref.get("namespace") or "default") != ns):
                continue  # the PV belongs to another claim
            self._bind_pair(pv, pvc, emit)
            changed = True
        return changed

    def _bind_pair(self, pv: dict[str, Any], pvc: dict[str, Any], emit: bool) -> None:
        pmeta = pvc["metadata"]
        new_pv = copy_object(pv)
        new_pv.setdefault("spec", {})["claimRef"] = {
            **((pv.get("spec") or {}).get("claimRef") or {}), "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": pmeta.get("namespace") or "default", "name": pmeta["name"], "uid": pmeta.get("uid")}
        new_pv["status"] = {**(pv.get("status") or {}), "phase": "Bound"}
        self._put("persistentvolumes", new_pv, emit)
        new_pvc = copy_object(pvc)
        ann = dict(new_pvc["metadata"].get("annotations") or {})
        if not (pvc.get("spec") or {}).get("volumeName"):
            ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        ann[ANN_BIND_COMPLETED] = "yes"
        new_pvc["metadata"]["annotations"] = ann
        new_pvc.setdefault("spec", {})["volumeName"] = pv["metadata"]["name"]
        pspec = pv.get("spec") or {}
        new_pvc["status"] = {**(pvc.get("status") or {}), "phase": "Bound",
                             "accessModes": list(pspec.get("accessModes") or []),
                             "capacity": dict(pspec.get("capacity") or {})}
        self._put("persistentvolumeclaims", new_pvc, emit)

    def _provision(self, pvc: dict[str, Any], node_name: str, emit: bool) -> dict[str, Any] | None:
        pspec = pvc.get("spec") or {}
        class_name = class_of(pvc)
        with self._lock:
            sc = self._objects.get("storageclasses", {}).get(class_name)
            node = self._objects.get("nodes", {}).get(node_name)
        provisioner = (sc or {}).get("provisioner") or ""
        if sc is None or not provisioner or provisioner == NO_PROVISIONER:
            return None
        name = f"pvc-{pvc['metadata'].get('uid')}"
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        keys = sorted({e.get("key") for t in sc.get("allowedTopologies") or []
                       for e in (t or {}).get("matchLabelExpressions") or [] if e.get("key")})
        spec: dict[str, Any] = {
            "capacity": {"storage": ((pspec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "accessModes": list(pspec.get("accessModes") or []), "storageClassName": class_name,
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
            "volumeMode": pspec.get("volumeMode") or "Filesystem",
            "csi": {"driver": provisioner, "volumeHandle": name},
        }
        if keys and all(k in labels for k in keys):
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": k, "operator": "In", "values": [labels[k]]} for k in keys]}]}}
        raw = {"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
               "spec": spec, "status": {"phase": "Pending"}}
        try:
            return self.create(raw, emit=emit)  # sync_volumes is not re-entered: we are in it
        except InputError:
            return None

    def delete(self, resource: str, name: str, namespace: str | None = "default") -> None:
        key = name if resource in CLUSTER_SCOPED else f"{namespace or 'default'}/{name}"
        with self._lock:
            old = self._objects.get(resource, {}).pop(key, None)
            if old is not None and resource == "resourceclaims":
                self._claim_index.note(key, old, None)
        if old is not None:
            self._emit(resource, "DELETED", old, None)
            if resource == "pods":
                m = old.get("metadata") or {}
                release_pod(self, str(m.get("uid") or ""), emit=True, namespace=m.get("namespace") or "default")

    def _emit(self, resource: str, action: str, old: dict | None, new: dict | None) -> None:
        for h in list(self._handlers):
            h(resource, action, old, new)
        store = self._stores.get(resource)
        if store is not None:
            for fn in list(store._handlers):
                fn(action, old, new)

    # ------------------------------------------------------------------ backend interface
    def start(self, handler: EventHandler) -> None:
        with self._lock:
            self._handlers.append(handler)
            order = ["namespaces", "nodes"] + sorted(r for r in self._objects if r not in
                                                     ("namespaces", "nodes", "pods")) + ["pods"]
            snapshot = [(r, list(self._objects.get(r, {}).values())) for r in order]
        for resource, objs in snapshot:
            for raw in objs:
                handler(resource, "ADDED", None, raw)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get("pods", {}).get(f"{namespace}/{name}")

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        if not self.may_write():
            raise LeadershipLost(f"not binding {pod.key} to {node_name}: {NOT_LEADER}")
        with self._lock:
            raw = self._objects.get("pods", {}).get(pod.key)
            if raw is None or raw["metadata"].get("uid") != pod.uid:
                raise BindError(f'pods "{pod.name}" not found', gone=True)
            if (raw.get("spec") or {}).get("nodeName"):
                raise BindError(f'pod {pod.key} is already assigned to node "{raw["spec"]["nodeName"]}"', gone=True)
            if node_name not in self._objects.get("nodes", {}):
                raise BindError(f'nodes "{node_name}" not found')
            new = copy.copy(raw)
            new["spec"] = dict(raw.get("spec") or {})
            new["spec"]["nodeName"] = node_name
            status = dict(raw.get("status") or {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()})
            status["conditions"] = conds
            status.pop("nominatedNodeName", None)  # the API server clears it (ClearingNominatedNodeNameAfterBinding)
            new["status"] = status
            new["metadata"] = dict(raw["metadata"])
            if annotations:
                new["metadata"]["annotations"] = {**(raw["metadata"].get("annotations") or {}), **annotations}
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._objects["pods"][pod.key] = new
            self.bindings.append((pod.key, node_name))
        self._emit("pods", "MODIFIED", raw, new)

    def record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                     reporting_controller: str = "default-scheduler") -> None:
        with self._lock:
            self.events.append(RecordedEvent(pod.namespace, pod.name, type_, reason, action, note,
                                             reporting_controller, _now()))

    def patch_pod_status(self, pod: Pod, condition: dict[str, Any] | None,
                         nominated_node_name: str | None = None) -> None:
        if not self.may_write():
            return
        with self._lock:
            raw = self._objects.get("pods", {}).get(pod.key)
            if raw is None:
                return
            new = copy.copy(raw)
            status = dict(raw.get("status") or {})
            if condition is not None:
                before = next((c for c in status.get("conditions") or [] if c.get("type") == condition["type"]), {})
                same = all(before.get(k) == condition.get(k) for k in ("status", "reason", "message"))
                if same and (nominated_node_name is None
                             or (status.get("nominatedNodeName") or "") == nominated_node_name):
                    return  # as kube-scheduler's updatePod: nothing changes, nothing is written
                conds = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
                since = before.get("lastTransitionTime") if before.get("status") == condition.get("status") else None
                conds.append({**condition, "lastTransitionTime": since or _now()})
                status["conditions"] = conds
            if nominated_node_name is not None:
                if nominated_node_name:
                    status["nominatedNodeName"] = nominated_node_name
                else:
                    status.pop("nominatedNodeName", None)
            new["status"] = status
            new["metadata"] = dict(raw["metadata"])
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._objects["pods"][pod.key] = new
        # Status-only changes are not delivered: the scheduler wrote them and needs no event back.

    def annotate_pod(self, pod: Pod, annotations: dict[str, str | None]) -> None:
        if not self.may_write():
            return
        with self._lock:
            raw = self._objects.get("pods", {}).get(pod.key)
            if raw is None:
                return
            meta = raw["metadata"]
            ann = dict(meta.get("annotations") or {})
            for k, v in annotations.items():
                if v is None:
                    ann.pop(k, None)
                else:
                    ann[k] = v
            meta["annotations"] = ann

    def delete_pod(self, pod: Pod, reason: str = "", by: str = "") -> None:
        if not self.may_write():
            return
        self.deleted.append(pod.key)
        self.delete("pods", pod.name, pod.namespace)

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            objs = list(self._objects.get(resource, {}).values())
        if namespace is not None and resource not in CLUSTER_SCOPED:
            objs = [o for o in objs if (o.get("metadata") or {}).get("namespace") == namespace]
        return objs

    def informer(self, resource: str) -> Store:
        """A store of `resource`, named as KubeCluster accepts it: `pods`, `plural.group` or
        `group/version/plural`; objects here are kept by plural, so the rest of the name is dropped."""
        if "/" in resource:
            resource = resource.rsplit("/", 1)[1]
        resource = resource.split(".", 1)[0]
        store = self._stores.get(resource)
        if store is None:
            store = self._stores[resource] = Store(self, resource)
        return store

    def events_for(self, namespace: str, name: str) -> list[RecordedEvent]:
        with self._lock:
            return [e for e in self.events if e.namespace == namespace and e.name == name]


# ---------------------------------------------------------------------- YAML loading


def load_objects(path: Path) -> list[tuple[dict[str, Any], str]]:
    """Objects from a file (a list, a v1 List, or multi-document YAML) or every *.yaml in a folder."""
    if path.is_dir():
        out: list[tuple[dict[str, Any], str]] = []
        for f in sorted([*path.glob("*.yaml"), *path.glob("*.yml"), *path.glob("*.json")]):
            out += load_objects(f)
        return out
    where = str(path)
    docs = yamlio.load_file(path, limit=yamlio.SNAPSHOT_LIMIT, what="YAML file of Kubernetes objects")
    out = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        items: list[Any]
        if isinstance(doc, list):
            items = doc
        elif isinstance(doc, dict) and (doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List")) \
                and isinstance(doc.get("items"), list):
            items = doc["items"]
        else:
            items = [doc]
        for j, item in enumerate(items):
            if not isinstance(item, dict):
                raise InputError(f"document {i + 1}, item {j + 1}: expected a Kubernetes object (a mapping), "
                                 f"got {type(item).__name__}", file=where, usage=False)
            try:
                apishape.check_object(item)
            except InputError as exc:
                raise InputError(exc.detail, file=where, field=exc.field, usage=False) from None
            if item.get("kind"):
                fieldcheck.check_object(item, where)  # unknown fields: a warning each, as kubectl gives
            out.append((item, where))
    return out


def bind_error_is_gone(exc: BaseException) -> bool:
    return isinstance(exc, BindError) and exc.gone


def _mark_scheduling_gated(raw: dict[str, Any]) -> None:
    """What kube-apiserver does on create: a pod with scheduling gates starts with PodScheduled=False,
    reason SchedulingGated (kubectl shows it as the pod's STATUS)."""
    spec = raw.get("spec") or {}
    if not spec.get("schedulingGates") or spec.get("nodeName"):
        return
    status = raw.setdefault("status", {})
    conds = status.setdefault("conditions", [])
    if any(c.get("type") == "PodScheduled" for c in conds):
        return
    status.setdefault("phase", "Pending")
    conds.append({"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": _now(),
                  "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"})

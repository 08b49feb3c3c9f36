"""What kube-controller-manager's resourceclaim controller does, for the embedded cluster (which has none), so
`ksched simulate` and `ksched run` without an API server schedule pods whose claims come from templates:

- a pod's `spec.resourceClaims[]` entry naming a ResourceClaimTemplate gets a claim `<pod>-<entry>-<5 chars>`
  (the template's spec and metadata, controlled by the pod, annotated `resource.kubernetes.io/pod-claim-name`),
  and the pod's `status.resourceClaimStatuses` names it; a missing template leaves the pod waiting, as in kube;
- when a pod is deleted, its `status.reservedFor` entries are removed, a claim reserved by nobody any more is
  deallocated, and a claim generated for the pod is deleted (kube's garbage collector).

The suffix is derived from the pod's UID (kube's is random) so replays are reproducible.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from typing import Any, Protocol

from .objcopy import copy_object

DRA_RESOURCES = ("pods", "resourceclaims", "resourceclaimtemplates")
ANN_POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class PodClaimIndex:
    """The claims naming each pod UID (as their controlling owner or in `status.reservedFor`), so a deleted pod's
    claims are found without reading every claim of its namespace. Keys come back in the store's order (a key
    keeps its place when rewritten and goes last when it is new), which the controller's walk follows."""

    def __init__(self) -> None:
        self._by_uid: dict[str, set[str]] = {}
        self._seq: dict[str, int] = {}
        self._next = 0

    @staticmethod
    def _uids(claim: dict[str, Any] | None) -> set[str]:
        if claim is None:
            return set()
        out = {str(r.get("uid")) for r in _meta(claim).get("ownerReferences") or []
               if r.get("controller") and r.get("kind") == "Pod"}
        out.update(str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or []
                   if r.get("resource") == "pods")
        return out

    def note(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Called with the store's lock held, for every write of a claim (`new` None: deleted)."""
        if new is None:
            self._seq.pop(key, None)
        elif key not in self._seq:
            self._seq[key] = self._next
            self._next += 1
        before, after = self._uids(old), self._uids(new)
        for uid in before - after:
            keys = self._by_uid.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_uid[uid]
        for uid in after - before:
            self._by_uid.setdefault(uid, set()).add(key)

    def keys_for(self, uid: str, prefix: str) -> list[str]:
        keys = [k for k in self._by_uid.get(uid, ()) if k.startswith(prefix)]
        keys.sort(key=self._seq.__getitem__)
        return keys


class ClaimStore(Protocol):
    """The embedded cluster (`memory.MemoryCluster`) as the controller sees it: its store and its writes."""

    _lock: threading.RLock
    _objects: dict[str, dict[str, dict[str, Any]]]
    _claim_index: PodClaimIndex

    def create(self, raw: dict[str, Any], emit: bool = True) -> dict[str, Any]: ...

    def delete(self, resource: str, name: str, namespace: str | None = "default") -> None: ...

    def _put(self, resource: str, new: dict[str, Any], emit: bool, sync: bool = False,
             expect: dict[str, Any] | None = None) -> bool: ...


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def sync_claims(cluster: ClaimStore, emit: bool, pod: dict[str, Any] | None = None) -> None:
    """Create the missing claims of one pod's templates, or of every pod's (`pod` None)."""
    with cluster._lock:
        pods = [pod] if pod is not None else list(cluster._objects.get("pods", {}).values())
        templates = cluster._objects.get("resourceclaimtemplates", {})
    for p in pods:
        if (p.get("spec") or {}).get("resourceClaims"):
            _instantiate(cluster, p, templates, emit)


def release_pod(cluster: ClaimStore, uid: str, emit: bool, namespace: str) -> None:
    """A pod is gone: release what it held. Only the pod's namespace's claims are looked at: an owner reference
    and a `reservedFor` entry both name an object of the claim's own namespace."""
    with cluster._lock:
        bucket = cluster._objects.get("resourceclaims", {})
        claims = [bucket[k] for k in cluster._claim_index.keys_for(uid, f"{namespace}/") if k in bucket]
    for claim in claims:
        _release(cluster, claim, uid, emit)


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _instantiate(cluster: ClaimStore, pod: dict[str, Any], templates: dict[str, dict[str, Any]],
                 emit: bool) -> None:
    refs = [r for r in ((pod.get("spec") or {}).get("resourceClaims") or []) if isinstance(r, dict)]
    if not refs or _finished(pod):
        return
    m = _meta(pod)
    ns = m.get("namespace") or "default"
    statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
    have = {s.get("name") for s in statuses}
    added = False
    for ref in refs:
        tname = ref.get("resourceClaimTemplateName")
        if tname is None or ref.get("name") in have:
            continue
        template = templates.get(f"{ns}/{tname}")
        if template is None:
            continue  # kube's controller reports an error event and retries; the pod keeps waiting
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        name = f"{m.get('name')}-{ref.get('name')}-{_suffix(str(m.get('uid')) + str(ref.get('name')))}"
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": name, "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**(tmeta.get("annotations") or {}), ANN_POD_CLAIM_NAME: str(ref.get("name"))},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": m.get("name"), "uid": m.get("uid"),
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": copy_object(tspec.get("spec") or {}),
        }
        if not claim["metadata"]["labels"]:
            del claim["metadata"]["labels"]
        with cluster._lock:
            exists = f"{ns}/{name}" in cluster._objects.get("resourceclaims", {})
        if not exists:
            cluster.create(claim, emit=emit)
        statuses.append({"name": ref.get("name"), "resourceClaimName": name})
        have.add(ref.get("name"))
        added = True
    if added:
        with cluster._lock:
            cur = cluster._objects.get("pods", {}).get(f"{ns}/{m.get('name')}")
        if cur is None or _meta(cur).get("uid") != m.get("uid"):
            return
        new = copy.copy(cur)
        new["metadata"] = dict(_meta(cur))
        new["status"] = {**(cur.get("status") or {}), "resourceClaimStatuses": statuses}
        cluster._put("pods", new, emit)


def _release(cluster: ClaimStore, claim: dict[str, Any], uid: str, emit: bool) -> None:
    m = _meta(claim)
    owner = next((r for r in m.get("ownerReferences") or [] if r.get("controller") and r.get("kind") == "Pod"),
                 None)
    if owner is not None and str(owner.get("uid")) == uid:
        cluster.delete("resourceclaims", m.get("name", ""), m.get("namespace") or "default")
        return
    st = claim.get("status") or {}
    rf = st.get("reservedFor") or []
    keep = [r for r in rf if r.get("resource") != "pods" or str(r.get("uid")) != uid]
    if len(keep) == len(rf):
        return
    new = copy_object(claim)
    status = dict(st)
    if keep:
        status["reservedFor"] = keep
    else:
        status.pop("reservedFor", None)
        status.pop("allocation", None)
        status.pop("devices", None)
    new["status"] = status
    cluster._put("resourceclaims", new, emit)

"""`ksched snapshot`: capture what scheduling depends on from a live cluster, as one v1 List that
`ksched simulate --snapshot` (and the embedded cluster) loads.

What is captured: the objects kube-scheduler's plugins read, nothing else (no Secrets, no ConfigMaps).
Pods are listed as kube-scheduler lists them (not Succeeded, not Failed); workload controllers and
Services only for their selectors (PodTopologySpread's system defaults), without pod templates.

What is stripped, because a snapshot gets mailed around and scheduling needs none of it:
  * `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration` annotation (a
    full copy of the object as applied, env values included) from every object;
  * in every container: env values (`value`, `valueFrom`; names stay), `envFrom`, `command`, `args`,
    probes, lifecycle hooks, security context; the fields the scheduler reads (image, resources, ports,
    restartPolicy, volume mounts) stay;
  * pod volumes: secret, configMap, projected and downwardAPI sources keep only the volume's name and the
    referenced object's name (no items), CSI `volumeAttributes` and `nodePublishSecretRef` and flexVolume
    `options` and `secretRef` are dropped;
  * PersistentVolumes: CSI `volumeAttributes` (driver-specific, sometimes credentials) are dropped;
  * pod status: only phase, conditions, nominatedNodeName, qosClass, startTime, resourceClaimStatuses,
    extendedResourceClaimStatus, nodeAllocatableResourceClaimStatuses (DRANodeAllocatableResources' node
    accounting) and the containers' allocated resources (in-place resize) stay; IPs and messages go.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .cluster.kube import BUILTIN, POD_FIELD_SELECTOR, KubeClient, load_connection

#: what is captured, in the order a reader would want it (cluster-scoped first, pods last)
RESOURCES = ("namespaces", "priorityclasses", "nodes", "storageclasses", "csidrivers", "csinodes", "volumeattachments",
             "persistentvolumes", "persistentvolumeclaims", "csistoragecapacities", "deviceclasses",
             "resourceslices", "resourceclaimtemplates", "resourceclaims", "poddisruptionbudgets", "services",
             "replicationcontrollers", "replicasets", "statefulsets", "pods")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_CONTAINER_KEEP = ("name", "image", "imagePullPolicy", "resources", "resizePolicy", "restartPolicy", "ports",
                   "volumeMounts", "volumeDevices", "env")
_POD_STATUS_KEEP = ("phase", "conditions", "nominatedNodeName", "qosClass", "startTime", "resourceClaimStatuses",
                    "extendedResourceClaimStatus", "nodeAllocatableResourceClaimStatuses")
_REFERENCE_VOLUMES = {"secret": ("secretName", "optional"), "configMap": ("name", "optional"),
                      "downwardAPI": (), "projected": ()}
_WORKLOAD_SPEC_KEEP = ("selector", "replicas")


@dataclass
class Snapshot:
    server: str
    items: list[dict[str, Any]] = field(default_factory=list)
    #: resources the API server does not serve (an older cluster without DRA, ...)
    not_served: list[str] = field(default_factory=list)
    namespace: str | None = None
    taken: str = ""

    def counts(self) -> Counter[str]:
        return Counter(str(o.get("kind")) for o in self.items)

    def unbound_pods(self) -> int:
        return sum(1 for o in self.items if o.get("kind") == "Pod" and not (o.get("spec") or {}).get("nodeName"))

    def to_list(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": self.items}

    def header(self) -> str:
        """The comment a YAML snapshot starts with: where and when, and that secrets were stripped."""
        scope = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        return (f"# ksched snapshot of {self.server} ({scope}) taken {self.taken}.\n"
                "# Secrets, env values, commands and last-applied annotations are stripped (scheduler_runtime/"
                "snapshot.py).\n# Use: ksched simulate --snapshot THIS_FILE [--pods more.yaml] [--compare B.yaml]\n")


def _clean_container(c: Any) -> Any:
    if not isinstance(c, dict):
        return c
    out = {k: c[k] for k in _CONTAINER_KEEP if k in c}
    if "env" in out:
        out["env"] = [{"name": e.get("name")} for e in out["env"] or [] if isinstance(e, dict)]
    return out


def _clean_volume(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    out = dict(v)
    for source, keep in _REFERENCE_VOLUMES.items():
        if isinstance(out.get(source), dict):
            out[source] = {k: out[source][k] for k in keep if k in out[source]}
    if isinstance(out.get("csi"), dict):
        out["csi"] = {k: x for k, x in out["csi"].items() if k not in ("volumeAttributes", "nodePublishSecretRef")}
    if isinstance(out.get("flexVolume"), dict):
        out["flexVolume"] = {k: x for k, x in out["flexVolume"].items() if k not in ("options", "secretRef")}
    return out


def _clean_pod(pod: dict[str, Any]) -> None:
    spec = pod.get("spec")
    if isinstance(spec, dict):
        for key in ("containers", "initContainers", "ephemeralContainers"):
            if isinstance(spec.get(key), list):
                spec[key] = [_clean_container(c) for c in spec[key]]
        if isinstance(spec.get("volumes"), list):
            spec["volumes"] = [_clean_volume(v) for v in spec["volumes"]]
    status = pod.get("status")
    if isinstance(status, dict):
        kept = {k: status[k] for k in _POD_STATUS_KEEP if k in status}
        for key in ("containerStatuses", "initContainerStatuses"):
            if isinstance(status.get(key), list):
                kept[key] = [{k: s[k] for k in ("name", "allocatedResources", "resources") if k in s}
                             for s in status[key] if isinstance(s, dict)]
        pod["status"] = kept


def sanitize(obj: dict[str, Any]) -> dict[str, Any]:
    """Strip `obj` in place of what scheduling does not need and must not leak (see the module docstring)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        ann = meta.get("annotations")
        if isinstance(ann, dict):
            ann.pop(LAST_APPLIED, None)
            if not ann:
                meta.pop("annotations")
    kind = obj.get("kind")
    if kind == "Pod":
        _clean_pod(obj)
    elif kind in ("ReplicaSet", "StatefulSet", "ReplicationController"):
        spec = obj.get("spec") or {}
        obj["spec"] = {k: spec[k] for k in _WORKLOAD_SPEC_KEEP if k in spec}
        obj.pop("status", None)
    elif kind == "PersistentVolume":
        csi = (obj.get("spec") or {}).get("csi")
        if isinstance(csi, dict):
            csi.pop("volumeAttributes", None)
    elif kind == "Service":
        spec = obj.get("spec") or {}
        obj["spec"] = {k: spec[k] for k in ("selector", "type") if k in spec}
        obj.pop("status", None)
    return obj


def _list(client: KubeClient, resource: str, namespace: str | None, page: int) -> list[dict[str, Any]] | None:
    """Every object of `resource` (paginated), or None when the server does not serve it."""
    ref = BUILTIN[resource]
    path = ref.path(namespace if ref.namespaced else None)
    query: dict[str, Any] = {"limit": page}
    if resource == "pods":
        query["fieldSelector"] = POD_FIELD_SELECTOR
    out: list[dict[str, Any]] = []
    while True:
        resp = client.request("GET", path, query=query)
        if resp.status == 404 and not out:
            return None
        if not resp.ok:
            raise client.error(resp, "GET", path, query)
        body = resp.json()
        for it in body.get("items") or ():
            it.setdefault("apiVersion", ref.group_version)
            it.setdefault("kind", ref.kind)
            out.append(it)
        cont = (body.get("metadata") or {}).get("continue")
        if not cont:
            return out
        query["continue"] = cont


def take(client: KubeClient, namespace: str | None = None, resources: tuple[str, ...] = RESOURCES,
         page: int = 500) -> Snapshot:
    """List `resources` (namespaced ones only in `namespace` when given) and strip every object."""
    snap = Snapshot(server=client.host, namespace=namespace,
                    taken=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    for resource in resources:
        objs = _list(client, resource, namespace, page)
        if objs is None:
            snap.not_served.append(f"{resource}.{BUILTIN[resource].group or 'core'}/{BUILTIN[resource].version}")
            continue
        if resource == "namespaces" and namespace:
            objs = [o for o in objs if (o.get("metadata") or {}).get("name") == namespace]
        snap.items += [sanitize(o) for o in objs]
    return snap


def take_from_kubeconfig(kubeconfig: str | None = None, context: str | None = None,
                         namespace: str | None = None) -> Snapshot:
    """`take` on the cluster a kubeconfig (kubectl's lookup: --kubeconfig, $KUBECONFIG, ~/.kube/config or
    the pod's service account) and context point at."""
    client = KubeClient(load_connection(kubeconfig, context), qps=50.0, burst=100, pool_size=4)
    try:
        return take(client, namespace)
    finally:
        client.close()

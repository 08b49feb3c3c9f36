"""The volume plugins on the embedded cluster: every branch and message, kube-scheduler's wording."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.nodelist import NodeList
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code, Status
from scheduler_runtime.framework.types import QUEUE, QUEUE_SKIP, NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.volume.nodevolumelimits import REASON_MAX_VOLUME_COUNT as NVL_REASON
from scheduler_runtime.plugins.volume.nodevolumelimits import NodeVolumeLimits
from scheduler_runtime.plugins.volume.volumebinding import REASON_BIND_CONFLICT as VB_BIND_CONFLICT
from scheduler_runtime.plugins.volume.volumebinding import REASON_NODE_CONFLICT as VB_NODE_CONFLICT
from scheduler_runtime.plugins.volume.volumebinding import REASON_PV_NOT_EXIST as VB_PV_NOT_EXIST
from scheduler_runtime.plugins.volume.volumebinding import REASON_UNBOUND_IMMEDIATE as VB_UNBOUND_IMMEDIATE
from scheduler_runtime.plugins.volume.volumebinding import VolumeBinding, VolumeBindingArgs
from scheduler_runtime.plugins.volume.volumerestrictions import (
    REASON_DISK_CONFLICT,
    REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)
from scheduler_runtime.plugins.volume.volumezone import REASON_CONFLICT as VZ_REASON
from scheduler_runtime.plugins.volume.volumezone import VolumeZone

NS = "ns"


def node(name: str, labels: dict | None = None, allocatable: dict | None = None) -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110",
                                                      **(allocatable or {})}}})


_uid = [0]


def pod(name: str = "p", volumes: list | None = None, node_name: str = "", ns: str = NS) -> Pod:
    _uid[0] += 1
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app:1"}], "volumes": volumes or []}
    if node_name:
        spec["nodeName"] = node_name
    return Pod.from_dict({"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}-{_uid[0]}"}, "spec": spec})


def claim_vol(claim: str, name: str = "") -> dict:
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}


def pvc(name: str, *, modes: tuple = ("ReadWriteOnce",), cls: str | None = "", volume: str = "",
        storage: str = "1Gi", bound: bool = False, ns: str = NS, status: dict | None = None, **extra: Any) -> dict:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": storage}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    meta: dict[str, Any] = {"name": name, "namespace": ns, **extra.pop("meta", {})}
    if bound:
        meta.setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": {**spec, **extra},
            "status": status or {}}


def pv(name: str, *, cls: str = "", storage: str = "1Gi", modes: tuple = ("ReadWriteOnce",), labels: dict | None = None,
       affinity: dict | None = None, claim: tuple[str, str] | None = None, phase: str = "Available",
       **extra: Any) -> dict:
    spec: dict[str, Any] = {"capacity": {"storage": storage}, "accessModes": list(modes), "storageClassName": cls,
                            **extra}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": v if isinstance(v, list) else [v]}
            for k, v in affinity.items()]}]}}
    if claim:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"phase": phase}}


def storage_class(name: str, mode: str | None = "WaitForFirstConsumer", provisioner: str = "csi.example.com",
                  topologies: list | None = None) -> dict:
    raw: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner}
    if mode is not None:
        raw["volumeBindingMode"] = mode
    if topologies is not None:
        raw["allowedTopologies"] = [{"matchLabelExpressions": [{"key": k, "values": v} for k, v in t.items()]}
                                    for t in topologies]
    return raw


def setup(*objects: dict, nodes: tuple[Node, ...] = (), placed: dict[str, list[Pod]] | None = None
          ) -> tuple[MemoryCluster, Handle]:
    cluster = MemoryCluster()
    for o in objects:
        cluster.create(o, emit=False)
    snap = Snapshot()
    for n in nodes:
        cluster.create({"apiVersion": "v1", "kind": "Node", **n.raw}, emit=False)
        ni = NodeInfo(n)
        snap.add_node(ni)
        for p in (placed or {}).get(n.name, []):
            snap.add_pod(ni, p)
    return cluster, Handle(snap, cluster=cluster)


def prefilter(plugin: Any, p: Pod, state: CycleState | None = None) -> tuple[CycleState, Any]:
    state = state or CycleState()
    return state, plugin.pre_filter(state, p, NodeList(plugin.handle.snapshot))


def reasons(st: Status | None) -> tuple[int, list[str]] | None:
    return None if st is None else (int(st.code), st.reasons)


# ------------------------------------------------------------------------------------------ VolumeRestrictions


def test_volume_restrictions_skips_pods_without_volumes_or_checks():
    _, h = setup(pvc("data"), nodes=(node("n1"),))
    pl = VolumeRestrictions(None, h)
    assert prefilter(pl, pod())[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[{"name": "tmp", "emptyDir": {}}]))[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[claim_vol("data")]))[1].code == Code.Skip  # RWO claim: nothing to check


def test_volume_restrictions_missing_claim_is_unresolvable():
    _, h = setup(nodes=(node("n1"),))
    st = prefilter(VolumeRestrictions(None, h), pod(volumes=[claim_vol("gone")]))[1]
    assert reasons(st) == (Code.UnschedulableAndUnresolvable, ['persistentvolumeclaim "gone" not found'])


@pytest.mark.parametrize("mine, theirs, conflict", [
    ({"gcePersistentDisk": {"pdName": "d1"}}, {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}}, True),
    ({"gcePersistentDisk": {"pdName": "d1", "readOnly": True}},
     {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}}, False),
    ({"gcePersistentDisk": {"pdName": "d1"}}, {"gcePersistentDisk": {"pdName": "d2"}}, False),
    ({"awsElasticBlockStore": {"volumeID": "v1", "readOnly": True}},
     {"awsElasticBlockStore": {"volumeID": "v1", "readOnly": True}}, True),
    ({"awsElasticBlockStore": {"volumeID": "v1"}}, {"awsElasticBlockStore": {"volumeID": "v2"}}, False),
    ({"iscsi": {"iqn": "iqn.1", "targetPortal": "a", "lun": 0}}, {"iscsi": {"iqn": "iqn.1", "lun": 1}}, True),
    ({"iscsi": {"iqn": "iqn.1", "readOnly": True}}, {"iscsi": {"iqn": "iqn.1", "readOnly": True}}, False),
    ({"rbd": {"monitors": ["m1", "m2"], "image": "img"}}, {"rbd": {"monitors": ["m2"], "image": "img"}}, True),
    ({"rbd": {"monitors": ["m1"], "image": "img"}}, {"rbd": {"monitors": ["m3"], "image": "img"}}, False),
    ({"rbd": {"monitors": ["m1"], "image": "img", "pool": "a"}},
     {"rbd": {"monitors": ["m1"], "image": "img", "pool": "b"}}, False),
    ({"rbd": {"monitors": ["m1"], "image": "img", "readOnly": True}},
     {"rbd": {"monitors": ["m1"], "image": "img", "readOnly": True}}, False),
])
def test_volume_restrictions_disk_conflicts(mine, theirs, conflict):
    other = pod("other", volumes=[{"name": "d", **theirs}], node_name="n1")
    _, h = setup(nodes=(node("n1"), node("n2")), placed={"n1": [other]})
    pl = VolumeRestrictions(None, h)
    p = pod(volumes=[{"name": "d", **mine}])
    state, st = prefilter(pl, p)
    assert st is None
    got = pl.filter(state, p, h.snapshot.get("n1"))
    assert reasons(got) == ((Code.Unschedulable, [REASON_DISK_CONFLICT]) if conflict else None)
    assert pl.filter(state, p, h.snapshot.get("n2")) is None


def test_volume_restrictions_read_write_once_pod():
    user = pod("user", volumes=[claim_vol("solo")], node_name="n1")
    _, h = setup(pvc("solo", modes=("ReadWriteOncePod",)), pvc("free", modes=("ReadWriteOncePod",)),
                 nodes=(node("n1"), node("n2")), placed={"n1": [user]})
    pl = VolumeRestrictions(None, h)
    p = pod(volumes=[claim_vol("solo")])
    state, st = prefilter(pl, p)
    assert st is None
    assert REASON_RWOP_CONFLICT == ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                                    "access mode already in-use by another pod")  # kube v1.36.3
    # the claim is in use anywhere in the cluster: every node is rejected, preemption may help
    for n in ("n1", "n2"):
        assert reasons(pl.filter(state, p, h.snapshot.get(n))) == (Code.Unschedulable, [REASON_RWOP_CONFLICT])
    # removing the user (a preemption victim) clears the conflict; adding it back restores it
    s2 = state.clone()
    assert pl.remove_pod(s2, p, user, h.snapshot.get("n1")) is None
    assert pl.filter(s2, p, h.snapshot.get("n2")) is None
    pl.add_pod(s2, p, user, h.snapshot.get("n1"))
    assert pl.filter(s2, p, h.snapshot.get("n2")).code == Code.Unschedulable
    assert pl.filter(state, p, h.snapshot.get("n2")).code == Code.Unschedulable  # the clone is separate
    # an unused ReadWriteOncePod claim needs no check
    assert prefilter(pl, pod(volumes=[claim_vol("free")]))[1].code == Code.Skip
    # the same claim name in another namespace is another claim
    assert prefilter(pl, pod(volumes=[claim_vol("solo")], ns="other"))[1].code == Code.UnschedulableAndUnresolvable


def test_volume_restrictions_events_and_hints():
    pl = VolumeRestrictions(None, None)
    regs = {r.event.resource: r for r in pl.events_to_register()}
    assert set(regs) == {"Pod", "Node", "PersistentVolumeClaim"}
    p = pod(volumes=[claim_vol("data"), {"name": "d", "awsElasticBlockStore": {"volumeID": "v1"}}])
    hint = regs["PersistentVolumeClaim"].hint
    assert hint(p, None, pvc("data")) == QUEUE
    assert hint(p, None, pvc("other")) == QUEUE_SKIP
    assert hint(p, None, pvc("data", ns="elsewhere")) == QUEUE_SKIP
    deleted = regs["Pod"].hint
    assert deleted(p, pod("x", volumes=[{"name": "d", "awsElasticBlockStore": {"volumeID": "v1"}}]), None) == QUEUE
    assert deleted(p, pod("x", volumes=[claim_vol("data")]), None) == QUEUE
    assert deleted(p, pod("x", volumes=[claim_vol("zzz")]), None) == QUEUE_SKIP


# ------------------------------------------------------------------------------------------ VolumeZone

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def zone_setup(*objects: dict):
    nodes = (node("a1", {ZONE: "a", REGION: "r1"}), node("b1", {ZONE: "b", REGION: "r1"}),
             node("beta-a", {BETA_ZONE: "a"}), node("plain"))
    return setup(*objects, nodes=nodes)


def zone_verdicts(pl, p) -> dict[str, Any]:
    state, st = prefilter(pl, p)
    assert st is None
    return {ni.name: reasons(pl.filter(state, p, ni)) for ni in pl.handle.snapshot.node_infos}


def test_volume_zone_bound_pv_zone_and_region():
    _, h = zone_setup(pvc("data", volume="pv-a", bound=True), pv("pv-a", labels={ZONE: "a", REGION: "r1"}))
    got = zone_verdicts(VolumeZone(None, h), pod(volumes=[claim_vol("data")]))
    no = (Code.UnschedulableAndUnresolvable, [VZ_REASON])
    # beta-a has only the beta zone label: the GA zone label of the PV matches it, the region does not
    assert got == {"a1": None, "b1": no, "beta-a": no, "plain": None}


def test_volume_zone_beta_labels_and_multi_zone_values():
    _, h = zone_setup(pvc("data", volume="pv", bound=True), pv("pv", labels={BETA_ZONE: "a__b"}))
    got = zone_verdicts(VolumeZone(None, h), pod(volumes=[claim_vol("data")]))
    # the PV's beta key is looked up on the node, then translated to the GA key
    assert got == {"a1": None, "b1": None, "beta-a": None, "plain": None}
    _, h = zone_setup(pvc("data", volume="pv", bound=True), pv("pv", labels={ZONE: "a__"}))
    assert prefilter(VolumeZone(None, h), pod(volumes=[claim_vol("data")]))[1].code == Code.Skip  # bad label ignored


def test_volume_zone_skips_and_errors():
    objs = (pvc("nolabels", volume="pv0", bound=True), pv("pv0"), pvc("wffc", cls="late"), storage_class("late"),
            pvc("imm", cls="now"), storage_class("now", mode="Immediate"), pvc("nocls", cls=None),
            pvc("ghostcls", cls="ghost"), pvc("ghostpv", volume="missing", bound=True), pvc("odd", cls="odd"),
            storage_class("odd"))
    cluster, h = zone_setup(*objs)
    del cluster._objects["storageclasses"]["odd"]["volumeBindingMode"]  # only an unvalidated object lacks it
    pl = VolumeZone(None, h)
    assert prefilter(pl, pod())[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[claim_vol("nolabels")]))[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[claim_vol("wffc")]))[1].code == Code.Skip  # unbound WaitForFirstConsumer
    unres = Code.UnschedulableAndUnresolvable
    for claim, msg in [("imm", "PersistentVolume had no name"),
                       ("nocls", "PersistentVolumeClaim had no pv name and storageClass name"),
                       ("ghostcls", 'storageclass.storage.k8s.io "ghost" not found'),
                       ("ghostpv", 'persistentvolume "missing" not found'),
                       ("absent", 'persistentvolumeclaim "absent" not found'),
                       ("odd", 'VolumeBindingMode not set for StorageClass "odd"'),
                       ("", "PersistentVolumeClaim had no name")]:
        assert reasons(prefilter(pl, pod(volumes=[claim_vol(claim, "v")]))[1]) == (unres, [msg]), claim


def test_volume_zone_events():
    regs = {r.event.resource: r for r in VolumeZone(None, None).events_to_register()}
    assert set(regs) == {"storage.k8s.io/StorageClass", "Node", "PersistentVolumeClaim", "PersistentVolume"}
    p = pod(volumes=[claim_vol("data")])
    assert regs["PersistentVolumeClaim"].hint(p, None, pvc("data")) == QUEUE
    assert regs["PersistentVolumeClaim"].hint(p, None, pvc("x")) == QUEUE_SKIP


# ------------------------------------------------------------------------------------------ NodeVolumeLimits


def csinode(name: str, **counts: int) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": d.replace("_", "."), "nodeID": name, "allocatable": {"count": c}}
                                 for d, c in counts.items()]}}


def csi_pv(name: str, driver: str = "csi.example.com", handle: str = "") -> dict:
    return pv(name, csi={"driver": driver, "volumeHandle": handle or name}, phase="Bound")


def nvl_filter(pl: NodeVolumeLimits, p: Pod, ni: NodeInfo) -> Status | None:
    """PreFilter (which looks the pod's volumes up) then Filter on one node."""
    state, st = prefilter(pl, p)
    assert st is None
    return pl.filter(state, p, ni)


def test_node_volume_limits_counts_unique_handles_per_driver():
    existing = pod("old", volumes=[claim_vol("c1"), claim_vol("c2")], node_name="n1")
    objs = [pvc(f"c{i}", volume=f"v{i}", bound=True) for i in range(1, 5)] + [
        csi_pv("v1"), csi_pv("v2"), csi_pv("v3"), csi_pv("v4", driver="other.example.com"),
        csinode("n1", csi_example_com=3, other_example_com=0), csinode("n2", csi_example_com=1)]
    _, h = setup(*objs, nodes=(node("n1"), node("n2"), node("n3")), placed={"n1": [existing]})
    pl = NodeVolumeLimits(None, h)
    n1, n2, n3 = (h.snapshot.get(n) for n in ("n1", "n2", "n3"))
    p = pod(volumes=[claim_vol("c2"), claim_vol("c3")])  # c2 is already attached on n1: counted once
    state, st = prefilter(pl, p)
    assert st is None
    assert pl.filter(state, p, n1) is None  # 2 attached + 1 new <= 3
    assert reasons(pl.filter(state, p, n2)) == (Code.Unschedulable, [NVL_REASON])  # 2 new > 1
    assert pl.filter(state, p, n3) is None  # no CSINode, no limits
    q = pod(volumes=[claim_vol("c1"), claim_vol("c3"), claim_vol("c4")])
    assert reasons(nvl_filter(pl, q, n1)) == (Code.Unschedulable, [NVL_REASON])  # other driver limit 0
    r = pod(volumes=[claim_vol("c3"), {"name": "x", "persistentVolumeClaim": {"claimName": "c3"}}])
    assert nvl_filter(pl, r, n2) is None  # the same claim twice is one volume


def test_node_volume_limits_unbound_claims_count_for_the_provisioner():
    objs = [pvc("u1", cls="fast"), pvc("u2", cls="fast"), pvc("nocls", cls=None), storage_class("fast"),
            csinode("n1", csi_example_com=1)]
    _, h = setup(*objs, nodes=(node("n1"),))
    pl = NodeVolumeLimits(None, h)
    n1 = h.snapshot.get("n1")
    assert nvl_filter(pl, pod(volumes=[claim_vol("u1")]), n1) is None
    assert nvl_filter(pl, pod(volumes=[claim_vol("u1"), claim_vol("u2")]), n1).reasons == [NVL_REASON]
    assert nvl_filter(pl, pod(volumes=[claim_vol("u1"), claim_vol("nocls")]), n1) is None


def test_node_volume_limits_come_from_the_csinode_only_and_errors():
    """kube 1.36 reads limits from the CSINode only: a node's attachable-volumes-csi-* allocatable is not a limit."""
    objs = [pvc("c1", volume="v1", bound=True), pvc("c2", volume="v2", bound=True), csi_pv("v1"), csi_pv("v2"),
            csinode("n2", csi_example_com=1)]
    _, h = setup(*objs, nodes=(node("n1", allocatable={"attachable-volumes-csi-csi.example.com": "1"}),
                               node("n2")))
    pl = NodeVolumeLimits(None, h)
    n1 = h.snapshot.get("n1")
    assert nvl_filter(pl, pod(volumes=[claim_vol("c1"), claim_vol("c2")]), n1) is None
    assert nvl_filter(pl, pod(volumes=[claim_vol("c1"), claim_vol("c2")]), h.snapshot.get("n2")).reasons == [
        NVL_REASON]
    assert prefilter(pl, pod())[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[{"name": "e", "emptyDir": {}}]))[1].code == Code.Skip
    assert prefilter(pl, pod(volumes=[{"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}]))[1] is None
    st = nvl_filter(pl, pod(volumes=[claim_vol("gone")]), n1)
    assert reasons(st) == (Code.UnschedulableAndUnresolvable,
                           ['looking up PVC ns/gone: persistentvolumeclaim "gone" not found'])
    # a generic ephemeral volume's claim must be owned by the pod
    _, h = setup(pvc("p-scratch"), nodes=(node("n1"),))
    st = nvl_filter(NodeVolumeLimits(None, h), pod("p", volumes=[{"name": "scratch", "ephemeral": {}}]),
                    h.snapshot.get("n1"))
    assert st.code == Code.Error and "was not created for pod ns/p (pod is not owner)" in st.message


def test_node_volume_limits_events():
    regs = {r.event.resource: r for r in NodeVolumeLimits(None, None).events_to_register()}
    assert set(regs) == {"storage.k8s.io/CSINode", "Pod", "PersistentVolumeClaim", "storage.k8s.io/VolumeAttachment"}
    p = pod(volumes=[claim_vol("c")])
    assert regs["Pod"].hint(p, pod("x", volumes=[claim_vol("c")], node_name="n"), None) == QUEUE
    assert regs["Pod"].hint(p, pod("x", node_name="n"), None) == QUEUE_SKIP
    assert regs["PersistentVolumeClaim"].hint(p, None, pvc("c")) == QUEUE


def va(name: str, node_name: str, pv_name: str, attacher: str = "csi.example.com") -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node_name, "source": {"persistentVolumeName": pv_name}}}


def test_node_volume_limits_count_volume_attachments_as_the_store_changes():
    """VolumeAttachments of the node count once per volume (not again for a pod's volume), and the plugin's
    index follows the store: a deleted attachment frees its slot."""
    existing = pod("old", volumes=[claim_vol("c1")], node_name="n1")
    objs = [pvc("c1", volume="v1", bound=True), pvc("c3", volume="v3", bound=True),
            csi_pv("v1"), csi_pv("v2"), csi_pv("v3"), csinode("n1", csi_example_com=2),
            va("a1", "n1", "v1"), va("a2", "n1", "v2"), va("other-node", "n2", "v3"),
            va("no-pv", "n1", "missing"), {**va("no-attacher", "n1", "v3"), "spec": {
                "attacher": "", "nodeName": "n1", "source": {"persistentVolumeName": "v3"}}}]
    cluster, h = setup(*objs, nodes=(node("n1"), node("n2")), placed={"n1": [existing]})
    pl = NodeVolumeLimits(None, h)
    p = pod(volumes=[claim_vol("c3")])
    assert reasons(nvl_filter(pl, p, h.snapshot.get("n1"))) == (Code.Unschedulable, [NVL_REASON])  # v1, v2 + v3
    cluster.delete("volumeattachments", "a2", None)
    assert nvl_filter(pl, p, h.snapshot.get("n1")) is None
    cluster.create(va("a3", "n1", "v2"))
    assert reasons(nvl_filter(pl, p, h.snapshot.get("n1"))) == (Code.Unschedulable, [NVL_REASON])


def test_node_volume_limits_count_in_tree_volumes_as_their_csi_driver():
    """CSI migration: inline in-tree volumes, in-tree PVs and claims of an in-tree provisioner count against the
    CSI driver they migrated to, on nodes that have a CSINode; Azure File and vSphere are not counted."""
    objs = [pvc("pd", volume="gce-pv", bound=True), pvc("unbound", cls="ebs-sc"), pvc("af", volume="af-pv", bound=True),
            pv("gce-pv", gcePersistentDisk={"pdName": "disk-1"}, labels={"topology.kubernetes.io/zone": "us-a-1"}),
            pv("af-pv", azureFile={"secretName": "s", "shareName": "x"}),
            storage_class("ebs-sc", provisioner="kubernetes.io/aws-ebs"),
            csinode("n1", ebs_csi_aws_com=1, pd_csi_storage_gke_io=1, file_csi_azure_com=0)]
    _, h = setup(*objs, nodes=(node("n1"), node("bare")))
    pl = NodeVolumeLimits(None, h)
    n1, bare = h.snapshot.get("n1"), h.snapshot.get("bare")

    def inline_ebs(vid: str) -> dict:
        return {"name": vid, "awsElasticBlockStore": {"volumeID": vid}}

    two = pod(volumes=[inline_ebs("vol-1"), inline_ebs("aws://us-east-1a/vol-2")])
    assert reasons(nvl_filter(pl, two, n1)) == (Code.Unschedulable, [NVL_REASON])
    assert nvl_filter(pl, two, bare) is None  # no CSINode: no migration, no limits
    same = pod(volumes=[inline_ebs("vol-1"), inline_ebs("aws://us-east-1a/vol-1")])
    assert nvl_filter(pl, same, n1) is None  # one handle
    assert reasons(nvl_filter(pl, pod(volumes=[inline_ebs("vol-1"), claim_vol("unbound")]), n1)) == (
        Code.Unschedulable, [NVL_REASON])  # the provisioner's claim counts for ebs.csi.aws.com too
    gce = pod(volumes=[claim_vol("pd"), {"name": "i", "gcePersistentDisk": {"pdName": "disk-2"}}])
    assert reasons(nvl_filter(pl, gce, n1)) == (Code.Unschedulable, [NVL_REASON])
    assert nvl_filter(pl, pod(volumes=[claim_vol("af")]), n1) is None  # azure-file: migratable, not counted
    bad = pod(volumes=[inline_ebs("aws://zone/not-a-volume")])
    st = nvl_filter(pl, bad, n1)
    assert st.code == Code.Error and "converting volume(aws://zone/not-a-volume) from inline to csi" in st.message
    assert nvl_filter(pl, bad, bare) is None  # translated only where migrated
    assert prefilter(pl, pod(volumes=[{"name": "a", "azureFile": {"shareName": "x"}}]))[1] is None  # not skipped


def test_csi_migration_volume_handles():
    from scheduler_runtime.plugins.volume.csimigration import TranslationError, inline_handle, plugin_of, pv_handle
    gce = plugin_of({"gcePersistentDisk": {}})

    def gce_pv(zone: str) -> dict:
        return {"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}, "spec": {"gcePersistentDisk": {
            "pdName": "d"}}}
    assert pv_handle(gce, gce_pv("us-central1-a")) == "projects/UNSPECIFIED/zones/us-central1-a/disks/d"
    assert pv_handle(gce, gce_pv("us-central1-a__us-central1-b")) == "projects/UNSPECIFIED/regions/us-central1/disks/d"
    assert pv_handle(gce, gce_pv("")) == "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"
    with pytest.raises(TranslationError):
        pv_handle(gce, gce_pv("us-central1-a__europe-west1-b"))
    disk = plugin_of({"azureDisk": {}})
    assert inline_handle(disk, {"azureDisk": {"diskURI": "/sub/d", "kind": "Managed"}}, "ns") == "/sub/d"
    with pytest.raises(TranslationError, match=r"kind\(Shared\) is not supported in csi migration"):
        inline_handle(disk, {"azureDisk": {"diskURI": "/sub/d", "kind": "Shared"}}, "ns")
    af = plugin_of({"azureFile": {}})
    assert inline_handle(af, {"name": "v", "azureFile": {"secretName": "azure-storage-account-acct-secret",
                                                         "shareName": "s"}}, "ns") == "#acct#s#v#ns"


def test_node_volume_limits_hints_for_in_tree_volumes_and_attachments():
    regs = {r.event.resource: r for r in NodeVolumeLimits(None, None).events_to_register()}
    ebs = {"name": "e", "awsElasticBlockStore": {"volumeID": "vol-1"}}
    assert regs["Pod"].hint(pod(), pod("x", volumes=[ebs], node_name="n"), None) == QUEUE
    deleted = va("a", "n1", "v", attacher="ebs.csi.aws.com")
    hint = regs["storage.k8s.io/VolumeAttachment"].hint
    assert hint(pod(volumes=[ebs]), deleted, None) == QUEUE
    assert hint(pod(volumes=[{"name": "g", "gcePersistentDisk": {"pdName": "d"}}]), deleted, None) == QUEUE_SKIP
    assert hint(pod(volumes=[claim_vol("c")]), deleted, None) == QUEUE
    assert hint(pod(volumes=[{"name": "e", "ephemeral": {}}]), deleted, None) == QUEUE_SKIP  # kube: PVC volumes only


# ------------------------------------------------------------------------------------------ VolumeBinding


def vb_setup(*objects: dict, nodes: tuple[Node, ...] | None = None):
    nodes = nodes or (node("n1", {ZONE: "a"}), node("n2", {ZONE: "b"}), node("n3", {ZONE: "a"}))
    cluster, h = setup(*objects, nodes=nodes)
    return cluster, h, VolumeBinding(None, h)


def vb_filter(pl, p) -> tuple[CycleState, dict[str, Any]]:
    state = CycleState()
    res, st = pl.pre_filter(state, p, NodeList(pl.handle.snapshot))
    assert st is None, st.message
    allowed = res.node_names if res is not None else None
    return state, {ni.name: reasons(pl.filter(state, p, ni)) for ni in pl.handle.snapshot.node_infos
                   if allowed is None or ni.name in allowed}


UNRES = Code.UnschedulableAndUnresolvable


def test_volume_binding_prefilter_skip_and_claim_errors():
    objs = (pvc("deleting", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
            pvc("lost", volume="pv-x", status={"phase": "Lost"}),
            pvc("imm", cls="now"), storage_class("now", mode="Immediate"), pvc("nocls", cls=None),
            pvc("prebound", cls="late", volume="pv-y"), storage_class("late"), pvc("p-eph"))
    _, _, pl = vb_setup(*objs)
    state = CycleState()
    res, st = pl.pre_filter(state, pod(), NodeList(pl.handle.snapshot))
    assert st.code == Code.Skip and res is None
    res, st = pl.pre_filter(state, pod(volumes=[{"name": "t", "emptyDir": {}}]), NodeList(pl.handle.snapshot))
    assert st.code == Code.Skip
    for claim, msg in [("gone", 'persistentvolumeclaim "gone" not found'),
                       ("deleting", 'persistentvolumeclaim "deleting" is being deleted'),
                       ("lost", 'persistentvolumeclaim "lost" bound to non-existent persistentvolume "pv-x"'),
                       ("imm", VB_UNBOUND_IMMEDIATE), ("nocls", VB_UNBOUND_IMMEDIATE),
                       ("prebound", VB_UNBOUND_IMMEDIATE)]:
        _, st = pl.pre_filter(CycleState(), pod(volumes=[claim_vol(claim)]), NodeList(pl.handle.snapshot))
        assert reasons(st) == (UNRES, [msg]), claim
    eph = pod("q", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}])
    _, st = pl.pre_filter(CycleState(), eph, NodeList(pl.handle.snapshot))
    assert st.reasons == ['waiting for ephemeral volume controller to create the persistentvolumeclaim "q-scratch"']
    eph = pod("p", volumes=[{"name": "eph", "ephemeral": {"volumeClaimTemplate": {}}}])
    _, st = pl.pre_filter(CycleState(), eph, NodeList(pl.handle.snapshot))
    assert st.reasons == ["PVC ns/p-eph was not created for pod ns/p (pod is not owner)"]


def test_volume_binding_bound_pv_node_affinity_and_missing_pv():
    _, _, pl = vb_setup(pvc("zonal", volume="pv-a", bound=True), pv("pv-a", affinity={ZONE: "a"}, claim=(NS, "zonal")),
                        pvc("local", volume="pv-l", bound=True),
                        pv("pv-l", affinity={"kubernetes.io/hostname": "n3"}, claim=(NS, "local")),
                        pvc("dangling", volume="nope", bound=True))
    _, got = vb_filter(pl, pod(volumes=[claim_vol("zonal")]))
    assert got == {"n1": None, "n2": (UNRES, [VB_NODE_CONFLICT]), "n3": None}
    state, got = vb_filter(pl, pod(volumes=[claim_vol("local")]))
    # v1.36.3 narrows nothing in PreFilter: the other nodes fail Filter, so kube's message counts them
    assert got == {"n1": (UNRES, [VB_NODE_CONFLICT]), "n2": (UNRES, [VB_NODE_CONFLICT]), "n3": None}
    assert VB_NODE_CONFLICT == "node(s) didn't match PersistentVolume's node affinity"
    _, got = vb_filter(pl, pod(volumes=[claim_vol("dangling")]))
    assert list(got.values()) == [(UNRES, [VB_PV_NOT_EXIST])] * 3


def test_volume_binding_static_match_picks_smallest_fitting_pv():
    objs = (storage_class("local", provisioner="kubernetes.io/no-provisioner"), pvc("data", cls="local", storage="5Gi"),
            pv("small", cls="local", storage="1Gi"), pv("big", cls="local", storage="20Gi"),
            pv("fit", cls="local", storage="10Gi"), pv("taken", cls="local", storage="5Gi", claim=(NS, "other")),
            pv("released", cls="local", storage="5Gi", phase="Released"), pv("otherclass", cls="x", storage="5Gi"),
            pv("rox", cls="local", storage="5Gi", modes=("ReadOnlyMany",)),
            pv("block", cls="local", storage="5Gi", volumeMode="Block"),
            pv("zone-b", cls="local", storage="6Gi", affinity={ZONE: "b"}))
    _, _, pl = vb_setup(*objs)
    state, got = vb_filter(pl, pod(volumes=[claim_vol("data")]))
    assert got == {"n1": None, "n2": None, "n3": None}
    s = state.get("VolumeBinding")
    assert [p["metadata"]["name"] for p, _ in s.by_node["n1"].static] == ["fit"]
    assert [p["metadata"]["name"] for p, _ in s.by_node["n2"].static] == ["zone-b"]  # smaller and fits zone b
    # a selector narrows the candidates
    _, _, pl = vb_setup(*objs, pvc("sel", cls="local", storage="1Gi", selector={"matchLabels": {"tier": "gold"}}))
    _, got = vb_filter(pl, pod(volumes=[claim_vol("sel")]))
    assert list(got.values()) == [(UNRES, [VB_BIND_CONFLICT])] * 3  # no PV labelled gold; no-provisioner class


def test_volume_binding_reserve_assumes_and_unreserve_reverts():
    objs = (storage_class("local", provisioner="kubernetes.io/no-provisioner"), pvc("a", cls="local"),
            pvc("b", cls="local"), pv("only", cls="local"))
    _, _, pl = vb_setup(*objs)
    p1 = pod("p1", volumes=[claim_vol("a")])
    state, got = vb_filter(pl, p1)
    assert got["n1"] is None
    assert pl.reserve(state, p1, "n1") is None
    assert pl.cache.pv("only")["spec"]["claimRef"]["name"] == "a"
    p2 = pod("p2", volumes=[claim_vol("b")])
    _, got = vb_filter(pl, p2)  # the PV is assumed for p1: p2 finds nothing
    assert list(got.values()) == [(UNRES, [VB_BIND_CONFLICT])] * 3
    pl.unreserve(state, p1, "n1")
    pl.unreserve(state, p1, "n1")  # idempotent
    assert "claimRef" not in pl.cache.pv("only")["spec"]
    _, got = vb_filter(pl, p2)
    assert got["n1"] is None


def test_volume_binding_prebind_static_and_provisioned_on_the_embedded_cluster():
    objs = (storage_class("local", provisioner="kubernetes.io/no-provisioner"), pvc("a", cls="local"),
            pv("only", cls="local"), storage_class("fast", topologies=[{ZONE: ["b"]}]), pvc("dyn", cls="fast"))
    cluster, _, pl = vb_setup(*objs)
    p = pod("p", volumes=[claim_vol("a"), claim_vol("dyn")])
    state, got = vb_filter(pl, p)
    # pv "only" fits every node, class "fast" provisions in zone b only: n2
    assert got == {"n1": (UNRES, [VB_BIND_CONFLICT]), "n2": None, "n3": (UNRES, [VB_BIND_CONFLICT])}
    objs2 = objs[:-2] + (storage_class("fast", topologies=[{ZONE: ["a"]}]), pvc("dyn", cls="fast"))
    cluster, _, pl = vb_setup(*objs2)
    state, got = vb_filter(pl, p)
    assert got == {"n1": None, "n2": (UNRES, [VB_BIND_CONFLICT]), "n3": None}
    assert pl.reserve(state, p, "n1") is None
    assert pl.pre_bind(state, p, "n1") is None
    a = cluster.informer("persistentvolumeclaims").get("a", NS)
    assert a["spec"]["volumeName"] == "only" and a["status"]["phase"] == "Bound"
    dyn = cluster.informer("persistentvolumeclaims").get("dyn", NS)
    assert dyn["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n1"
    provisioned = cluster.informer("persistentvolumes").get(dyn["spec"]["volumeName"])
    assert provisioned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": ZONE, "operator": "In", "values": ["a"]}]
    # the next cycle sees both claims bound
    state, got = vb_filter(pl, pod("p2", volumes=[claim_vol("a"), claim_vol("dyn")]))
    assert got == {"n1": None, "n2": (UNRES, [VB_NODE_CONFLICT]), "n3": None}


def test_volume_binding_prebind_times_out_and_reports_patch_errors():
    objs = (storage_class("fast"), pvc("dyn", cls="fast"))
    cluster, h, _ = vb_setup(*objs)
    pl = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=0), h)
    cluster._objects["storageclasses"]["fast"]["provisioner"] = "csi.example.com"
    p = pod("p", volumes=[claim_vol("dyn")])
    state, got = vb_filter(pl, p)
    pl.reserve(state, p, "n1")
    cluster._objects["storageclasses"].pop("fast")  # nothing can provision it now
    st = pl.pre_bind(state, p, "n1")
    assert st.code == Code.Error and st.message == "binding volumes: context deadline exceeded"
    # a claim changed since it was read: the patch conflicts
    cluster, h, pl = vb_setup(storage_class("fast"), pvc("dyn", cls="fast"))
    state, _ = vb_filter(pl, p)
    pl.reserve(state, p, "n1")
    cluster.patch_object("persistentvolumeclaims", "dyn", NS, {"metadata": {"labels": {"x": "y"}}})
    st = pl.pre_bind(state, p, "n1")
    assert st.code == Code.Error and "the object has been modified" in st.message


def test_volume_binding_args_validation():
    assert VolumeBindingArgs().bind_timeout_seconds == 600
    with pytest.raises(ValueError, match="invalid BindTimeoutSeconds, should not be a negative value"):
        VolumeBindingArgs(bind_timeout_seconds=-1)
    with pytest.raises(ValueError, match="turn on the feature gate StorageCapacityScoring"):
        VolumeBindingArgs.model_validate({"shape": [{"utilization": 0, "score": 10}]},
                                         context={"feature_gates": {"StorageCapacityScoring": False}})


def test_volume_binding_events():
    regs = {r.event.resource for r in VolumeBinding(None, None).events_to_register()}
    assert regs == {"storage.k8s.io/StorageClass", "PersistentVolumeClaim", "PersistentVolume", "Node",
                    "storage.k8s.io/CSINode", "storage.k8s.io/CSIDriver", "storage.k8s.io/CSIStorageCapacity"}


def test_volume_binding_reports_bound_and_unbound_conflicts_together():
    """kube's FindPodVolumes matches the unbound claims even when a bound claim's PV does not fit the node,
    and reports both reasons (found by the differential test: kube counted a node under both)."""
    _, _, pl = vb_setup(storage_class("local", provisioner="kubernetes.io/no-provisioner"),
                        pvc("local", volume="pv-l", bound=True),
                        pv("pv-l", affinity={"kubernetes.io/hostname": "n3"}, claim=(NS, "local")),
                        pvc("big", cls="local", storage="100Gi"))
    _, got = vb_filter(pl, pod(volumes=[claim_vol("local"), claim_vol("big")]))
    assert got == {"n1": (UNRES, [VB_NODE_CONFLICT, VB_BIND_CONFLICT]),
                   "n2": (UNRES, [VB_NODE_CONFLICT, VB_BIND_CONFLICT]), "n3": (UNRES, [VB_BIND_CONFLICT])}


def test_pv_affinity_cache_is_not_fooled_by_another_pv_with_the_same_name_and_version():
    """Two clusters in one process (tests, repeated simulations) can hold different PVs under the same name and
    resourceVersion: the cached selector of one must not decide for the other (found by the upstream tables)."""
    from scheduler_runtime.plugins.volume.volumeutil import pv_matches_node

    n1 = node("n1")
    a = pv("same", affinity={"kubernetes.io/hostname": "n1"})
    b = pv("same", affinity={"kubernetes.io/hostname": "n2"})
    a["metadata"]["resourceVersion"] = b["metadata"]["resourceVersion"] = "7"
    assert pv_matches_node(a, n1)
    assert not pv_matches_node(b, n1)


def test_volume_binding_provisioning_needs_storage_capacity_when_the_driver_tracks_it():
    """hasEnoughCapacity: a CSIDriver with storageCapacity needs a CSIStorageCapacity of the class that holds the
    request and selects the node; without one the node has "did not have enough free storage"."""
    from scheduler_runtime.plugins.volume.volumebinding import REASON_NOT_ENOUGH_SPACE

    driver = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"},
              "spec": {"storageCapacity": True}}

    def capacity(name: str, size: str, zone: str) -> dict:
        return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                "metadata": {"name": name, "namespace": NS}, "storageClassName": "fast", "capacity": size,
                "nodeTopology": {"matchLabels": {ZONE: zone}}}

    objs = (storage_class("fast"), driver, pvc("data", cls="fast", storage="5Gi"))
    _, _, pl = vb_setup(*objs)
    _, got = vb_filter(pl, pod(volumes=[claim_vol("data")]))
    assert got == {n: (UNRES, [REASON_NOT_ENOUGH_SPACE]) for n in ("n1", "n2", "n3")}
    _, _, pl = vb_setup(*objs, capacity("small", "1Gi", "a"), capacity("big-b", "10Gi", "b"))
    _, got = vb_filter(pl, pod(volumes=[claim_vol("data")]))
    assert got == {"n1": (UNRES, [REASON_NOT_ENOUGH_SPACE]), "n2": None, "n3": (UNRES, [REASON_NOT_ENOUGH_SPACE])}

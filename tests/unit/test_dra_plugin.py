"""DynamicResources on the embedded cluster: claims from templates, shared claims, allocations in flight in one
wave, PostFilter deallocation, bad input (missing class, selector that does not compile, template that never
becomes a claim, inconsistent pools) with kube's messages, and the scheduler running on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.describe import describe
from scheduler_runtime.framework.cycle_state import CycleState
from scheduler_runtime.framework.handle import Handle
from scheduler_runtime.framework.snapshot import Snapshot
from scheduler_runtime.framework.status import Code
from scheduler_runtime.framework.types import NodeInfo
from scheduler_runtime.objects import Node, Pod
from scheduler_runtime.plugins.dynamicresources import DynamicResources
from scheduler_runtime.plugins.dynamicresources.cel import CelCache, DeviceInput
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler

NS = "ml"
DRIVER = "gpu.example.com"


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def device_class(name: str = DRIVER, expr: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr or f'device.driver == "{DRIVER}"'}}]}}


def rslice(node_name: str, models: list[str], *, pool: str | None = None, generation: int = 1, count: int = 1,
           name: str | None = None, first: int = 0) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name or f"{node_name}-{pool or node_name}-{generation}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": pool or node_name, "generation": generation, "resourceSliceCount": count},
                     "devices": [{"name": f"gpu-{first + i}", "attributes": {"model": {"string": m}}}
                                 for i, m in enumerate(models)]}}


def claim_spec(model: str | None = None, count: int = 1, cls: str = DRIVER) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if model:
        body["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": body}]}}


def claim(name: str, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": claim_spec(**kw)}


def template(name: str, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS}, "spec": {"spec": claim_spec(**kw)}}


def pod(name: str, *, claim_name: str | None = None, tmpl: str | None = None, cpu: str = "100m") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    if tmpl:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tmpl}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def run(objects: list[dict[str, Any]], pods: list[dict[str, Any]]) -> MemoryCluster:
    m = MemoryCluster()
    for o in objects:
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    for p in pods:
        m.create(p)
    s.run(until_idle=True)
    return m


def where(m: MemoryCluster, name: str) -> str:
    return (m.get_pod(NS, name) or {}).get("spec", {}).get("nodeName") or ""


def message(m: MemoryCluster, name: str) -> str:
    conds = ((m.get_pod(NS, name) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conds if c["type"] == "PodScheduled"), "")


def get_claim(m: MemoryCluster, name: str) -> dict[str, Any]:
    got = m.informer("resourceclaims").get(name, NS)
    assert got is not None, name
    return got


def devices_of(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["pool"], r["device"]) for r in c["status"]["allocation"]["devices"]["results"]]


def test_template_claims_are_created_allocated_and_reserved():
    m = run([node("n1"), node("n2"), device_class(), rslice("n1", ["a100"]), rslice("n2", ["t4", "t4"]),
             template("one-t4", model="t4")],
            [pod("a", tmpl="one-t4"), pod("b", tmpl="one-t4"), pod("c", tmpl="one-t4")])
    assert where(m, "a") == where(m, "b") == "n2"
    assert not where(m, "c")
    assert "0/2 nodes are available: 2 cannot allocate all claims. preemption:" in message(m, "c")
    names = {s["name"]: s["resourceClaimName"] for p in ("a", "b")
             for s in m.get_pod(NS, p)["status"]["resourceClaimStatuses"]}
    assert len(names) == 1  # same entry name "gpu"; check each claim individually below
    got = {}
    for p in ("a", "b"):
        (st,) = m.get_pod(NS, p)["status"]["resourceClaimStatuses"]
        c = get_claim(m, st["resourceClaimName"])
        assert c["metadata"]["ownerReferences"][0]["name"] == p
        assert c["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert c["status"]["reservedFor"] == [{"resource": "pods", "name": p,
                                               "uid": m.get_pod(NS, p)["metadata"]["uid"]}]
        got[p] = devices_of(c)
    assert sorted(got.values()) == [[("n2", "gpu-0")], [("n2", "gpu-1")]]


def test_a_shared_claim_is_allocated_once_and_reserved_for_every_pod():
    m = run([node("n1"), node("n2"), device_class(), rslice("n1", ["t4"]), rslice("n2", ["t4"]), claim("shared")],
            [pod("a", claim_name="shared"), pod("b", claim_name="shared")])
    assert where(m, "a") and where(m, "a") == where(m, "b")
    c = get_claim(m, "shared")
    assert [r["name"] for r in c["status"]["reservedFor"]] == ["a", "b"]
    assert c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == \
        [where(m, "a")]


def test_pod_deletion_releases_its_devices_for_the_next_pod():
    m = run([node("n1"), device_class(), rslice("n1", ["t4"]), template("one", model="t4")],
            [pod("a", tmpl="one"), pod("b", tmpl="one")])
    assert where(m, "a") == "n1" and not where(m, "b")
    (st,) = m.get_pod(NS, "a")["status"]["resourceClaimStatuses"]
    m.delete("pods", "a", NS)
    assert m.informer("resourceclaims").get(st["resourceClaimName"], NS) is None  # generated claim collected
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    s.run(until_idle=True)
    assert where(m, "b") == "n1"


def test_bad_input_leaves_pods_pending_with_kubes_messages_and_the_scheduler_running():
    bad_pool = [rslice("n3", ["t4"], pool="p", count=2, name="s1"), rslice("n3", ["t4"], pool="p", count=2, name="s2")]
    m = run([node("n1"), node("n2"), node("n3"), device_class(), device_class("broken", "device.driver =="),
             rslice("n1", ["t4"]), *bad_pool, claim("nocls", cls="missing"), claim("badcel", cls="broken"),
             claim("pooled", model="a100")],
            [pod("nocls", claim_name="nocls"), pod("badcel", claim_name="badcel"), pod("typo", tmpl="nope"),
             pod("pooled", claim_name="pooled"), pod("fine", cpu="100m")])
    assert where(m, "fine")
    assert message(m, "nocls").startswith("0/3 nodes are available: request gpu: device class missing does not "
                                          "exist. preemption:")
    assert "class broken: selector #0: CEL compile error: compilation failed" in message(m, "badcel")
    assert not where(m, "typo") and message(m, "typo") == ""  # held back by PreEnqueue: never attempted
    # n3's pool has two slices with the same device name: invalid, and nothing else fits the a100 request
    assert message(m, "pooled").startswith("0/3 nodes are available: 1 invalid resource pools were encountered, "
                                           "2 cannot allocate all claims.")
    nodes = {n["metadata"]["name"]: Node.from_dict(n) for n in m.list("nodes")}
    lines = describe(m.get_pod(NS, "typo"), [], nodes, m.list).summary
    assert any("ResourceClaimTemplate ml/nope does not exist (spec.resourceClaims[0].resourceClaimTemplateName)"
               in x for x in lines)
    lines = describe(m.get_pod(NS, "badcel"), [], nodes, m.list).summary
    assert any("DeviceClass broken spec.selectors[0].cel.expression does not compile" in x for x in lines)
    lines = describe(m.get_pod(NS, "pooled"), [], nodes, m.list).summary
    assert any("ResourceSlice pool gpu.example.com/p is invalid (duplicate device name gpu-0)" in x for x in lines)
    assert any("no node has 1 free device of class gpu.example.com matching model == \"a100\"" in x for x in lines)


def test_a_claim_created_later_lets_the_waiting_pod_in():
    m = MemoryCluster()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"])):
        m.create(o, emit=False)
    reg = build_registry([])
    s = Scheduler(m, load_config(None, reg), reg, seed=1)
    s.start()
    m.create(pod("late", claim_name="later"))
    s.run(until_idle=True)
    assert not where(m, "late")
    m.create(claim("later"))
    s.run(until_idle=True)
    assert where(m, "late") == "n1"


def test_postfilter_deallocates_an_unreserved_claim_that_blocks_the_pod():
    stale = claim("stale")
    stale["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    m = run([node("n1", cpu="1"), node("n2"), device_class(), rslice("n1", ["t4"]), rslice("n2", ["t4"]), stale],
            [pod("big", claim_name="stale", cpu="2")])
    # first attempt: allocated on n1 (too small) -> deallocated; the retry allocates on n2
    assert where(m, "big") == "n2"
    assert devices_of(get_claim(m, "stale")) == [("n2", "gpu-0")]


def test_deleting_an_allocated_claim_requeues_a_pod_short_of_devices_from_1_37_only():
    """kube 1.37 registers ResourceClaim deletions (an allocated claim deleted frees its devices: Queue; one
    deleted unallocated frees nothing: QueueSkip); 1.36 registers none, so the pod waits for another event."""
    from scheduler_runtime.featuregates import default_gates

    held = claim("held")
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    for minor, moves in (("1.37", True), ("1.36", False)):
        m = MemoryCluster()
        for o in (node("n1"), device_class(), rslice("n1", ["t4"]), held, claim("spare"), claim("mine")):
            m.create(o, emit=False)
        reg = build_registry([])
        s = Scheduler(m, load_config(None, reg, feature_gates=default_gates(minor)), reg, seed=1,
                      clock=lambda: 0.0)
        s.start()
        m.create(pod("p", claim_name="mine"))
        s.run(until_idle=True)
        uid = m.get_pod(NS, "p")["metadata"]["uid"]
        assert s.queue.where(uid) == "unschedulable", minor
        m.delete("resourceclaims", "spare", NS)  # never allocated: frees nothing
        s.drain_inbox()
        assert s.queue.where(uid) == "unschedulable", minor
        m.delete("resourceclaims", "held", NS)
        s.drain_inbox()
        assert (s.queue.where(uid) != "unschedulable") is moves, minor


# ----------------------------------------------------------------------------------- plugin level
def _plugin(m: MemoryCluster) -> tuple[DynamicResources, Snapshot]:
    snap = Snapshot()
    handle = Handle(snap, cluster=m)
    return DynamicResources(None, handle), snap


def _cycle(pl: DynamicResources, p: Pod, n: Node) -> tuple[CycleState, Any]:
    st = CycleState()
    _res, status = pl.pre_filter(st, p, None)  # type: ignore[arg-type]
    if status is not None and status.code != Code.Success:
        return st, status
    return st, pl.filter(st, p, NodeInfo(n))


def test_allocations_in_flight_are_seen_by_the_next_pod_of_the_wave():
    m = MemoryCluster()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c1"), claim("c2"),
              pod("a", claim_name="c1"), pod("b", claim_name="c2"), pod("a2", claim_name="c1")):
        m.create(o, emit=False)
    pl, _snap = _plugin(m)
    n1 = Node.from_dict(node("n1"))
    pa, pb, pa2 = (Pod.from_dict(m.get_pod(NS, x)) for x in ("a", "b", "a2"))
    sa, st = _cycle(pl, pa, n1)
    assert st is None
    assert pl.reserve(sa, pa, "n1") is None
    # the only device is in flight for c1: c2 cannot get it, and c1 itself waits for its allocation
    _sb, st = _cycle(pl, pb, n1)
    assert st.code == Code.UnschedulableAndUnresolvable and st.message == "cannot allocate all claims"
    _s2, st = _cycle(pl, pa2, n1)
    assert st.message == "resource claim ml/c1 is in the process of being allocated"
    pl.unreserve(sa, pa, "n1")
    _sb, st = _cycle(pl, pb, n1)
    assert st is None


def test_runtime_cel_error_is_the_claims_error_not_a_crash():
    m = MemoryCluster()
    c = claim("c")
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].memory == 1'}}]
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), c, pod("p", claim_name="c")):
        m.create(o, emit=False)
    pl, _ = _plugin(m)
    _s, st = _cycle(pl, Pod.from_dict(m.get_pod(NS, "p")), Node.from_dict(node("n1")))
    assert st.code == Code.Error
    # kube 1.37 names the device and hints at optional chaining (cel.EnhanceRuntimeError)
    assert st.message == ("claim ml/c: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error: no such "
                          "key: memory. consider using CEL optional chaining (.? followed by orValue()) or guarding "
                          "the check with has() for optional fields")


def test_cel_library_quantity_semver_and_unknown_domains():
    cache = CelCache()
    dev = DeviceInput(DRIVER, {"attributes": {"model": {"string": "a100"}, "v": {"version": "1.2.3"}},
                               "capacity": {"memory": {"value": "80Gi"}}})
    for expr, want in [
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory == quantity("81920Mi")', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Ti"))', True),
        ('device.attributes["gpu.example.com"].v.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].v.isLessThan(semver("1.2.3-rc.1"))', False),
        ('device.attributes["gpu.example.com"].v.major() == 1', True),
        ('device.attributes["other.example.com"].size() == 0', True),
        ('device.attributes["other.example.com"].?model.orValue("none") == "none"', True),
        ("cel.bind(m, device.attributes[\"gpu.example.com\"].model, m.startsWith(\"a1\"))", True),
    ]:
        compiled = cache.get_or_compile(expr)
        assert compiled.error is None, (expr, compiled.error)
        assert compiled.matches(dev) is want, expr
    assert "must evaluate to bool" in (cache.get_or_compile("1 + 2").error or "")
    assert "undeclared reference" in (cache.get_or_compile("noSuchVar").error or "")


def test_the_dra_example_in_simulate():
    """examples/dra: placements, devices and the pending pods' reasons, as the example's comments promise."""
    from pathlib import Path

    from scheduler_runtime.simulate import simulate

    root = Path(__file__).resolve().parents[2] / "examples" / "dra"
    reg = build_registry([])
    res = simulate([root / "cluster.yaml"], [root / "pods.yaml"], load_config(None, reg), reg, seed=0,
                   keep_cluster=True)
    assert {k: v or "" for k, v in res.placements.items()} == {
        "ml/train-0": "gpu-1", "ml/infer-0": "gpu-2", "ml/infer-1": "gpu-2", "ml/flex-0": "gpu-1",
        "ml/flex-1": "gpu-2", "ml/train-big": "", "ml/fpga-0": "", "ml/typo-0": ""}
    m = res.cluster
    assert m is not None
    flex1 = m.get_pod("ml", "flex-1")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert [r["request"] for r in get_claim(m, flex1)["status"]["allocation"]["devices"]["results"]] == \
        ["gpu/t4", "gpu/t4"]
    assert "cannot allocate all claims" in message(m, "train-big")
    assert "device class fpga.example.com does not exist" in message(m, "fpga-0")


def test_assumed_claims_hold_their_devices_until_the_store_catches_up():
    """PreBind's write is remembered until the informer has that version: an older event (the finalizer
    update that came first) must not make the devices look free."""
    from scheduler_runtime.plugins.dynamicresources.claims import DraManager

    m = MemoryCluster()
    c = m.create(claim("c"), emit=False)
    mgr = DraManager(Handle(Snapshot(), cluster=m))
    rv = int(c["metadata"]["resourceVersion"])
    written = {**c, "metadata": {**c["metadata"], "resourceVersion": str(rv + 2)},
               "status": {"allocation": {"devices": {"results": [
                   {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}}}}
    mgr.assume(written)
    m.patch_object("resourceclaims", "c", NS, {"metadata": {"finalizers": ["x"]}})  # rv + 1: older than written
    assert (DRIVER, "n1", "gpu-0") in mgr.allocated()
    assert mgr.get_claim(NS, "c") is written
    m.patch_object("resourceclaims", "c", NS, {"metadata": {"labels": {"a": "b"}}})  # rv + 2: caught up
    assert (DRIVER, "n1", "gpu-0") not in mgr.allocated()
    assert mgr.get_claim(NS, "c") is not written


def test_unreserve_takes_the_pod_out_of_reserved_for():
    m = MemoryCluster()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c"), pod("a", claim_name="c")):
        m.create(o, emit=False)
    pa = Pod.from_dict(m.get_pod(NS, "a"))
    m.patch_object("resourceclaims", "c", NS, {"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "u-other"},
                        {"resource": "pods", "name": "a", "uid": pa.uid}]}}, subresource="status")
    pl, _ = _plugin(m)
    st, status = _cycle(pl, pa, Node.from_dict(node("n1")))
    assert status is None
    m.patch_object("resourceclaims", "c", NS, {"metadata": {"labels": {"x": "y"}}})  # the cycle's copy is stale now
    pl.unreserve(st, pa, "n1")
    assert get_claim(m, "c")["status"]["reservedFor"] == [{"resource": "pods", "name": "other", "uid": "u-other"}]


def _binding_setup(cond_status: dict[str, str] | None, binding_timeout: float | None = None) -> Any:
    """A pod whose device has binding conditions, through PreFilter..PreBind on a thread; once PreBind has
    written the allocation the device's conditions are set to `cond_status` (None: never set). Returns
    PreBind's status, the cluster and the scheduler metrics PreBind recorded into."""
    import threading
    import time as _time

    from scheduler_runtime.metrics import SchedulerMetrics

    m = MemoryCluster()
    sl = rslice("n1", ["t4"])
    sl["spec"]["devices"][0].update(bindingConditions=["Attached"], bindingFailureConditions=["Failed"])
    for o in (node("n1"), device_class(), sl, claim("c"), pod("a", claim_name="c")):
        m.create(o, emit=False)
    pa = Pod.from_dict(m.get_pod(NS, "a"))
    pl, _ = _plugin(m)
    metrics = SchedulerMetrics()
    pl.handle.framework = SimpleNamespace(metrics=metrics, profile_name="prof")
    pl.binding_poll = 0.02
    if binding_timeout is not None:
        pl.binding_timeout = binding_timeout
    st, status = _cycle(pl, pa, Node.from_dict(node("n1")))
    assert status is None and pl.reserve(st, pa, "n1") is None
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("status", pl.pre_bind(st, pa, "n1")))
    t.start()
    deadline = _time.monotonic() + 10
    while not (get_claim(m, "c").get("status") or {}).get("allocation") and _time.monotonic() < deadline:
        _time.sleep(0.01)
    if cond_status is not None:
        conds = [{"type": k, "status": v, "reason": "Test", "message": "set by the test"}
                 for k, v in cond_status.items()]
        m.patch_object("resourceclaims", "c", NS, {"status": {"devices": [
            {"driver": DRIVER, "pool": "n1", "device": "gpu-0", "conditions": conds}]}}, subresource="status")
    t.join(10)
    return out["status"], m, metrics


def _bc_samples(metrics: Any) -> dict[str, float]:
    """The binding-conditions counter and the histogram's count, by status label."""
    out = {}
    for fam in metrics.registry.collect():
        for smp in fam.samples:
            if smp.name == "scheduler_dra_bindingconditions_allocations_total":
                assert smp.labels["profile"] == "prof" and smp.labels["driver"] == DRIVER
                out["allocations/" + smp.labels["status"]] = smp.value
            elif smp.name == "scheduler_dra_bindingconditions_wait_duration_seconds_count":
                out["wait/" + smp.labels["status"]] = smp.value
    return out


def test_prebind_waits_for_binding_conditions():
    st, m, metrics = _binding_setup({"Attached": "True"})
    assert st is None
    results = get_claim(m, "c")["status"]["allocation"]["devices"]["results"]
    assert results[0]["bindingConditions"] == ["Attached"]
    assert _bc_samples(metrics) == {"allocations/success": 1, "wait/success": 1}


def test_prebind_fails_on_a_binding_failure_condition():
    """kube 1.36/1.37's ErrDeviceBindingFailed wording (the message in Go's %q), counted as a failure."""
    st, _m, metrics = _binding_setup({"Failed": "True"})
    assert st.code == Code.Error
    assert st.message == 'device binding failed: claim=c, reason=Test, message="set by the test"'
    assert _bc_samples(metrics) == {"allocations/failure": 1, "wait/failure": 1}


def test_prebind_gives_up_after_the_binding_timeout():
    """Conditions never set: PreBind stops at bindingTimeout with kube's wrapped context error (claim-level
    timeout from the allocation timestamp is whole seconds, so the poll's own deadline comes first)."""
    st, _m, metrics = _binding_setup(None, binding_timeout=0.3)
    assert st.code == Code.Error
    assert st.message in ("device binding timeout: context deadline exceeded", "device binding timeout: claim=c")
    assert _bc_samples(metrics) == {"allocations/timeout": 1, "wait/timeout": 1}


def test_filter_and_binding_timeouts_come_from_the_args_and_are_validated_like_kube():
    import pytest

    from scheduler_runtime.plugins.dynamicresources.plugin import DynamicResourcesArgs

    p = DynamicResources(DynamicResourcesArgs.model_validate({"filterTimeout": "5s", "bindingTimeout": "5m"}))
    assert (p.filter_timeout, p.binding_timeout) == (5.0, 300.0)
    assert p.args.binding_timeout == "5m0s"  # written back in Go's form, as --write-config-to does
    off = DynamicResources(DynamicResourcesArgs.model_validate({"filterTimeout": "0s"}))
    assert off.filter_timeout == 0.0  # 0 turns the per-node search bound off
    with pytest.raises(Exception, match="bindingTimeout"):
        DynamicResourcesArgs.model_validate({"bindingTimeout": "500ms"})
    with pytest.raises(Exception, match="filterTimeout"):
        DynamicResourcesArgs.model_validate({"filterTimeout": "-1s"})


def test_device_eligibility_is_remembered_per_selector_set_not_per_device_alone():
    """The allocator remembers a device's eligibility across nodes and cycles; claims with different
    selectors over the same devices in one run must still get only the devices their selectors accept."""
    objs = [node("n1"), device_class(), rslice("n1", ["a100", "h100", "a100", "h100"]),
            claim("any"), claim("h", model="h100"), claim("a", model="a100"), claim("h2", model="h100"),
            claim("none", model="v100")]
    pods = [pod(f"p-{c}", claim_name=c) for c in ("h", "a", "any", "h2", "none")]
    m = run(objs, pods)
    assert devices_of(get_claim(m, "h")) == [("n1", "gpu-1")]  # gpu-0 seen and refused for h100
    assert devices_of(get_claim(m, "a")) == [("n1", "gpu-0")]  # ... yet taken for a100
    assert devices_of(get_claim(m, "any")) == [("n1", "gpu-2")]
    assert devices_of(get_claim(m, "h2")) == [("n1", "gpu-3")]
    assert where(m, "p-none") == ""


def _ip_slice(node_name: str, ips: list[str]) -> dict[str, Any]:
    s = rslice(node_name, ["a100"] * len(ips))
    for d, ip in zip(s["spec"]["devices"], ips, strict=True):
        d["attributes"]["ip"] = {"string": ip}
    return s


def test_kubernetes_cel_libraries_select_devices_on_the_embedded_cluster():
    """CIDR, regex and sets selectors choose the devices kube would: only n2's device is in 10.0.2.0/24."""
    c = claim("c")
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": (
        f'cidr("10.0.2.0/24").containsIP(device.attributes["{DRIVER}"].ip) && '
        f'device.attributes["{DRIVER}"].model.find("[0-9]+") == "100" && '
        f'sets.contains(["a100", "h100"], [device.attributes["{DRIVER}"].model])')}}]
    m = run([node("n1"), node("n2"), device_class(), _ip_slice("n1", ["10.0.1.5"]),
             _ip_slice("n2", ["10.0.3.1", "10.0.2.7"]), c], [pod("p", claim_name="c")])
    assert where(m, "p") == "n2"
    assert devices_of(get_claim(m, "c")) == [("n2", "gpu-1")]


def test_a_selector_over_the_iteration_budget_leaves_the_pod_pending_not_a_crash():
    c = claim("c")
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": (
        "lists.range(200).all(i, lists.range(200).all(j, i + j >= 0))")}}]
    m = run([node("n1"), device_class(), rslice("n1", ["a100"]), c], [pod("p", claim_name="c"), pod("q")])
    assert where(m, "p") == "" and where(m, "q") == "n1"
    assert ("claim ml/c: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error: operation cancelled: "
            "iteration budget exceeded"
            in message(m, "p"))


def test_kubes_literal_checks_refuse_a_selector_at_compile_time():
    cache = CelCache()
    err = cache.get_or_compile(f'[device.attributes["{DRIVER}"].model, 1].size() == 2').error or ""
    assert "ERROR: <input>:1:46: expected type 'any' but found 'int'" in err
    assert "invalid matches argument" in (cache.get_or_compile("'a'.matches('[')").error or "")
    assert (cache.get_or_compile("'a'.find('(') == ''").error
            == "program instantiation failed: error parsing regexp: missing closing ): `(`")


def test_a_selector_over_kubes_cost_limit_gets_kubes_error_without_being_evaluated():
    c = claim("c")
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": (
        "lists.range(1000000000).size() > 0")}}]  # built, this list would exhaust memory
    m = run([node("n1"), device_class(), rslice("n1", ["a100"]), c], [pod("p", claim_name="c"), pod("q")])
    assert where(m, "p") == "" and where(m, "q") == "n1"
    assert ("claim ml/c: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error: operation cancelled: "
            "actual cost limit exceeded"
            in message(m, "p"))


def test_a_claim_with_a_full_reserved_for_does_not_block_prefilter_as_in_kube():
    """kube 1.36.3/1.37.2 PreFilter's "resourceclaim in use" check is guarded by resourceclaim.CanBeReserved,
    which returns true for every claim there ("no restrictions on sharing"): a claim whose status.reservedFor
    already holds ResourceClaimReservedForMaxSize (256) other consumers does not make the pod unschedulable at
    PreFilter (the API server refuses the 257th entry when PreBind adds it). ksched must not add the check."""
    m = MemoryCluster()
    full = claim("full")
    full["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": f"other-{i}", "uid": f"uid-{i}"} for i in range(256)]}
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), full, pod("p", claim_name="full")):
        m.create(o, emit=False)
    pl, _snap = _plugin(m)
    assert len(get_claim(m, "full")["status"]["reservedFor"]) == 256
    _st, status = _cycle(pl, Pod.from_dict(m.get_pod(NS, "p")), Node.from_dict(node("n1")))
    assert status is None or status.code == Code.Success, status


def test_prebind_rereads_a_conflicting_claim_from_the_api_not_the_informer():
    """kube's bindClaim GETs the claim after a conflict (retry.DefaultRetry: 10 ms apart): the informer may
    not have seen the write that won yet, and retrying on its copy would only conflict again."""
    from scheduler_runtime.cluster.base import PatchError

    class Lagging(MemoryCluster):
        """The first status write conflicts, as when another pod's reservation landed first."""

        def __init__(self) -> None:
            super().__init__()
            self.reads: list[str] = []
            self.conflicts = 1

        def patch_object(self, resource: str, name: str, namespace: str | None, patch: dict[str, Any],
                         subresource: str | None = None) -> dict[str, Any]:
            if subresource == "status" and self.conflicts:
                self.conflicts -= 1
                raise PatchError("the object has been modified", status=409)
            return super().patch_object(resource, name, namespace, patch, subresource)

        def get_object(self, resource: str, name: str, namespace: str | None) -> dict[str, Any]:
            self.reads.append(name)
            return super().get_object(resource, name, namespace)

    m = Lagging()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c"), pod("a", claim_name="c")):
        m.create(o, emit=False)
    pa = Pod.from_dict(m.get_pod(NS, "a"))
    pl, _ = _plugin(m)
    pauses: list[float] = []
    pl.clock = SimpleNamespace(sleep=pauses.append, time=pl.clock.time, monotonic=pl.clock.monotonic)
    st, status = _cycle(pl, pa, Node.from_dict(node("n1")))
    assert status is None and pl.reserve(st, pa, "n1") is None
    assert pl.pre_bind(st, pa, "n1") is None
    assert m.reads == ["c"] and len(pauses) == 1 and 0.01 <= pauses[0] <= 0.011
    got = get_claim(m, "c")["status"]
    assert got["reservedFor"] == [{"resource": "pods", "name": "a", "uid": pa.uid}] and got["allocation"]


def test_prebind_reports_a_claim_gone_after_a_conflict_with_kubes_message():
    class Gone(MemoryCluster):
        def patch_object(self, resource: str, name: str, namespace: str | None, patch: dict[str, Any],
                         subresource: str | None = None) -> dict[str, Any]:
            if subresource == "status":
                self.delete("resourceclaims", name, namespace)
                from scheduler_runtime.cluster.base import PatchError
                raise PatchError("the object has been modified", status=409)
            return super().patch_object(resource, name, namespace, patch, subresource)

    m = Gone()
    for o in (node("n1"), device_class(), rslice("n1", ["t4"]), claim("c"), pod("a", claim_name="c")):
        m.create(o, emit=False)
    pa = Pod.from_dict(m.get_pod(NS, "a"))
    pl, _ = _plugin(m)
    pl.clock = SimpleNamespace(sleep=lambda s: None, time=pl.clock.time, monotonic=pl.clock.monotonic)
    st, status = _cycle(pl, pa, Node.from_dict(node("n1")))
    assert status is None and pl.reserve(st, pa, "n1") is None
    got = pl.pre_bind(st, pa, "n1")
    assert got is not None and got.message == (
        'get updated claim ml/c after conflict: resourceclaims.resource.k8s.io "c" not found')

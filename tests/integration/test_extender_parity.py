"""Extender parity with the real kube-scheduler v1.37.2: the same extender process and the same extender config.

kube-scheduler schedules the scenario pod by pod on the real API server, calling a real extender (filter
with failed and failed-and-unresolvable nodes plus prioritize at weight 5, nodeCacheCapable; a second,
prioritize-only extender at weight 1 that receives full Node objects). ksched then replays the sequence in
its embedded cluster against the same extender, aligned with kube-scheduler's choice after each pod. Where
ksched's best total is unique it must pick kube-scheduler's node; the same pods must stay pending, with the
same FailedScheduling message; ksched must never pick a node the extender filtered out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.cluster.kube import KubeClient, load_connection
from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config import load_config
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.results import ResultStore
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.testing.kube import kube_scheduler, put_node, run_ksched_aligned, wait_decision, wait_for

pytestmark = pytest.mark.integration
NS = "ext-parity"
SCHEDULER = "ext-parity-scheduler"
NODES = [f"en-{i}" for i in range(10)]
REJECT = {"en-1": "no licence left on this node", "en-4": "no licence left on this node"}
UNRESOLVABLE = {"en-7": "node is being retired"}


def behaviour() -> dict[str, Any]:
    return {"filter": {"reject": REJECT, "unresolvable": UNRESOLVABLE},
            "prioritize": {"scores": {n: (i * 7) % 11 for i, n in enumerate(NODES)}}}


def config(primary: str, secondary: str, kubeconfig: str | None, cache: bool = True) -> str:
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": SCHEDULER}],
        "extenders": [
            {"urlPrefix": primary, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 5,
             "nodeCacheCapable": cache, "httpTimeout": "10s"},
            {"urlPrefix": secondary, "prioritizeVerb": "prioritize", "weight": 1, "httpTimeout": "10s"}]}
    if kubeconfig:
        doc["clientConnection"] = {"kubeconfig": kubeconfig}
    return yaml.safe_dump(doc)


def scenario() -> tuple[list[dict], list[dict]]:
    nodes = []
    for i, name in enumerate(NODES):
        cpu = [4, 8, 16][i % 3]
        nodes.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "ext-parity": "yes"}},
                      "spec": {}, "status": {"capacity": {"cpu": str(cpu), "memory": "32Gi", "pods": "110"},
                                             "allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "110"},
                                             "conditions": [{"type": "Ready", "status": "True"}]}})
    pods = []
    cpus = ["500m", "1", "2", "250m", "3", "1500m"]
    for i in range(24):
        cpu = "20" if i == 21 else "6" if i in (9, 19) else cpus[i % len(cpus)]  # 20 CPUs fit nowhere
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}],
                                "nodeSelector": {"ext-parity": "yes"}, "schedulerName": SCHEDULER}
        if i in (9, 19):  # only nodes the extender rejects, and one too small: pending for the extender's reasons
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                             "values": ["en-1", "en-3", "en-7"]}]}]}}}
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"ep-{i:02d}", "namespace": NS, "labels": {"app": "ep"}}, "spec": spec})
    return nodes, pods


def run_kube_scheduler(cp: Any, cfg_text: str, nodes: list[dict], pods: list[dict]
                       ) -> dict[str, tuple[str | None, str]]:
    c = KubeClient(load_connection(str(cp.kubeconfig_path)))
    c.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for n in nodes:
        put_node(c, n)
    # the API server is shared by the session: nodes other tests left there count in kube-scheduler's
    # messages, so ksched's embedded cluster gets them too
    everything = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["metadata"]["name"],
                                                                    "labels": n["metadata"].get("labels") or {}},
                   "spec": n.get("spec") or {}, "status": n.get("status") or {}}
                  for n in c.call("GET", "/api/v1/nodes").get("items") or []]
    nodes[:] = everything
    cfg = cp.dir / "ext-parity-config.yaml"
    cfg.write_text(cfg_text)
    out: dict[str, tuple[str | None, str]] = {}
    with kube_scheduler(cp.bin_dir, cfg, cp.dir / "kube-scheduler-ext-parity.log", verbosity=2):
        for p in pods:
            name = p["metadata"]["name"]
            c.call("POST", f"/api/v1/namespaces/{NS}/pods", body=p)
            verdict, what = wait_decision(c, NS, name)
            out[name] = (what, "") if verdict == "bound" else (None, what)
            if out[name][0] is None:  # not retried later: each decision stands alone
                c.call("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", body={"gracePeriodSeconds": 0})
    return out


def test_extender_placements_and_messages_match_kube_scheduler(control_plane: Any, extender_server: Any,
                                                               tmp_path: Path) -> None:
    primary = extender_server(behaviour())
    secondary = extender_server({"prioritize": {"scores": {n: (i * 3) % 11 for i, n in enumerate(NODES)}}})
    nodes, pods = scenario()
    try:
        kube = run_kube_scheduler(control_plane, config(primary.url, secondary.url,
                                                        str(control_plane.kubeconfig_path)), nodes, pods)
    finally:  # the API server is shared by the session: leave no nodes behind
        c = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
        for n in NODES:
            c.request("DELETE", f"/api/v1/nodes/{n}")
    kube_calls = len(primary.requests("filter"))
    assert kube_calls >= len(pods) - 2, "kube-scheduler did not call the extender"
    body = primary.requests("filter")[0]["body"]
    assert body["Nodes"] is None and body["NodeNames"]  # nodeCacheCapable on the wire, from kube-scheduler too
    assert secondary.requests("prioritize")[0]["body"]["Nodes"]["items"]  # full nodes from kube-scheduler
    cfg = tmp_path / "ksched.yaml"
    cfg.write_text(config(primary.url, secondary.url, None))
    decisions = run_ksched_aligned(cfg, nodes, pods, {n: k[0] for n, k in kube.items()}, NS)
    report = "\n".join(f"{n}: kube={k} ksched={o} unique={u} msg={m!r}" for n, k, o, m, u in decisions)
    (tmp_path / "parity.txt").write_text(report)
    filtered = set(REJECT) | set(UNRESOLVABLE)
    assert not {k for _, k, _, _, _ in decisions} & filtered, report  # kube-scheduler honoured the extender
    assert not {o for _, _, o, _, _ in decisions} & filtered, report
    assert {n for n, k, _, _, _ in decisions if k is None} == {n for n, _, o, _, _ in decisions if o is None}, report
    for n, _, o, msg, _ in decisions:
        if o is None:  # byte for byte, DynamicResources' PostFilter part included
            assert msg == kube[n][1], (n, msg, kube[n][1])
    assert any("1 no licence left on this node, 1 node is being retired" in kube[n][1] for n in kube), report
    unique = [(n, k, o) for n, k, o, _, u in decisions if u and k is not None]
    assert len(unique) >= 15, report
    assert [(n, k, o) for n, k, o in unique if k != o] == [], report


def test_ksched_on_the_real_api_server_with_a_binding_extender(control_plane: Any, extender_server: Any,
                                                               namespace: str, tmp_path: Path) -> None:
    """ksched as the cluster's scheduler: the extender filters a node out and binds the pod itself (bindVerb)
    through the API server; ksched records the Scheduled event and never binds it with DefaultBinder."""
    from scheduler_runtime.testing.kube import create_node, ksched_runner

    admin = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    names = [f"eb-{namespace}-{i}" for i in range(3)]
    for n in names:
        create_node(admin, n, labels={"ext-bind": namespace})
    e = extender_server({"filter": {"reject": {names[0]: "reserved", names[1]: "reserved"}}},
                        kubeconfig=str(control_plane.kubeconfig_path))
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": "ksched-ext-bind"}],
        "extenders": [{"urlPrefix": e.url, "filterVerb": "filter", "bindVerb": "bind", "nodeCacheCapable": True}]}))
    try:
        with ksched_runner(cfg_file, control_plane.kubeconfig_path):
            admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound-by-extender", "namespace": namespace},
                "spec": {"schedulerName": "ksched-ext-bind", "nodeSelector": {"ext-bind": namespace},
                         "containers": [{"name": "c", "image": "pause"}]}})
            node = wait_for(lambda: admin.call("GET", f"/api/v1/namespaces/{namespace}/pods/bound-by-extender")
                            ["spec"].get("nodeName"), 60, "the extender to bind the pod")
            assert node == names[2]
            (bind,) = e.requests("bind")
            assert bind["body"]["Node"] == names[2] and bind["body"]["PodName"] == "bound-by-extender"
            events = wait_for(lambda: [
                ev for ev in admin.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
                if ev["reason"] == "Scheduled"], 30, "the Scheduled event")
            assert events[0]["note"] == f"Successfully assigned {namespace}/bound-by-extender to {names[2]}"
    finally:
        for n in names:
            admin.request("DELETE", f"/api/v1/nodes/{n}")


@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "full-nodes"])
def test_full_node_filter_scores_empty_nodes_like_kube_scheduler(control_plane: Any, extender_server: Any,
                                                                 namespace: str, tmp_path: Path, cache: bool) -> None:
    """Without nodeCacheCapable, kube-scheduler scores the Node objects the filter extender returns as empty
    nodes (NodeResourcesFit ignores their pods): a busy big node then beats an empty small one. ksched too."""
    from scheduler_runtime.testing.kube import create_node

    admin = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    suffix = f"{namespace}-{int(cache)}"
    big, small = f"big-{suffix}", f"small-{suffix}"
    create_node(admin, big, cpu="8", memory="16Gi", labels={"fresh": suffix})
    create_node(admin, small, cpu="4", memory="16Gi", labels={"fresh": suffix})
    busy = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": namespace},
            "spec": {"nodeName": big, "containers": [{"name": "c", "image": "pause",
                                                      "resources": {"requests": {"cpu": "7"}}}]}}
    admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=busy)
    e = extender_server({"filter": {}})
    sched_name = f"fresh-{int(cache)}"
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": sched_name}],
           "extenders": [{"urlPrefix": e.url, "filterVerb": "filter", "nodeCacheCapable": cache}]}
    cfg = tmp_path / "kube.yaml"
    cfg.write_text(yaml.safe_dump({**doc, "clientConnection": {"kubeconfig": str(control_plane.kubeconfig_path)}}))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
           "spec": {"schedulerName": sched_name, "nodeSelector": {"fresh": suffix},
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}}
    try:
        with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
            kube = wait_for(lambda: admin.call("GET", f"/api/v1/namespaces/{namespace}/pods/p")["spec"].get("nodeName"),
                         60, "kube-scheduler to bind p")
    finally:
        for n in (big, small):
            admin.request("DELETE", f"/api/v1/nodes/{n}")
    assert kube == (small if cache else big)  # the behaviour ksched follows, seen on the real binary
    reg = build_registry([])
    cluster = MemoryCluster()
    for name, cpu in ((big, "8"), (small, "4")):
        cluster.create({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "fresh": suffix}},
                        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}, emit=False)
    cluster.create(busy, emit=False)
    kcfg = tmp_path / "ksched.yaml"
    kcfg.write_text(yaml.safe_dump(doc))
    sched = Scheduler(cluster, load_config(kcfg, reg), reg, seed=1)
    sched.start()
    cluster.create(pod)
    sched.run(until_idle=True)
    assert cluster.get_pod(namespace, "p")["spec"]["nodeName"] == kube


def test_preempt_extender_wire_and_error_message_match_kube_scheduler(control_plane: Any, extender_server: Any,
                                                                      namespace: str, tmp_path: Path) -> None:
    """kube-scheduler's preempt call (meta victims when nodeCacheCapable) and its FailedScheduling message when
    the preempt extender fails, against ksched's."""
    from scheduler_runtime.testing.kube import create_node

    admin = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    node, high = f"pv-{namespace}", f"high-{namespace}"
    create_node(admin, node, cpu="4", memory="16Gi", labels={"preempt": namespace})
    admin.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body={
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": high}, "value": 1000})
    victim = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "victim", "namespace": namespace},
              "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause",
                                                         "resources": {"requests": {"cpu": "3"}}}]}}
    victim = admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=victim)
    e = extender_server({"preempt": {"status": 500}})
    sched_name = f"pre-{namespace}"
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": sched_name}],
           "extenders": [{"urlPrefix": e.url, "preemptVerb": "preempt", "nodeCacheCapable": True}]}
    cfg = tmp_path / "kube.yaml"
    cfg.write_text(yaml.safe_dump({**doc, "clientConnection": {"kubeconfig": str(control_plane.kubeconfig_path)}}))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "preemptor", "namespace": namespace},
           "spec": {"schedulerName": sched_name, "nodeSelector": {"preempt": namespace}, "priorityClassName": high,
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}}}]}}
    everything = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["metadata"]["name"],
                                                                    "labels": n["metadata"].get("labels") or {}},
                   "spec": n.get("spec") or {}, "status": n.get("status") or {}}
                  for n in admin.call("GET", "/api/v1/nodes").get("items") or []]

    def failed() -> str | None:
        got = admin.call("GET", f"/api/v1/namespaces/{namespace}/pods/preemptor")
        for cond in (got.get("status") or {}).get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return cond.get("message")
        return None

    try:
        with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
            kube_msg = wait_for(failed, 60, "kube-scheduler to fail the preemptor")
    finally:
        admin.request("DELETE", f"/api/v1/nodes/{node}")
        admin.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{high}")
    kube_req = e.requests("preempt")[0]["body"]
    assert kube_req["NodeNameToVictims"] is None
    assert kube_req["NodeNameToMetaVictims"] == {node: {"Pods": [{"UID": victim["metadata"]["uid"]}],
                                                        "NumPDBViolations": 0}}
    assert kube_msg.endswith(f". preemption: failed preempt with extender at URL {e.url}/preempt, code 500"), kube_msg
    reg = build_registry([])
    cluster = MemoryCluster()
    for n in everything:
        cluster.create(n, emit=False)
    cluster.create({**victim, "metadata": {"name": "victim", "namespace": namespace,
                                           "uid": victim["metadata"]["uid"]}}, emit=False)
    kcfg = tmp_path / "ksched.yaml"
    kcfg.write_text(yaml.safe_dump(doc))
    results = ResultStore()
    sched = Scheduler(cluster, load_config(kcfg, reg), reg, seed=1, results=results)
    sched.start()
    cluster.create({**pod, "spec": {**pod["spec"], "priority": 1000}})
    sched.run(until_idle=True)
    ours = e.requests("preempt")[-1]["body"]
    assert ours["NodeNameToVictims"] is None and ours["NodeNameToMetaVictims"] == kube_req["NodeNameToMetaVictims"]
    assert results.get(f"{namespace}/preemptor").message == kube_msg


def test_filter_error_messages_match_kube_scheduler(control_plane: Any, extender_server: Any, namespace: str,
                                                    tmp_path: Path) -> None:
    """A non-ignorable filter extender that errs: the pod's PodScheduled condition (SchedulerError) says what
    kube-scheduler says, for the extender's own Error, a non-200 code, a timeout and a refused connection.
    Each extender manages its own extended resource, so each pod reaches exactly one of them."""
    import socket

    from scheduler_runtime.testing.kube import create_node

    admin = KubeClient(load_connection(str(control_plane.kubeconfig_path)))
    node = f"fe-{namespace}"
    create_node(admin, node, labels={"filter-errors": namespace})
    admin.call("PATCH", f"/api/v1/nodes/{node}/status", content_type="application/merge-patch+json", body={
        "status": {"capacity": {f"example.com/r{i}": "10" for i in range(4)},
                   "allocatable": {f"example.com/r{i}": "10" for i in range(4)}}})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/gone"
    behaviours = [{"filter": {"error": "licence server down"}}, {"filter": {"status": 503}},
                  {"filter": {"sleep": 3}}]
    urls = [extender_server(b).url for b in behaviours] + [closed]
    sched_name = f"fe-{namespace}"
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": sched_name}],
           "extenders": [{"urlPrefix": u, "filterVerb": "filter", "httpTimeout": "500ms",
                          "managedResources": [{"name": f"example.com/r{i}"}]} for i, u in enumerate(urls)]}
    cfg = tmp_path / "kube.yaml"
    cfg.write_text(yaml.safe_dump({**doc, "clientConnection": {"kubeconfig": str(control_plane.kubeconfig_path)}}))
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": namespace},
             "spec": {"schedulerName": sched_name, "nodeSelector": {"filter-errors": namespace},
                      "containers": [{"name": "c", "image": "pause",
                                      "resources": {"requests": {f"example.com/r{i}": "1"},
                                                    "limits": {f"example.com/r{i}": "1"}}}]}} for i in range(4)]
    node_obj = admin.call("GET", f"/api/v1/nodes/{node}")
    kube: dict[str, tuple[str, str]] = {}
    try:
        with kube_scheduler(control_plane.bin_dir, cfg, tmp_path / "kube-scheduler.log"):
            for p in pods:
                admin.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=p)

            def condition(name: str) -> tuple[str, str] | None:
                got = admin.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
                for cond in (got.get("status") or {}).get("conditions") or []:
                    if cond["type"] == "PodScheduled" and cond["status"] == "False":
                        return cond.get("reason") or "", cond.get("message") or ""
                return None

            for p in pods:
                name = p["metadata"]["name"]
                kube[name] = wait_for(lambda name=name: condition(name), 60, f"kube-scheduler to fail {name}")
    finally:
        admin.request("DELETE", f"/api/v1/nodes/{node}")
    assert kube["p0"] == ("SchedulerError", "licence server down")
    assert kube["p1"] == ("SchedulerError", f"failed filter with extender at URL {urls[1]}/filter, code 503")
    reg = build_registry([])
    cluster = MemoryCluster()
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": node_obj["metadata"] | {"resourceVersion": None},
                    "spec": node_obj.get("spec") or {}, "status": node_obj["status"]}, emit=False)
    kcfg = tmp_path / "ksched.yaml"
    kcfg.write_text(yaml.safe_dump(doc))
    sched = Scheduler(cluster, load_config(kcfg, reg), reg, seed=1)
    sched.start()
    for p in pods:
        cluster.create(p)
    sched.run(until_idle=True)
    ours = {}
    for p in pods:
        conds = cluster.get_pod(namespace, p["metadata"]["name"])["status"]["conditions"]
        ours[p["metadata"]["name"]] = next((c["reason"], c["message"]) for c in conds if c["type"] == "PodScheduled")
    assert ours == kube

"""`ksched dev-cluster` with nodes: KWOK nodes on the local control plane, and objects loaded into it.

`up` starts etcd + kube-apiserver (controlplane.py); with nodes it also starts kube-controller-manager's node
lifecycle controller (it removes the `node.kubernetes.io/not-ready` taint once a node is Ready, as in a real
cluster) and the kwok controller (kwok.py), which keeps the nodes Ready and runs the pods bound to them.
Every process is recorded by identity in the state file, so `down` stops exactly those.

Objects are sent to the API server one by one; each one's outcome (created, already there, refused with the
API server's reason) is kept for the summary, so nothing the API refuses goes unsaid.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import kwok, processes
from .atomicfile import atomic_write
from .cluster.base import CLUSTER_SCOPED, resource_of_kind
from .errors import InputError, KschedError, UsageError

#: kube-controller-manager controllers the dev cluster runs with nodes: taints follow the Ready condition
CONTROLLERS = ("node-lifecycle-controller",)
#: its client's default 20 requests/s untaints about 5 nodes a second; a local API server takes far more
CONTROLLER_MANAGER_ARGS = ("--kube-api-qps=200", "--kube-api-burst=400")
#: most nodes `--nodes N` makes (a 2-core laptop runs a few thousand KWOK nodes; more is a typo)
MAX_FAKE_NODES = 5000
#: creation order: what other objects refer to first, pods last
_KIND_ORDER = {k: i for i, k in enumerate((
    "Namespace", "CustomResourceDefinition", "PriorityClass", "StorageClass", "CSIDriver", "CSINode",
    "PersistentVolume", "DeviceClass", "ResourceSlice", "PersistentVolumeClaim", "ResourceClaim",
    "ResourceClaimTemplate"))}
_POD_ORDER = 1000
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink",
                  "deletionTimestamp")


# ------------------------------------------------------------------------------------------- input


@dataclass
class Source:
    """What `up` loads: nodes to register as KWOK nodes and other objects to create."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    objects: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (object, file it came from)


def _read(spec: str | Path, stdin: Callable[[], str] | None = None) -> list[tuple[dict[str, Any], str]]:
    """Objects in a file or folder (memory.load_objects' rules); `-` is standard input."""
    from .cluster.memory import load_objects

    if str(spec) == "-":
        text = (stdin or sys.stdin.read)()
        with tempfile.TemporaryDirectory(prefix="ksched-stdin-") as d:
            p = Path(d) / "stdin.yaml"
            p.write_text(text)
            try:
                return [(o, "-") for o, _ in load_objects(p)]
            except InputError as exc:
                raise InputError(exc.detail, file="-", field=exc.field, usage=exc.usage) from None
    p = Path(spec)
    if not p.exists():
        raise InputError("no such file or directory", file=str(p), usage=True)
    return load_objects(p)


def parse_nodes(spec: str) -> tuple[int | None, str | None]:
    """`--nodes N` -> (N, None); `--nodes FILE|DIR|-` -> (None, path). UsageError for a count out of range."""
    s = spec.strip()
    if s.isdigit():
        n = int(s)
        if not 1 <= n <= MAX_FAKE_NODES:
            raise UsageError(f"--nodes {spec}: a node count must be between 1 and {MAX_FAKE_NODES}")
        return n, None
    return None, spec


def load_source(nodes: str | None, filenames: Sequence[str], stdin: Callable[[], str] | None = None) -> Source:
    """Read everything before anything starts, so bad input changes nothing.

    `nodes` is a count (`--nodes 3`: that many KWOK nodes) or a file/folder whose Node objects are registered
    as KWOK nodes; other objects in it (namespaces, bound pods, PDBs...) are created too, as
    `simulate --cluster` reads the same folder. `filenames` (`-f`) hold further objects, such as pending pods."""
    src = Source()
    if sum(1 for s in [nodes, *filenames] if s is not None and str(s) == "-") > 1:
        raise UsageError("standard input (`-`) can be read only once")
    if nodes is not None:
        count, path = parse_nodes(nodes)
        if count is not None:
            src.nodes = kwok.fake_nodes(count)
        else:
            assert path is not None
            objs = _read(path, stdin)
            src.nodes = [kwok.as_kwok_node(o) for o, _ in objs if o.get("kind") == "Node"]
            if not src.nodes:
                where = "-" if path == "-" else str(Path(path))
                raise InputError("holds no Node object (give a node count, e.g. --nodes 3, or a file of "
                                 "kind: Node documents)", file=where, field="kind", usage=False)
            src.objects += [(o, w) for o, w in objs if o.get("kind") != "Node"]
    for f in filenames:
        for o, w in _read(f, stdin):
            if o.get("kind") == "Node":
                src.nodes.append(kwok.as_kwok_node(o))
            else:
                src.objects.append((o, w))
    seen: dict[str, int] = {}
    for i, n in enumerate(src.nodes):
        name = (n.get("metadata") or {}).get("name")
        if name in seen:
            raise InputError(f'Duplicate value: "{name}": node {seen[name] + 1} has this name too',
                             field=f"nodes[{i}].metadata.name", usage=False)
        seen[str(name)] = i
    return src


# ------------------------------------------------------------------------------------------- loading


@dataclass
class Outcome:
    """What the API server did with one object."""

    kind: str
    name: str
    namespace: str | None
    result: str  # created | exists | refused
    reason: str = ""
    source: str = ""
    bound_to: str = ""

    @property
    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.namespace + '/' if self.namespace else ''}{self.name}"

    def line(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"{self.result} {self.ref}{where}" + (f": {self.reason}" if self.reason else "")


#: (group, kind) -> (plural, namespaced) for kinds that CRDs in the input define
CrdKinds = dict[tuple[str, str], tuple[str, bool]]


def _crd_kinds(objs: Sequence[tuple[dict[str, Any], str]]) -> CrdKinds:
    out: CrdKinds = {}
    for o, _ in objs:
        if o.get("kind") != "CustomResourceDefinition":
            continue
        spec = o.get("spec") or {}
        names = spec.get("names") or {}
        if spec.get("group") and names.get("kind") and names.get("plural"):
            out[(str(spec["group"]), str(names["kind"]))] = (str(names["plural"]), spec.get("scope") != "Cluster")
    return out


def _group(obj: dict[str, Any]) -> str:
    api = str(obj.get("apiVersion") or "v1")
    return api.split("/", 1)[0] if "/" in api else ""


def _namespace_of(obj: dict[str, Any], crds: CrdKinds) -> str | None:
    kind = str(obj.get("kind"))
    crd = crds.get((_group(obj), kind))
    if (not crd[1]) if crd else resource_of_kind(kind) in CLUSTER_SCOPED:
        return None
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _path(obj: dict[str, Any], namespace: str | None, crds: CrdKinds) -> str:
    api = str(obj.get("apiVersion") or "v1")
    base = "/api/v1" if api == "v1" else f"/apis/{api}"
    crd = crds.get((_group(obj), str(obj.get("kind"))))
    plural = crd[0] if crd else resource_of_kind(str(obj.get("kind")))
    if namespace is None:
        return f"{base}/{plural}"
    return f"{base}/namespaces/{urllib.parse.quote(namespace, safe='')}/{plural}"


def _wait_established(client: Any, names: Sequence[str], timeout: float = 30.0) -> None:
    """Until the API server serves the CRDs `names` (condition Established), so their objects can follow."""
    deadline = time.monotonic() + timeout
    left = list(names)
    while left and time.monotonic() < deadline:
        r = client.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{left[0]}")
        conds = ((r.json() if r.ok else {}).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
            left.pop(0)
        else:
            time.sleep(0.2)


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    o = copy.deepcopy(obj)
    meta = o.setdefault("metadata", {})
    for k in _SERVER_FIELDS:
        meta.pop(k, None)
    if o.get("kind") == "Pod":
        o.pop("status", None)  # the API server starts every pod Pending; KWOK moves bound ones on
    return o


def create_all(client: Any, objs: Sequence[tuple[dict[str, Any], str]]) -> list[Outcome]:
    """Create `objs` in dependency order (namespaces, including ones only referred to, then cluster-wide
    objects, then namespaced ones, pods last); one Outcome each. A 409 AlreadyExists is `exists`, any other
    answer than 201 is `refused` with the API server's message."""
    crds = _crd_kinds(objs)
    declared = {str((o.get("metadata") or {}).get("name")) for o, _ in objs if o.get("kind") == "Namespace"}
    implied = sorted({ns for o, _ in objs if (ns := _namespace_of(o, crds)) and ns not in declared
                      and ns != "default"})
    todo = [({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, "implied") for ns in implied]
    todo += sorted(objs, key=lambda ow: _POD_ORDER if ow[0].get("kind") == "Pod"
                   else _KIND_ORDER.get(str(ow[0].get("kind")), len(_KIND_ORDER)))
    out: list[Outcome] = []
    waited = False
    for obj, where in todo:
        kind = str(obj.get("kind"))
        if not waited and crds and _KIND_ORDER.get(kind, len(_KIND_ORDER)) > _KIND_ORDER["CustomResourceDefinition"]:
            _wait_established(client, [o.name for o in out if o.kind == "CustomResourceDefinition"
                                       and o.result != "refused"])
            waited = True
        ns = _namespace_of(obj, crds)
        body = _clean(obj)
        if ns is not None:
            body["metadata"]["namespace"] = ns
        name = str(body["metadata"].get("name"))
        resp = client.request("POST", _path(body, ns, crds), body=body)
        bound = str((body.get("spec") or {}).get("nodeName") or "") if kind == "Pod" else ""
        if resp.status in (200, 201):
            out.append(Outcome(kind, name, ns, "created", source=where, bound_to=bound))
        elif resp.status == 409:
            out.append(Outcome(kind, name, ns, "exists", source=where, bound_to=bound))
        else:
            out.append(Outcome(kind, name, ns, "refused", resp.message(), source=where))
    return out


def register_nodes(client: Any, nodes: Sequence[dict[str, Any]]) -> list[Outcome]:
    """POST each node (capacity in its status is kept at create; KWOK fills conditions and addresses).
    A node that exists already is annotated for KWOK so it is managed too."""
    out = []
    for n in nodes:
        name = str(n["metadata"]["name"])
        resp = client.request("POST", "/api/v1/nodes", body=n)
        if resp.status in (200, 201):
            out.append(Outcome("Node", name, None, "created"))
            continue
        if resp.status == 409:
            patch = {"metadata": {"annotations": {kwok.NODE_ANNOTATION: kwok.NODE_ANNOTATION_VALUE}}}
            r = client.request("PATCH", f"/api/v1/nodes/{name}", body=patch,
                               content_type="application/merge-patch+json")
            out.append(Outcome("Node", name, None, "exists") if r.ok
                       else Outcome("Node", name, None, "refused", r.message()))
            continue
        out.append(Outcome("Node", name, None, "refused", resp.message()))
    return out


def wait_nodes_ready(client: Any, names: Sequence[str], timeout: float,
                     alive: Callable[[], str | None] = lambda: None) -> tuple[list[str], list[str]]:
    """Poll until every node in `names` is Ready without condition taints, or `timeout` passes, or `alive()`
    names a helper process that died. Returns (ready, not ready)."""
    want = set(names)
    deadline = time.monotonic() + timeout
    ready: set[str] = set()
    while True:
        items = client.call("GET", "/api/v1/nodes").get("items") or []
        ready = {str(n["metadata"]["name"]) for n in items if n["metadata"]["name"] in want and kwok.node_ready(n)}
        if ready == want or time.monotonic() >= deadline:
            break
        dead = alive()
        if dead:
            raise KschedError(dead, usage=False)
        time.sleep(0.3)
    return sorted(ready), sorted(want - ready)


def unknown_bindings(client: Any, objects: Sequence[Outcome]) -> list[str]:
    """One line per pod created bound (spec.nodeName) to a node the cluster does not have: it stays Pending."""
    bound = [o for o in objects if o.kind == "Pod" and o.bound_to and o.result != "refused"]
    if not bound:
        return []
    nodes = {n["metadata"]["name"] for n in client.call("GET", "/api/v1/nodes").get("items") or []}
    return [f"pod/{o.namespace}/{o.name} is bound to node {o.bound_to}, which this cluster does not have: it stays "
            f"Pending" for o in bound if o.bound_to not in nodes]


@dataclass
class Summary:
    """What `up` did, for the lines it prints."""

    nodes: list[Outcome]
    ready: list[str]
    not_ready: list[str]
    objects: list[Outcome]

    @property
    def refused(self) -> list[Outcome]:
        return [o for o in (*self.nodes, *self.objects) if o.result == "refused"]

    def lines(self) -> list[str]:
        out = []
        if self.nodes:
            made = sum(o.result == "created" for o in self.nodes)
            out.append(f"nodes: {len(self.ready)}/{len(self.nodes)} Ready (KWOK-managed; {made} registered now, "
                       f"{sum(o.result == 'exists' for o in self.nodes)} already there)")
            if self.not_ready:
                out.append(f"  not Ready: {', '.join(self.not_ready)}")
        pods = [o for o in self.objects if o.kind == "Pod"]
        if pods:
            ok = [o for o in pods if o.result != "refused"]
            bound = sum(bool(o.bound_to) for o in ok)
            out.append(f"pods: {sum(o.result == 'created' for o in pods)} created, "
                       f"{sum(o.result == 'exists' for o in pods)} already there, "
                       f"{sum(o.result == 'refused' for o in pods)} refused ({bound} bound to a node, "
                       f"{len(ok) - bound} pending for a scheduler)")
        others = [o for o in self.objects if o.kind != "Pod" and o.result != "refused"]
        if others:
            out.append("other objects: " + ", ".join(o.ref + ("" if o.result == "created" else " (already there)")
                                                     for o in others))
        out += [f"refused {o.ref}" + (f" ({o.source})" if o.source else "") + f": {o.reason}"
                for o in self.refused]
        return out


# ------------------------------------------------------------------------------------------- processes


def recorded(state: dict[str, Any]) -> list[tuple[str, processes.Identity | None]]:
    """(name, identity) per process the state file records."""
    out = []
    for i, e in enumerate(state.get("processes") or []):
        name = str(e.get("name") or f"process {i}") if isinstance(e, dict) else f"process {i}"
        out.append((name, processes.Identity.from_json(e)))
    return out


def running(ident: processes.Identity | None) -> bool:
    """Whether the recorded process still runs (and is still the one recorded)."""
    return ident is not None and ident.matches(processes.identify(ident.pid))


def add_processes(state_dir: Path, procs: Sequence[tuple[str, int]], **info: Any) -> None:
    """Record `procs` (name, pid) at the front of the state file's list (`down` stops them before the API
    server they talk to); entries of the same names that no longer run are dropped, ones that still run are
    kept, so `down` stops them too."""
    path = state_dir / "state.json"
    st = json.loads(path.read_text())
    names = {n for n, _ in procs}
    entries = []
    for name, pid in procs:
        ident = processes.identify_started(pid)
        if ident is None:
            raise KschedError(f"{name} (pid {pid}) exited right after start; see {state_dir / name}.log",
                              usage=False)
        entries.append({"name": name, **ident.to_json()})
    keep = [e for e in st.get("processes") or []
            if not (isinstance(e, dict) and e.get("name") in names and not running(processes.Identity.from_json(e)))]
    st["processes"] = entries + keep
    st.update(info)
    atomic_write(path, json.dumps(st, indent=1).encode(), 0o600)


def start_node_agents(state_dir: Path, state: dict[str, Any]) -> list[tuple[str, int]]:
    """Start kube-controller-manager (node lifecycle) and kwok for the dev cluster in `state_dir` unless the
    state file says they run; returns what was started, for add_processes."""
    from .controlplane import ControlPlane

    live = {name for name, ident in recorded(state) if running(ident)}
    assets = kwok.find_kwok()
    started: list[tuple[str, int]] = []
    if "kube-controller-manager" not in live:
        cp = ControlPlane(state_dir=state_dir, bin_dir=state.get("bin_dir") or None, detached=True)
        cp.start_controller_manager(CONTROLLERS, CONTROLLER_MANAGER_ARGS)
        assert cp.controller_manager is not None
        started.append(("kube-controller-manager", cp.controller_manager.pid))
    if "kwok" not in live:
        proc = kwok.start_controller(assets, state_dir / "admin.kubeconfig", state_dir / "kwok", state_dir / "kwok.log")
        started.append(("kwok", proc.pid))
    return started


def agents_alive(state_dir: Path, pids: dict[str, int]) -> Callable[[], str | None]:
    """A check for wait_nodes_ready: names a helper that exited, with the tail of its log."""
    def check() -> str | None:
        for name, pid in pids.items():
            if processes.identify(pid) is None:
                log = state_dir / f"{name}.log"
                tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
                return f"{name} exited while the nodes were coming up; last lines of {log}:\n" + "\n".join(tail)
        return None
    return check


def node_and_pod_counts(client: Any) -> tuple[str, str]:
    """One line on nodes (Ready, KWOK-managed) and one on pods by phase, for `status`."""
    nodes = client.call("GET", "/api/v1/nodes").get("items") or []
    ready = sum(kwok.node_ready(n) for n in nodes)
    managed = sum(kwok.is_kwok_node(n) for n in nodes)
    pods = client.call("GET", "/api/v1/pods").get("items") or []
    phases: dict[str, int] = {}
    for p in pods:
        ph = str((p.get("status") or {}).get("phase") or "Pending")
        phases[ph] = phases.get(ph, 0) + 1
    pod_line = ", ".join(f"{n} {ph}" for ph, n in sorted(phases.items())) or "none"
    return f"nodes: {len(nodes)} ({ready} Ready, {managed} managed by kwok)", f"pods: {pod_line}"

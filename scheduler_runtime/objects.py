"""Light typed records of the API objects scheduling needs, parsed once from their JSON/YAML dicts.

Plugins get these instead of generated client models: reading `pod.priority` is an attribute access,
not a walk through a 48 KiB model. The untouched object stays available as `.raw` for plugins that
need more than the scheduler does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError
from .labelsel import SelectorError, node_field_requirements, node_selector_requirements, selector_requirements
from .podrequests import DEFAULT_MEMORY_REQUEST as DEFAULT_MEMORY_REQUEST  # re-exported: tests import them here
from .podrequests import DEFAULT_MILLI_CPU_REQUEST as DEFAULT_MILLI_CPU_REQUEST
from .podrequests import claim_resources, counting_claim_statuses, non_zero_pod_requests, pod_requests
from .quantity import resource_amount

DEFAULT_SCHEDULER_NAME = "default-scheduler"


# --------------------------------------------------------------------------- selectors


Matcher = Callable[[Mapping[str, str]], bool]


def _exprs(raw: Any, path: str) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(e, Mapping) for e in raw):
        raise InputError("must be a list of requirements", field=path, usage=False)
    for i, e in enumerate(raw):
        vals = e.get("values")
        if vals is not None and not isinstance(vals, list):
            raise InputError("must be a list of strings", field=f"{path}[{i}].values", usage=False)
    return raw


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """metav1.LabelSelector; `None` selector (absent) is represented by not having one at all."""

    match_labels: tuple[tuple[str, str], ...]
    requirements: tuple[Matcher, ...]
    raw: Mapping[str, Any]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, path: str = "labelSelector") -> LabelSelector:
        """Parse, refusing a selector kube would not parse (InputError naming `path`)."""
        try:
            return cls.parse_or_raise(raw, path)
        except SelectorError as exc:
            raise InputError(str(exc), field=path, usage=False) from exc

    @classmethod
    def parse_or_raise(cls, raw: Mapping[str, Any] | None, path: str = "labelSelector") -> LabelSelector:
        """LabelSelectorAsSelector: raises SelectorError (Go's text) for invalid keys, values or operators."""
        raw = raw or {}
        ml = raw.get("matchLabels") or {}
        exprs = _exprs(raw.get("matchExpressions"), f"{path}.matchExpressions")
        reqs = selector_requirements({str(k): str(v) for k, v in ml.items()}, exprs)
        return cls(tuple((str(k), str(v)) for k, v in ml.items()), tuple(reqs[len(ml):]), raw)

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(r(labels) for r in self.requirements)


class NodeSelectorTerm:
    """One term of a NodeSelector: all of its expressions and fields must match.

    A term kube-scheduler cannot parse (invalid key, value or operator) keeps its error and matches no node,
    as the LazyErrorNodeSelector does; an empty term matches nothing either.
    """

    __slots__ = ("exprs", "fields", "empty", "error", "name_values")

    def __init__(self, raw: Mapping[str, Any], path: str, go_path: str | None = None) -> None:
        """`path` names fields in InputErrors; `go_path` is the path kube's parse errors use (default `path`)."""
        gp = path if go_path is None else go_path
        raw_exprs = _exprs(raw.get("matchExpressions"), f"{path}.matchExpressions")
        raw_fields = _exprs(raw.get("matchFields"), f"{path}.matchFields")
        self.empty = not raw_exprs and not raw_fields
        self.error = ""
        errs: list[str] = []
        self.exprs: tuple[Matcher, ...] = ()
        self.fields: tuple[Matcher, ...] = ()
        try:
            self.exprs = tuple(node_selector_requirements(raw_exprs, f"{gp}.matchExpressions"))
        except SelectorError as exc:
            errs.append(str(exc))
        try:
            self.fields = tuple(node_field_requirements(raw_fields, f"{gp}.matchFields"))
        except SelectorError as exc:
            errs.append(str(exc))
        if errs:
            self.error = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        # PreFilter narrows to the named nodes: the intersection of this term's `metadata.name In` values
        # (None when the term has no such requirement).
        names: set[str] | None = None
        for f in raw_fields:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                vals = {str(v) for v in f.get("values") or []}
                names = vals if names is None else names & vals
        self.name_values = None if names is None else frozenset(names)

    def matches(self, node: Node) -> bool:
        if self.empty or self.error:
            return False
        if any(not r(node.labels) for r in self.exprs):
            return False
        if self.fields:
            f = {"metadata.name": node.name}
            return all(r(f) for r in self.fields)
        return True


class NodeSelector:
    """Terms are ORed."""

    __slots__ = ("terms",)

    def __init__(self, raw: Mapping[str, Any], path: str) -> None:
        self.terms = tuple(NodeSelectorTerm(t, f"{path}.nodeSelectorTerms[{i}]", f"nodeSelectorTerms[{i}]")
                           for i, t in enumerate(raw.get("nodeSelectorTerms") or []))

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)


@dataclass(slots=True, frozen=True)
class PreferredSchedulingTerm:
    weight: int
    term: NodeSelectorTerm


def _sections(raw: Any, kind: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]:
    """metadata, spec, status and the name of an object about to be parsed, the name checked first, since every
    record is keyed by it."""
    if not isinstance(raw, dict):
        raise InputError(f"a {kind} must be a mapping", usage=False)
    meta = raw.get("metadata") or {}
    name = meta.get("name")
    if not name or not isinstance(name, str):
        raise InputError("Required value: name is required", field="metadata.name", usage=False)
    return meta, raw.get("spec") or {}, raw.get("status") or {}, name


@dataclass(slots=True, frozen=True)
class PodAffinityTerm:
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str
    weight: int = 0

    def namespace_matches(self, owner_ns: str, pod_ns: str, ns_labels: Mapping[str, str] | None) -> bool:
        """Namespaces are the listed ones plus those matching namespaceSelector; none of either = owner's."""
        if not self.namespaces and self.namespace_selector is None:
            return pod_ns == owner_ns
        if pod_ns in self.namespaces:
            return True
        if self.namespace_selector is not None:
            if self.namespace_selector.empty:
                return True
            return ns_labels is not None and self.namespace_selector.matches(ns_labels)
        return False

    def matches(self, owner_ns: str, pod: Pod, ns_labels: Mapping[str, str] | None = None) -> bool:
        if self.selector is None:
            return False
        return self.namespace_matches(owner_ns, pod.namespace, ns_labels) and self.selector.matches(pod.labels)


def _pod_affinity_terms(raw: Mapping[str, Any] | None, path: str, pod: Mapping[str, Any],
                        errors: list[str], names: tuple[str, str]) -> tuple[
        tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
    """(required, preferred) terms. A list holding a term kube cannot parse is dropped whole and its error
    appended to `errors` as `<names[i]>: <Go error>`, as framework.PodInfo.Update does."""
    if not raw:
        return (), ()
    pod_labels = ((pod.get("metadata") or {}).get("labels")) or {}

    def term(t: Mapping[str, Any], p: str, weight: int = 0) -> PodAffinityTerm:
        sel_raw = t.get("labelSelector")
        # matchLabelKeys / mismatchLabelKeys merge the incoming pod's label values into the selector.
        extra: list[dict[str, Any]] = []
        for key in t.get("matchLabelKeys") or []:
            if key in pod_labels:
                extra.append({"key": key, "operator": "In", "values": [pod_labels[key]]})
        for key in t.get("mismatchLabelKeys") or []:
            if key in pod_labels:
                extra.append({"key": key, "operator": "NotIn", "values": [pod_labels[key]]})
        if extra and sel_raw is not None:
            sel_raw = dict(sel_raw)
            sel_raw["matchExpressions"] = list(sel_raw.get("matchExpressions") or []) + extra
        sel = LabelSelector.parse_or_raise(sel_raw, f"{p}.labelSelector") if sel_raw is not None else None
        ns_sel_raw = t.get("namespaceSelector")
        tk = str(t.get("topologyKey") or "")  # the API server requires one; kube-scheduler does not check
        return PodAffinityTerm(sel, frozenset(t.get("namespaces") or []),
                               LabelSelector.parse_or_raise(ns_sel_raw, f"{p}.namespaceSelector")
                               if ns_sel_raw is not None else None, tk, weight)

    def parse_list(name: str, build: Callable[[], tuple[PodAffinityTerm, ...]]) -> tuple[PodAffinityTerm, ...]:
        try:
            return build()
        except SelectorError as exc:
            errors.append(f"{name}: {exc}")
            return ()

    req = parse_list(names[0], lambda: tuple(
        term(t, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, t in enumerate(raw.get("requiredDuringSchedulingIgnoredDuringExecution") or [])))
    pref = parse_list(names[1], lambda: tuple(
        term(w.get("podAffinityTerm") or {},
             f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm", int(w.get("weight", 0)))
        for i, w in enumerate(raw.get("preferredDuringSchedulingIgnoredDuringExecution") or [])))
    return req, pref


# --------------------------------------------------------------------------- taints


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(slots=True, frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint semantics (empty key + Exists tolerates everything)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


def tolerates_all(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


# --------------------------------------------------------------------------- pods


@dataclass(slots=True, frozen=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(slots=True, frozen=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(slots=True, frozen=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int | None
    node_affinity_policy: str  # Honor | Ignore
    node_taints_policy: str  # Honor | Ignore


def _owner_refs(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(OwnerRef(r.get("kind", ""), r.get("name", ""), r.get("uid", ""), bool(r.get("controller")))
                 for r in meta.get("ownerReferences") or [])


def _same_but(a: Any, b: Any, keys: tuple[str, ...]) -> bool:
    """Both mappings, equal except (maybe) at `keys`."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    if len(a) - sum(k in a for k in keys) != len(b) - sum(k in b for k in keys):
        return False
    for k, v in a.items():
        if k not in keys and (k not in b or b[k] != v):
            return False
    return True


#: what a bind (and the result annotation written with it) may change in a pod, see Pod.rebound
_BIND_METADATA = ("resourceVersion", "annotations")
_BIND_SPEC = ("nodeName",)
_BIND_TOP = ("metadata", "spec", "status")


class Pod:
    """A pod as the scheduler sees it. Build with `Pod.from_dict`; `raw` is the full object."""

    __slots__ = (
        "raw", "uid", "name", "namespace", "labels", "annotations", "node_name", "scheduler_name",
        "priority", "priority_class_name", "preemption_policy", "scheduling_gates", "tolerations",
        "node_selector", "required_node_affinity", "preferred_node_affinity", "affinity_required",
        "affinity_preferred", "anti_affinity_required", "anti_affinity_preferred", "spread_constraints",
        "host_ports", "images", "init_images", "requests", "non_zero_requests", "scoring_requests", "owner_refs",
        "affinity_error", "deletion_timestamp", "creation_timestamp", "phase", "nominated_node_name",
        "resource_version",
        "termination_grace_period", "key",
    )

    raw: dict[str, Any]
    uid: str
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    node_name: str
    scheduler_name: str
    priority: int
    priority_class_name: str
    preemption_policy: str
    scheduling_gates: tuple[str, ...]
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str]
    required_node_affinity: NodeSelector | None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...]
    affinity_required: tuple[PodAffinityTerm, ...]
    affinity_preferred: tuple[PodAffinityTerm, ...]
    anti_affinity_required: tuple[PodAffinityTerm, ...]
    anti_affinity_preferred: tuple[PodAffinityTerm, ...]
    affinity_error: str  # Go's text of the pod's unparseable affinity terms, "" when they all parse
    spread_constraints: tuple[SpreadConstraint, ...]
    host_ports: tuple[HostPort, ...]
    images: tuple[str, ...]
    init_images: tuple[str, ...]
    requests: dict[str, int]
    non_zero_requests: dict[str, int]
    scoring_requests: dict[str, int]
    owner_refs: tuple[OwnerRef, ...]
    deletion_timestamp: str | None
    creation_timestamp: str
    phase: str
    nominated_node_name: str
    resource_version: str
    termination_grace_period: int
    key: str

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Pod:
        """Parse once; raises InputError naming the field on malformed input."""
        meta, spec, status, name = _sections(raw, "Pod")
        p = cls.__new__(cls)
        p.raw = raw
        p.name = name
        p.namespace = meta.get("namespace") or "default"
        p.key = f"{p.namespace}/{name}"
        p.uid = meta.get("uid") or p.key
        p.labels = dict(meta.get("labels") or {})
        p.annotations = dict(meta.get("annotations") or {})
        p.owner_refs = _owner_refs(meta)
        p.deletion_timestamp = meta.get("deletionTimestamp")
        p.creation_timestamp = meta.get("creationTimestamp") or ""
        p.resource_version = str(meta.get("resourceVersion") or "")
        p.node_name = spec.get("nodeName") or ""
        p.scheduler_name = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        prio = spec.get("priority", 0)
        if prio is None:
            prio = 0
        if isinstance(prio, bool) or not isinstance(prio, int):
            raise InputError(f"Invalid value: {prio!r}: must be an integer", field="spec.priority", usage=False)
        p.priority = prio
        p.priority_class_name = spec.get("priorityClassName") or ""
        p.preemption_policy = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        p.scheduling_gates = tuple(g.get("name", "") for g in spec.get("schedulingGates") or [])
        p.tolerations = tuple(Toleration(t.get("key", "") or "", t.get("operator", "") or "",
                                         str(t.get("value", "") or ""), t.get("effect", "") or "")
                              for t in spec.get("tolerations") or [])
        p.node_selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        aff = spec.get("affinity") or {}
        na = aff.get("nodeAffinity") or {}
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        p.required_node_affinity = (NodeSelector(req, "spec.affinity.nodeAffinity."
                                                      "requiredDuringSchedulingIgnoredDuringExecution")
                                    if req is not None else None)
        p.preferred_node_affinity = tuple(
            PreferredSchedulingTerm(int(t.get("weight", 0)), NodeSelectorTerm(
                t.get("preference") or {},
                f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                f"[{i}]"))
            for i, t in enumerate(na.get("preferredDuringSchedulingIgnoredDuringExecution") or []))
        errs: list[str] = []
        aff_req, aff_pref = _pod_affinity_terms(aff.get("podAffinity"), "spec.affinity.podAffinity", raw, errs,
                                                ("requiredAffinityTerms", "preferredAffinityTerms"))
        anti_req, anti_pref = _pod_affinity_terms(aff.get("podAntiAffinity"), "spec.affinity.podAntiAffinity", raw,
                                                  errs, ("requiredAntiAffinityTerms", "preferredAntiAffinityTerms"))
        # PodInfo.Update's order: required affinity, required anti, preferred affinity, preferred anti.
        errs.sort(key=lambda e: ("requiredAffinityTerms", "requiredAntiAffinityTerms", "preferredAffinityTerms",
                                 "preferredAntiAffinityTerms").index(e.split(":", 1)[0]))
        p.affinity_required, p.affinity_preferred = aff_req, aff_pref
        p.anti_affinity_required, p.anti_affinity_preferred = anti_req, anti_pref
        p.affinity_error = errs[0] if len(errs) == 1 else ("[" + ", ".join(errs) + "]" if errs else "")
        spreads = []
        for i, c in enumerate(spec.get("topologySpreadConstraints") or []):
            path = f"spec.topologySpreadConstraints[{i}]"
            sel_raw = c.get("labelSelector")
            if sel_raw is not None and c.get("matchLabelKeys"):
                sel_raw = dict(sel_raw)
                sel_raw["matchExpressions"] = list(sel_raw.get("matchExpressions") or []) + [
                    {"key": k, "operator": "In", "values": [p.labels[k]]}
                    for k in c["matchLabelKeys"] if k in p.labels]
            skew = c.get("maxSkew")
            if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
                raise InputError(f"Invalid value: {skew!r}: must be greater than zero", field=f"{path}.maxSkew",
                                 usage=False)
            if not c.get("topologyKey"):
                raise InputError("Required value: can not be empty", field=f"{path}.topologyKey", usage=False)
            wu = c.get("whenUnsatisfiable")
            if wu not in ("DoNotSchedule", "ScheduleAnyway"):
                raise InputError(f'Unsupported value: "{wu}": supported values: "DoNotSchedule", "ScheduleAnyway"',
                                 field=f"{path}.whenUnsatisfiable", usage=False)
            spreads.append(SpreadConstraint(
                skew, c["topologyKey"], wu,
                LabelSelector.parse(sel_raw, f"{path}.labelSelector") if sel_raw is not None else None,
                c.get("minDomains"), c.get("nodeAffinityPolicy") or "Honor", c.get("nodeTaintsPolicy") or "Ignore"))
        p.spread_constraints = tuple(spreads)
        ports = []
        images = []
        for c in spec.get("initContainers") or []:
            # restartable (sidecar) init containers run for the pod's lifetime: their host ports count
            if isinstance(c, dict) and c.get("restartPolicy") == "Always":
                for port in c.get("ports") or []:
                    hp = port.get("hostPort") or 0
                    if hp:
                        ports.append(HostPort(port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP",
                                              int(hp)))
        for i, c in enumerate(spec.get("containers") or []):
            if not isinstance(c, dict):
                raise InputError("must be a mapping", field=f"spec.containers[{i}]", usage=False)
            if c.get("image"):
                images.append(str(c["image"]))
            for port in c.get("ports") or []:
                hp = port.get("hostPort") or 0
                if hp:
                    ports.append(HostPort(port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", int(hp)))
        p.images = tuple(images)
        p.init_images = tuple(str(c["image"]) for c in spec.get("initContainers") or [] if c.get("image"))
        p.host_ports = tuple(ports)
        # DRANodeAllocatableResources: an assigned pod's claims count on its node (kube's CalculateResource); a
        # pending pod's own requests, which Fit and the scorers read, never include them
        claims = None
        if p.node_name and counting_claim_statuses():
            claims = _claim_statuses_requests(status)
        p.requests = pod_requests(spec, claims=claims)
        p.non_zero_requests, p.scoring_requests = non_zero_pod_requests(spec, p.requests, claims)
        if claims:
            p.scoring_requests = non_zero_pod_requests(spec, pod_requests(spec))[1]
        p.phase = status.get("phase") or "Pending"
        p.nominated_node_name = status.get("nominatedNodeName") or ""
        p.termination_grace_period = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        return p

    def rebound(self, raw: dict[str, Any]) -> Pod | None:
        """`Pod.from_dict(raw)` without the parse, for `raw` being this pod's `self.raw` after a change that
        touched only what a bind changes: metadata.resourceVersion and .annotations, spec.nodeName and
        status. Every other field from_dict sets is a function of the rest of metadata and spec (labels
        included, which matchLabelKeys read), so it is taken over; annotations, nodeName, resourceVersion,
        phase and nominatedNodeName are read from `raw`. None (parse instead) when anything else differs."""
        old = self.raw
        meta, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status") or {}
        if not isinstance(meta, dict) or not isinstance(spec, dict) \
                or not _same_but(meta, old.get("metadata"), _BIND_METADATA) \
                or not _same_but(spec, old.get("spec"), _BIND_SPEC) or not _same_but(raw, old, _BIND_TOP) \
                or not isinstance(status, dict):
            return None
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict):
            return None
        p = Pod.__new__(Pod)
        for name in Pod.__slots__:
            setattr(p, name, getattr(self, name))
        for name in ("labels", "node_selector", "requests", "non_zero_requests", "scoring_requests"):
            setattr(p, name, dict(getattr(self, name)))  # parse gives each Pod its own dicts
        p.raw = raw
        p.annotations = dict(annotations)
        p.resource_version = str(meta.get("resourceVersion") or "")
        p.node_name = spec.get("nodeName") or ""
        p.phase = status.get("phase") or "Pending"
        p.nominated_node_name = status.get("nominatedNodeName") or ""
        return p

    def with_claim_statuses(self, statuses: list[dict[str, Any]]) -> Pod:
        """The pod as the scheduler assumes it with DRANodeAllocatableResources: `statuses` (what its claims take
        of the node, from DynamicResources' Filter) in status.nodeAllocatableResourceClaimStatuses and counted
        in the requests node accounting adds (kube's assume)."""
        raw = dict(self.raw)
        raw["status"] = {**(raw.get("status") or {}), "nodeAllocatableResourceClaimStatuses": statuses}
        p = Pod.__new__(Pod)
        for name in Pod.__slots__:
            setattr(p, name, getattr(self, name))
        p.raw = raw
        spec = raw.get("spec") or {}
        claims = claim_resources(statuses) or None
        p.requests = pod_requests(spec, claims=claims)
        p.non_zero_requests = non_zero_pod_requests(spec, p.requests, claims)[0]
        p.scoring_requests = dict(self.scoring_requests)
        return p

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.affinity_required or self.affinity_preferred or self.anti_affinity_required
                    or self.anti_affinity_preferred)

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def controller_ref(self) -> OwnerRef | None:
        for r in self.owner_refs:
            if r.controller:
                return r
        return None

    def __repr__(self) -> str:
        return f"Pod({self.key})"


# --------------------------------------------------------------------------- nodes


@dataclass(slots=True)
class ImageState:
    size: int
    num_nodes: int = 0


class Node:
    """A node as the scheduler sees it."""

    __slots__ = ("raw", "name", "uid", "labels", "annotations", "taints", "unschedulable", "allocatable",
                 "images", "resource_version", "ready", "declared_features")

    raw: dict[str, Any]
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]
    images: tuple[tuple[tuple[str, ...], int], ...]
    resource_version: str
    ready: bool
    #: status.declaredFeatures as the kubelet published it (NodeDeclaredFeatures plugin)
    declared_features: tuple[str, ...]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Node:
        meta, spec, status, name = _sections(raw, "Node")
        n = cls.__new__(cls)
        n.raw = raw
        n.name = name
        n.uid = meta.get("uid") or name
        n.labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        n.annotations = dict(meta.get("annotations") or {})
        n.resource_version = str(meta.get("resourceVersion") or "")
        taints = []
        for i, t in enumerate(spec.get("taints") or []):
            if not t.get("key"):
                raise InputError("Required value", field=f"spec.taints[{i}].key", usage=False)
            eff = t.get("effect")
            if eff not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise InputError(f'Unsupported value: "{eff}": supported values: "NoExecute", "NoSchedule", '
                                 f'"PreferNoSchedule"', field=f"spec.taints[{i}].effect", usage=False)
            taints.append(Taint(t["key"], str(t.get("value", "") or ""), eff))
        n.taints = tuple(taints)
        n.unschedulable = bool(spec.get("unschedulable"))
        alloc_src = status.get("allocatable")
        if alloc_src is None:
            alloc_src = status.get("capacity") or {}
        n.allocatable = {str(k): resource_amount(str(k), v, f"status.allocatable.{k}") for k, v in alloc_src.items()}
        n.images = tuple((tuple(img.get("names") or ()), int(img.get("sizeBytes") or 0))
                         for img in status.get("images") or [])
        ready = True
        for c in status.get("conditions") or []:
            if c.get("type") == "Ready":
                ready = c.get("status") == "True"
        n.ready = ready
        n.declared_features = _declared_features(status.get("declaredFeatures"))
        return n

    def __repr__(self) -> str:
        return f"Node({self.name})"


def _claim_statuses_requests(status: dict[str, Any]) -> dict[str, int] | None:
    """What status.nodeAllocatableResourceClaimStatuses adds to the pod's node accounting (None: nothing)."""
    statuses = status.get("nodeAllocatableResourceClaimStatuses")
    if not statuses or not isinstance(statuses, list):
        return None
    try:
        return claim_resources([s for s in statuses if isinstance(s, dict)]) or None
    except InputError as exc:
        raise InputError(str(exc), field="status.nodeAllocatableResourceClaimStatuses", usage=False) from None


def _declared_features(value: Any) -> tuple[str, ...]:
    """status.declaredFeatures, held to the API server's rule (strings, sorted, no duplicates) so the
    embedded cluster cannot hold a node the real one would refuse."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise InputError("Invalid value: must be a list of strings", field="status.declaredFeatures", usage=False)
    for i in range(1, len(value)):
        if value[i] == value[i - 1]:
            raise InputError(f'Duplicate value: "{value[i]}"', field=f"status.declaredFeatures[{i}]", usage=False)
        if value[i] < value[i - 1]:
            raise InputError(f'Invalid value: "{value[i]}": list must be sorted alphabetically',
                             field=f"status.declaredFeatures[{i}]", usage=False)
    return tuple(value)


def normalized_image_name(name: str) -> str:
    """Append ':latest' when the image has no tag, as ImageLocality does."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


@dataclass(slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PodDisruptionBudget:
        meta = raw.get("metadata") or {}
        if not meta.get("name"):
            raise InputError("Required value: name is required", field="metadata.name", usage=False)
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        sel = spec.get("selector")
        return cls(meta.get("namespace") or "default", meta["name"],
                   LabelSelector.parse(sel, "spec.selector") if sel is not None else None,
                   int(status.get("disruptionsAllowed", 0) or 0),
                   frozenset((status.get("disruptedPods") or {}).keys()))

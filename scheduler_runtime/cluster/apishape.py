"""The Go types of the Pod and Node fields ksched reads, checked when a snapshot or pods file is loaded.

kube-apiserver decodes an object into its Go struct before anything else looks at it: a list where
`spec.tolerations[0]` needs an object, a number where `metadata.labels` needs a map of strings, is a
400 "cannot be handled as a Pod" and the object never exists. Files loaded into the in-memory cluster get
the same treatment here, so the scheduler never meets a shape kube would not have stored. Only fields
ksched reads are described; other fields pass through unchecked (the API server knows more fields).
The check also refuses what kube-apiserver's validation refuses and the scheduler cannot work without
(a Pod without containers).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..fielderrors import go_value

STR, INT, BOOL, NUM, QTY = "string", "integer", "boolean", "number", "quantity"
ANY = "any"


def obj(**fields: Any) -> dict[str, Any]:
    return {"": "object", **fields}


def lst(item: Any) -> dict[str, Any]:
    return {"": "list", "item": item}


def smap(value: Any) -> dict[str, Any]:
    return {"": "map", "value": value}


_REQ = obj(key=STR, operator=STR, values=lst(STR))
SELECTOR = obj(matchLabels=smap(STR), matchExpressions=lst(_REQ))
NODE_SELECTOR_TERM = obj(matchExpressions=lst(_REQ), matchFields=lst(_REQ))
AFFINITY_TERM = obj(labelSelector=SELECTOR, namespaceSelector=SELECTOR, namespaces=lst(STR), topologyKey=STR,
                    matchLabelKeys=lst(STR), mismatchLabelKeys=lst(STR))
_POD_AFFINITY = obj(requiredDuringSchedulingIgnoredDuringExecution=lst(AFFINITY_TERM),
                    preferredDuringSchedulingIgnoredDuringExecution=lst(obj(weight=INT, podAffinityTerm=AFFINITY_TERM)))
AFFINITY = obj(
    nodeAffinity=obj(requiredDuringSchedulingIgnoredDuringExecution=obj(nodeSelectorTerms=lst(NODE_SELECTOR_TERM)),
                     preferredDuringSchedulingIgnoredDuringExecution=lst(obj(weight=INT,
                                                                             preference=NODE_SELECTOR_TERM))),
    podAffinity=_POD_AFFINITY, podAntiAffinity=_POD_AFFINITY)
RESOURCES = obj(requests=smap(QTY), limits=smap(QTY), claims=lst(obj(name=STR, request=STR)))
CONTAINER = obj(name=STR, image=STR, resources=RESOURCES, restartPolicy=STR,
                ports=lst(obj(name=STR, containerPort=INT, hostPort=INT, protocol=STR, hostIP=STR)))
METADATA = obj(name=STR, namespace=STR, generateName=STR, uid=STR, resourceVersion=STR, labels=smap(STR),
               annotations=smap(STR), creationTimestamp=STR, deletionTimestamp=STR, finalizers=lst(STR),
               ownerReferences=lst(obj(apiVersion=STR, kind=STR, name=STR, uid=STR, controller=BOOL)))
CONDITION = obj(type=STR, status=STR, reason=STR, message=STR, lastTransitionTime=STR, lastProbeTime=STR)
POD = obj(
    apiVersion=STR, kind=STR, metadata=METADATA,
    spec=obj(containers=lst(CONTAINER), initContainers=lst(CONTAINER), nodeName=STR, nodeSelector=smap(STR),
             affinity=AFFINITY, schedulerName=STR, priority=INT, priorityClassName=STR, preemptionPolicy=STR,
             tolerations=lst(obj(key=STR, operator=STR, value=STR, effect=STR, tolerationSeconds=INT)),
             topologySpreadConstraints=lst(obj(maxSkew=INT, topologyKey=STR, whenUnsatisfiable=STR,
                                               labelSelector=SELECTOR, minDomains=INT, nodeAffinityPolicy=STR,
                                               nodeTaintsPolicy=STR, matchLabelKeys=lst(STR))),
             overhead=smap(QTY), resources=RESOURCES, schedulingGates=lst(obj(name=STR)), hostNetwork=BOOL,
             volumes=lst(obj(name=STR)), resourceClaims=lst(obj(name=STR))),
    status=obj(phase=STR, nominatedNodeName=STR, conditions=lst(CONDITION)))
NODE = obj(
    apiVersion=STR, kind=STR, metadata=METADATA,
    spec=obj(unschedulable=BOOL, taints=lst(obj(key=STR, value=STR, effect=STR, timeAdded=STR)), podCIDR=STR,
             providerID=STR),
    status=obj(capacity=smap(QTY), allocatable=smap(QTY), conditions=lst(CONDITION),
               images=lst(obj(names=lst(STR), sizeBytes=INT)), declaredFeatures=lst(STR)))
SHAPES = {"Pod": POD, "Node": NODE}
#: clientcmd's v1 Config (kubeconfig), the fields its Go struct types
_NAMED = {"name": STR}
KUBECONFIG = obj(
    apiVersion=STR, kind=STR, **{"current-context": STR}, preferences=obj(colors=BOOL),
    clusters=lst(obj(**_NAMED, cluster=obj(server=STR, **{
        "certificate-authority": STR, "certificate-authority-data": STR, "insecure-skip-tls-verify": BOOL,
        "tls-server-name": STR, "proxy-url": STR, "disable-compression": BOOL}))),
    contexts=lst(obj(**_NAMED, context=obj(cluster=STR, user=STR, namespace=STR))),
    users=lst(obj(**_NAMED, user=obj(token=STR, tokenFile=STR, username=STR, password=STR, **{
        "client-certificate": STR, "client-certificate-data": STR, "client-key": STR, "client-key-data": STR,
        "as": STR, "as-uid": STR, "as-groups": lst(STR)},
        exec=obj(command=STR, args=lst(STR), apiVersion=STR, env=lst(obj(name=STR, value=STR))),
        **{"auth-provider": obj(name=STR, config=smap(STR))}))))

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _kind_of(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _fail(path: str, value: Any, want: str) -> InputError:
    shown = go_value(value) if not isinstance(value, dict | list) else ("{...}" if isinstance(value, dict) else "[...]")
    return InputError(f"Invalid value: {shown[:80]}: cannot unmarshal {_kind_of(value)} into a field of type {want}",
                      field=path or "<root>", usage=False)


def check(value: Any, shape: Any, path: str = "") -> None:
    """Raise InputError(field=path) at the first value whose type the Go struct would not decode; null list
    elements and map values are replaced by their zero value in place, as decoding does."""
    if value is None or shape == ANY:
        return  # null decodes to the zero value
    if shape == STR:
        if not isinstance(value, str):
            raise _fail(path, value, "string")
    elif shape == INT:
        if isinstance(value, bool) or not isinstance(value, int):
            if not (isinstance(value, float) and value.is_integer()):
                raise _fail(path, value, "integer")
            value = int(value)
        if not _INT64[0] <= value <= _INT64[1]:
            raise _fail(path, value, "int64")
    elif shape == BOOL:
        if not isinstance(value, bool):
            raise _fail(path, value, "boolean")
    elif shape == QTY:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _fail(path, value, "quantity (string or number)")
    elif shape[""] == "object":
        if not isinstance(value, dict):
            raise _fail(path, value, "object")
        for key, sub in shape.items():
            if key and key in value:
                check(value[key], sub, f"{path}.{key}" if path else key)
    elif shape[""] == "list":
        if not isinstance(value, list):
            raise _fail(path, value, "array")
        for i, item in enumerate(value):
            if item is None:  # Go decodes a null element to the zero value of the element type
                value[i] = item = _zero(shape["item"])
            check(item, shape["item"], f"{path}[{i}]")
    elif shape[""] == "map":
        if not isinstance(value, dict):
            raise _fail(path, value, "object")
        for key, item in value.items():
            if item is None:
                value[key] = item = _zero(shape["value"])
            check(item, shape["value"], f"{path}.{key}")


def _zero(shape: Any) -> Any:
    """The value Go's decoder leaves for null: "" / 0 / false / "0" / {} / []."""
    if isinstance(shape, dict):
        return {} if shape[""] in ("object", "map") else []
    return {STR: "", INT: 0, BOOL: False, NUM: 0, QTY: "0"}.get(shape)


def check_object(raw: dict[str, Any]) -> None:
    """The kinds ksched schedules with must decode as kube would decode them; see the module docstring."""
    kind = raw.get("kind")
    shape = SHAPES.get(kind) if isinstance(kind, str) else None
    if shape is None:
        return
    check(raw, shape)
    if kind == "Pod" and not (raw.get("spec") or {}).get("containers"):
        raise InputError("Required value: a Pod needs at least one container (kube-apiserver refuses it)",
                         field="spec.containers", usage=False)

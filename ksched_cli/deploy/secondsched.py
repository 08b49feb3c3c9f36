"""Run a ksched scheduler beside the default one: a Deployment with its ServiceAccount, RBAC and ConfigMap.

Objects are server-side applied (field manager `ksched`), so re-applying the same input changes nothing
and edits made by others to fields ksched does not set are kept. Undeploy finds objects by label.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.comments import CommentedMap

from scheduler_runtime.errors import InputError, KschedError

from . import files, render
from .manifest import load_roundtrip
from .rbac import ANNOTATION_PREFIXES, DEFAULT_LEASE, RUNTIME_RULES, lease_rules, plugin_rules, service_account_user
from .staticplan import validate_config

FIELD_MANAGER = "ksched"
DEFAULT_NAME = "ksched-scheduler"
DEFAULT_SCHEDULER = "default-scheduler"
SECURE_PORT = 10259
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

#: kind -> (API prefix, plural, namespaced)
KINDS: dict[str, tuple[str, str, bool]] = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ValidatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("/apis/admissionregistration.k8s.io/v1",
                                         "validatingadmissionpolicybindings", False),
}
#: delete order for undeploy: stop the scheduler first, then what it used
UNDEPLOY_ORDER = ["Deployment", "ConfigMap", "RoleBinding", "Role", "ClusterRoleBinding", "ClusterRole",
                  "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy", "ServiceAccount"]


class RolloutError(KschedError):
    """Applied, but the Deployment did not become available; the message says what the pods report."""


def labels_for(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "ksched", "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": "scheduler", "app.kubernetes.io/managed-by": "ksched"}


def selector_for(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "ksched", "app.kubernetes.io/instance": name}


def label_selector(name: str) -> str:
    return f"app.kubernetes.io/managed-by=ksched,app.kubernetes.io/instance={name}"


@dataclass
class SecondScheduler:
    name: str
    namespace: str
    image: str
    replicas: int
    config_text: str
    scheduler_names: list[str]
    leader_elect: bool
    lease: tuple[str, str]
    notes: list[str] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    plugin_rbac: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def check_name(name: str, flag: str = "--name") -> None:
    if not _DNS_LABEL.match(name) or len(name) > 40:
        raise InputError(f"{name!r} is not a valid name: use lowercase letters, digits and '-', at most 40 "
                         f"characters (objects are named after it, e.g. {name}-extras)", field=flag, usage=True)


def check_namespace_name(namespace: str, flag: str = "--namespace") -> None:
    """A namespace name is a DNS-1123 label (at most 63 characters), as the API server requires."""
    from scheduler_runtime.fielderrors import invalid

    if len(namespace) > 63:
        raise InputError(invalid(namespace, "must be no more than 63 characters"), field=flag, usage=True)
    if not _DNS_LABEL.match(namespace):
        raise InputError(invalid(namespace, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                            "characters or '-', and must start and end with an alphanumeric "
                                            "character (e.g. 'my-name', or '123-abc')"), field=flag, usage=True)


def prepare(name: str, namespace: str, image: str, config: Path, replicas: int, registry: Any) -> SecondScheduler:
    """Validate the input, make the config safe to run beside the default scheduler, render the objects."""
    check_name(name)
    check_namespace_name(namespace)
    if not image or not image.strip() or any(ch.isspace() for ch in image):
        raise InputError("must be a non-empty image reference without spaces, e.g. registry.example.com/ksched:v1 "
                         "(the tag `ksched build` printed)", field="--image", usage=True)
    if replicas < 1:
        raise InputError(f"must be at least 1, got {replicas}", field="--replicas", usage=True)
    where = str(config)
    raw, _ = validate_config(config, registry)
    text = files.read_bytes(config, "config").decode("utf-8")
    loaded = load_roundtrip(config, text)
    doc = loaded.doc
    notes: list[str] = []

    profiles = doc.get("profiles")
    if not profiles:
        doc["profiles"] = profiles = [CommentedMap([("schedulerName", name)])]
        notes.append(f"profiles[0].schedulerName set to {name!r} (the config has no profiles: the default profile "
                     f"runs under this name)")
    for i, prof in enumerate(profiles):
        sn = prof.get("schedulerName")
        if not sn:
            prof.insert(0, "schedulerName", name)
            notes.append(f"profiles[{i}].schedulerName set to {name!r} (it was not set, and {DEFAULT_SCHEDULER!r} "
                         f"belongs to the default scheduler)")
        elif sn == DEFAULT_SCHEDULER:
            raise InputError(f'"{DEFAULT_SCHEDULER}" is the default scheduler\'s name: two schedulers would both take '
                             f'its pods; set a name of its own (e.g. {name}) or leave it out to use --name',
                             file=where, field=f"profiles[{i}].schedulerName", usage=False)

    le = doc.get("leaderElection")
    if not isinstance(le, dict):
        le = CommentedMap()
        doc["leaderElection"] = le
    if le.get("leaderElect") is None:
        le["leaderElect"] = replicas > 1
        notes.append(f"leaderElection.leaderElect set to {'true' if replicas > 1 else 'false'} "
                     f"({replicas} replica{'s' if replicas > 1 else ''})")
    elif le.get("leaderElect") is False and replicas > 1:
        raise InputError(f"false with --replicas {replicas}: every replica would schedule and they would race for "
                         f"the same pods; set it to true or use --replicas 1", file=where,
                         field="leaderElection.leaderElect", usage=False)
    leader_elect = bool(le.get("leaderElect"))
    if leader_elect:
        lease_name = le.get("resourceName")
        if not lease_name:
            le["resourceName"] = name
            notes.append(f"leaderElection.resourceName set to {name!r} (the default {DEFAULT_LEASE!r} is the default "
                         f"scheduler's lease)")
        elif lease_name == DEFAULT_LEASE:
            raise InputError(f'"{DEFAULT_LEASE}" is the default scheduler\'s lease: the two would take turns being '
                             f'leader; use a name of its own (e.g. {name}) or leave it out', file=where,
                             field="leaderElection.resourceName", usage=False)
        if not le.get("resourceNamespace"):
            le["resourceNamespace"] = namespace
    lease = (str(le.get("resourceName") or name), str(le.get("resourceNamespace") or namespace))

    cc = doc.get("clientConnection")
    if isinstance(cc, dict) and cc.get("kubeconfig"):
        notes.append(f"clientConnection.kubeconfig ({cc['kubeconfig']}) dropped: in the cluster the scheduler uses "
                     f"its ServiceAccount")
        del cc["kubeconfig"]
        if not cc:
            del doc["clientConnection"]

    final = loaded.dump()
    final_doc = yaml.safe_load(final)
    from scheduler_runtime.config import ConfigError
    from scheduler_runtime.config.loader import build

    try:
        cfg = build(final_doc, registry, where)
    except ConfigError as exc:  # our own edits must not make a valid file invalid
        raise InputError(f"after adjusting for a second scheduler: {exc.errors[0]}", file=where, usage=False) from None
    s = SecondScheduler(name=name, namespace=namespace, image=image, replicas=replicas, config_text=final,
                        scheduler_names=[p.scheduler_name for p in cfg.profiles], leader_elect=leader_elect,
                        lease=lease, notes=notes, plugin_rbac=plugin_rules(cfg, registry))
    _ = raw
    s.objects = render_objects(s)
    return s


def render_objects(s: SecondScheduler) -> list[dict[str, Any]]:
    labels = labels_for(s.name)
    subject = {"kind": "ServiceAccount", "name": s.name, "namespace": s.namespace}
    rules = list(RUNTIME_RULES) + [r for _, r in s.plugin_rbac]
    why = "plugins: " + ", ".join(dict.fromkeys(p for p, _ in s.plugin_rbac))
    lease = {"namespace": s.lease[1], "rules": lease_rules(s.lease[0])} if s.leader_elect else None
    objs = render.render("serviceaccount.yaml.j2", name=s.name, namespace=s.namespace, labels=labels)
    objs += render.render("rbac.yaml.j2", name=s.name, labels=labels, subject=subject, bind_system_roles=True,
                          extra_rules=rules, why=why, lease=lease)
    objs += render.render("podwrites-policy.yaml.j2", name=s.name, labels=labels,
                          user=service_account_user(s.namespace, s.name), prefixes=list(ANNOTATION_PREFIXES))
    objs += render.render("configmap.yaml.j2", name=s.name, namespace=s.namespace, labels=labels,
                          config_text=s.config_text)
    objs += render.render("deployment.yaml.j2", name=s.name, namespace=s.namespace, labels=labels,
                          selector=selector_for(s.name), replicas=s.replicas, image=s.image, port=SECURE_PORT,
                          leader_elect=s.leader_elect,
                          config_hash=hashlib.sha256(s.config_text.encode()).hexdigest()[:16])
    return objs


def static_pod_rbac(rules: list[tuple[str, dict[str, Any]]], lease: tuple[str, str] | None = None) \
        -> list[dict[str, Any]]:
    """RBAC for a static-pod ksched, bound to kube-scheduler's own user (it has system:kube-scheduler already)."""
    who = ", ".join(dict.fromkeys(p for p, _ in rules))
    lease_obj = {"namespace": lease[1], "rules": lease_rules(lease[0])} if lease else None
    return render.render("rbac.yaml.j2", name="ksched-static-scheduler", labels=labels_for("ksched-static-scheduler"),
                         subject={"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                                  "name": "system:kube-scheduler"},
                         bind_system_roles=False, extra_rules=[r for _, r in rules], why=who, lease=lease_obj)


# ------------------------------------------------------------------------------------------ API


def object_path(obj: dict[str, Any], with_name: bool = True) -> str:
    kind = obj.get("kind", "")
    if kind not in KINDS:
        raise KschedError(f"cannot apply kind {kind!r}", usage=False)
    prefix, plural, namespaced = KINDS[kind]
    md = obj.get("metadata") or {}
    path = prefix + (f"/namespaces/{md['namespace']}" if namespaced else "") + f"/{plural}"
    return path + (f"/{md['name']}" if with_name else "")


def describe(obj: dict[str, Any]) -> str:
    md = obj.get("metadata") or {}
    ns = f" -n {md['namespace']}" if md.get("namespace") else ""
    return f"{obj.get('kind')}/{md.get('name')}{ns}"


def check_namespace(client: Any, namespace: str) -> None:
    resp = client.request("GET", f"/api/v1/namespaces/{namespace}")
    if resp.status == 404:
        raise InputError(f"namespace {namespace!r} does not exist: create it (kubectl create namespace {namespace}) "
                         f"or use --namespace kube-system", field="--namespace", usage=False)
    if not resp.ok:
        raise client.error(resp, "GET", f"/api/v1/namespaces/{namespace}")


def apply_objects(client: Any, objects: list[dict[str, Any]], dry_run: bool = False,
                  report: Callable[[dict[str, Any], str], None] | None = None) -> list[tuple[dict[str, Any], str]]:
    """Server-side apply each object; outcome is created, configured or unchanged (by resourceVersion)."""
    out = []
    for obj in objects:
        path = object_path(obj)
        before = client.request("GET", path)
        if before.status not in (200, 404):
            raise client.error(before, "GET", path)
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        result = client.call("PATCH", path, body=obj, content_type="application/apply-patch+yaml", query=query)
        if before.status == 404:
            outcome = "created"
        else:
            rv0 = (before.json().get("metadata") or {}).get("resourceVersion")
            outcome = "unchanged" if rv0 == (result.get("metadata") or {}).get("resourceVersion") else "configured"
        if dry_run:
            outcome += " (server dry run)"
        out.append((obj, outcome))
        if report is not None:
            report(obj, outcome)
    return out


_BAD_WAITING = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                "InvalidImageName", "CreateContainerError", "RunContainerError"}


@dataclass
class RolloutStatus:
    desired: int = 0
    updated: int = 0
    available: int = 0
    old: int = 0
    done: bool = False
    problem: str = ""


def rollout_status(client: Any, namespace: str, name: str) -> RolloutStatus:
    d = client.call("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    spec, st, md = d.get("spec") or {}, d.get("status") or {}, d.get("metadata") or {}
    r = RolloutStatus(desired=int(spec.get("replicas", 1)), updated=int(st.get("updatedReplicas", 0)),
                      available=int(st.get("availableReplicas", 0)))
    r.old = max(0, int(st.get("replicas", 0)) - r.updated)
    r.done = (int(st.get("observedGeneration", 0)) >= int(md.get("generation", 1)) and r.updated >= r.desired
              and r.available >= r.desired and r.old == 0)
    for cond in st.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            r.problem = f"Deployment progress deadline exceeded: {cond.get('message', '')}"
        if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
            r.problem = f"cannot create pods: {cond.get('message', '')}"
    sel = ",".join(f"{k}={v}" for k, v in selector_for(name).items())
    pods = client.call("GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": sel})
    for pod in pods.get("items") or []:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _BAD_WAITING:
                last = ((cs.get("lastState") or {}).get("terminated") or {})
                detail = waiting.get("message") or last.get("message") or last.get("reason") or ""
                r.problem = (f"pod {pod['metadata']['name']}: {waiting['reason']}" + (f": {detail}" if detail else ""))
    return r


def wait_rollout(client: Any, namespace: str, name: str, timeout: float,
                 progress: Callable[[RolloutStatus], None] | None = None, interval: float = 1.0) -> RolloutStatus:
    """Poll until the Deployment is fully available; RolloutError on a failing pod or after `timeout`."""
    deadline = time.monotonic() + timeout
    hint = (f"see `kubectl -n {namespace} describe deployment {name}` and `kubectl -n {namespace} logs "
            f"deploy/{name}`; docs/deploy.md#troubleshooting")
    while True:
        st = rollout_status(client, namespace, name)
        if progress is not None:
            progress(st)
        if st.done:
            return st
        if st.problem and ("CrashLoopBackOff" in st.problem or "Image" in st.problem or "deadline" in st.problem
                           or "cannot create" in st.problem or "Config" in st.problem):
            raise RolloutError(f"rollout of {name} failed: {st.problem} ({hint})")
        if time.monotonic() >= deadline:
            raise RolloutError(f"rollout of {name} not finished after {timeout:.0f}s: {st.available}/{st.desired} "
                               f"available{'; ' + st.problem if st.problem else ''} ({hint}; or pass --no-wait)")
        time.sleep(interval)


def find_deployed(client: Any, name: str, namespace: str) -> list[dict[str, Any]]:
    """Objects labelled as this ksched deployment, in undeploy order."""
    sel = label_selector(name)
    found: list[dict[str, Any]] = []
    for kind in UNDEPLOY_ORDER:
        prefix, plural, namespaced = KINDS[kind]
        # Roles may sit in the lease's namespace; everything else namespaced lives in --namespace
        if namespaced and kind not in ("Role", "RoleBinding"):
            path = f"{prefix}/namespaces/{namespace}/{plural}"
        else:
            path = f"{prefix}/{plural}"
        for item in client.call("GET", path, query={"labelSelector": sel}).get("items") or []:
            item.setdefault("kind", kind)
            found.append(item)
    return found


def delete_objects(client: Any, objects: list[dict[str, Any]],
                   report: Callable[[dict[str, Any], str], None] | None = None) -> None:
    for obj in objects:
        path = object_path(obj)
        resp = client.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                    "propagationPolicy": "Background"})
        if resp.status == 404:
            outcome = "already gone"
        elif resp.ok:
            outcome = "deleted"
        else:
            raise client.error(resp, "DELETE", path)
        if report is not None:
            report(obj, outcome)

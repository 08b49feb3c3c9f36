"""The embedded resourceclaim controller finds a deleted pod's claims through PodClaimIndex: the index must name
exactly the claims a scan of the namespace would act on, in the store's order, through creates, rewrites and
deletes."""

from __future__ import annotations

import random
from typing import Any

from scheduler_runtime.cluster.memory import MemoryCluster


def _claim(name: str, ns: str, owner: str | None = None, reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": f"p-{owner}", "uid": owner,
                                    "controller": True}]
    c: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
                         "spec": {"devices": {"requests": []}}}
    if reserved:
        c["status"] = {"allocation": {"devices": {"results": []}},
                       "reservedFor": [{"resource": "pods", "name": f"p-{u}", "uid": u} for u in reserved]}
    return c


def _scan(cluster: MemoryCluster, uid: str, ns: str) -> list[str]:
    """What the controller acted on before the index: every claim of the namespace naming the pod."""
    out = []
    for key, c in cluster._objects.get("resourceclaims", {}).items():
        if not key.startswith(f"{ns}/"):
            continue
        owners = [r for r in c["metadata"].get("ownerReferences") or [] if r.get("controller")]
        reserved = (c.get("status") or {}).get("reservedFor") or []
        if any(r["uid"] == uid for r in owners) or any(r["uid"] == uid for r in reserved):
            out.append(key)
    return out


def test_index_names_what_a_scan_finds_in_store_order() -> None:
    rnd = random.Random(7)
    cluster = MemoryCluster()
    uids = [f"u{i}" for i in range(6)]
    names = [f"c{i}" for i in range(12)]
    for step in range(400):
        ns = rnd.choice(["a", "b"])
        name = rnd.choice(names)
        key = f"{ns}/{name}"
        exists = key in cluster._objects.get("resourceclaims", {})
        op = rnd.random()
        if not exists:
            cluster.create(_claim(name, ns, rnd.choice([None, *uids]),
                                  tuple(rnd.sample(uids, rnd.randint(0, 2)))))
        elif op < 0.3:
            cluster.delete("resourceclaims", name, ns)
        else:
            new = _claim(name, ns, rnd.choice([None, *uids]), tuple(rnd.sample(uids, rnd.randint(0, 3))))
            new["metadata"]["uid"] = cluster._objects["resourceclaims"][key]["metadata"]["uid"]
            cluster.update(new)
        for uid in uids:
            for n in ("a", "b"):
                assert cluster._claim_index.keys_for(uid, f"{n}/") == _scan(cluster, uid, n), (step, uid, n)


def test_deleting_a_pod_releases_only_the_claims_naming_it() -> None:
    cluster = MemoryCluster()
    pod = cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
                          "spec": {"containers": [{"name": "c", "image": "i"}]}})
    uid = pod["metadata"]["uid"]
    cluster.create(_claim("owned", "a", owner=uid))
    cluster.create(_claim("shared", "a", reserved=(uid, "other")))
    cluster.create(_claim("alone", "a", reserved=(uid,)))
    cluster.create(_claim("elsewhere", "a", reserved=("other",)))
    cluster.delete("pods", "p", "a")
    claims = cluster._objects["resourceclaims"]
    assert "a/owned" not in claims
    assert [r["uid"] for r in claims["a/shared"]["status"]["reservedFor"]] == ["other"]
    assert "allocation" not in claims["a/alone"]["status"]
    assert [r["uid"] for r in claims["a/elsewhere"]["status"]["reservedFor"]] == ["other"]
    assert cluster._claim_index.keys_for(uid, "a/") == []

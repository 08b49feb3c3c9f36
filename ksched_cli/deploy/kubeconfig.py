"""The kubeconfig the ksched static pod reads: it must be self-contained and readable by the image's user.

kubeadm writes /etc/kubernetes/scheduler.conf mode 0600, owned by root: kube-scheduler runs as root and reads
it; the ksched image runs as uid 65532 and would crash-loop with "permission denied". Making that file
world-readable would hand kube-scheduler's client key to every user of the node, and changing its owner
changes a file kubeadm manages (and kube-scheduler needs again after a rollback). So `deploy --static-pod`
installs a private copy instead, beside the config it installs: the same credentials, with any file it
references (client certificate and key, CA, token file) inlined, mode 0600, owned by the container's user.
Only that user and root can read it; kubeadm's file is not touched; `--rollback` removes the copy.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler_runtime.errors import InputError

from . import files

#: name of the private copy, in the folder of --config-dest
PRIVATE_NAME = "ksched-scheduler.conf"
#: the volume that mounts it into the scheduler container
VOLUME_NAME = "ksched-kubeconfig"
#: kubeconfigs are a few KiB; client certificates inlined keep them far below this
MAX_BYTES = 1 << 20

#: (section, entry key, field) -> field that holds the same data inline
_FILE_FIELDS = (("clusters", "cluster", "certificate-authority", "certificate-authority-data"),
                ("users", "user", "client-certificate", "client-certificate-data"),
                ("users", "user", "client-key", "client-key-data"),
                ("users", "user", "tokenFile", "token"))


@dataclass
class Reference:
    field: str  # field path inside the kubeconfig, e.g. users[0].user.client-key
    path: Path  # as the host sees it (relative paths are relative to the kubeconfig's folder)


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"not a readable kubeconfig ({type(exc).__name__})", file=str(path), usage=True) from None
    if not isinstance(doc, dict) or doc.get("kind", "Config") != "Config":
        raise InputError("expected a kubeconfig (kind: Config)", file=str(path), field="kind", usage=False)
    return doc


def references(path: Path, doc: dict[str, Any]) -> list[Reference]:
    """The files a kubeconfig names instead of holding their contents."""
    out = []
    for section, key, fname, _ in _FILE_FIELDS:
        for i, item in enumerate(doc.get(section) or []):
            entry = item.get(key) if isinstance(item, dict) else None
            value = entry.get(fname) if isinstance(entry, dict) else None
            if isinstance(value, str) and value:
                p = Path(value)
                out.append(Reference(f"{section}[{i}].{key}.{fname}", p if p.is_absolute() else path.parent / p))
    return out


def plugins(doc: dict[str, Any]) -> list[str]:
    """Users that authenticate through a program (exec) or an auth-provider: not something a copy can hold."""
    return [f"users[{i}].user.{k}" for i, u in enumerate(doc.get("users") or [])
            if isinstance(u, dict) and isinstance(u.get("user"), dict)
            for k in ("exec", "auth-provider") if u["user"].get(k)]


def read(path: Path) -> tuple[bytes, dict[str, Any]]:
    data = files.read_limited(path, "kubeconfig", MAX_BYTES)
    return data, _parse(path, data)


def self_contained(path: Path, data: bytes, doc: dict[str, Any]) -> bytes:
    """The kubeconfig with every referenced file inlined; the original bytes when it references none."""
    refs = references(path, doc)
    if not refs:
        return data
    for section, key, fname, inline in _FILE_FIELDS:
        for i, item in enumerate(doc.get(section) or []):
            entry = item.get(key) if isinstance(item, dict) else None
            if not isinstance(entry, dict) or not entry.get(fname):
                continue
            p = Path(str(entry[fname]))
            p = p if p.is_absolute() else path.parent / p
            raw = files.read_limited(p, f"file named by {section}[{i}].{key}.{fname} of {path}", MAX_BYTES)
            del entry[fname]
            entry[inline] = raw.decode("utf-8").strip() if inline == "token" else base64.b64encode(raw).decode()
    return yaml.safe_dump(doc, sort_keys=False).encode()


__all__ = ["MAX_BYTES", "PRIVATE_NAME", "VOLUME_NAME", "Reference", "plugins", "read", "references",
           "self_contained"]

"""The text `kube-scheduler --write-config-to` writes, byte for byte (kube-scheduler v1.37.2; the 1.36 and 1.35
Plugins struct by `--emulated-version`).

kube-scheduler serialises its defaulted v1 config through sigs.k8s.io/yaml: JSON field order becomes
alphabetical, every extension point of the Plugins struct is written (`filter: {}` when empty), every
enabled or disabled plugin carries its `weight` (0 when unset: the field is not omitempty in the encoder
it goes through), and strings that need quoting get double quotes. ksched's own defaulted document
(loader.default_document) leaves empty points out; `written_document` adds what kube writes."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ..kubeversion import KUBE_MINOR
from .model import plugins_fields


def written_points(minor: str = KUBE_MINOR) -> list[str]:
    """The Plugins struct of kubescheduler.config.k8s.io/v1 in kube `minor`, in the order kube writes it
    (alphabetical)."""
    return sorted(plugins_fields(minor))


def written_document(raw: dict[str, Any], minor: str = KUBE_MINOR) -> dict[str, Any]:
    """`raw` (a defaulted v1 document) with what kube-scheduler `minor` adds when it writes the config."""
    d = copy.deepcopy(raw)
    for prof in d.get("profiles") or []:
        if not isinstance(prof, dict):
            continue
        pcs = prof.get("pluginConfig")
        if pcs:  # kube writes the defaulted args sorted by plugin name
            prof["pluginConfig"] = sorted(pcs, key=lambda pc: str(pc.get("name", "")) if isinstance(pc, dict) else "")
        else:
            prof.pop("pluginConfig", None)  # omitempty
        plugins = prof.setdefault("plugins", {})
        for point in written_points(minor):
            ps = plugins.setdefault(point, {})
            for key in ("enabled", "disabled"):
                if key in ps and not ps[key]:
                    del ps[key]  # omitempty
                for e in ps.get(key) or []:
                    if isinstance(e, dict):
                        e.setdefault("weight", 0)
        prof["plugins"] = {k: plugins[k] for k in sorted(plugins)}
    return d


class _GoStyleDumper(yaml.SafeDumper):
    """go-yaml's choices: lists not indented under their key, double quotes where quoting is needed."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        # go-yaml double-quotes a string whose plain form reads as another type ("", "true", "10");
        # a string that is a string but cannot be plain ("*") gets single quotes, as in PyYAML
        # (PyYAML alone reads a lone "!", "&" or "*" as its `yaml` tag; go-yaml reads them as strings)
        if style == "'" and self.event is not None and not self.event.implicit[0] \
                and self.event.value not in ("!", "&", "*"):
            return '"'
        return style


def kube_yaml(doc: dict[str, Any]) -> str:
    """`doc` written as sigs.k8s.io/yaml writes it (keys already in kube's order)."""
    return yaml.dump(doc, Dumper=_GoStyleDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 30)

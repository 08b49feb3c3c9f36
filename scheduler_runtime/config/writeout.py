"""The text `kube-scheduler --write-config-to` writes, byte for byte (kube-scheduler v1.36.3).

kube-scheduler serialises its defaulted v1 config through sigs.k8s.io/yaml: JSON field order becomes
alphabetical, every extension point of the Plugins struct is written (`filter: {}` when empty), every
enabled or disabled plugin carries its `weight` (0 when unset: the field is not omitempty in the encoder
it goes through), and strings that need quoting get double quotes. ksched's own defaulted document
(loader.default_document) leaves empty points out; `written_document` adds what kube writes."""

from __future__ import annotations

import copy
from typing import Any

import yaml

#: the Plugins struct of kubescheduler.config.k8s.io/v1 in kube 1.36 (written in alphabetical order)
WRITTEN_POINTS = ("bind", "filter", "multiPoint", "permit", "placementGenerate", "placementScore", "postBind",
                  "postFilter", "preBind", "preEnqueue", "preFilter", "preScore", "queueSort", "reserve", "score")
#: in kube 1.36's default multiPoint list but not run by ksched (UNSUPPORTED_IN_TREE): written where kube
#: writes it so the text matches, and named on stderr by `ksched config default`
KUBE_ONLY_DEFAULTS = ("NodeDeclaredFeatures",)
UNSUPPORTED_NOTE = ("NodeDeclaredFeatures is written where kube-scheduler 1.36 writes it, but ksched does not run it "
                    "yet: to run this output with ksched, add {name: NodeDeclaredFeatures} to "
                    "multiPoint.disabled (or delete its enabled entry)")


def written_document(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` (a defaulted v1 document) with what kube-scheduler adds when it writes the config."""
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
        _add_kube_only_defaults(plugins.get("multiPoint"))
        for point in WRITTEN_POINTS:
            ps = plugins.setdefault(point, {})
            for key in ("enabled", "disabled"):
                if key in ps and not ps[key]:
                    del ps[key]  # omitempty
                for e in ps.get(key) or []:
                    if isinstance(e, dict):
                        e.setdefault("weight", 0)
        prof["plugins"] = {k: plugins[k] for k in sorted(plugins)}
    return d


def kube_only_enabled(doc: dict[str, Any]) -> bool:
    """Whether the written document enables a plugin ksched does not run (KUBE_ONLY_DEFAULTS)."""
    return any(isinstance(e, dict) and e.get("name") in KUBE_ONLY_DEFAULTS
               for prof in doc.get("profiles") or [] if isinstance(prof, dict)
               for e in ((prof.get("plugins") or {}).get("multiPoint") or {}).get("enabled") or [])


def _add_kube_only_defaults(multi: Any) -> None:
    """Put KUBE_ONLY_DEFAULTS where kube's merge of the default multiPoint list puts them: after the last
    default plugin (plugins the user adds come after the defaults), unless disabled by name or `*`."""
    if not isinstance(multi, dict):
        return
    from ..plugins import DEFAULT_MULTIPOINT

    disabled = {e.get("name") for e in multi.get("disabled") or [] if isinstance(e, dict)}
    enabled = multi.get("enabled")
    if "*" in disabled or not isinstance(enabled, list):
        return
    defaults = {name for name, _ in DEFAULT_MULTIPOINT}
    for name in KUBE_ONLY_DEFAULTS:
        if name in disabled or any(isinstance(e, dict) and e.get("name") == name for e in enabled):
            continue
        last = max((i for i, e in enumerate(enabled) if isinstance(e, dict) and e.get("name") in defaults),
                   default=-1)
        enabled.insert(last + 1, {"name": name})


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

"""Build a v1 KubeSchedulerConfiguration from flags or a scheduler-plugins style values file."""

from __future__ import annotations

from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ..resources import templates_dir
from .loader import API_VERSION

TEMPLATES = templates_dir() / "config"


def _scalar(text: str) -> Any:
    """`--args Name.key=value` values are YAML scalars (numbers, booleans, lists)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def profile_from_flags(scheduler_name: str, plugins: list[str], disable: list[str], queue_sort: str | None,
                       args: list[str]) -> dict[str, Any]:
    prof: dict[str, Any] = {"schedulerName": scheduler_name}
    mp: dict[str, Any] = {}
    enabled = []
    for spec in plugins:
        name, _, weight = spec.partition(":")
        e: dict[str, Any] = {"name": name}
        if weight:
            try:
                e["weight"] = int(weight)
            except ValueError:
                raise ValueError(f"--plugin {spec}: weight must be an integer") from None
        enabled.append(e)
    if enabled:
        mp["enabled"] = enabled
    if disable:
        mp["disabled"] = [{"name": n} for n in disable]
    plugins_block: dict[str, Any] = {}
    if mp:
        plugins_block["multiPoint"] = mp
    if queue_sort:
        plugins_block["queueSort"] = {"enabled": [{"name": queue_sort}], "disabled": [{"name": "*"}]}
    if plugins_block:
        prof["plugins"] = plugins_block
    pcs: dict[str, dict[str, Any]] = {}
    for a in args:
        key, eq, value = a.partition("=")
        plugin, dot, path = key.partition(".")
        if not eq or not dot or not path:
            raise ValueError(f"--args {a}: expected NAME.key=value (NAME.key.sub=value for nested keys)")
        node = pcs.setdefault(plugin, {})
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = _scalar(value)
    if pcs:
        prof["pluginConfig"] = [{"name": n, "args": v} for n, v in pcs.items()]
    return prof


def profile_from_values(values: dict[str, Any], scheduler_name: str) -> dict[str, Any]:
    """scheduler-plugins Helm values: plugins.enabled / plugins.disabled / pluginConfig."""
    sched = values.get("scheduler") or {}
    name = sched.get("name") or scheduler_name
    plugins = values.get("plugins") or {}
    prof: dict[str, Any] = {"schedulerName": name}
    mp: dict[str, Any] = {}
    if plugins.get("enabled"):
        mp["enabled"] = [{"name": n} if isinstance(n, str) else n for n in plugins["enabled"]]
    if plugins.get("disabled"):
        mp["disabled"] = [{"name": n} if isinstance(n, str) else n for n in plugins["disabled"]]
    if mp:
        prof["plugins"] = {"multiPoint": mp}
    if values.get("pluginConfig"):
        prof["pluginConfig"] = values["pluginConfig"]
    return prof


def build_document(profiles: list[dict[str, Any]], leader_elect: bool | None, kubeconfig: str | None
                   ) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    if leader_elect is not None:
        doc["leaderElection"] = {"leaderElect": leader_elect}
    if kubeconfig:
        doc["clientConnection"] = {"kubeconfig": kubeconfig}
    doc["profiles"] = profiles
    return doc


def render_text(doc: dict[str, Any], filename: str = "FILE", source: str = "") -> str:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, keep_trailing_newline=True)
    body = yaml.safe_dump(doc, sort_keys=False)
    return env.get_template("kube-scheduler-config.yaml.j2").render(body=body.rstrip("\n"), filename=filename,
                                                                       source=source)

"""Build a v1 KubeSchedulerConfiguration from flags or a scheduler-plugins style values file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .. import yamlio
from ..errors import InputError
from ..fielderrors import go_value, invalid, required
from ..resources import templates_dir
from .loader import API_VERSION

TEMPLATES = templates_dir() / "config"


def _scalar(text: str) -> Any:
    """`--args Name.key=value` values are YAML scalars (numbers, booleans, lists)."""
    return yamlio.safe_scalar(text)


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
                raise ValueError(f"--plugin {go_value(spec)}: weight must be an integer") from None
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
            raise ValueError(f"--args {go_value(a)}: expected NAME.key=value (NAME.key.sub=value for nested keys)")
        node = pcs.setdefault(plugin, {})
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = _scalar(value)
    if pcs:
        prof["pluginConfig"] = [{"name": n, "args": v} for n, v in pcs.items()]
    return prof


# The keys of scheduler-plugins' Helm chart values (manifests/install/charts/as-a-second-scheduler/values.yaml)
_WORKLOAD_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,), "image": (str,), "command": (list,), "replicaCount": (int,), "leaderElect": (bool,),
    "priorityClassName": (str,), "resources": (dict,), "nodeSelector": (dict,), "affinity": (dict,),
    "tolerations": (list,)}
_TOP_KEYS = ("scheduler", "controller", "plugins", "pluginConfig")
_TYPE_NAMES = {int: "integer", str: "string", bool: "boolean", dict: "object", list: "array"}


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _want(value: Any, types: tuple[type, ...], path: str, errs: list[str]) -> bool:
    if value is None or _is(value, types):
        return True
    want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
    errs.append(f"{path}: {invalid(value, 'expected ' + want)}")
    return False


def _check_plugin_list(items: Any, path: str, errs: list[str], weight: bool) -> None:
    if not _want(items, (list,), path, errs) or items is None:
        return
    allowed = {"name", "weight"} if weight else {"name"}
    for j, e in enumerate(items):
        p = f"{path}[{j}]"
        if isinstance(e, str):
            if not e:
                errs.append(f"{p}: {required('a plugin name')}")
            continue
        if not isinstance(e, dict):
            what = "expected a plugin name or an object with name" + (" and weight" if weight else "")
            errs.append(f"{p}: {invalid(e, what)}")
            continue
        for k in e:
            if k not in allowed:
                errs.append(f'{p}.{k}: unknown field "{k}"')
        if not isinstance(e.get("name"), str) or not e.get("name"):
            errs.append(f"{p}.name: {required()}")
        if weight:
            _want(e.get("weight"), (int,), f"{p}.weight", errs)


def check_values(values: Any) -> list[str]:
    """Problems of a scheduler-plugins style values file, each as `key.path: what is wrong`."""
    if not isinstance(values, dict):
        got = _TYPE_NAMES.get(type(values), type(values).__name__)
        return [f"expected a mapping of values ({', '.join(_TOP_KEYS)}), got {got}"]
    if "kind" in values or "apiVersion" in values:
        kind = values.get("kind")
        what = ("a KubeSchedulerConfiguration (pass it to --config, not --values)"
                if kind == "KubeSchedulerConfiguration" else "a Kubernetes object")
        detail = f"{what}, not a scheduler-plugins values file (keys: {', '.join(_TOP_KEYS)})"
        return [f"kind: {invalid(kind, detail)}"]
    errs: list[str] = []
    for k in values:
        if k not in _TOP_KEYS:
            errs.append(f'{k}: unknown field "{k}" (values files have: {", ".join(_TOP_KEYS)})')
    for section in ("scheduler", "controller"):
        sec = values.get(section)
        if not _want(sec, (dict,), section, errs) or sec is None:
            continue
        for k, v in sec.items():
            if k not in _WORKLOAD_KEYS:
                errs.append(f'{section}.{k}: unknown field "{k}"')
            else:
                _want(v, _WORKLOAD_KEYS[k], f"{section}.{k}", errs)
    plugins = values.get("plugins")
    if _want(plugins, (dict,), "plugins", errs) and plugins is not None:
        for k in plugins:
            if k not in ("enabled", "disabled"):
                errs.append(f'plugins.{k}: unknown field "{k}"')
        _check_plugin_list(plugins.get("enabled"), "plugins.enabled", errs, weight=True)
        _check_plugin_list(plugins.get("disabled"), "plugins.disabled", errs, weight=False)
    pcs = values.get("pluginConfig")
    if _want(pcs, (list,), "pluginConfig", errs) and pcs is not None:
        for j, pc in enumerate(pcs):
            p = f"pluginConfig[{j}]"
            if not _want(pc, (dict,), p, errs) or pc is None:
                continue
            for k in pc:
                if k not in ("name", "args"):
                    errs.append(f'{p}.{k}: unknown field "{k}"')
            if not isinstance(pc.get("name"), str) or not pc.get("name"):
                errs.append(f"{p}.name: {required()}")
            _want(pc.get("args"), (dict,), f"{p}.args", errs)
    return errs


def _values_error(errs: list[str], source: str) -> InputError:
    more = f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""
    return InputError(errs[0] + more, file=source, usage=False)


def load_values(path: Path) -> dict[str, Any]:
    """Read a values file (one YAML mapping); profile_from_values checks its keys against the chart's."""
    from .loader import read_document

    return read_document(path, what="a values")


def profile_from_values(values: dict[str, Any], scheduler_name: str, source: str = "--values file"
                        ) -> dict[str, Any]:
    """scheduler-plugins Helm values: plugins.enabled / plugins.disabled / pluginConfig."""
    errs = check_values(values)
    if errs:
        raise _values_error(errs, source)
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

"""`ksched config`: validate, default, explain, migrate and render KubeSchedulerConfiguration files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scheduler_runtime.atomicfile import write_output
from scheduler_runtime.errors import InputError

from ..guard import EXIT_USAGE, fail, warn
from ..inputs import registry as _registry
from ..output import emit, output_option

app = typer.Typer(no_args_is_help=True, help="Validate, default, explain, migrate and render "
                                             "KubeSchedulerConfiguration files with kube-scheduler's rules.")
console = Console(highlight=False, soft_wrap=True)
PluginDirOpt = Annotated[list[Path] | None, typer.Option("--plugin-dir", help="Folder of plugin packages.")]
FilenameOpt = Annotated[Path | None, typer.Option("-f", "--filename", metavar="FILE",
                                                  help="The config file, as kubectl names input (- reads stdin).")]


def _one_file(positional: Path | None, filename: Path | None, required: bool) -> Path | None:
    """The input file given either way (kubectl's -f, or positionally); both at once is a usage error."""
    if positional is not None and filename is not None:
        raise fail("give the config file once: positionally or with -f/--filename", EXIT_USAGE)
    got = positional if positional is not None else filename
    if got is None and required:
        raise fail("missing the config file: give it positionally or with -f/--filename", EXIT_USAGE)
    return got


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="config", help="Validate, default, explain, migrate and render "
                                            "KubeSchedulerConfiguration files.")


#: apiVersions kube-scheduler accepts, by minor release
SERVED = {"v1beta1": (19, 22), "v1beta2": (22, 27), "v1beta3": (23, 28), "v1": (25, 99)}


def _minor(version: str | None) -> int | None:
    if not version:
        return None
    v = version.lstrip("v")
    try:
        major, minor = v.split(".")[:2]
        if major != "1":
            raise ValueError
        return int(minor)
    except ValueError:
        raise fail(f"--kubernetes-version: expected 1.XX, got {version!r}", EXIT_USAGE) from None


def validate_file(path: Path, reg: Any, minor: int | None,
                  feature_gates: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(errors, notes) for one file; raises InputError for I/O problems. `feature_gates` are kube-scheduler's
    `--feature-gates` values: some args defaults and rules follow gates (DynamicResourcesArgs' timeouts)."""
    from scheduler_runtime.config import ConfigError
    from scheduler_runtime.config.loader import build, read_document
    from scheduler_runtime.config.migrate import migrate

    doc = read_document(path)
    notes: list[str] = []
    api = str(doc.get("apiVersion") or "")
    ver = api.split("/", 1)[1] if api.startswith("kubescheduler.config.k8s.io/") else ""
    if minor is not None and ver in SERVED:
        lo, hi = SERVED[ver]
        if not lo <= minor <= hi:
            if ver == "v1" and minor < lo:
                return [f'apiVersion: Invalid value: "{api}": Kubernetes 1.{minor} does not serve {ver} '
                        f'(added in 1.{lo}); use v1beta3 or upgrade'], notes
        elif ver != "v1":
            try:
                doc = migrate(doc).doc
                notes.append(f"{api} is served by Kubernetes 1.{minor}; checked as its v1 equivalent")
            except ValueError as exc:
                return [str(exc)], notes
    from scheduler_runtime.featuregates import EMULATABLE, default_gates, parse_feature_gates
    from scheduler_runtime.kubeversion import KUBE_MINOR

    gates = None
    emulated = KUBE_MINOR
    if minor is not None and f"1.{minor}" in EMULATABLE:
        emulated = f"1.{minor}"
        gates = default_gates(emulated)  # that minor's gate defaults, Plugins fields and default plugins
    elif minor is not None:
        notes.append(f"ksched carries the rules of Kubernetes {', '.join(EMULATABLE)}; checked with {KUBE_MINOR}'s")
    if feature_gates:
        gates = parse_feature_gates(feature_gates, emulated)
    try:
        cfg = build(doc, reg, None, notes=notes, feature_gates=gates)
    except ConfigError as exc:
        return exc.errors, notes
    _warn_no_default_profile(cfg, str(path))
    return [], notes


def _warn_no_default_profile(cfg: Any, where: str) -> None:
    from scheduler_runtime.config.profiles import no_default_profile_warning

    msg = no_default_profile_warning(cfg)
    if msg:
        warn(f"{where}: {msg}")


@app.command(epilog="Examples:\n\n  ksched config validate scheduler-config.yaml\n\n"
                    "  ksched config validate examples/configs/*.yaml -o json\n\n"
                    "  ksched config validate old.yaml --kubernetes-version 1.28")
def validate(
    files: Annotated[list[Path] | None, typer.Argument(help="Config files.")] = None,
    filename: Annotated[list[Path] | None, typer.Option("-f", "--filename", metavar="FILE",
                                                        help="A config file (repeatable), as kubectl names input.")
                        ] = None,
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    kubernetes_version: Annotated[str | None, typer.Option("--kubernetes-version",
                                                           help="Apply that release's rules (1.XX).")] = None,
    plugin_dir: Annotated[list[Path] | None, typer.Option("--plugin-dir", help="Folder of plugin packages.")] = None,
    feature_gates: Annotated[list[str] | None, typer.Option(
        "--feature-gates", metavar="K=V,...",
        help="kube-scheduler's --feature-gates (repeatable): the rules that follow gates use these values.")] = None,
) -> None:
    """Check files with kube-scheduler's decoding, validation and profile-building rules; all errors at once.
    Exit 0 valid, 1 invalid, 2 usage or I/O error."""

    minor = _minor(kubernetes_version)
    files = [*(files or []), *(filename or [])]
    if not files:
        raise fail("missing config files: give them positionally or with -f/--filename", EXIT_USAGE)
    reg = _registry(plugin_dir)
    results = []
    worst = 0
    for f in files:
        try:
            errs, notes = validate_file(f, reg, minor, feature_gates)
        except InputError as exc:
            results.append({"file": str(f), "valid": False, "errors": [exc.detail], "io": exc.usage})
            worst = max(worst, exc.exit_code)
            continue
        results.append({"file": str(f), "valid": not errs, "errors": errs, "notes": notes})
        if errs:
            worst = max(worst, 1)
    if output != "table":
        emit(results, output)
    else:
        for r in results:
            if r["valid"]:
                print(f"{r['file']}: valid" + "".join(f" ({n})" for n in r.get("notes", [])))
            for e in r["errors"]:
                print(f"{r['file']}: {e}", file=sys.stderr)
    raise typer.Exit(worst)


@app.command(epilog="Examples:\n\n  ksched config default scheduler-config.yaml\n\n"
                    "  ksched config default --expand        # the built-in default profile, expanded")
def default(
    file: Annotated[Path | None, typer.Argument(help="Config file (omit for the default profile; - reads "
                                                     "standard input).")] = None,
    filename: FilenameOpt = None,
    output: Annotated[str, output_option(("yaml", "json"))] = "yaml",
    expand: Annotated[bool, typer.Option("--expand", help="Add each profile's effective plugin plan.")] = False,
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Print the fully defaulted config, byte for byte as `kube-scheduler --write-config-to` writes it."""

    from scheduler_runtime.config import load_config
    from scheduler_runtime.config.writeout import kube_yaml, written_document

    file = _one_file(file, filename, required=False)
    cfg = load_config(file, _registry(plugin_dir))
    doc = written_document(cfg.raw, cfg.kube_minor)
    if output == "json":
        if expand:
            raise fail("--expand is for -o yaml", EXIT_USAGE)
        emit(doc, "json")
        return
    print(kube_yaml(doc), end="")
    if expand:
        plans = {p.scheduler_name: {point: [f"{n}" + (f" (weight {w})" if point == "score" else "")
                                            for n, w in lst] for point, lst in p.plan.items() if lst}
                 for p in cfg.profiles}
        print("---\n# effective plan per profile, in run order (after multiPoint expansion)")
        print(yaml.safe_dump({"plan": plans}, sort_keys=False), end="")


@app.command(epilog="Examples:\n\n  ksched config explain NodeResourcesFit\n\n  ksched config explain Coscheduling")
def explain(
    plugin: Annotated[str, typer.Argument(help="Plugin name, or `extenders` for the extenders list.")],
    output: Annotated[str, output_option(("table", "json", "yaml"))] = "table",
    plugin_dir: PluginDirOpt = None,
) -> None:
    """A plugin's extension points, args (types, defaults, ranges), a pluginConfig example and its RBAC."""

    from scheduler_runtime.config.explain import explain as do_explain

    try:
        info = do_explain(plugin, _registry(plugin_dir))
    except KeyError as exc:
        raise fail(str(exc.args[0]), 1) from None
    if output != "table":
        emit(json.loads(json.dumps(info, default=str)), output)
        return
    console.print(f"[bold]{info['name']}[/] ({info['source']})")
    if info["doc"]:
        console.print(escape(info["doc"].splitlines()[0]))
    console.print(f"extension points: {', '.join(info['extensionPoints'])}")
    if info["args"]:
        t = Table(title=info.get("argsTitle") or f"args ({info['name']}Args)", title_justify="left")
        for col in ("field", "type", "default", "meaning" if info.get("argsTitle") else "range"):
            t.add_column(col, overflow="fold")
        for a in info["args"]:
            t.add_row(a["name"] + (" *" if a["required"] else ""), escape(a["type"]),
                      escape(json.dumps(a.get("default"))) if "default" in a else "",
                      a.get("range", a.get("description", "")))
        console.print(t)
    console.print("[bold]example[/]:")
    print(info["example"], end="")
    if info["rbac"]:
        console.print("[bold]RBAC beyond system:kube-scheduler[/]:")
        print(yaml.safe_dump(info["rbac"], sort_keys=False), end="")
    else:
        console.print("RBAC: nothing beyond system:kube-scheduler")


@app.command(epilog="Examples:\n\n  ksched config migrate old-v1beta2.yaml\n\n"
                    "  ksched config migrate old.yaml --write-to new.yaml\n\n"
                    "  kubectl get cm sched -o jsonpath='{.data.config}' | ksched config migrate -")
def migrate(
    file: Annotated[Path | None, typer.Argument(help="A v1beta1/v1beta2/v1beta3 config (- reads standard input).")
                    ] = None,
    filename: FilenameOpt = None,
    output: Annotated[str, output_option(("yaml", "json"), file_flag="--write-to")] = "yaml",
    out: Annotated[Path | None, typer.Option("--write-to", help="Write the result to this file instead of "
                                             "stdout (atomically).")] = None,
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Convert to kubescheduler.config.k8s.io/v1, reporting each change on stderr; the result is validated."""

    from scheduler_runtime.config import ConfigError
    from scheduler_runtime.config.loader import build, read_document
    from scheduler_runtime.config.migrate import migrate as do_migrate
    from scheduler_runtime.config.render import render_text

    file = _one_file(file, filename, required=True)
    assert file is not None
    doc = read_document(file)
    try:
        m = do_migrate(doc)
    except ValueError as exc:
        raise fail(f"{file}: {exc}", 1) from None
    for c in m.changes:
        print(f"changed: {c}", file=sys.stderr)
    for w in m.warnings:
        print(f"warning: {w}", file=sys.stderr)
    try:
        build(m.doc, _registry(plugin_dir), str(out or file))
    except ConfigError as exc:
        for e in exc.errors:
            print(f"{file}: after migration: {e}", file=sys.stderr)
        raise typer.Exit(1) from None
    text = render_text(m.doc, filename=str(out or "FILE"), source=f"ksched config migrate {file}") \
        if output == "yaml" else json.dumps(m.doc, indent=2) + "\n"
    if out is None:
        print(text, end="")
    else:
        write_output(out, text)
        print(f"wrote {out}", file=sys.stderr)




@app.command(epilog="Examples:\n\n  ksched config render --scheduler-name my-scheduler --plugin NetworkTraffic:5 "
                    "--args NetworkTraffic.prometheusAddress=http://prometheus:9090\n\n"
                    "  ksched config render --values values.yaml --write-to config.yaml\n\n"
                    "  ksched config render --queue-sort Coscheduling --plugin Coscheduling --disable PrioritySort "
                    "--write-to cfg.yaml --check")
def render(
    scheduler_name: Annotated[str, typer.Option("--scheduler-name",
                                                help="Profile's schedulerName.")] = "default-scheduler",
    plugin: Annotated[list[str] | None, typer.Option("--plugin", help="NAME[:WEIGHT] enabled at multiPoint.")] = None,
    disable: Annotated[list[str] | None, typer.Option("--disable", help="NAME or * to disable at multiPoint.")] = None,
    queue_sort: Annotated[str | None, typer.Option("--queue-sort", help="The QueueSort plugin.")] = None,
    args: Annotated[list[str] | None, typer.Option("--args", help="NAME.key=value plugin args.")] = None,
    leader_elect: Annotated[bool | None, typer.Option("--leader-elect/--no-leader-elect")] = None,
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", help="clientConnection.kubeconfig.")] = None,
    profile: Annotated[list[str] | None, typer.Option(
        "--profile", help="Extra profile: 'name=N,plugin=A:2,disable=B,args=A.k=v' (repeatable).")] = None,
    values: Annotated[Path | None, typer.Option("--values", help="scheduler-plugins style values.yaml.")] = None,
    fmt: Annotated[str, output_option(("yaml", "json"), file_flag="--write-to")] = "yaml",
    output: Annotated[Path | None, typer.Option("--write-to", help="Write the config to this file instead of "
                                                "stdout (atomically).")] = None,
    check: Annotated[bool, typer.Option("--check",
                                        help="Fail if the --write-to file differs from what would be written.")] =
    False,
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Render a valid v1 config from flags or a values file (templates/config), validating it before writing."""

    from scheduler_runtime.config import ConfigError
    from scheduler_runtime.config.loader import build
    from scheduler_runtime.config.render import (
        build_document,
        load_values,
        profile_from_flags,
        profile_from_values,
        render_text,
    )

    if check and output is None:
        raise fail("--check needs --write-to: the file to compare with", EXIT_USAGE)

    try:
        elect = leader_elect
        if values is not None:
            vals = load_values(values)
            profiles = [profile_from_values(vals, scheduler_name, source=str(values))]
            from_values = (vals.get("scheduler") or {}).get("leaderElect")
            if elect is None and isinstance(from_values, bool):
                elect = from_values
        else:
            profiles = [profile_from_flags(scheduler_name, plugin or [], disable or [], queue_sort, args or [])]
        for spec in profile or []:
            kv: dict[str, list[str]] = {}
            for part in spec.split(","):
                k, _, v = part.partition("=")
                kv.setdefault(k.strip(), []).append(v)
            if "name" not in kv:
                raise ValueError(f"--profile {json.dumps(spec, ensure_ascii=False)}: needs name=SCHEDULER_NAME")
            profiles.append(profile_from_flags(kv["name"][0], kv.get("plugin", []), kv.get("disable", []),
                                               queue_sort, kv.get("args", [])))
    except ValueError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    doc = build_document(profiles, elect, kubeconfig)
    try:
        build(doc, _registry(plugin_dir), str(output) if output else "<rendered>")
    except ConfigError as exc:
        for e in exc.errors:
            print(f"rendered config: {e}", file=sys.stderr)
        raise typer.Exit(1) from None
    text = render_text(doc, filename=str(output or "FILE"), source=str(values) if values else "flags") \
        if fmt == "yaml" else json.dumps(doc, indent=2) + "\n"
    if output is None:
        print(text, end="")
        return
    if check:
        current = output.read_text() if output.exists() else None
        if current != text:
            raise fail(f"{output}: differs from the rendered config (run without --check to update)", 1)
        print(f"{output}: up to date", file=sys.stderr)
        return
    write_output(output, text)
    print(f"wrote {output}", file=sys.stderr)

"""`ksched deploy`: the thin CLI over ksched_cli.deploy (see docs/deploy.md); `undeploy` is its own module."""

from __future__ import annotations

import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from scheduler_runtime.errors import InputError

from ..cluster_opts import ContextOpt, KubeconfigOpt
from ..guard import EXIT_USAGE, fail
from ..inputs import registry as _registry
from ..output import output_option, render

console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

#: the objects were applied but the scheduler did not become available in time (or its pods fail)
EXIT_ROLLOUT = 3

DEPLOY_EPILOG = (
    "Examples:\n\n"
    "  sudo ksched deploy --static-pod --config cfg.yaml --image registry.example.com/ksched:v1 --dry-run\n\n"
    "  sudo ksched deploy --static-pod --config cfg.yaml --image registry.example.com/ksched:v1 --yes\n\n"
    "  sudo ksched deploy --static-pod --config cfg.yaml --image localhost/ksched:v1 --yes --wait 2m "
    "--kubeconfig /etc/kubernetes/admin.conf\n\n"
    "  sudo ksched deploy --static-pod --rollback --yes\n\n"
    "  ksched deploy --static-pod --config cfg.yaml --print-rbac | kubectl apply -f -\n\n"
    "  ksched deploy --second-scheduler --name my-scheduler --config cfg.yaml --image IMG -o yaml\n\n"
    "  ksched deploy --second-scheduler --name my-scheduler --config cfg.yaml --image IMG --apply\n\n"
    "Exit codes: 0 done (or nothing to change), 1 invalid input or API error, 2 usage or I/O error "
    "(missing, empty or malformed file, permission denied, bad flag value), "
    "3 applied but the rollout failed or timed out. See docs/deploy.md.")


def say(text: str) -> None:
    """Print text that may hold paths or names with brackets: never read as rich markup."""
    console.print(text, markup=False)


def _print_diff(diff: str) -> None:
    out = Text()
    for line in diff.splitlines():
        style = ("bold" if line.startswith(("---", "+++")) else "green" if line.startswith("+")
                 else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
        out.append(line + "\n", style=style)
    out.rstrip()
    console.print(out)  # one print: rich's per-call cost made a long diff take seconds


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise fail(f"{question} needs confirmation and stdin is not a terminal: pass --yes (nothing was written)",
                   EXIT_USAGE)
    if not typer.confirm(question, default=False):
        raise fail("not confirmed; nothing was written", EXIT_USAGE)


def _bullets(title: str, items: list[str], style: str = "") -> None:
    if not items:
        return
    console.print(f"[bold]{title}[/]")
    for it in items:
        console.print(f"  • {escape(it)}", style=style or None)


# ------------------------------------------------------------------------------------------ static pod


@dataclass
class Waiter:
    """--wait: how long to follow the kubelet replacing the pod, and the API that shows its mirror pod."""

    seconds: float
    client: Any
    node: str


def _waiter(wait: str | None, kubeconfig: str | None, context: str | None,
            node_name: str | None) -> Waiter | None:
    """Checked before anything is written: a bad duration or an unreachable API server stops the deploy."""
    if wait is None:
        if kubeconfig is not None or context is not None or node_name is not None:
            raise fail("--kubeconfig, --context and --node-name are for --wait (with --static-pod)", EXIT_USAGE)
        return None
    from scheduler_runtime.goduration import parse_seconds

    try:
        seconds = float(wait) if wait.replace(".", "", 1).isdigit() else parse_seconds(wait)
    except ValueError:
        raise fail(f"--wait: {wait!r} is not a duration (e.g. 120s, 2m, or seconds)", EXIT_USAGE) from None
    if seconds <= 0:
        raise fail(f"--wait: {wait!r} must be positive", EXIT_USAGE)
    client = kube_client(kubeconfig, context)
    try:
        client.call("GET", "/version")
    except Exception as exc:  # noqa: BLE001 - any failure here means we cannot watch; say so before writing
        raise fail(f"--wait: cannot reach the API server to follow the mirror pod ({exc}); pass --kubeconfig "
                   f"(kubeadm: /etc/kubernetes/admin.conf); nothing was written", EXIT_USAGE) from None
    node = (node_name or socket.gethostname()).lower()  # the kubelet's default node name
    return Waiter(seconds, client, node)


def _wait_static(w: Waiter, manifest_text: str, image_hint: str, undo: str | None) -> None:
    """Follow the mirror pod of `manifest_text` until its scheduler container is ready."""
    import yaml

    from scheduler_runtime.cluster.kube import ApiError

    from ..deploy import staticpod, staticwait

    doc = yaml.safe_load(manifest_text)
    _, c = staticpod.find_scheduler_container(doc, Path("manifest"))
    md = doc.get("metadata") or {}
    ns, name = md.get("namespace") or "default", f"{md.get('name')}-{w.node}"
    path = f"/api/v1/namespaces/{ns}/pods/{name}"

    def get() -> dict[str, Any] | None:
        try:
            return dict(w.client.call("GET", path))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def logs() -> str:
        try:  # through the API server to the kubelet; best effort (it may lack kubelet client credentials)
            resp = w.client.request("GET", f"{path}/log", query={"container": c.get("name"), "previous": "true",
                                                                "tailLines": "3"}, timeout=5)
        except Exception:  # noqa: BLE001
            return ""
        lines = [ln.strip() for ln in resp.data.decode("utf-8", "replace").splitlines() if ln.strip()]
        return " | ".join(lines)[-400:] if resp.ok else ""

    console.print(f"waiting up to {w.seconds:.0f} s for the kubelet to run it: mirror pod {ns}/{name}")
    t0 = time.monotonic()
    try:
        st = staticwait.wait(get, str(c.get("name")), image_hint, w.seconds,
                             lambda s: say(f"  {time.monotonic() - t0:5.1f} s  {s.detail}"), logs=logs)
    except staticwait.StaticPodFailed as exc:
        raise fail(f"{exc}. " + (f"Roll back: {undo}" if undo else "See docs/deploy.md#crash-loop"),
                   EXIT_ROLLOUT) from None
    say(f"{ns}/{name} is ready ({st.detail}) after {time.monotonic() - t0:.0f} s")


def _static_pod(manifest: Path, config: Path | None, image: str | None, config_dest: Path, backup_dir: Path,
                dry_run: bool, rollback: bool, yes: bool, print_rbac: bool, plugin_dir: list[Path] | None,
                waiter: Waiter | None = None) -> None:
    from ..deploy import staticpod

    if manifest.is_dir():
        raise InputError("Is a directory: --manifest names the static pod file, e.g. "
                         "/etc/kubernetes/manifests/kube-scheduler.yaml", file=str(manifest), usage=True)
    staticpod.check_locations(manifest, config_dest, backup_dir)
    if rollback:
        _rollback(manifest, config_dest, backup_dir, dry_run, yes, waiter)
        return
    if config is None:
        raise fail("--config is required (the KubeSchedulerConfiguration to install); see --help", EXIT_USAGE)
    reg = _registry(plugin_dir)
    if print_rbac:
        _, cfg = staticpod.validate_config(config, reg)
        from ..deploy.rbac import DEFAULT_LEASE, RUNTIME_RULES, plugin_rules
        from ..deploy.render import to_yaml
        from ..deploy.secondsched import static_pod_rbac

        le = cfg.leader_election
        lease = (le.resource_name, le.resource_namespace) if le.resource_name != DEFAULT_LEASE else None
        rules = [("ksched", r) for r in RUNTIME_RULES] + plugin_rules(cfg, reg)
        objs = static_pod_rbac(rules, lease)
        if not objs:
            print("# nothing to grant: user system:kube-scheduler already has every permission this config "
                  "needs (system:kube-scheduler, system:volume-scheduler)", file=sys.stderr)
            return
        print(to_yaml(objs), end="")
        return
    if image is None:
        raise fail("--image is required (the image `ksched build` printed); see --help", EXIT_USAGE)
    p = staticpod.plan(manifest, config, image, config_dest, reg)
    console.print(f"[bold]manifest[/] {escape(str(manifest))}   [bold]config[/] {escape(str(config))} → "
                  f"{escape(str(config_dest))}")
    if not p.changed:
        say(f"nothing to change: {manifest} already runs {image} with --config={config_dest}, and "
            f"{config_dest} already holds this config")
        _bullets("warnings", p.warnings, "yellow")
        if waiter is not None and not dry_run:
            _wait_static(waiter, p.new_manifest, image, undo_command(manifest, config_dest, backup_dir))
        return
    _bullets("changes to the manifest", p.changes)
    if p.config_changed:
        verb = "replace" if p.old_config is not None else "install"
        console.print(f"[bold]config[/]: {verb} {escape(str(config_dest))} (mode 0644)")
    _bullets("notes", p.notes, "dim")
    _print_diff(p.diff())
    _bullets("warnings", p.warnings, "yellow")
    if dry_run:
        console.print("dry run: nothing written")
        _rbac_reminder(config, p.rbac)
        return
    _confirm(f"Write these changes to {manifest}?", yes)
    w = staticpod.apply(p, backup_dir)
    if w.backup:
        say(f"backup: {w.backup}" + (f" and {w.config_backup}" if w.config_backup else ""))
    if w.wrote_config:
        say(f"installed {config_dest} (mode 0644)")
    if w.wrote_kubeconfig and p.kubeconfig_copy is not None:
        uid, gid = p.kubeconfig_owner
        say(f"installed {p.kubeconfig_copy} (mode 0600, owner {uid}:{gid}): the scheduler's kubeconfig, readable by "
            f"the image's user and root only")
    if w.wrote_manifest:
        say(f"patched {manifest}; the kubelet restarts kube-scheduler with it within about 20 s. Check: "
            f"kubectl -n kube-system get pods -l component=kube-scheduler -o wide")
    say(f"undo: {undo_command(manifest, config_dest, backup_dir)}")
    _rbac_reminder(config, p.rbac)
    if waiter is not None:
        _wait_static(waiter, p.new_manifest, image, undo_command(manifest, config_dest, backup_dir))


def undo_command(manifest: Path, config_dest: Path, backup_dir: Path) -> str:
    """The rollback command for a deploy, with every location flag that differs from its default."""
    from ..deploy import staticpod

    cmd = ["sudo", "ksched", "deploy", "--static-pod", "--rollback"]
    for flag, value, default in (("--manifest", manifest, staticpod.DEFAULT_MANIFEST),
                                 ("--config-dest", config_dest, staticpod.DEFAULT_CONFIG_DEST),
                                 ("--backup-dir", backup_dir, staticpod.DEFAULT_BACKUP_DIR)):
        if value.absolute() != default:
            cmd += [flag, str(value.absolute())]
    return shlex.join(cmd)


def _rollback(manifest: Path, config_dest: Path, backup_dir: Path, dry_run: bool, yes: bool,
              waiter: Waiter | None = None) -> None:
    from ..deploy import staticpod

    r = staticpod.plan_rollback(manifest, backup_dir, config_dest)
    if r.entry is None:
        say(f"nothing to roll back: every change ksched recorded for {manifest} in {r.journal.path} is rolled back, "
            f"so it is as it was before ksched first changed it")
        return
    step = f"the change of {r.entry.time}"
    if r.edited_since:
        console.print(escape(f"note: {manifest} was edited after ksched wrote it; the diff shows what the rollback "
                             f"discards"), style="yellow")
    if not r.changed:
        if dry_run:
            say(f"dry run: {manifest} already matches the backup {r.backup} ({step}); nothing written")
            return
        staticpod.apply_rollback(r)
        say(f"{manifest} already matches the backup {r.backup}; {step} is now recorded as rolled back")
    else:
        _print_diff(r.diff())
        if dry_run:
            say(f"dry run: would restore {manifest} from {r.backup} (undoing {step}); nothing written")
            return
        _confirm(f"Restore {manifest} from {r.backup.name} (undo {step})?", yes)
        staticpod.apply_rollback(r)
        kept = r.entry.config is not None and r.config_backup is None
        say(f"restored {manifest} byte for byte from {r.backup}"
            + (f" and {r.config_dest} from {r.config_backup}" if r.config_backup and r.config_restored is not None
               and r.config_current != r.config_restored else "")
            + (f"; {r.config_dest} is left in place (ksched installed it; the restored manifest does not use it)"
               if kept and r.config_dest is not None and r.config_dest.exists()
               and str(r.config_dest).encode() not in r.restored else ""))
        if r.kubeconfig_remove and r.kubeconfig_path is not None:
            say(f"removed {r.kubeconfig_path} (the private kubeconfig copy ksched installed)")
        console.print("the kubelet restarts kube-scheduler from the restored manifest within about 20 s")
    if r.earlier:
        say(f"{r.earlier} earlier change(s) recorded in {r.journal.path}: run the same command again to undo the "
            f"previous one; the last brings back {manifest} as it was before ksched first changed it")
    else:
        say(f"that was the first change ksched recorded: {manifest} is as it was before ksched first changed it")
    if waiter is not None and not dry_run:
        import yaml

        from ..deploy import staticpod

        text = r.restored.decode("utf-8", "replace")
        _, c = staticpod.find_scheduler_container(yaml.safe_load(text), manifest)
        _wait_static(waiter, text, str(c.get("image")), None)


def _rbac_reminder(config: Path, rules: list[tuple[str, dict[str, Any]]]) -> None:
    if not rules:
        return  # kube-scheduler's user has system:kube-scheduler and system:volume-scheduler: all ksched needs
    who = ", ".join(dict.fromkeys(p for p, _ in rules))
    say(f"RBAC: {who} need permissions beyond system:kube-scheduler; grant them once (from a machine with "
        f"cluster-admin): ksched deploy --static-pod --config {config} --print-rbac | kubectl apply -f -")


# ------------------------------------------------------------------------------------------ second scheduler


def kube_client(kubeconfig: str | None, context: str | None = None) -> Any:
    from ..cluster_opts import kube_client as client

    return client(kubeconfig, context)


def _second(name: str, namespace: str, image: str | None, config: Path | None, replicas: int, apply: bool,
            output: str | None, kubeconfig: str | None, context: str | None, no_wait: bool, dry_run: bool,
            timeout: float, plugin_dir: list[Path] | None) -> None:
    from ..deploy import secondsched
    from ..deploy.render import to_yaml

    if apply == (output is not None):
        raise fail("choose --apply (install into the cluster) or -o yaml|json (print the objects)", EXIT_USAGE)
    if config is None or image is None:
        raise fail(f"{'--config' if config is None else '--image'} is required; see --help", EXIT_USAGE)
    s = secondsched.prepare(name, namespace, image, config, replicas, _registry(plugin_dir))
    if output is not None:
        for n in s.notes:
            print(f"# {n}", file=sys.stderr)
        print(to_yaml(s.objects) if output == "yaml" else
              render({"apiVersion": "v1", "kind": "List", "items": s.objects}, "json"), end="")
        return
    _bullets("config adjusted for running beside the default scheduler", s.notes, "dim")
    client = kube_client(kubeconfig, context)
    secondsched.check_namespace(client, namespace)

    def report(obj: dict[str, Any], outcome: str) -> None:
        console.print(f"  {escape(secondsched.describe(obj))} {outcome}")

    console.print(f"[bold]applying[/] (server-side apply, field manager {secondsched.FIELD_MANAGER})"
                  + (" as a server dry run" if dry_run else ""))
    results = secondsched.apply_objects(client, s.objects, dry_run=dry_run, report=report)
    if dry_run:
        console.print("dry run: the API server accepted every object; nothing was stored")
        return
    if all(o == "unchanged" for _, o in results):
        console.print("nothing changed: every object already matched")
    if not no_wait:
        _wait(client, s, timeout)
    names = ", ".join(s.scheduler_names)
    console.print(f"\n[bold]{name}[/] schedules pods whose spec.schedulerName is {escape(names)}. Point a workload at "
                  f"it:")
    say(f"  spec:\n    schedulerName: {s.scheduler_names[0]}")
    say(f"  e.g. kubectl patch deployment web -p "
        f"'{{\"spec\":{{\"template\":{{\"spec\":{{\"schedulerName\":\"{s.scheduler_names[0]}\"}}}}}}}}'")
    say(f"remove it: ksched undeploy --second-scheduler --name {name} --namespace {namespace}")


def _wait(client: Any, s: Any, timeout: float) -> None:
    """Wait for the rollout: a live bar on a terminal's stderr, then one line with how it ended."""
    from ..deploy import secondsched
    from ..progress import progress

    last: list[Any] = []
    with progress(f"rollout deployment/{s.name}", s.replicas, "available") as bar:
        def show(st: Any) -> None:
            last[:] = [st]
            bar.update(total=max(st.desired, 1), completed=min(st.available, st.desired),
                       description=f"rollout deployment/{s.name} (updated {st.updated}, old {st.old})"
                       + (f" {st.problem}" if st.problem else ""))

        try:
            secondsched.wait_rollout(client, s.namespace, s.name, timeout, show)
        except secondsched.RolloutError as exc:
            raise fail(str(exc), EXIT_ROLLOUT) from None
    st = last[-1] if last else None
    say(f"rollout: deployment/{s.name} " + (f"{min(st.available, st.desired)}/{st.desired} available"
                                            if st is not None else "available"))


# ------------------------------------------------------------------------------------------ commands

PluginDirOpt = Annotated[list[Path] | None, typer.Option("--plugin-dir", help="Folder of plugin packages "
                                                         "(for validating the config).")]


def register(app: typer.Typer) -> None:
    app.command("deploy", epilog=DEPLOY_EPILOG)(deploy)


def deploy(
    static_pod: Annotated[bool, typer.Option("--static-pod", help="Patch the kubeadm static pod manifest of "
                                             "kube-scheduler on this node (replaces the default scheduler).")] = False,
    second_scheduler: Annotated[bool, typer.Option("--second-scheduler", help="Run as a Deployment beside the "
                                                   "default scheduler, under its own schedulerName.")] = False,
    config: Annotated[Path | None, typer.Option("--config", readable=False,
                                                help="KubeSchedulerConfiguration to install.")] = None,
    image: Annotated[str | None, typer.Option("--image", help="The ksched image (from `ksched build`).")] = None,
    manifest: Annotated[Path, typer.Option("--manifest", readable=False,
                                           help="Static pod: The manifest to patch.")] =
    Path("/etc/kubernetes/manifests/kube-scheduler.yaml"),
    config_dest: Annotated[Path, typer.Option("--config-dest", help="Static pod: Where the config is installed "
                                              "(same path on the node and in the container).")] =
    Path("/etc/kubernetes/ksched-config.yaml"),
    backup_dir: Annotated[Path, typer.Option("--backup-dir", help="Static pod: Backups go here (never inside the "
                                             "manifests folder).")] = Path("/etc/kubernetes/ksched-backups"),
    rollback: Annotated[bool, typer.Option("--rollback", help="Static pod: Undo the newest change ksched "
                                           "recorded (one per run, back to the original manifest), restoring "
                                           "only backups whose sha256 still matches.")] = False,
    print_rbac: Annotated[bool, typer.Option("--print-rbac", help="Static pod: Print the RBAC that ksched and the "
                                             "config's plugins need for user system:kube-scheduler.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff (static pod) or apply with the API "
                                          "server's dry run (second scheduler); write nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Static pod: Do not ask before writing.")] = False,
    name: Annotated[str, typer.Option("--name", help="Second scheduler: Name of the Deployment and its objects; "
                                      "also the schedulerName when the config sets none.")] = "ksched-scheduler",
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Second scheduler: Namespace.")] =
    "kube-system",
    replicas: Annotated[int, typer.Option("--replicas", help="Second scheduler: Replicas; more than 1 turns on "
                                          "leader election.")] = 1,
    apply: Annotated[bool, typer.Option("--apply", help="Second scheduler: Server-side apply to the cluster.")] =
    False,
    output: Annotated[str | None, output_option(("yaml", "json"), what="Second scheduler: print the objects "
                                                "instead of applying them.")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    wait: Annotated[str | None, typer.Option("--wait", help="Static pod: after writing, follow the kubelet "
                                             "replacing the pod (its mirror pod in the API) for up to this long "
                                             "(e.g. 2m); exit 3 with the rollback command if the new container "
                                             "crash-loops or is not ready in time.")] = None,
    node_name: Annotated[str | None, typer.Option("--node-name", help="Static pod --wait: the kubelet's node name "
                                                  "(default: this host's name, lower-cased).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Second scheduler: Do not wait for the rollout.")] =
    False,
    timeout: Annotated[float, typer.Option("--timeout", help="Second scheduler: Seconds to wait for the "
                                           "rollout.")] = 300.0,
    plugin_dir: PluginDirOpt = None,
) -> None:
    """Deploy a ksched scheduler: replace kube-scheduler's static pod (--static-pod) or run beside it
    (--second-scheduler). Every change is shown first; see docs/deploy.md."""

    if static_pod == second_scheduler:
        raise fail("choose one of --static-pod (replace the default scheduler on this control-plane node) or "
                   "--second-scheduler (run beside it)", EXIT_USAGE)
    if static_pod:
        if apply or output is not None or no_wait:
            raise fail("--apply, -o and --no-wait are for --second-scheduler", EXIT_USAGE)
        waiter = None if print_rbac or dry_run else _waiter(wait, kubeconfig, context, node_name)
        _static_pod(manifest, config, image, config_dest, backup_dir, dry_run, rollback, yes, print_rbac,
                    plugin_dir, waiter)
    else:
        if rollback or print_rbac or wait is not None or node_name is not None:
            raise fail("--rollback, --print-rbac, --wait and --node-name are for --static-pod (undo a second "
                       "scheduler with `ksched undeploy --second-scheduler`)", EXIT_USAGE)
        _second(name, namespace, image, config, replicas, apply, output, kubeconfig, context, no_wait, dry_run,
                timeout, plugin_dir)


__all__ = ["DEPLOY_EPILOG", "EXIT_ROLLOUT", "console", "deploy", "kube_client", "say", "undo_command"]

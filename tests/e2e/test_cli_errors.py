"""Bad input as a user meets it: one line naming the file and what is wrong, exit 2 for usage and I/O
problems (missing, directory, empty, malformed YAML, bad option values) and 1 for input that parses but
is invalid, no traceback or "internal error", nothing half-written."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from .conftest import KSCHED

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOOD_CONFIG = EXAMPLES / "configs" / "least-allocated.yaml"
SIM = ("--cluster", str(EXAMPLES / "cluster"), "--pods", str(EXAMPLES / "pods.yaml"))

OLD_CONFIG = textwrap.dedent("""\
    apiVersion: kubescheduler.config.k8s.io/v1beta3
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: default-scheduler
    """)

SECOND_CONFIG = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

BAD_YAML = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters:
    - name: a
      cluster:
        server: [https://x
    """)


def one_line_error(r, code: int) -> str:
    """The command failed with `code` and said so in exactly one `error:` line, without a traceback."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return errors[0]


@pytest.fixture
def no_kube_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No kubeconfig anywhere: no KUBECONFIG, no in-cluster account, an empty HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


# ----------------------------------------------------------------------------- 1: output files


def test_output_to_a_directory_or_missing_folder_is_a_usage_error(ksched, tmp_path: Path):
    old = tmp_path / "old.yaml"
    old.write_text(OLD_CONFIG)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    line = one_line_error(ksched("config", "migrate", str(old), "--write-to", str(out_dir)), 2)
    assert str(out_dir) in line and "is a directory" in line.lower()
    assert list(out_dir.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml", "out"]

    line = one_line_error(ksched("config", "migrate", str(old), "--write-to", str(tmp_path / "nope" / "x.yaml")), 2)
    assert str(tmp_path / "nope") in line and "no such directory" in line
    assert not (tmp_path / "nope").exists()

    line = one_line_error(ksched("config", "render", "--plugin", "ImageLocality", "--write-to", str(out_dir)), 2)
    assert str(out_dir) in line and "is a directory" in line.lower()
    assert list(out_dir.iterdir()) == []


def test_write_config_to_goes_through_the_output_helper(ksched, tmp_path: Path, no_kube_env: Path):
    out = tmp_path / "missing" / "cfg.yaml"
    r = ksched("run", "--config", str(GOOD_CONFIG), f"--write-config-to={out}")
    line = one_line_error(r, 2)
    assert "no such directory" in line and str(out) in line
    out = tmp_path / "cfg.yaml"
    r = ksched("run", "--config", str(GOOD_CONFIG), f"--write-config-to={out}")
    assert r.returncode == 0, r.stderr
    assert "KubeSchedulerConfiguration" in out.read_text()


# ----------------------------------------------------------------------------- 2: kubeconfig files


KUBE_COMMANDS = [
    ("run",),
    ("describe-pod", "x"),
    ("deploy", "--second-scheduler", "--config", "SECOND", "--image", "registry.example.com/ksched:v1",
     "--apply", "--no-wait"),
    ("undeploy", "--second-scheduler"),
]


@pytest.fixture
def second_config(tmp_path: Path) -> Path:
    """A config a second scheduler can run (no profile named default-scheduler)."""
    p = tmp_path / "second.yaml"
    p.write_text(SECOND_CONFIG)
    return p


@pytest.mark.parametrize("cmd", KUBE_COMMANDS, ids=lambda c: c[0])
def test_malformed_kubeconfig_is_one_line_naming_the_file(ksched, tmp_path: Path, cmd: tuple[str, ...],
                                                         second_config: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_YAML)
    cmd = tuple(str(second_config) if a == "SECOND" else a for a in cmd)
    line = one_line_error(ksched(*cmd, "--kubeconfig", str(bad)), 2)
    assert line.startswith(f"error: {bad}: line ") and "invalid YAML" in line
    assert "<unicode string>" not in line


def test_kubeconfig_that_is_a_directory_empty_or_missing(ksched, tmp_path: Path):
    line = one_line_error(ksched("describe-pod", "x", "--kubeconfig", str(tmp_path)), 2)
    assert "is a directory" in line and "no such file" not in line
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    line = one_line_error(ksched("describe-pod", "x", "--kubeconfig", str(empty)), 2)
    assert str(empty) in line and "empty" in line
    line = one_line_error(ksched("undeploy", "--second-scheduler", "--kubeconfig", str(tmp_path / "nope.yaml")), 2)
    assert str(tmp_path / "nope.yaml") in line and "no such file" in line


KUBECONFIG_OK = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
}


@pytest.mark.parametrize(("change", "field"), [
    ({"clusters": []}, "clusters"),
    ({"current-context": None}, "current-context"),
    ({"current-context": "elsewhere"}, "current-context"),
    ({"users": []}, "contexts[0].context.user"),
    ({"clusters": [{"name": "k", "cluster": {}}]}, "clusters[0].cluster.server"),
])
def test_kubeconfig_missing_required_fields_names_the_field(ksched, tmp_path: Path, change: dict, field: str):
    import yaml

    doc = {**KUBECONFIG_OK, **change}
    doc = {k: v for k, v in doc.items() if v is not None}
    kc = tmp_path / "kc.yaml"
    kc.write_text(yaml.safe_dump(doc))
    line = one_line_error(ksched("describe-pod", "x", "--kubeconfig", str(kc)), 1)
    assert line.startswith(f"error: {kc}: {field}:"), line


def test_no_kubeconfig_anywhere_is_a_usage_error(ksched, no_kube_env: Path):
    line = one_line_error(ksched("describe-pod", "x"), 2)
    assert "no kubeconfig found" in line


# ----------------------------------------------------------------------------- 3, 4: plugin folders


def _plugin(folder: Path, name: str, body: str) -> Path:
    d = folder / name
    d.mkdir(parents=True)
    (d / "__init__.py").write_text(textwrap.dedent(body))
    return d


CTOR_PLUGIN = """\
    from scheduler_runtime.framework.plugin import Plugin


    class Ctor(Plugin):
        name = "Ctor"

        def __init__(self, args=None, handle=None):
            raise RuntimeError("ctor boom")

        def filter(self, state, pod, node_info):
            return None
    """

CTOR_CONFIG = """\
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
      - schedulerName: default-scheduler
        plugins:
          multiPoint:
            enabled:
              - name: Ctor
    """


@pytest.mark.parametrize("cmd", ["simulate", "run"])
def test_plugin_constructor_that_raises(ksched, tmp_path: Path, cmd: str):
    plugins = tmp_path / "plugins"
    _plugin(plugins, "ctor", CTOR_PLUGIN)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(textwrap.dedent(CTOR_CONFIG))
    extra = SIM if cmd == "simulate" else ()
    r = ksched(cmd, "--plugin-dir", str(plugins), "--config", str(cfg), *extra)
    assert one_line_error(r, 1) == 'error: initializing plugin "Ctor": ctor boom'
    assert "embedded cluster" not in r.stdout  # nothing started


def test_plugin_import_error_names_file_and_line(ksched, tmp_path: Path):
    plugins = tmp_path / "plugins"
    d = _plugin(plugins, "boomer", "from .impl import *  # noqa\n")
    (d / "impl.py").write_text("X = 1\n\n\ndef explode():\n    raise RuntimeError('boom at import')\n\n\nexplode()\n")
    line = one_line_error(ksched("plugins", "list", "--plugin-dir", str(plugins)), 1)
    assert line.startswith(f"error: {d / 'impl.py'}:5: cannot import plugin"), line
    assert "RuntimeError: boom at import" in line


def test_plugin_folder_without_plugin_class_warns_once(ksched, tmp_path: Path):
    plugins = tmp_path / "plugins"
    d = _plugin(plugins, "helpers", "def util():\n    return 1\n")
    r = ksched("simulate", "--plugin-dir", str(plugins), *SIM)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:") and str(d) in ln]
    assert len(warnings) == 1 and "no Plugin subclass" in warnings[0], r.stderr


# ----------------------------------------------------------------------------- 5: same exit codes everywhere


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: [x\n")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    folder = tmp_path / "folder"
    folder.mkdir()
    return {"malformed": bad, "empty": empty, "directory": folder, "missing": tmp_path / "missing.yaml"}


CONFIG_COMMANDS = {
    "validate": ("config", "validate"),
    "migrate": ("config", "migrate"),
    "run": ("run", "--config"),
    "simulate": ("simulate", *SIM, "--config"),
    "deploy": ("deploy", "--second-scheduler", "--image", "registry.example.com/ksched:v1", "-o", "yaml",
               "--config"),  # the invalid config below names no profile, so only its own error shows
}


@pytest.mark.parametrize("cmd", sorted(CONFIG_COMMANDS))
def test_unreadable_config_exits_2_in_every_command(ksched, tmp_path: Path, cmd: str):
    for kind, path in _bad_files(tmp_path).items():
        r = ksched(*CONFIG_COMMANDS[cmd], str(path))
        assert r.returncode == 2, (cmd, kind, r.stderr)
        assert str(path) in r.stderr and "Traceback" not in r.stderr, (cmd, kind, r.stderr)


@pytest.mark.parametrize("cmd", sorted(CONFIG_COMMANDS))
def test_invalid_but_parsed_config_exits_1_in_every_command(ksched, tmp_path: Path, cmd: str):
    cfg = tmp_path / "invalid.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "percentageOfNodesToScore: 101\n")
    r = ksched(*CONFIG_COMMANDS[cmd], str(cfg))
    assert r.returncode == 1, (cmd, r.stderr)
    assert "percentageOfNodesToScore" in r.stderr


def test_plugin_dir_that_is_a_file(ksched):
    line = one_line_error(ksched("plugins", "list", "--plugin-dir", str(EXAMPLES / "pods.yaml")), 2)
    assert "not a directory" in line and "does not exist" not in line


@pytest.mark.parametrize("args", [
    ("new-plugin", "Foo", "--points", "bogus"),
    ("deploy", "--second-scheduler", "--config", str(GOOD_CONFIG), "--image", "x", "--replicas", "0", "-o", "yaml"),
    ("run", "-v=notanumber"),
])
def test_bad_option_values_are_usage_errors(ksched, tmp_path: Path, args: tuple[str, ...]):
    r = ksched(*args, "--kubeconfig", "unused") if args[0] == "run" else ksched(*args, cwd=tmp_path)
    one_line_error(r, 2)
    assert not (tmp_path / "plugins").exists()


# ----------------------------------------------------------------------------- 6: namespace rule


def test_namespace_is_checked_as_a_dns_label(ksched, second_config: Path):
    base = ("deploy", "--second-scheduler", "--config", str(second_config), "--image", "x", "-o", "yaml")
    line = one_line_error(ksched(*base, "-n", "Bad_NS"), 2)
    assert "--namespace" in line and "lowercase RFC 1123 label" in line and "40" not in line
    long_ns = "n" * 50  # longer than --name's 40, a valid namespace
    r = ksched(*base, "-n", long_ns)
    assert r.returncode == 0, r.stderr
    line = one_line_error(ksched(*base, "-n", "n" * 64), 2)
    assert "63" in line


# ----------------------------------------------------------------------------- 7: flags without kubeconfig


@pytest.mark.parametrize("args", [("-v=4",), ("--config", str(GOOD_CONFIG), "--leader-elect=false")])
def test_kube_scheduler_flags_without_kubeconfig(ksched, no_kube_env: Path, args: tuple[str, ...]):
    line = one_line_error(ksched("run", *args), 2)
    flags = args[0] if len(args) == 1 else args[-1]
    assert line == (f"error: kube-scheduler flags ({flags}) run against an API server and no kubeconfig was "
                    "given (--kubeconfig, clientConnection.kubeconfig in --config, or in-cluster); "
                    "drop them to run on the embedded cluster")


# ----------------------------------------------------------------------------- 8: --debug anywhere


def test_debug_after_the_subcommand(ksched, tmp_path: Path):
    folder = tmp_path / "out"
    folder.mkdir()
    old = tmp_path / "old.yaml"
    old.write_text(OLD_CONFIG)
    r = ksched("config", "validate", "--debug", str(GOOD_CONFIG))
    assert r.returncode == 0, r.stderr
    r = ksched("config", "migrate", str(old), "--write-to", str(folder), "--debug")
    assert r.returncode != 0 and "Traceback" in r.stderr and "No such option" not in r.stderr
    r = ksched("simulate", *SIM, "--debug", "-o", "json")
    assert r.returncode == 0, r.stderr


# ----------------------------------------------------------------------------- 9: empty inputs, order


def test_empty_pods_or_cluster_warn(ksched, tmp_path: Path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    r = ksched("simulate", "--cluster", str(EXAMPLES / "cluster"), "--pods", str(empty))
    assert r.returncode == 0, r.stderr
    assert f"warning: no pods in {empty}" in r.stderr
    folder = tmp_path / "cluster"
    folder.mkdir()
    r = ksched("simulate", "--cluster", str(folder), "--pods", str(EXAMPLES / "pods.yaml"))
    assert r.returncode == 0, r.stderr
    assert f"warning: no nodes in {folder}" in r.stderr


def test_run_validates_pods_before_the_banner(ksched, tmp_path: Path):
    bad = tmp_path / "bad-pods.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  priority: high\n"
                   "  containers:\n  - name: c\n    image: x\n")
    r = ksched("run", "--cluster", str(EXAMPLES / "cluster"), "--pods", str(bad))
    line = one_line_error(r, 1)
    assert str(bad) in line and "spec.priority" in line
    assert r.stdout == "", r.stdout


def test_installed_script_is_used():
    assert KSCHED.exists() and os.access(KSCHED, os.X_OK)


# ----------------------------------------------------------------------------- 10: exit codes of cluster/pod inputs
# (the code comes from the error's class and its raise site: README "Exit codes")

POD = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata: {name: p1}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
    """)


@pytest.mark.parametrize("what,text,code,needle", [
    ("malformed YAML", "apiVersion: [v1\n", 2, "invalid YAML"),
    ("duplicate key", POD + "metadata: {name: p2}\n", 2, "duplicate key"),
    ("not UTF-8", None, 2, "not UTF-8 text"),
    ("a list, not an object", "- 1\n- 2\n", 1, "expected a Kubernetes object"),
    ("maxSkew 0", POD + "  topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, "
                        "whenUnsatisfiable: DoNotSchedule}]\n", 1, "maxSkew"),
    ("bad priority", POD.replace("spec:\n", "spec:\n  priority: high\n"), 1, "spec.priority"),
])
def test_pod_files_unreadable_exit_2_invalid_exit_1(ksched, tmp_path: Path, what: str, text: str | None,
                                                     code: int, needle: str):
    pods = tmp_path / "pods.yaml"
    if text is None:
        pods.write_bytes(b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff\xfe}\n")
    else:
        pods.write_text(text)
    line = one_line_error(ksched("simulate", "--cluster", str(EXAMPLES / "cluster"), "--pods", str(pods)), code)
    assert str(pods) in line and needle in line, (what, line)


def test_missing_cluster_folder_exits_2(ksched, tmp_path: Path):
    line = one_line_error(ksched("simulate", "--cluster", str(tmp_path / "nope"), "--pods",
                                 str(EXAMPLES / "pods.yaml")), 2)
    assert line == f"error: {tmp_path / 'nope'}: no such file or directory"


@pytest.mark.parametrize("args,code,needle", [
    (("--args", "ratio:float=nan"), 2, "not a finite number"),
    (("--args", "limit:int=-3"), 2, "fails the generated validator"),
    (("--description", 'ok """ quotes \\ fine'), 0, ""),
])
def test_new_plugin_bad_defaults_are_usage_errors(ksched, tmp_path: Path, args: tuple[str, ...], code: int,
                                                  needle: str):
    r = ksched("new-plugin", "ExitCheck", "--points", "filter", *args, "--dir", str(tmp_path / "plugins"))
    if code == 0:
        assert r.returncode == 0, r.stderr
        return
    assert needle in one_line_error(r, code)
    assert not (tmp_path / "plugins").exists()

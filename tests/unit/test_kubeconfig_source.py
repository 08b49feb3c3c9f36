"""Which kubeconfig `ksched run`/`kube-scheduler` uses: kube-scheduler's rule (ApplyTo + BuildConfigFromFlags):
--config's clientConnection.kubeconfig wins and --kubeconfig is then ignored; never $KUBECONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_runtime.errors import KschedError
from scheduler_runtime.kubeconfig_source import choose, require_usable

ENV = {"KUBECONFIG": "/env/kubeconfig"}


@pytest.mark.parametrize("config_file,config_kc,flag_kc,env,path,line", [
    ("cfg.yaml", "/cc", "/flag", ENV, "/cc",
     "using kubeconfig /cc from --config clientConnection.kubeconfig (--kubeconfig is ignored when --config is "
     "given, as in kube-scheduler; $KUBECONFIG is not read, as in kube-scheduler)"),
    ("cfg.yaml", "/cc", None, {}, "/cc", "using kubeconfig /cc from --config clientConnection.kubeconfig"),
    ("cfg.yaml", "", "/flag", {}, None,
     "using the in-cluster service account because clientConnection.kubeconfig in cfg.yaml is empty "
     "(--kubeconfig is ignored when --config is given, as in kube-scheduler)"),
    ("cfg.yaml", "", None, ENV, None,
     "using the in-cluster service account because clientConnection.kubeconfig in cfg.yaml is empty "
     "($KUBECONFIG is not read, as in kube-scheduler)"),
    (None, None, "/flag", ENV, "/flag",
     "using kubeconfig /flag from --kubeconfig ($KUBECONFIG is not read, as in kube-scheduler)"),
    (None, None, "/flag", {"KUBECONFIG": "/flag"}, "/flag", "using kubeconfig /flag from --kubeconfig"),
    (None, None, None, ENV, None,
     "using the in-cluster service account because neither --kubeconfig nor --config was given "
     "($KUBECONFIG is not read, as in kube-scheduler)"),
    (None, None, None, {}, None,
     "using the in-cluster service account because neither --kubeconfig nor --config was given"),
])
def test_each_combination(config_file: str | None, config_kc: str | None, flag_kc: str | None,
                          env: dict[str, str], path: str | None, line: str) -> None:
    src = choose(config_file=config_file, config_kubeconfig=config_kc, flag_kubeconfig=flag_kc, environ=env)
    assert src.path == path
    assert src.describe() == line


def test_master_overrides_the_server_or_stands_alone() -> None:
    src = choose(config_file=None, config_kubeconfig=None, flag_kubeconfig="/k", master="https://m:6443", environ={})
    assert src.describe() == "using kubeconfig /k from --kubeconfig, with the server overridden by --master https://m:6443"
    alone = choose(config_file=None, config_kubeconfig=None, flag_kubeconfig=None, master="https://m:6443",
                   environ={})
    assert alone.path is None and alone.master == "https://m:6443"
    require_usable(alone, False, config_file=None, flag_kubeconfig=None)  # no in-cluster account needed


@pytest.mark.parametrize("config_file,flag_kc,fix", [
    ("cfg.yaml", "/flag", "set clientConnection.kubeconfig: /flag in cfg.yaml"),
    ("cfg.yaml", None, "set clientConnection.kubeconfig in cfg.yaml"),
    (None, None, "pass --kubeconfig"),
])
def test_the_in_cluster_account_outside_a_pod_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                                     config_file: str | None, flag_kc: str | None,
                                                                     fix: str) -> None:
    monkeypatch.setenv("KUBECONFIG", "/env/kubeconfig")
    src = choose(config_file=config_file, config_kubeconfig="", flag_kubeconfig=flag_kc)
    with pytest.raises(KschedError) as err:
        require_usable(src, False, config_file=config_file, flag_kubeconfig=flag_kc)
    assert err.value.exit_code == 2 and fix in str(err.value) and "$KUBECONFIG is not read" in str(err.value)
    require_usable(src, True, config_file=config_file, flag_kubeconfig=flag_kc)  # in a pod: fine


KUBECONFIG_DOC = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_runtime_connection_never_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from scheduler_runtime.cluster.kube import KubeConfigError, load_connection

    kc = tmp_path / "kubeconfig"
    kc.write_text(KUBECONFIG_DOC)
    monkeypatch.setenv("KUBECONFIG", str(kc))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert load_connection().host == "https://10.0.0.1:6443"  # kubectl-like commands do read $KUBECONFIG
    with pytest.raises(KubeConfigError, match="in-cluster config"):
        load_connection(None, fallbacks=False)  # kube-scheduler's rule: only the in-cluster account is left
    assert load_connection(str(kc), fallbacks=False, master="https://m:6443/").host == "https://m:6443"
    alone = load_connection(None, fallbacks=False, master="https://m:6443")
    assert alone.host == "https://m:6443" and alone.auth is None


def test_context_picks_a_context_of_the_chosen_kubeconfig() -> None:
    """ksched's --context (kube-scheduler has none): a context of the kubeconfig kube-scheduler's rule chose,
    said in the start-up line; with no kubeconfig to take it from, a usage error."""
    from scheduler_runtime.errors import UsageError

    s = choose(config_file=None, config_kubeconfig=None, flag_kubeconfig="/k", environ={}, context="prod")
    assert s.context == "prod" and s.describe() == "using kubeconfig /k from --kubeconfig, context prod"
    via_config = choose(config_file="c.yaml", config_kubeconfig="/cc", flag_kubeconfig="/k", environ={},
                        context="prod")
    assert via_config.path == "/cc" and via_config.context == "prod"
    with pytest.raises(UsageError, match="--context prod: no kubeconfig") as err:
        choose(config_file=None, config_kubeconfig=None, flag_kubeconfig=None, environ={}, context="prod")
    assert err.value.exit_code == 2

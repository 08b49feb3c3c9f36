"""Scheduler extenders on the embedded cluster, against a real extender process over HTTP(S)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_runtime.cluster.memory import MemoryCluster
from scheduler_runtime.config.loader import ConfigError, build
from scheduler_runtime.describe import RESULT_ANNOTATION
from scheduler_runtime.plugins.registry import build_registry
from scheduler_runtime.scheduler import Scheduler
from scheduler_runtime.simresults import PREFIX

REG = build_registry([])


def _node(name: str, cpu: str = "4", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110", "example.com/gpu": "4"}}}


def _pod(name: str, cpu: str = "100m", priority: int = 0, **extra: str) -> dict[str, Any]:
    req = {"cpu": cpu, **extra}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": req}}]}
    if priority:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def _config(*extenders: dict[str, Any], **top: Any) -> Any:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "extenders": list(extenders), **top}
    return build(doc, REG)


def _run(cfg: Any, nodes: list[dict], pods: list[dict], mode: str = "ksched",
         bound: list[dict] | None = None) -> tuple[MemoryCluster, Scheduler]:
    m = MemoryCluster()
    for o in nodes + (bound or []):
        m.create(o, emit=False)
    s = Scheduler(m, cfg, REG, seed=1, results_mode=mode)
    s.start()
    for p in pods:
        m.create(p)
    s.run(until_idle=True)
    return m, s


def _placed(m: MemoryCluster, name: str) -> str | None:
    return (m.get_pod("ns", name).get("spec") or {}).get("nodeName")


def _result(m: MemoryCluster, name: str) -> dict[str, Any]:
    return json.loads(m.get_pod("ns", name)["metadata"]["annotations"][RESULT_ANNOTATION])


def ext(url: str, **kw: Any) -> dict[str, Any]:
    return {"urlPrefix": url, **kw}


# ------------------------------------------------------------------------------------------------ filter
@pytest.mark.parametrize("cache", [True, False])
def test_filtered_node_is_never_chosen_and_wire_form_follows_node_cache_capable(extender_server: Any,
                                                                                  cache: bool) -> None:
    e = extender_server({"filter": {"reject": {"a": "no licence on a"}, "unresolvable": {"b": "b is retired"}}})
    cfg = _config(ext(e.url, filterVerb="filter", nodeCacheCapable=cache))
    m, _ = _run(cfg, [_node("a", "64"), _node("b", "64"), _node("c", "2")], [_pod(f"p{i}") for i in range(4)])
    assert {_placed(m, f"p{i}") for i in range(4)} == {"c"}
    reqs = e.requests("filter")
    assert reqs and reqs[0]["path"] == "/scheduler/filter" and reqs[0]["contentType"] == "application/json"
    body = reqs[0]["body"]
    assert body["Pod"]["metadata"]["name"] == "p0"
    if cache:
        assert body["Nodes"] is None and sorted(body["NodeNames"]) == ["a", "b", "c"]
    else:
        assert body["NodeNames"] is None
        items = body["Nodes"]["items"]
        assert sorted(n["metadata"]["name"] for n in items) == ["a", "b", "c"]
        assert items[0]["status"]["allocatable"]["cpu"]  # the node objects as the scheduler keeps them
    r = _result(m, "p0")
    assert r["extenders"][e.url]["filter"]["failed"] == {"a": "no licence on a"}
    assert r["extenders"][e.url]["filter"]["unresolvable"] == {"b": "b is retired"}


def test_extender_reasons_enter_the_failed_scheduling_message(extender_server: Any) -> None:
    e = extender_server({"filter": {"reject": {"a": "no licence", "b": "no licence"}}})
    cfg = _config(ext(e.url, filterVerb="filter", nodeCacheCapable=True))
    m, s = _run(cfg, [_node("a"), _node("b"), _node("c", "1")], [_pod("p", cpu="2")])
    assert _placed(m, "p") is None
    r = _result(m, "p")
    assert r["message"] == ("0/3 nodes are available: 1 Insufficient cpu, 2 no licence. "
                            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
                            "scheduling, 2 No preemption victims found for incoming pod.")
    assert r["filter_reasons"]["no licence"]["plugin"] == e.url
    assert r["filter_reasons"]["no licence"]["count"] == 2
    qpi = s.queue._unschedulable.get(m.get_pod("ns", "p")["metadata"]["uid"])
    assert qpi is not None and "Extender" in qpi.unschedulable_plugins


# ------------------------------------------------------------------------------------------------ prioritize
def test_prioritize_scores_are_weighted_and_scaled_like_kube(extender_server: Any) -> None:
    e = extender_server({"prioritize": {"scores": {"a": 3, "b": 7}, "default": 0}})
    cfg = _config(ext(e.url, prioritizeVerb="prioritize", weight=5))
    m, _ = _run(cfg, [_node("a"), _node("b"), _node("c")], [_pod("p")])
    assert _placed(m, "p") == "b"
    r = _result(m, "p")
    by_node = {s["node"]: s for s in r["scores"]}
    # score x weight x (MaxNodeScore / MaxExtenderPriority) = 7 x 5 x 10
    assert by_node["b"]["plugins"][e.url] == {"raw": 7, "normalized": 70, "weight": 5, "weighted": 350}
    assert by_node["a"]["plugins"][e.url]["weighted"] == 150
    plugin_part = sum(v["weighted"] for k, v in by_node["b"]["plugins"].items() if k != e.url)
    assert by_node["b"]["total"] == plugin_part + 350
    assert r["extenders"][e.url]["prioritize"] == {"weight": 5, "scores": {"a": 3, "b": 7, "c": 0}}


def test_prioritize_errors_only_lose_that_extenders_scores(extender_server: Any) -> None:
    bad = extender_server({"prioritize": {"status": 500}})
    good = extender_server({"prioritize": {"scores": {"c": 10}}})
    cfg = _config(ext(bad.url, prioritizeVerb="prioritize", weight=100), ext(good.url, prioritizeVerb="prioritize",
                                                                             weight=1))
    m, _ = _run(cfg, [_node("a"), _node("b"), _node("c")], [_pod("p")])
    assert _placed(m, "p") == "c"
    r = _result(m, "p")
    assert r["extenders"][bad.url]["prioritize"]["error"] == \
        f"failed prioritize with extender at URL {bad.url}/prioritize, code 500"


# ------------------------------------------------------------------------------------------------ errors
def test_non_ignorable_filter_error_fails_the_attempt_and_ignorable_is_skipped(extender_server: Any) -> None:
    e = extender_server({"filter": {"error": "licence server down"}})
    m, s = _run(_config(ext(e.url, filterVerb="filter")), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") is None
    r = _result(m, "p")
    assert r["outcome"] == "error" and r["message"] == "licence server down"
    cond = m.get_pod("ns", "p")["status"]["conditions"][0]
    assert cond["reason"] == "SchedulerError" and cond["message"] == "licence server down"
    m2, _ = _run(_config(ext(e.url, filterVerb="filter", ignorable=True)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m2, "p") in {"a", "b"}
    assert _result(m2, "p")["extenders"][e.url]["filter"] == {"error": "licence server down", "ignorable": True}


def test_http_timeout_applies_and_is_an_error(extender_server: Any) -> None:
    e = extender_server({"filter": {"sleep": 3}})
    m, _ = _run(_config(ext(e.url, filterVerb="filter", httpTimeout="300ms")), [_node("a")], [_pod("p")])
    assert _placed(m, "p") is None
    msg = _result(m, "p")["message"]
    assert msg == f'Post "{e.url}/filter": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'


def test_unreachable_extender_message_is_gos(extender_server: Any) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    m, _ = _run(_config(ext(url, filterVerb="filter")), [_node("a")], [_pod("p")])
    assert _result(m, "p")["message"] == \
        f'Post "{url}/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'


def test_cache_capable_extender_claiming_an_unknown_node_is_an_error(extender_server: Any) -> None:
    e = extender_server({"filter": {"claim": ["ghost"]}})
    m, _ = _run(_config(ext(e.url, filterVerb="filter", nodeCacheCapable=True)), [_node("a")], [_pod("p")])
    assert _result(m, "p")["message"] == \
        f'extender "{e.url}" claims a filtered node "ghost" which is not found in the input node list'


# ------------------------------------------------------------------------------------------------ interest
def test_managed_resources_decide_which_pods_the_extender_sees(extender_server: Any) -> None:
    e = extender_server({"filter": {"reject": {"a": "no"}}})
    cfg = _config(ext(e.url, filterVerb="filter", managedResources=[{"name": "example.com/gpu"}]))
    init_pod = _pod("init")
    init_pod["spec"]["initContainers"] = [{"name": "i", "image": "x",
                                           "resources": {"limits": {"example.com/gpu": "1"}}}]
    m, _ = _run(cfg, [_node("a", "64"), _node("b", "1")],
                [_pod("plain"), _pod("gpu", **{"example.com/gpu": "1"}), init_pod])
    seen = [r["body"]["Pod"]["metadata"]["name"] for r in e.requests("filter")]
    assert "plain" not in seen and "gpu" in seen and "init" in seen
    assert _placed(m, "gpu") == "b" and _placed(m, "init") == "b"


def test_ignored_by_scheduler_resources_are_ignored_by_node_resources_fit(extender_server: Any) -> None:
    e = extender_server({})
    cfg = _config(ext(e.url, filterVerb="filter",
                      managedResources=[{"name": "example.com/fpga", "ignoredByScheduler": True}]))
    assert cfg.profiles[0].args["NodeResourcesFit"].ignored_resources == ["example.com/fpga"]
    m, _ = _run(cfg, [_node("a")], [_pod("p", **{"example.com/fpga": "1"})])  # no node has any fpga
    assert _placed(m, "p") == "a"
    m2, _ = _run(_config(), [_node("a")], [_pod("p", **{"example.com/fpga": "1"})])
    assert _placed(m2, "p") is None


# ------------------------------------------------------------------------------------------------ bind
def test_bind_verb_delegates_binding_to_the_extender(extender_server: Any) -> None:
    e = extender_server({})
    m, s = _run(_config(ext(e.url, bindVerb="bind")), [_node("a")], [_pod("p")])
    (req,) = e.requests("bind")
    assert req["body"] == {"PodName": "p", "PodNamespace": "ns", "PodUID": m.get_pod("ns", "p")["metadata"]["uid"],
                           "Node": "a"}
    assert _placed(m, "p") is None  # the extender binds (this one does not): the default binder did not
    assert s.results.get("ns/p").outcome == "scheduled"


def test_bind_error_non_ignorable_fails_and_ignorable_falls_back_to_default_binder(extender_server: Any) -> None:
    e = extender_server({"bind": {"error": "quota exceeded"}})
    m, s = _run(_config(ext(e.url, bindVerb="bind")), [_node("a")], [_pod("p")])
    assert _placed(m, "p") is None and s.results.get("ns/p").message == "quota exceeded"
    m2, _ = _run(_config(ext(e.url, bindVerb="bind", ignorable=True)), [_node("a")], [_pod("p")])
    assert _placed(m2, "p") == "a"


# ------------------------------------------------------------------------------------------------ preempt
def _victim(name: str, node: str) -> dict[str, Any]:
    p = _pod(name, cpu="3")
    p["spec"]["nodeName"] = node
    p["metadata"]["creationTimestamp"] = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).isoformat()
    return p


@pytest.mark.parametrize("cache", [True, False])
def test_preempt_verb_filters_candidate_nodes(extender_server: Any, cache: bool) -> None:
    e = extender_server({"preempt": {"drop": ["a"]}})
    cfg = _config(ext(e.url, preemptVerb="preempt", nodeCacheCapable=cache))
    m, s = _run(cfg, [_node("a"), _node("b")], [_pod("hi", cpu="3", priority=100)],
                bound=[_victim("va", "a"), _victim("vb", "b")])
    (req,) = e.requests("preempt")[:1]
    body = req["body"]
    if cache:
        assert body["NodeNameToVictims"] is None
        assert set(body["NodeNameToMetaVictims"]) == {"a", "b"}
        assert body["NodeNameToMetaVictims"]["a"]["Pods"][0] == {"UID": m.get_pod("ns", "va")["metadata"]["uid"]}
    else:
        assert body["NodeNameToMetaVictims"] is None
        assert body["NodeNameToVictims"]["b"]["Pods"][0]["metadata"]["name"] == "vb"
        assert body["NodeNameToVictims"]["b"]["NumPDBViolations"] == 0
    assert m.get_pod("ns", "va") is not None  # the extender kept only node b
    assert m.get_pod("ns", "vb") is None or m.get_pod("ns", "vb")["metadata"].get("deletionTimestamp")


def test_preempt_extender_dropping_all_nodes_means_no_candidate(extender_server: Any) -> None:
    e = extender_server({"preempt": {"drop": ["a"]}})
    m, _ = _run(_config(ext(e.url, preemptVerb="preempt")), [_node("a")], [_pod("hi", cpu="3", priority=100)],
                bound=[_victim("va", "a")])
    assert m.get_pod("ns", "va") is not None
    assert _result(m, "hi")["message"].endswith(
        ". preemption: no candidate node for preemption")


# ------------------------------------------------------------------------------------------------ simulator
def test_simulator_results_carry_extender_responses(extender_server: Any) -> None:
    e = extender_server({"filter": {"reject": {"a": "no"}}, "prioritize": {"scores": {"b": 1}}})
    cfg = _config(ext(e.url, filterVerb="filter", prioritizeVerb="prioritize", weight=1))
    m, _ = _run(cfg, [_node("a"), _node("b"), _node("c")], [_pod("p")], mode="simulator")
    ann = m.get_pod("ns", "p")["metadata"]["annotations"]
    filt = json.loads(ann[PREFIX + "extender-filter-result"])
    assert filt[e.url]["FailedNodes"] == {"a": "no"}
    assert {h["Host"] for h in json.loads(ann[PREFIX + "extender-prioritize-result"])[e.url]} == {"b", "c"}
    assert json.loads(ann[PREFIX + "extender-bind-result"]) == {}
    assert e.url not in json.loads(ann[PREFIX + "score-result"])["b"]  # plugins only, as the simulator
    assert ann[PREFIX + "selected-node"] == "b"


# ------------------------------------------------------------------------------------------------ HTTPS
def _pki(d: Path) -> tuple[Path, Path, Path]:
    """A CA (d/ca.pem) and the extender's serving pair for extender.test (d/tls.crt, d/tls.key)."""
    ca, ca_key = _ca(d)
    cert, key = _issue(d, "tls", ca, ca_key, "extender", dns="extender.test")
    return d / "ca.pem", cert, key


def _ca(d: Path, name: str = "ca") -> tuple[Any, Any]:
    """A self-signed CA certificate written to d/NAME.pem; returns (certificate, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test-{name}")])
    key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    (d / f"{name}.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return ca, key


def _issue(d: Path, stem: str, ca: Any, ca_key: Any, cn: str, dns: str | None = None) -> tuple[Path, Path]:
    """A certificate for CN `cn` (and DNS name `dns`, else a client certificate) signed by the CA, written to
    d/STEM.crt and d/STEM.key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
         .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1)))
    if dns:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    cert_p, key_p = d / f"{stem}.crt", d / f"{stem}.key"
    cert_p.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_p.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    return cert_p, key_p


def test_https_with_a_generated_ca_server_name_and_ca_data(extender_server: Any, tmp_path: Path) -> None:
    import base64

    ca, cert, key = _pki(tmp_path)
    e = extender_server({"filter": {"reject": {"a": "no"}}}, cert=str(cert), key=str(key))
    tls = {"caFile": str(ca), "serverName": "extender.test"}
    m, _ = _run(_config(ext(e.url, filterVerb="filter", enableHTTPS=True, tlsConfig=tls)),
                [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"
    tls_data = {"caData": base64.b64encode(ca.read_bytes()).decode(), "serverName": "extender.test"}
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig=tls_data)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"
    # the certificate is for extender.test, not 127.0.0.1: verification without serverName fails
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig={"caFile": str(ca)})), [_node("a")], [_pod("p")])
    assert _placed(m, "p") is None and _result(m, "p")["message"].startswith(f'Post "{e.url}/filter": tls: ')
    # enableHTTPS without a CA: insecure, as kube-scheduler
    m, _ = _run(_config(ext(e.url, filterVerb="filter", enableHTTPS=True)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"


def test_https_client_certificate_from_files_or_data_and_explicit_insecure(extender_server: Any,
                                                                          tmp_path: Path) -> None:
    """tlsConfig certFile/keyFile and certData/keyData present a client certificate (the extender requires one
    signed by its client CA and logs who called); without one the handshake fails and the non-ignorable
    extender fails the attempt; `insecure: true` skips verifying the extender's certificate."""
    import base64

    ca, cert, key = _pki(tmp_path)
    client_ca, client_ca_key = _ca(tmp_path, "client-ca")
    ccert, ckey = _issue(tmp_path, "client", client_ca, client_ca_key, "kube-scheduler-extender-client")
    e = extender_server({"filter": {"reject": {"a": "no"}}}, cert=str(cert), key=str(key),
                        client_ca=str(tmp_path / "client-ca.pem"))
    base = {"caFile": str(ca), "serverName": "extender.test"}
    files = {**base, "certFile": str(ccert), "keyFile": str(ckey)}
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig=files)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"
    assert {r["clientCN"] for r in e.requests("filter")} == {"kube-scheduler-extender-client"}
    data = {**base, "certData": base64.b64encode(ccert.read_bytes()).decode(),
            "keyData": base64.b64encode(ckey.read_bytes()).decode()}
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig=data)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"
    assert len(e.requests("filter")) == 2
    # no client certificate: the extender refuses the handshake, so the call fails and so does the attempt
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig=base)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") is None
    assert _result(m, "p")["message"].startswith(f'Post "{e.url}/filter": ')
    assert len(e.requests("filter")) == 2  # never reached the handler
    # a certificate only in certFile (no key): HasCertAuth is false, so none is sent, as client-go
    half = {**base, "certFile": str(ccert)}
    m, _ = _run(_config(ext(e.url, filterVerb="filter", tlsConfig=half)), [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") is None
    # insecure: the serving certificate (for extender.test, from a CA not given) is not verified
    plain = extender_server({"filter": {"reject": {"a": "no"}}}, cert=str(cert), key=str(key))
    m, _ = _run(_config(ext(plain.url, filterVerb="filter", tlsConfig={"insecure": True})),
                [_node("a"), _node("b")], [_pod("p")])
    assert _placed(m, "p") == "b"


# ------------------------------------------------------------------------------------------------ config
def _errors(*extenders: Any) -> list[str]:
    with pytest.raises(ConfigError) as ei:
        _config(*extenders)
    return ei.value.errors


def test_validation_is_kubes() -> None:
    assert _errors(ext("u", prioritizeVerb="p")) == [
        "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it"]
    assert _errors(ext("u", bindVerb="b"), ext("v", bindVerb="b")) == [
        'extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind']
    assert _errors(ext("u", managedResources=[{"name": "kubernetes.io/foo"}])) == [
        'extenders[0].managedResources[0].name: Invalid value: "kubernetes.io/foo": is an invalid extended '
        'resource name']
    assert _errors(ext("u", managedResources=[{"name": "foo.com/bar"}]),
                   ext("v", managedResources=[{"name": "foo.com/bar"}])) == [
        'extenders[1].managedResources[0].name: Invalid value: "foo.com/bar": duplicate extender managed '
        'resource name']
    assert _errors(ext("u", weight="5")) == ['extenders[0].weight: Invalid value: "5": expected integer']
    assert _errors(ext("u", verb="x")) == ['extenders[0].verb: unknown field "verb"']
    assert _errors(ext("u", managedResources=[{"name": "cpu"}])) == [
        'extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name']


def test_ignored_resources_need_node_resources_fit_args() -> None:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "s",
                         "plugins": {"multiPoint": {"disabled": [{"name": "NodeResourcesFit"}]}}}],
           "extenders": [ext("u", managedResources=[{"name": "example.com/x", "ignoredByScheduler": True}])]}
    with pytest.raises(ConfigError) as ei:
        build(doc, REG)
    assert "can't find NodeResourcesFitArgs in plugin config" in str(ei.value)


def test_config_default_renders_extenders_as_write_config_to() -> None:
    cfg = _config(ext("http://e/", filterVerb="filter", weight=0, nodeCacheCapable=False,
                      tlsConfig={"insecure": True, "certData": "YWJj"},
                      managedResources=[{"name": "example.com/gpu", "ignoredByScheduler": False}]))
    assert cfg.raw["extenders"] == [{"filterVerb": "filter", "httpTimeout": "5s",
                                     "managedResources": [{"name": "example.com/gpu"}],
                                     "tlsConfig": {"certData": "YWJj", "insecure": True}, "urlPrefix": "http://e/"}]
    text = yaml.safe_dump(cfg.raw)
    assert build(yaml.safe_load(text), REG).raw["extenders"] == cfg.raw["extenders"]
    assert _config(ext("u", httpTimeout="1m30s")).raw["extenders"][0]["httpTimeout"] == "1m30s"
    assert _config(ext("u", httpTimeout="1500ms")).raw["extenders"][0]["httpTimeout"] == "1.5s"


# ------------------------------------------------------------------------------------------------ describe-pod
def test_describe_pod_shows_extender_verdicts_beside_the_plugins(extender_server: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    e = extender_server({"filter": {"reject": {"a": "no licence"}}, "prioritize": {"scores": {"c": 9, "b": 2}}})
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "nodes.yaml").write_text(yaml.safe_dump_all([_node("a"), _node("b"), _node("c")]))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump(_pod("p")))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                   "extenders": [ext(e.url, filterVerb="filter", prioritizeVerb="prioritize",
                                                     weight=2)]}))
    ksched = Path(sys.executable).parent / "ksched"
    args = [str(ksched), "describe-pod", "p", "-n", "ns", "--cluster", str(tmp_path / "cluster"), "--pods",
            str(tmp_path / "pods.yaml"), "--config", str(cfg)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env={"COLUMNS": "250", **__import__(
        "os").environ})
    assert r.returncode == 0, r.stderr
    assert "Node: c" in r.stdout
    assert "Extenders" in r.stdout and "kept 2; failed: a (no licence)" in r.stdout
    assert "weight 2: b=2, c=9" in r.stdout
    assert "90x2" in r.stdout  # the extender's column in the score table: 9 x 10 at weight 2
    j = subprocess.run([*args, "-o", "json"], capture_output=True, text=True, timeout=120)
    res = json.loads(j.stdout)["schedulingResult"]
    assert res["extenders"][e.url]["filter"]["failed"] == {"a": "no licence"}


# ------------------------------------------------------------------------------------------------ metrics
def test_prioritizing_extender_goroutines_gauge(extender_server: Any) -> None:
    import threading
    import time

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from scheduler_runtime.metrics import SchedulerMetrics

    def gauge(m: SchedulerMetrics) -> float | None:
        for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
            for s in fam.samples:
                if s.name == "scheduler_goroutines" and s.labels.get("operation") == "prioritizing_extender":
                    return s.value
        return None

    e = extender_server({"prioritize": {"sleep": 2, "scores": {"a": 1}}})
    cfg = _config(ext(e.url, prioritizeVerb="prioritize", weight=1))
    m = MemoryCluster()
    for n in (_node("a"), _node("b")):
        m.create(n, emit=False)
    metrics = SchedulerMetrics()
    s = Scheduler(m, cfg, REG, seed=1, metrics=metrics)
    s.start()
    assert gauge(metrics) == 0
    m.create(_pod("p"))
    t = threading.Thread(target=s.run, kwargs={"until_idle": True}, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and gauge(metrics) != 1:
        time.sleep(0.02)
    assert gauge(metrics) == 1
    t.join(60)
    assert gauge(metrics) == 0 and _placed(m, "p") == "a"


# ------------------------------------------------------------------------------------------------ the example
def test_example_extender_with_simulate(tmp_path: Path) -> None:
    """examples/extender: its script and config, through `ksched simulate` (table and JSON)."""
    import os
    import socket
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(root / "examples/extender/extender.py"), "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "listening" in proc.stdout.readline()
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text((root / "examples/extender/scheduler-config.yaml").read_text().replace(":8888/", f":{port}/"))
        ksched = Path(sys.executable).parent / "ksched"
        args = [str(ksched), "simulate", "--cluster", str(root / "examples/cluster"), "--pods",
                str(root / "examples/pods.yaml"), "--config", str(cfg)]
        r = subprocess.run([*args, "-o", "json"], capture_output=True, text=True, timeout=120, cwd=root)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["pods"] and all(p["node"] != "node-c1" for p in out["pods"])  # zone-c has no licence
        verdicts = [p["extenders"] for p in out["pods"] if "extenders" in p]
        assert any("node-c1" in v[f"http://127.0.0.1:{port}/licence"]["filter"].get("failed", {}) for v in verdicts)
        t = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=root,
                           env={**os.environ, "COLUMNS": "200"})
        assert t.returncode == 0 and "extender verdicts" in t.stdout and "no GPU licence left in zone-c" in t.stdout
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_undecodable_responses_are_errors_worded_like_go(extender_server: Any) -> None:
    e = extender_server({"filter": {"raw": "oops, not json"}})
    m, _ = _run(_config(ext(e.url, filterVerb="filter")), [_node("a")], [_pod("p")])
    assert _result(m, "p")["message"] == "invalid character 'o' looking for beginning of value"
    e.set({"filter": {"raw": '{"FailedNodes": ["a"]}'}})
    m, _ = _run(_config(ext(e.url, filterVerb="filter")), [_node("a")], [_pod("p")])
    assert _result(m, "p")["message"] == ("json: cannot unmarshal array into Go struct field "
                                          "ExtenderFilterResult.FailedNodes of type extenderv1.FailedNodesMap")
    e.set({"filter": {"raw": '{"nodenames": ["a"], "failednodes": {}, "Unknown": 1}'}})  # Go matches any case
    m, _ = _run(_config(ext(e.url, filterVerb="filter", nodeCacheCapable=True)), [_node("a"), _node("b")],
                [_pod("p")])
    assert _placed(m, "p") == "a"


def test_tls_problems_kube_refuses_at_start_up_are_config_errors(tmp_path: Path) -> None:
    assert _errors(ext("https://e", tlsConfig={"caFile": str(tmp_path / "missing.pem")})) == [
        f"extenders[0].tlsConfig.caFile: open {tmp_path / 'missing.pem'}: no such file or directory"]
    assert _errors(ext("https://e", tlsConfig={"insecure": True, "caData": "YWJj"})) == [
        "extenders[0].tlsConfig: specifying a root certificates file with the insecure flag is not allowed"]


def test_preempt_errors_ignorable_and_not(extender_server: Any) -> None:
    e = extender_server({"preempt": {"status": 500}})
    nodes, bound = [_node("a")], [_victim("va", "a")]
    m, _ = _run(_config(ext(e.url, preemptVerb="preempt")), nodes, [_pod("hi", cpu="3", priority=100)], bound=bound)
    assert m.get_pod("ns", "va") is not None  # nothing preempted
    # DefaultPreemption prefixes "preemption: "; RunPostFilterPlugins passes the error on unwrapped
    assert _result(m, "hi")["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: failed preempt "
                                           f"with extender at URL {e.url}/preempt, code 500")
    m, _ = _run(_config(ext(e.url, preemptVerb="preempt", ignorable=True)), nodes,
                [_pod("hi", cpu="3", priority=100)], bound=bound)
    assert m.get_pod("ns", "va") is None or m.get_pod("ns", "va")["metadata"].get("deletionTimestamp")
    e.set({"preempt": {"empty": ["a"]}})
    m, _ = _run(_config(ext(e.url, preemptVerb="preempt")), nodes, [_pod("hi", cpu="3", priority=100)], bound=bound)
    assert _result(m, "hi")["message"].endswith('. preemption: expected at least one victim pod on node "a"')
    m, _ = _run(_config(ext(e.url, preemptVerb="preempt", ignorable=True)), nodes,
                [_pod("hi", cpu="3", priority=100)], bound=bound)
    assert _result(m, "hi")["message"].endswith(
        ". preemption: no candidate node for preemption")


@pytest.mark.parametrize("cache", [True, False])
def test_nodes_returned_by_a_full_node_filter_are_scored_as_empty_nodes(extender_server: Any, cache: bool) -> None:
    """kube-scheduler 1.36.3 builds new NodeInfos from the Node objects a non-nodeCacheCapable filter extender
    returns: NodeResourcesFit and BalancedAllocation then score them without their pods."""
    e = extender_server({"filter": {}})
    busy = _victim("busy", "a")
    busy["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "7"
    m, _ = _run(_config(ext(e.url, filterVerb="filter", nodeCacheCapable=cache)), [_node("a", "8"), _node("b", "4")],
                [_pod("p")], bound=[busy])
    # with its pods, a (7 of 8 CPUs used) loses to the empty b; as an empty 8-CPU node it wins
    assert _placed(m, "p") == ("b" if cache else "a")
    fit = {s["node"]: s["plugins"]["NodeResourcesFit"]["raw"] for s in _result(m, "p")["scores"]}
    assert fit["a"] > fit["b"] if not cache else fit["a"] < fit["b"]


def test_ignorable_extenders_run_after_the_others(extender_server: Any) -> None:
    first = extender_server({"filter": {"reject": {"a": "from the ignorable one"}}})
    second = extender_server({"filter": {"reject": {"b": "from the strict one"}}})
    cfg = _config(ext(first.url, filterVerb="filter", nodeCacheCapable=True, ignorable=True),
                  ext(second.url, filterVerb="filter", nodeCacheCapable=True))
    m, _ = _run(cfg, [_node("a"), _node("b"), _node("c")], [_pod("p")])
    assert _placed(m, "p") == "c"
    assert sorted(second.requests("filter")[0]["body"]["NodeNames"]) == ["a", "b", "c"]
    assert sorted(first.requests("filter")[0]["body"]["NodeNames"]) == ["a", "c"]  # after the strict one


def test_without_score_plugins_an_extender_still_sees_every_feasible_node(extender_server: Any) -> None:
    e = extender_server({"filter": {}})
    cfg = _config(ext(e.url, filterVerb="filter", nodeCacheCapable=True),
                  profiles=[{"schedulerName": "default-scheduler",
                             "plugins": {"score": {"disabled": [{"name": "*"}]}}}])
    assert not cfg.profiles[0].plan["score"]
    _run(cfg, [_node("a"), _node("b"), _node("c")], [_pod("p")])
    assert len(e.requests("filter")[0]["body"]["NodeNames"]) == 3
    e2 = extender_server({})  # no filter or prioritize verb: the usual first-feasible-node shortcut
    m, _ = _run(_config(ext(e2.url, bindVerb="bind", ignorable=True),
                        profiles=[{"schedulerName": "default-scheduler",
                                   "plugins": {"score": {"disabled": [{"name": "*"}]}}}]),
                [_node("a"), _node("b"), _node("c")], [_pod("p")])
    assert _result(m, "p")["feasible"] == 1

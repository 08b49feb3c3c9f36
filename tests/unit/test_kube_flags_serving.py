"""kube-scheduler's serving and delegated-auth flags reach the runtime (none is accepted and ignored)."""

from __future__ import annotations

import pytest

from scheduler_runtime.errors import UsageError
from scheduler_runtime.options.flags import parse
from scheduler_runtime.options.resolve import auth_options


def test_auth_flags_become_options_with_kube_defaults() -> None:
    o = auth_options(parse([]))
    assert o.always_allow_paths == ["/healthz", "/readyz", "/livez"]
    assert (o.token_cache_ttl, o.authorized_ttl, o.unauthorized_ttl) == (10.0, 10.0, 10.0)
    assert o.tolerate_lookup_failure and not o.skip_lookup
    assert o.authentication_kubeconfig is None and o.authorization_kubeconfig is None
    o = auth_options(parse([
        "--authentication-kubeconfig=/a.conf", "--authorization-kubeconfig", "/b.conf", "--client-ca-file=/ca",
        "--authorization-always-allow-paths=/healthz", "--authorization-always-allow-paths=/debug/*,/x",
        "--authentication-token-webhook-cache-ttl=1m", "--authorization-webhook-cache-authorized-ttl=5s",
        "--authorization-webhook-cache-unauthorized-ttl=0s", "--authentication-skip-lookup",
        "--authentication-tolerate-lookup-failure=false", "--requestheader-client-ca-file=/rh",
        "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-User",
        "--requestheader-group-headers=X-Group", "--requestheader-extra-headers-prefix=X-Extra-",
        "--requestheader-uid-headers=X-Uid"]))
    assert o.always_allow_paths == ["/healthz", "/debug/*", "/x"]  # pflag slices: repeats append
    assert (o.token_cache_ttl, o.authorized_ttl, o.unauthorized_ttl) == (60.0, 5.0, 0.0)
    assert o.skip_lookup and not o.tolerate_lookup_failure
    assert (o.authentication_kubeconfig, o.authorization_kubeconfig, o.client_ca_file) == ("/a.conf", "/b.conf", "/ca")
    assert o.requestheader_client_ca_file == "/rh" and o.requestheader_allowed_names == ["front-proxy-client"]
    assert (o.requestheader_username_headers, o.requestheader_group_headers, o.requestheader_extra_headers_prefix,
            o.requestheader_uid_headers) == (["X-User"], ["X-Group"], ["X-Extra-"], ["X-Uid"])
    assert auth_options(parse(["--authorization-always-allow-paths="])).always_allow_paths == []


def test_bad_always_allow_path_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r'only trailing \* allowed in "a\*/b"'):
        auth_options(parse(["--authorization-always-allow-paths=/a*/b"]))

"""API-server connection failures and watch errors are classified by exception type, errno and Status fields,
never by searching their message text."""

from __future__ import annotations

import errno
import socket
import ssl

import pytest
import urllib3

from scheduler_runtime.cluster.kube import _conn_error_text, too_large_resource_version


def _wrapped(inner: BaseException) -> urllib3.exceptions.MaxRetryError:
    """As urllib3 reports it: MaxRetryError(reason=NewConnectionError) raised from the socket error."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise urllib3.exceptions.NewConnectionError(None, f"Failed to establish a new connection: {exc}") from exc
    except urllib3.exceptions.NewConnectionError as nce:
        return urllib3.exceptions.MaxRetryError(None, "/api", reason=nce)


def test_a_real_refused_connection() -> None:
    pool = urllib3.PoolManager(retries=False)
    with pytest.raises(urllib3.exceptions.HTTPError) as err:
        pool.request("GET", "http://127.0.0.1:1/api", timeout=5)
    assert _conn_error_text(err.value) == "connection refused"


@pytest.mark.parametrize("inner,text", [
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
    (OSError(errno.ECONNREFUSED, "anything at all"), "connection refused"),
    (TimeoutError("connection refused by the certificate ssl check"), "timed out"),  # the type decides
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "host name not found"),
    (ssl.SSLCertVerificationError(1, "certificate verify failed"), "TLS error: certificate verify failed"),
    (OSError(errno.EHOSTUNREACH, "No route to host (not refused, no certificate, no ssl)"),
     "[Errno 113] No route to host (not refused, no certificate, no ssl)"),
])
def test_connection_failures_by_type_and_errno(inner: BaseException, text: str) -> None:
    assert _conn_error_text(_wrapped(inner)) == text


def test_too_large_resource_version_by_status_cause() -> None:
    status = {"kind": "Status", "status": "Failure", "reason": "Timeout", "code": 504,
              "message": "Too large resource version: 12, current: 7",
              "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                          "retryAfterSeconds": 1}}
    assert too_large_resource_version(status)
    # the words alone are not the error: another Timeout, or the cause on a non-timeout, is not it
    assert not too_large_resource_version({**status, "details": {"causes": []}})
    assert not too_large_resource_version({**status, "reason": "Invalid", "code": 422})
    assert not too_large_resource_version({"reason": "Timeout", "code": 504, "message": "too large resource version"})

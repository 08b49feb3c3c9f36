"""A minimal Prometheus HTTP API client: instant queries with a timeout, standard library only."""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("ksched.plugins.NetworkTraffic")

METRIC = "node_network_receive_bytes_total"
#: the largest raw score kept: the normaliser multiplies by 100 and must stay within int64
MAX_RAW_SCORE = (2**63 - 1) // 100


class PrometheusError(Exception):
    """The query could not be answered: connection, timeout, HTTP status or malformed response."""


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal (Go escaping rules for the characters that need it)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\t", "\\t")
    return f'"{out}"'


def build_query(mode: str, node_label: str, device: str, minutes: int) -> str:
    """One query for every node, one result series per value of `node_label`.

    compat: the tutorial's `sum_over_time(node_network_receive_bytes_total{device=...}[Nm])`, summed per
    node (the tutorial asked for one node at a time); rate: bytes per second over the same window.
    """
    selector = f"{METRIC}{{device={promql_string(device)}}}[{minutes}m]"
    inner = f"sum_over_time({selector})" if mode == "compat" else f"rate({selector})"
    return f"sum by ({node_label}) ({inner})"


#: socket.getaddrinfo's signature: what resolves the Prometheus host name
Resolver = Callable[..., Any]


class PrometheusClient:
    """Instant queries against `<address>/api/v1/query`.

    The timeout bounds the host name lookup too: urlopen's timeout covers only the socket, while the
    system resolver may wait far longer for a DNS server that does not answer (offline, or a cluster
    name like prometheus.monitoring.svc looked up outside the cluster). The lookup runs in one helper
    thread; while a lookup is still stuck, queries fail at once instead of starting another."""

    def __init__(self, address: str, timeout: float, resolve: Resolver = socket.getaddrinfo) -> None:
        self.address = address.rstrip("/")
        self.timeout = timeout
        self._resolve = resolve
        self._lookup: threading.Thread | None = None

    def check_resolves(self) -> None:
        """Resolve the address's host within the timeout; raises PrometheusError saying why not."""
        parts = urllib.parse.urlsplit(self.address)
        host = parts.hostname or ""
        try:
            ipaddress.ip_address(host)
            return  # a literal address needs no lookup
        except ValueError:
            pass
        if self._lookup is not None and self._lookup.is_alive():
            raise PrometheusError(f"cannot resolve {host}: the previous DNS lookup is still unanswered (offline? "
                                  f"check prometheusAddress)")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        box: dict[str, Any] = {}

        def lookup() -> None:
            try:
                self._resolve(host, port, 0, socket.SOCK_STREAM)
            except OSError as exc:
                box["error"] = exc

        t = threading.Thread(target=lookup, name=f"NetworkTraffic DNS {host}", daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            self._lookup = t
            raise PrometheusError(f"cannot resolve {host} within {self.timeout:g} s: no answer from DNS (offline, "
                                  f"or a name only the cluster's DNS knows? check prometheusAddress)")
        if "error" in box:
            exc = box["error"]
            raise PrometheusError(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}")

    def query_url(self, query: str) -> str:
        return f"{self.address}/api/v1/query?{urllib.parse.urlencode({'query': query})}"

    def instant_query(self, query: str) -> list[Mapping[str, Any]]:
        """The result vector of an instant query at the server's current time; raises PrometheusError."""
        req = urllib.request.Request(self.query_url(query), headers={"Accept": "application/json"})
        self.check_resolves()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - http(s) only
                body = resp.read()
        except urllib.error.HTTPError as exc:
            detail = ""
            try:
                err = json.loads(exc.read() or b"{}")
                detail = f": {err.get('errorType', '')}: {err.get('error', '')}"
            except (ValueError, OSError):
                pass
            raise PrometheusError(f"HTTP {exc.code} from {self.address}{detail}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusError(f"cannot reach Prometheus at {self.address}: {reason}") from exc
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise PrometheusError(f"response from {self.address} is not JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error", "") if isinstance(doc, dict) else ""
            raise PrometheusError(f"query failed at {self.address}: {err or 'status is not success'}")
        for w in doc.get("warnings") or []:
            log.warning("[NetworkTraffic] Prometheus warning: %s", w)
        data = doc.get("data") or {}
        if data.get("resultType") != "vector":
            raise PrometheusError(f"expected a vector result, got {data.get('resultType')!r}")
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusError("malformed response: data.result is not a list")
        return result


def bytes_by_node(result: list[Mapping[str, Any]], node_label: str) -> dict[str, int]:
    """Vector samples -> {node: int(value)}; values are truncated like Go's int64(sample.Value).

    Series without the node label are ignored; NaN, infinities and negatives count as 0.
    """
    out: dict[str, int] = {}
    for sample in result:
        metric = sample.get("metric") or {}
        node = metric.get(node_label)
        if not node:
            continue
        try:
            value = float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if not math.isfinite(value) or value <= 0:
            v = 0
        else:
            v = min(int(value), MAX_RAW_SCORE)
        out[node] = out.get(node, 0) + v
    return out

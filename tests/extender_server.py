"""A real scheduler extender for the tests: an HTTP(S) server speaking kube-scheduler's extender/v1 wire format.

    python tests/extender_server.py --behaviour B.json --log L.jsonl [--cert C --key K [--client-ca CA]]
        [--kubeconfig KC]

With --client-ca the server requires a client certificate signed by that CA (the log records its common name as
`clientCN`). It prints `PORT <n>` once listening. Every request is appended to the log (path and JSON body) and answered
as the behaviour file (re-read per request, so a test can change it) says, per verb (last path segment):
  filter:     {"reject": {node: msg}, "unresolvable": {node: msg}, "error": str, "claim": [extra names]}
  prioritize: {"scores": {node: int}, "default": int}
  bind:       {"error": str}; with --kubeconfig the extender binds the pod itself through the API server
  preempt:    {"drop": [node], "empty": [node]} -- victims echoed back as UIDs (MetaVictims), none for "empty"
  any verb:   {"status": int (not 200: answer that code), "sleep": seconds, "raw": text sent as is}
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_log_lock = threading.Lock()


def _names(body: dict[str, Any]) -> list[str]:
    if body.get("NodeNames") is not None:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in (body.get("Nodes") or {}).get("items") or []]


def answer(verb: str, body: dict[str, Any], b: dict[str, Any], kubeconfig: str | None) -> Any:
    if verb == "filter":
        names = _names(body)
        reject = {n: m for n, m in (b.get("reject") or {}).items() if n in names}
        unres = {n: m for n, m in (b.get("unresolvable") or {}).items() if n in names}
        keep = [n for n in names if n not in reject and n not in unres] + list(b.get("claim") or [])
        out: dict[str, Any] = {"FailedNodes": reject, "FailedAndUnresolvableNodes": unres, "Error": b.get("error", "")}
        if body.get("NodeNames") is not None:
            out["NodeNames"] = keep
        else:
            items = {n["metadata"]["name"]: n for n in body["Nodes"]["items"]}
            out["Nodes"] = {"metadata": {}, "items": [items[n] for n in keep if n in items]}
        return out
    if verb == "prioritize":
        scores = b.get("scores") or {}
        return [{"Host": n, "Score": scores.get(n, b.get("default", 0))} for n in _names(body)]
    if verb == "bind":
        if kubeconfig and not b.get("error"):
            from scheduler_runtime.cluster.kube import KubeClient, load_connection

            client = KubeClient(load_connection(kubeconfig))
            ns, name = body["PodNamespace"], body["PodName"]
            client.call("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body={
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns,
                                                                    "uid": body["PodUID"]},
                "target": {"kind": "Node", "name": body["Node"]}})
        return {"Error": b.get("error", "")}
    if verb == "preempt":
        drop, empty = set(b.get("drop") or []), set(b.get("empty") or [])
        out = {}
        if body.get("NodeNameToMetaVictims") is not None:
            for node, mv in body["NodeNameToMetaVictims"].items():
                if node not in drop:
                    out[node] = mv
        else:
            for node, v in (body.get("NodeNameToVictims") or {}).items():
                if node not in drop:
                    out[node] = {"Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]],
                                 "NumPDBViolations": v["NumPDBViolations"]}
        for node in empty & set(out):
            out[node] = {"Pods": [], "NumPDBViolations": 0}
        return {"NodeNameToMetaVictims": out}
    return {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--behaviour", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--client-ca")
    ap.add_argument("--kubeconfig")
    opts = ap.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"null")
            verb = self.path.rstrip("/").rsplit("/", 1)[-1]
            peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
            cn = next((v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "commonName"), None)
            with _log_lock, open(opts.log, "a") as fh:
                fh.write(json.dumps({"path": self.path, "verb": verb, "body": body, "clientCN": cn,
                                     "contentType": self.headers.get("Content-Type")}) + "\n")
            with open(opts.behaviour) as fh:
                b = (json.load(fh) or {}).get(verb) or {}
            if b.get("sleep"):
                time.sleep(float(b["sleep"]))
            status = int(b.get("status", 200))
            if "raw" in b:
                data = str(b["raw"]).encode()
            elif status != 200:
                data = b"extender says no"
            else:
                try:
                    data = json.dumps(answer(verb, body, b, opts.kubeconfig)).encode()
                except Exception as exc:  # noqa: BLE001 - report to the caller as a 500
                    status, data = 500, str(exc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.daemon_threads = True
    if opts.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(opts.cert, opts.key)
        if opts.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(opts.client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()

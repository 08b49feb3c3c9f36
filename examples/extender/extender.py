"""A scheduler extender in 60 lines of standard-library Python: GPU licences per zone.

kube-scheduler (and ksched) POST JSON to <urlPrefix>/<verb>; the keys are the Go field names of
k8s.io/kube-scheduler/extender/v1. This one answers two verbs:
  filter      nodes in a zone with no licence left fail, with a reason that shows in FailedScheduling
  prioritize  0-10 per node (more licences left, higher); the scheduler adds score x weight x 10

    python examples/extender/extender.py --port 8888
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LICENCES = {"zone-a": 2, "zone-b": 1, "zone-c": 0}
ZONE = "topology.kubernetes.io/zone"


def zone_of(node: dict[str, Any]) -> str:
    return ((node.get("metadata") or {}).get("labels") or {}).get(ZONE, "")


def filter_nodes(args: dict[str, Any]) -> dict[str, Any]:
    # nodeCacheCapable: false in the config, so full Node objects arrive in Nodes.items
    nodes = (args.get("Nodes") or {}).get("items") or []
    keep, failed = [], {}
    for n in nodes:
        if LICENCES.get(zone_of(n), 0) > 0:
            keep.append(n)
        else:
            failed[n["metadata"]["name"]] = f"no GPU licence left in {zone_of(n) or 'its zone'}"
    return {"Nodes": {"metadata": {}, "items": keep}, "FailedNodes": failed, "Error": ""}


def prioritize(args: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = (args.get("Nodes") or {}).get("items") or []
    return [{"Host": n["metadata"]["name"], "Score": min(10, 5 * LICENCES.get(zone_of(n), 0))} for n in nodes]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        args = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        handlers = {"filter": filter_nodes, "prioritize": prioritize}
        if verb not in handlers:
            self.send_error(404, f"unknown verb {verb}")
            return
        body = json.dumps(handlers[verb](args)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *a: Any) -> None:
        print(f"extender: {self.path} {fmt % a}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8888)
    port = ap.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"extender listening on http://127.0.0.1:{server.server_address[1]}/licence", flush=True)
    server.serve_forever()

"""kube-scheduler's z-pages: `/configz`, `/flagz`, `/statusz`.

`/configz` is the effective KubeSchedulerConfiguration in the shape kube's configz package serves it:
`{"componentconfig": {...}}` (the defaulted v1 document, the same one `--write-config-to` writes).

`/flagz` and `/statusz` follow component-base's zpages (feature gates ComponentFlagz/ComponentStatusz, beta
and on in 1.36): `text/plain` by default, with the `<component> flagz|statusz` header and the warning line,
the key/value separator chosen at random once per process (kube does so on purpose, so that nobody parses
the text); structured JSON for `Accept: application/json;g=config.k8s.io;v=v1beta1;as=Flagz|Statusz`
(v1alpha1 too, with kube's `Warning: 299` deprecation header); any other Accept is 406.
"""

from __future__ import annotations

import json
import platform
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from .serving import Request, Response

COMPONENT = "kube-scheduler"
_WARNING = ("Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility "
            "guarantees and is for debugging purposes only.")
_SEPARATORS = (":", ": ", "=", " ")
_NOT_ACCEPTABLE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "only the following media types are accepted: application/json, application/yaml, "
                              "text/plain", "reason": "NotAcceptable", "code": 406}
#: the paths kube-scheduler's /statusz lists (its top-level registered paths)
STATUSZ_PATHS = ("/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz")


def configz(raw: Mapping[str, Any]) -> Response:
    return Response(200, json.dumps({"componentconfig": raw}, separators=(",", ":")).encode(), "application/json")


def _negotiate(req: Request, kind: str) -> tuple[str, str | None] | Response:
    """('text'|'v1beta1'|'v1alpha1', warning) for the request's Accept header, or the 406 answer."""
    accept = ",".join(req.headers.get("accept", [])).strip()
    if not accept:
        return "text", None
    for part in accept.split(","):
        media, *params = [p.strip() for p in part.split(";")]
        opts = dict(p.split("=", 1) for p in params if "=" in p)
        if media in ("*/*", "text/*", "text/plain"):
            return "text", None
        if media == "application/json" and opts.get("g") == "config.k8s.io" and opts.get("as") == kind:
            if opts.get("v") == "v1beta1":
                return "v1beta1", None
            if opts.get("v") == "v1alpha1":
                return "v1alpha1", (f'299 - "This version of the {kind.lower()} endpoint is deprecated. '
                                    'Please use a newer version."')
    body = json.dumps(_NOT_ACCEPTABLE, indent=2).encode()
    return Response(406, body, "application/json", {"Cache-Control": "no-cache, private"})


def _structured(kind: str, version: str, warning: str | None, fields: dict[str, Any]) -> Response:
    doc = {"kind": kind, "apiVersion": f"config.k8s.io/{version}", "metadata": {"name": COMPONENT}, **fields}
    headers = {"Cache-Control": "no-cache, private"}
    if warning:
        headers["Warning"] = warning
    return Response(200, json.dumps(doc, indent=2).encode(), f"application/json;g=config.k8s.io;v={version};as={kind}",
                    headers)


class ZPages:
    """The three pages for one process. `flags` is every flag with its effective value (as text)."""

    def __init__(self, config: Mapping[str, Any] | None = None, flags: Mapping[str, str] | None = None,
                 binary_version: str = "", emulation_version: str = "", *, flagz: bool = True,
                 statusz: bool = True, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.flags = dict(flags or {})
        self.binary_version = binary_version
        self.emulation_version = emulation_version
        self.flagz_enabled = flagz
        self.statusz_enabled = statusz
        self.sep = (rng or random.SystemRandom()).choice(_SEPARATORS)
        self.clock = clock
        self.started = clock()

    def handle(self, req: Request) -> Response | None:
        """The answer for a z-page path, None for any other path (the router goes on)."""
        if req.path == "/configz" and self.config is not None:
            return configz(self.config)
        if req.path == "/flagz" and self.flagz_enabled:
            return self._flagz(req)
        if req.path == "/statusz" and self.statusz_enabled:
            return self._statusz(req)
        return None

    def _flagz(self, req: Request) -> Response:
        got = _negotiate(req, "Flagz")
        if isinstance(got, Response):
            return got
        version, warning = got
        if version != "text":
            return _structured("Flagz", version, warning, {"flags": dict(sorted(self.flags.items()))})
        lines = ["", f"{COMPONENT} flagz", _WARNING]
        lines += [f"{k}{self.sep}{v}" for k, v in sorted(self.flags.items())]
        return Response(200, ("\n".join(lines) + "\n").encode(), "text/plain; charset=utf-8")

    def _statusz(self, req: Request) -> Response:
        got = _negotiate(req, "Statusz")
        if isinstance(got, Response):
            return got
        version, warning = got
        up = max(0, int(self.clock() - self.started))
        if version != "text":
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))
            return _structured("Statusz", version, warning, {
                "startTime": start, "uptimeSeconds": up, "goVersion": f"python{platform.python_version()}",
                "binaryVersion": self.binary_version, "emulationVersion": self.emulation_version,
                "paths": list(STATUSZ_PATHS)})
        h, rem = divmod(up, 3600)
        m, s = divmod(rem, 60)
        rows = [("Started", time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(self.started))),
                ("Up", f"{h} hr {m:02d} min {s:02d} sec"),
                ("Python version", platform.python_version()),
                ("Binary version", self.binary_version),
                ("Emulation version", self.emulation_version),
                ("Paths", " ".join(STATUSZ_PATHS))]
        lines = ["", f"{COMPONENT} statusz", _WARNING, ""] + [f"{k}{self.sep} {v}" for k, v in rows]
        return Response(200, ("\n".join(lines) + "\n").encode(), "text/plain; charset=utf-8")

"""Image references and platforms, checked locally so a typo fails before minutes of work, with a reason."""

from __future__ import annotations

import re
from dataclasses import dataclass

from scheduler_runtime.errors import InputError

# The grammar of github.com/distribution/reference, written out: [domain[:port]/]path[:tag][@digest].
# re.ASCII: Go's \w is [0-9A-Za-z_], so `ksched:ünicode` is as malformed for ksched as for docker
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?\Z", re.ASCII)
_PLATFORM = re.compile(r"^(?P<os>[a-z0-9]+)/(?P<arch>[a-z0-9_]+)(?:/(?P<variant>[a-z0-9]+))?$")

#: Docker/OCI architecture names -> the machine names Python's platform.machine() and wheel tags use
ARCH_TO_MACHINE = {"amd64": "x86_64", "arm64": "aarch64", "arm": "armv7l", "386": "i686", "ppc64le": "ppc64le",
                   "s390x": "s390x", "riscv64": "riscv64"}


@dataclass(frozen=True)
class ImageRef:
    """A parsed image reference; `repository` keeps the registry part, as `docker push` needs it."""

    repository: str
    tag: str | None
    digest: str | None

    @property
    def registry(self) -> str:
        """The registry a push goes to (Docker Hub when the first part is not a host name)."""
        first, _, rest = self.repository.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            return first
        return "docker.io"

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_reference(value: str, *, flag: str, allow_digest: bool = True) -> ImageRef:
    """Parse `value` or raise an InputError naming `flag` and what is wrong with it."""
    if not value or not value.strip():
        raise InputError("must not be empty (e.g. registry.example.com/team/ksched:v1)", field=flag, usage=True)
    if any(ch.isspace() for ch in value):
        raise InputError(f"invalid image reference {value!r}: contains whitespace", field=flag, usage=True)
    m = _REFERENCE.match(value)
    if m is None:
        name = value.partition("@")[0]
        head, _, last = name.rpartition("/")
        last_name, has_tag, tag = last.partition(":")
        parts = [*(head.split("/") if head else []), last_name]
        if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
            parts = parts[1:]  # a registry host may use capitals; the repository path may not
        if any(p != p.lower() for p in parts):
            why = "repository names must be lowercase"
        elif has_tag and not re.fullmatch(_TAG, tag, re.ASCII):
            why = "a tag is 1-128 letters, digits, '_', '.' or '-' and cannot start with '.' or '-'"
        elif "@" in value:
            why = "a digest looks like sha256:<64 hex digits>"
        else:
            why = "use [registry[:port]/]name[:tag] with lowercase letters, digits and . _ - separators"
        raise InputError(f"invalid image reference {value!r}: {why}", field=flag, usage=True)
    if m.group("digest") and not allow_digest:
        raise InputError(f"invalid image reference {value!r}: a built image is named by a tag, not a digest",
                         field=flag, usage=True)
    domain = m.group("domain")
    repository = f"{domain}/{m.group('path')}" if domain else m.group("path")
    if len(repository) > 255:
        raise InputError(f"invalid image reference {value!r}: the name is longer than 255 characters", field=flag,
                         usage=True)
    return ImageRef(repository, m.group("tag"), m.group("digest"))


def parse_platform(value: str) -> tuple[str, str]:
    """`linux/arm64` -> ("linux/arm64", "aarch64"): the engine's platform and the wheel machine name."""
    m = _PLATFORM.match(value.strip().lower())
    if m is None:
        raise InputError(f"invalid platform {value!r}: use os/arch[/variant], e.g. linux/amd64 or linux/arm64",
                         field="--platform", usage=True)
    if m.group("os") != "linux":
        raise InputError(f"unsupported platform {value!r}: ksched images are Linux images", field="--platform",
                         usage=True)
    arch = m.group("arch")
    if arch not in ARCH_TO_MACHINE:
        raise InputError(f"unsupported architecture {arch!r}: one of {', '.join(sorted(ARCH_TO_MACHINE))}",
                         field="--platform", usage=True)
    return m.group(0), ARCH_TO_MACHINE[arch]

"""Errors that carry enough context to be shown to a user as one line.

Each error knows the exit status the CLI gives it: 2 for usage and I/O problems (a missing, unreadable or
empty file, a directory where a file is expected, malformed YAML, a bad option value) and 1 for input that
was read and parsed but is invalid (or a job that failed)."""

from __future__ import annotations

EXIT_INVALID = 1
EXIT_USAGE = 2

#: details that mean the file could not be read or parsed (as opposed to parsed but invalid)
_IO_PHRASES = (
    "no such file", "no such directory", "is a directory", "not a directory", "permission denied",
    "empty file", "invalid yaml", "binary file", "not utf-8", "not a utf-8", "larger than 64 mib",
    "duplicate key", "yaml aliases", "yaml documents; a configuration file holds exactly one",
    "expected a kubeschedulerconfiguration mapping", "cannot read the", "no kubeconfig found",
)


def looks_like_io(detail: str) -> bool:
    """Whether a one-line detail describes an I/O or parse problem (exit 2)."""
    low = detail.lower()
    return any(p in low for p in _IO_PHRASES)


class KschedError(Exception):
    """Base for errors a user can act on; `str()` is the one-line message shown without --debug.

    `usage=True` marks a usage or I/O problem (exit 2), `usage=False` invalid input or a failed job (exit 1);
    left unset, the message decides (see `looks_like_io`)."""

    usage: bool | None = None

    def __init__(self, *args: object, usage: bool | None = None) -> None:
        super().__init__(*args)
        if usage is not None:
            self.usage = usage

    def _detail(self) -> str:
        return str(self)

    @property
    def exit_code(self) -> int:
        if self.usage is not None:
            return EXIT_USAGE if self.usage else EXIT_INVALID
        return EXIT_USAGE if looks_like_io(self._detail()) else EXIT_INVALID


class UsageError(KschedError):
    """A bad flag or option value, or a wrong combination of them (exit 2)."""

    usage = True


class InputError(KschedError):
    """Bad input: names the file, the field path and what is wrong.

    Without a file, a field that is a flag (`--replicas`) makes it a usage error (exit 2)."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 usage: bool | None = None) -> None:
        self.file = file
        self.field = field
        self.detail = message
        parts = [p for p in (file, field) if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message, usage=usage)
        if usage is None and file is None and (field or "").startswith("-"):
            self.usage = True

    def _detail(self) -> str:
        return self.detail

    def with_file(self, file: str) -> InputError:
        """Return the same error attributed to `file` (used when parsing happens before the name is known)."""
        return InputError(self.detail, file=file, field=self.field, usage=self.usage)

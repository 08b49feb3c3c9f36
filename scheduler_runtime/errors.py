"""Errors that carry enough context to be shown to a user as one line."""

from __future__ import annotations


class KschedError(Exception):
    """Base for errors a user can act on; `str()` is the one-line message shown without --debug."""


class InputError(KschedError):
    """Bad input: names the file, the field path and what is wrong."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.detail = message
        parts = [p for p in (file, field) if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message)

    def with_file(self, file: str) -> InputError:
        """Return the same error attributed to `file` (used when parsing happens before the name is known)."""
        return InputError(self.detail, file=file, field=self.field)

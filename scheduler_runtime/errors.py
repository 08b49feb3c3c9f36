"""Errors that carry enough context to be shown to a user as one line.

Each error knows the exit status the CLI gives it, from its class or the `usage=` its raise site passes:
2 for usage and I/O problems (a missing, unreadable or empty file, a directory where a file is expected,
malformed YAML, a bad option value) and 1 for input that was read and parsed but is invalid (or a job that
failed). The message text never decides."""

from __future__ import annotations

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class KschedError(Exception):
    """Base for errors a user can act on; `str()` is the one-line message shown without --debug.

    The exit code comes from the class (`usage`, False here: invalid input or a failed job, exit 1) or from
    `usage=` given where it is raised (True: a usage or I/O problem, exit 2); never from the message."""

    usage: bool = False

    def __init__(self, *args: object, usage: bool | None = None) -> None:
        super().__init__(*args)
        if usage is not None:
            self.usage = usage

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.usage else EXIT_INVALID


class UsageError(KschedError):
    """A bad flag or option value, or a wrong combination of them (exit 2)."""

    usage = True


class InputError(KschedError):
    """Bad input: names the file, the field path and what is wrong.

    Pass `usage=True` when the input could not be read or parsed, or is a bad flag value (exit 2), and
    `usage=False` when it was parsed but is invalid (exit 1); tests/unit/test_exit_codes.py checks that every
    raise site says which."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 usage: bool | None = None) -> None:
        self.file = file
        self.field = field
        self.detail = message
        parts = [p for p in (file, field) if p]
        super().__init__(f"{': '.join(parts)}: {message}" if parts else message, usage=usage)

    def with_file(self, file: str) -> InputError:
        """Return the same error attributed to `file` (used when parsing happens before the name is known)."""
        return InputError(self.detail, file=file, field=self.field, usage=self.usage)

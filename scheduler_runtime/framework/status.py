"""Status and Code: what every extension point returns, with kube-scheduler's meanings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import IntEnum


class Code(IntEnum):
    """Same order and names as framework.Code in kube-scheduler."""

    Success = 0
    Error = 1
    Unschedulable = 2
    UnschedulableAndUnresolvable = 3
    Wait = 4
    Skip = 5
    Pending = 6


class Status:
    """Result of a plugin call. `None` returned by a plugin means Success, as a nil *Status does in Go."""

    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(self, code: Code = Code.Success, *reasons: str, plugin: str = "",
                 error: BaseException | None = None) -> None:
        self.code = code
        self.reasons: list[str] = [r for r in reasons if r] if reasons else []
        self.plugin = plugin
        self.error = error

    # constructors -----------------------------------------------------------------
    @classmethod
    def success(cls) -> Status:
        return cls(Code.Success)

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.Unschedulable, *reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UnschedulableAndUnresolvable, *reasons)

    @classmethod
    def wait(cls, *reasons: str) -> Status:
        return cls(Code.Wait, *reasons)

    @classmethod
    def skip(cls, *reasons: str) -> Status:
        return cls(Code.Skip, *reasons)

    @classmethod
    def pending(cls, *reasons: str) -> Status:
        return cls(Code.Pending, *reasons)

    @classmethod
    def as_error(cls, err: BaseException | str) -> Status:
        if isinstance(err, BaseException):
            return cls(Code.Error, error=err)
        return cls(Code.Error, err)

    # queries ----------------------------------------------------------------------
    def with_plugin(self, plugin: str) -> Status:
        self.plugin = plugin
        return self

    @property
    def all_reasons(self) -> list[str]:
        if self.error is not None:
            return [str(self.error) or type(self.error).__name__, *self.reasons]
        return list(self.reasons)

    @property
    def message(self) -> str:
        return ", ".join(self.all_reasons)

    def is_success(self) -> bool:
        return self.code == Code.Success

    def is_wait(self) -> bool:
        return self.code == Code.Wait

    def is_skip(self) -> bool:
        return self.code == Code.Skip

    def is_rejected(self) -> bool:
        return self.code in (Code.Unschedulable, Code.UnschedulableAndUnresolvable, Code.Pending)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.code == other.code and self.all_reasons == other.all_reasons

    def __hash__(self) -> int:
        return hash((self.code, tuple(self.all_reasons)))

    def __repr__(self) -> str:
        who = f" plugin={self.plugin}" if self.plugin else ""
        return f"Status({self.code.name}{who}: {self.message!r})"


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.Success


def code_of(status: Status | None) -> Code:
    return Code.Success if status is None else status.code


MAX_SCORE = 100
MIN_SCORE = 0


def distinct_statuses(statuses: Iterable[Status]) -> list[tuple[Status, int]]:
    """Each distinct Status (by identity) with how many times it occurs, in the order of its first occurrence.
    Batch filters share one Status among many nodes: what is read of a Status is then read once per distinct
    one and counted as many times as it is shared."""
    listed = list(statuses)
    by_id = dict(zip(map(id, listed), listed, strict=True))
    return [(by_id[i], n) for i, n in Counter(map(id, listed)).items()]

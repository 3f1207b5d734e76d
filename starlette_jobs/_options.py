"""Per-call enqueue options (`EnqueueOptions`, what `configure` takes), and the checks that a
job's settings and options pass: queue names, priorities, seconds, `run_at`, keys."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._errors import JobDefinitionError
from ._storable import MAX_DELAY, MAX_UNIQUE_KEY_LENGTH, unstorable

if TYPE_CHECKING:  # only a type: the driver is imported by _connections alone
    from .postgres._transactions import CallerTransaction

_QUEUE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,48}")
_PRIORITY_RANGE = range(-(2**31), 2**31)


def check_queue_name(queue: str) -> str:
    """Queue names become part of a LISTEN channel name, so they are short and plain."""
    if not isinstance(queue, str) or not _QUEUE_PATTERN.fullmatch(queue):
        raise JobDefinitionError(
            f"invalid queue name {queue!r}: use 1 to 48 letters, digits, '_', '.' or '-'"
        )
    return queue


def check_priority(priority: int) -> int:
    # A bool is an int to Python, and almost certainly a mistake here.
    if type(priority) is not int or priority not in _PRIORITY_RANGE:
        raise JobDefinitionError(f"priority must be a 32-bit integer, got {priority!r}")
    return priority


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-call options; see `Job.configure`."""

    delay: float | None = None
    run_at: datetime | None = None
    priority: int | None = None
    queue: str | None = None
    unique_key: str | None = None
    connection: CallerTransaction | None = None
    idempotency_key: str | None = None
    on_success: bool = False

    def __post_init__(self) -> None:
        if self.delay is not None and self.run_at is not None:
            raise JobDefinitionError("give either delay or run_at, not both")
        if self.delay is not None:
            check_seconds("delay", self.delay)
        if self.run_at is not None:
            _check_run_at(self.run_at)
        if self.priority is not None:
            check_priority(self.priority)
        if self.queue is not None:
            check_queue_name(self.queue)
        if self.unique_key is not None:
            _check_key("unique_key", self.unique_key)
        if self.idempotency_key is not None:
            _check_key("idempotency_key", self.idempotency_key)
        if self.on_success and self.connection is not None:
            raise JobDefinitionError(
                "give either on_success=True (written if the response succeeds) or connection= "
                "(written if that transaction commits), not both"
            )


def check_seconds(name: str, seconds: float, *, zero: bool = True) -> float:
    """A number of seconds for a delay or a timeout: finite, within `MAX_DELAY`, and >= 0
    (> 0 unless `zero`)."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not (0 <= seconds <= MAX_DELAY)
        or (seconds == 0 and not zero)
    ):
        raise JobDefinitionError(
            f"{name} must be a finite number of seconds {'>=' if zero else '>'} 0 and at most "
            f"{MAX_DELAY:.0f} (10 years), got {seconds!r}"
        )
    return seconds


def _check_run_at(run_at: datetime) -> None:
    if not isinstance(run_at, datetime) or run_at.utcoffset() is None:
        raise JobDefinitionError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
    try:
        in_utc = run_at.astimezone(UTC)
    except OverflowError:
        in_utc = None
    # asyncpg stores datetime.max and datetime.min as infinity, which never comes due.
    if in_utc is None or not (datetime.min < in_utc.replace(tzinfo=None) < datetime.max):
        raise JobDefinitionError(
            f"run_at must lie between years 1 and 9999 in UTC, got {run_at.isoformat()}"
        )


def _check_key(option: str, key: str) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_UNIQUE_KEY_LENGTH:
        raise JobDefinitionError(
            f"{option} must be 1 to {MAX_UNIQUE_KEY_LENGTH} characters, got "
            f"{len(key) if isinstance(key, str) else key!r}"
        )
    reason = unstorable(key)
    if reason is not None:
        raise JobDefinitionError(f"{option} {reason}")


NO_OPTIONS = EnqueueOptions()

"""What `jobs.throughput` returns: `ThroughputMinute`, the attempts the workers ended in one
minute of one queue, as they counted them (docs/dashboard.md, "Throughput")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

THROUGHPUT_KEPT_MINUTES = 60
"""How far back the counts are kept: older minutes are deleted as new ones are written."""


@dataclass(frozen=True, slots=True)
class ThroughputMinute:
    """The attempts of one queue that ended in one minute, added up over every worker.

    Attributes:
        queue: the queue.
        minute: the minute's start (UTC), by the clock of the workers that counted.
        succeeded: attempts that succeeded.
        failed: attempts that failed with no attempt left (the job failed).
        retried: attempts that failed and left the job to be tried again.
    """

    queue: str
    minute: datetime
    succeeded: int
    failed: int
    retried: int

    @property
    def finished(self) -> int:
        """The jobs that finished in the minute: succeeded or failed for good."""
        return self.succeeded + self.failed


def minute_of(epoch_minute: int) -> datetime:
    """The start of the minute counted from the epoch, in UTC."""
    return datetime.fromtimestamp(epoch_minute * 60, UTC)


def minute_start(at: datetime) -> datetime:
    """The start of the minute `at` falls in."""
    return at.replace(second=0, microsecond=0)

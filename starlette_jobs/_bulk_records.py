"""The records of a bulk action (docs/dashboard.md, "Bulk actions"): what it does to which jobs
(`BulkFilter`), and the one record of it, its audit record and its progress (`BulkRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from ._records import JobStatus

BulkAction = Literal["retry", "cancel"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("retry", "cancel")

# The statuses each action changes: a job of the filter in another status is left as it is.
ACTED_ON: dict[str, frozenset[JobStatus]] = {
    "retry": frozenset({JobStatus.FAILED, JobStatus.CANCELLED}),
    "cancel": frozenset({JobStatus.PENDING, JobStatus.WAITING, JobStatus.RUNNING}),
}


@dataclass(frozen=True, slots=True)
class BulkFilter:
    """The jobs a bulk action is for: those of `queue` (always one: who may act is decided per
    queue), of `status` and `name` if given, that the action applies to."""

    queue: str
    status: JobStatus | None = None
    name: str | None = None
    finished_after: datetime | None = None
    """Only the jobs that finished at or after this time (so never an unfinished one)."""

    def statuses(self, action: str) -> list[str]:
        """The statuses the action changes, narrowed to the filter's."""
        acted = ACTED_ON[action]
        chosen = acted if self.status is None else acted & {self.status}
        return sorted(status.value for status in chosen)


@dataclass(frozen=True, slots=True)
class BulkRecord:
    """One bulk action: who asked for what, over which jobs, and how far it has got. Written
    when it starts, advanced by each batch (in the batch's own statement), finished by the
    last: the one audit record of the action, and its progress."""

    id: int
    action: str
    """"retry" or "cancel"."""
    by: str | None
    """Who asked (written in each job's event too)."""
    queue: str
    status: JobStatus | None
    name: str | None
    started_at: datetime
    finished_at: datetime | None
    """None while it runs, or if the process running it stopped before its end."""
    matched: int
    """The jobs the action applied to when it started."""
    done: int
    """The jobs it has changed so far."""
    last_id: int
    """The id of the last job its batches have looked at: the next batch starts after it."""
    upper_id: int
    """The highest job id when it started: jobs enqueued since are left out."""
    finished_after: datetime | None = None
    """The filter's time bound: only the jobs that finished at or after it."""

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def filter(self) -> BulkFilter:
        return BulkFilter(self.queue, self.status, self.name, self.finished_after)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO 8601 strings)."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = value.isoformat()
        data["status"] = None if self.status is None else self.status.value
        return data

    @classmethod
    def _from_row(cls, row: Mapping[str, Any]) -> BulkRecord:
        status = row["status"]
        return cls(
            id=row["id"],
            action=row["action"],
            by=row["by_whom"],
            queue=row["queue"],
            status=None if status is None else JobStatus(status),
            name=row["name"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            matched=row["matched"],
            done=row["done"],
            last_id=row["last_id"],
            upper_id=row["upper_id"],
            finished_after=row["finished_after"],
        )

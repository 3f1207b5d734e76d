"""The records: what users get back when they look at jobs (`JobStatus`, `JobRecord`, the
`JobEvent`s of its history), and the `NewJobs` an enqueue hands the store. What a worker and
the store hand each other is in `_attempt_records.py`."""

from __future__ import annotations

import decimal
import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ._trace_ids import stored_ids

logger = logging.getLogger("starlette_jobs")


class JobStatus(StrEnum):
    """A job's status, as stored in the row. A job waiting for a retry is `PENDING`."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WAITING = "waiting"
    """A workflow's step waiting for the steps before it (docs/workflows.md): no worker takes
    it until they have finished."""


FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
"""The statuses a job ends in: nothing changes it any more, except `jobs.retry`."""


class EventKind(StrEnum):
    """What happened to a job, as `jobs.events` lists it."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    """A worker leased it for an attempt (`attempt`, `worker_id`)."""
    ATTEMPT_FAILED = "attempt_failed"
    """The attempt failed and a retry is scheduled (`error`, `run_at`)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Failed for good: no attempt left, or an error that retrying cannot help (`error`)."""
    CANCEL_REQUESTED = "cancel_requested"
    """`jobs.cancel` on a running job: its worker is told to stop it."""
    CANCELLED = "cancelled"
    RELEASED = "released"
    """Handed back to pending with the attempt given back: shutdown, or `jobs.release`."""
    RESCUED = "rescued"
    """Its lease expired (the worker crashed or stalled): pending again, or failed (`error`)."""
    RETRIED = "retried"
    """`jobs.retry` ran a failed or cancelled job again."""
    READY = "ready"
    """A workflow's step: the steps it waited for have finished as it needs, so it is pending."""
    WAITING = "waiting"
    """A workflow's step that a failure upstream had cancelled waits again: that step was
    retried (`jobs.retry`)."""


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's history (`jobs.events`), written by the same statement as the
    change it records."""

    job_id: int
    kind: EventKind
    at: datetime
    status: JobStatus
    """The job's status right after this event."""
    attempt: int
    """The job's attempt count right after this event."""
    worker_id: str | None = None
    error: str | None = None
    run_at: datetime | None = None
    """When the job is due next (a retry, a release), if it is pending."""
    workflow_id: int | None = None
    """The workflow the job is a step of (docs/workflows.md); None for other jobs."""
    by: str | None = None
    """Who asked for the change: the `by` of `jobs.retry`, `cancel` or `release` (the
    dashboard's user, the CLI's `--by`); None for the changes the library makes itself."""

    @classmethod
    def _from_row(cls, row: Mapping[str, Any]) -> JobEvent:
        return cls(
            job_id=row["job_id"],
            kind=EventKind(row["kind"]),
            at=row["at"],
            status=JobStatus(row["status"]),
            attempt=row["attempt"],
            worker_id=row["worker_id"],
            error=row["error"],
            run_at=row["run_at"],
            workflow_id=row.get("workflow_id"),
            by=row.get("actor"),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO 8601 strings)."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = value.isoformat()
        data["kind"], data["status"] = self.kind.value, self.status.value
        return data


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job row, as `Jobs.get` and `Jobs.list` return it.

    Every row can be read: an integer too long for Python to convert from text (more than
    4,300 digits, which only a row written by other means can hold) comes back as a
    `decimal.Decimal` with every digit; a JSON field nested too deeply for Python to decode
    comes back empty (`{}`, `[]`, `None`), and a warning names the job and the field.
    """

    id: int
    name: str
    queue: str
    status: JobStatus
    arguments: dict[str, Any]
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    """The latest failed attempt's error; None once an attempt succeeded."""
    errors: list[dict[str, Any]]
    """One entry per failed attempt, the latest 100: `attempt`, `error`, `at`, `worker_id`."""
    worker_id: str | None
    result: Any
    """What the job returned; for a job cancelled while it ran, what it returned when it caught
    the cancellation (its partial statistics), if anything."""
    progress: Any = None
    """The last progress the job reported (`current_job().report_progress`), or None."""
    cancel_requested_at: datetime | None = None
    """When `jobs.cancel` asked a running job to stop; the job ends `cancelled`."""
    scheduled_for: datetime | None = None
    """The tick a schedule enqueued the job for (docs/schedules.md); None for other jobs."""
    workflow_id: int | None = None
    """The workflow the job is a step of (docs/workflows.md); None for other jobs."""
    step: str | None = None
    """Its step's name in that workflow."""
    trace_id: str | None = None
    """The trace the job was enqueued in (32 hex digits, from the W3C traceparent stored with
    it, docs/tracing.md); None if it was enqueued outside a trace."""
    correlation_id: str | None = None
    """The correlation id of the request that enqueued it (`x-request-id`), or None."""

    @property
    def finished(self) -> bool:
        """Whether the job has ended for good: succeeded, failed or cancelled."""
        return self.status in FINISHED

    @classmethod
    def _from_row(cls, row: Mapping[str, Any]) -> JobRecord:
        job_id = row["id"]
        progress = row.get("progress")
        return cls(
            id=row["id"],
            name=row["name"],
            queue=row["queue"],
            status=JobStatus(row["status"]),
            arguments=_decoded(row["payload"], job_id, "arguments", {}),
            priority=row["priority"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            run_at=row["run_at"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            last_error=row["last_error"],
            errors=_decoded(row["errors"], job_id, "errors", []),
            worker_id=row["worker_id"],
            result=None
            if row["result"] is None
            else _decoded(row["result"], job_id, "result", None),
            progress=None if progress is None else _decoded(progress, job_id, "progress", None),
            cancel_requested_at=row.get("cancel_requested_at"),
            scheduled_for=row.get("scheduled_for"),
            workflow_id=row.get("workflow_id"),
            step=row.get("step"),
            **_traced(row.get("trace_context")),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO 8601 strings), e.g. for a JSONResponse."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = value.isoformat()
        data["status"] = self.status.value
        return data


def _traced(stored_context: str | None) -> dict[str, str | None]:
    if not stored_context:
        return {}  # most jobs: nothing to parse
    trace_id, correlation = stored_ids(stored_context)
    return {"trace_id": trace_id, "correlation_id": correlation}


def _decoded(text: str, job_id: int, field: str, placeholder: Any) -> Any:
    """A JSON column of the row, decoded; reading a row never fails on what it holds."""
    try:
        return json.loads(text)
    except ValueError:
        pass  # an integer past Python's int/str conversion limit
    except RecursionError:
        logger.warning("job %s: its %s cannot be decoded (nested too deeply)", job_id, field)
        return placeholder
    try:
        return json.loads(text, parse_int=_long_int)
    except (ValueError, RecursionError) as error:
        logger.warning("job %s: its %s cannot be decoded: %s", job_id, field, error)
        return placeholder


def _long_int(digits: str) -> int | decimal.Decimal:
    try:
        return int(digits)
    except ValueError:
        return decimal.Decimal(digits)


@dataclass(slots=True, kw_only=True)
class NewJobs:
    """Rows to insert for one job name; see `Store.insert_jobs`. Not frozen: one is built per
    enqueue, and a frozen dataclass sets each field through `object.__setattr__`."""

    name: str
    queue: str
    payloads: list[str]
    """One JSON text per job."""
    priority: int
    delay: float | None
    run_at: datetime | None
    max_attempts: int
    trace_context: str | None
    unique_key: str | None
    notify: bool
    """Whether to wake the queue's workers (false for a job that is not due yet)."""
    idempotency_key: str | None = None
    """Held by the job for as long as it is kept (a unique key: while it is live)."""
    ids: tuple[int, ...] = ()
    """The ids `Store.reserve_ids` gave, for `Store.insert_reserved`; empty otherwise."""

"""The rows and subscriptions of the in-memory store (`_store.py`): one job as the PostgreSQL
table holds it, its events, and the listeners its notifications go to."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from .._attempt_records import Claim, Outcome
from .._records import EventKind, JobEvent, JobRecord, JobStatus, NewJobs
from .._schedule_records import DeclaredSchedule
from .._storable import MAX_KEPT_ERRORS
from ..store._history import claim_event, place_claim
from ._jsonb import jsonb_text, jsonb_value, timestamptz_json


@dataclass(eq=False)
class Row:
    """One job, as the PostgreSQL table holds it, and its events."""

    id: int
    name: str
    queue: str
    payload: str
    priority: int
    run_at: datetime
    max_attempts: int
    trace_context: str | None
    unique_key: str | None
    created_at: datetime
    status: JobStatus = JobStatus.PENDING
    attempts: int = 0
    lease_token: UUID | None = None
    lease_expires_at: datetime | None = None
    worker_id: str | None = None
    last_error: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    result: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    progress: str | None = None
    cancel_requested_at: datetime | None = None
    outcome_wanted: bool = False
    idempotency_key: str | None = None
    scheduled_for: datetime | None = None
    events: list[JobEvent] = field(default_factory=list)
    # A workflow's step (docs/workflows.md; `_workflows.py`): as the PostgreSQL columns.
    workflow_id: int | None = None
    step: str | None = None
    upstream: list[int] | None = None
    dependents: list[int] | None = None
    upstream_left: int | None = None
    upstream_failed: int | None = None
    allowed_failures: int | None = None
    settled: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        # The table's index of pending jobs follows every change of status, wherever it is
        # made (`RowTable`); a row not in a table yet (being built) has none to tell.
        if name == "status":
            table = self.__dict__.get("_table")
            if table is not None:
                table.status_changed(self, value)
        object.__setattr__(self, name, value)

    @classmethod
    def new(cls, new: NewJobs, job_id: int, payload: str, now: datetime) -> Row:
        """A job of `new`, as its insert writes it (the payload in jsonb's form)."""
        return cls(
            id=job_id,
            name=new.name,
            queue=new.queue,
            payload=jsonb_text(payload),
            priority=new.priority,
            # In UTC, as timestamptz comes back: the caller's zone is not kept.
            run_at=(new.run_at or now + timedelta(seconds=new.delay or 0.0)).astimezone(UTC),
            max_attempts=new.max_attempts,
            trace_context=new.trace_context,
            unique_key=new.unique_key,
            idempotency_key=new.idempotency_key,
            created_at=now,
        )

    @property
    def cancelled_by_upstream(self) -> bool:
        """A workflow's step cancelled because more of the steps it waits for failed than it
        allows: a retry of one of those puts it back to waiting."""
        return (
            self.status is JobStatus.CANCELLED
            and self.allowed_failures is not None
            and (self.upstream_failed or 0) > self.allowed_failures
        )

    def holds_idempotency_key(self, new: NewJobs) -> bool:
        """Whether this job holds the idempotency key of `new` (under the same job name,
        whatever the status)."""
        return new.idempotency_key is not None and (self.name, self.idempotency_key) == (
            new.name,
            new.idempotency_key,
        )

    def holds_unique_key(self, new: NewJobs) -> bool:
        """Whether this job holds the unique key of `new`: it is live and has it."""
        return (
            new.unique_key is not None
            and self.unique_key == new.unique_key
            and self.status in (JobStatus.PENDING, JobStatus.RUNNING)
        )

    def has_payload(self, payload: str) -> bool:
        """Whether `payload` (JSON text) is this job's, as jsonb's `=` decides: objects
        whatever their key order, numbers by value (1 and 1.0 alike), true never 1."""
        return bool(jsonb_value(self.payload) == jsonb_value(payload))

    def record(self) -> JobRecord:
        return JobRecord._from_row(
            {
                **{name: getattr(self, name) for name in self.__dataclass_fields__},
                "status": self.status.value,
                "errors": json.dumps(self.errors),
            }
        )

    def log(
        self, kind: EventKind, at: datetime, *, error: str | None = None, by: str | None = None
    ) -> None:
        """Records the change just made, as the PostgreSQL store's statement would."""
        self.events.append(
            JobEvent(
                job_id=self.id,
                kind=kind,
                at=at,
                status=self.status,
                attempt=self.attempts,
                worker_id=None if kind is EventKind.RETRIED else self.worker_id,
                error=error,
                run_at=self.run_at if self.status is JobStatus.PENDING else None,
                workflow_id=self.workflow_id,
                by=by,
            )
        )

    def history(self) -> list[JobEvent]:
        enqueued = JobEvent(
            job_id=self.id,
            kind=EventKind.ENQUEUED,
            at=self.created_at,
            status=JobStatus.PENDING if self.upstream is None else JobStatus.WAITING,
            attempt=0,
            workflow_id=self.workflow_id,
        )
        events = [enqueued, *self.events]
        # What the row says of its last attempt, as on PostgreSQL: the claim of the one running
        # now, whether or not it was recorded, or its success (not recorded: nothing changes a
        # job after it), with that attempt's claim.
        last = self.status in (JobStatus.RUNNING, JobStatus.SUCCEEDED)
        if last and self.started_at is not None:
            claim = claim_event(
                self.id, self.started_at, self.attempts, self.worker_id, self.workflow_id
            )
            place_claim(events, claim)
        if self.status is JobStatus.SUCCEEDED and self.finished_at is not None:
            events.append(
                JobEvent(
                    job_id=self.id, kind=EventKind.SUCCEEDED, at=self.finished_at,
                    status=JobStatus.SUCCEEDED, attempt=self.attempts, worker_id=self.worker_id,
                    workflow_id=self.workflow_id,
                )
            )  # fmt: skip
        return events

    def claim(self, worker_id: str, lease_expires_at: datetime, now: datetime) -> Claim:
        self.status, self.attempts, self.worker_id = JobStatus.RUNNING, self.attempts + 1, worker_id
        self.lease_token, self.lease_expires_at = uuid4(), lease_expires_at
        self.started_at, self.progress = now, None
        return Claim(
            id=self.id,
            name=self.name,
            queue=self.queue,
            payload=self.payload,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            lease_token=self.lease_token,
            trace_context=self.trace_context,
            scheduled_for=self.scheduled_for,
            workflow_id=self.workflow_id,
        )

    def end(self, outcome: Outcome, now: datetime) -> EventKind:
        """The attempt's outcome (its lease already checked); returns the event to record."""
        self.status = outcome.status
        if outcome.status is JobStatus.PENDING and self.cancel_requested_at is not None:
            self.status = JobStatus.CANCELLED  # asked to stop: not retried
        if self.status is JobStatus.PENDING:
            self.run_at = now + timedelta(seconds=outcome.retry_delay or 0.0)
            self.finished_at = None
        else:
            self.finished_at = now
        if outcome.error is not None:
            self.failed_attempt(outcome.error, now)
        elif self.status is JobStatus.SUCCEEDED:
            self.last_error = None  # what went wrong before is in `errors`
        self.result = None if outcome.result is None else jsonb_text(outcome.result)
        if outcome.progress is not None:
            self.progress = jsonb_text(outcome.progress)
        self.lease_token = self.lease_expires_at = None
        if self.status is JobStatus.PENDING:
            return EventKind.ATTEMPT_FAILED
        return EventKind(self.status.value)

    def rescue(self, now: datetime) -> EventKind:
        """Its lease expired: pending again, failed with no attempt left, or cancelled if it
        was asked to stop; the lost attempt recorded as failed. Returns the event to record."""
        if self.cancel_requested_at is not None:
            self.status = JobStatus.CANCELLED
        elif self.attempts >= self.max_attempts:
            self.status = JobStatus.FAILED
        else:
            self.status = JobStatus.PENDING
        self.finished_at = None if self.status is JobStatus.PENDING else now
        self.run_at = now
        self.failed_attempt(
            f"lease expired: worker {self.worker_id or '?'} stopped renewing it "
            "(crashed or stalled)",
            now,
        )
        self.lease_token = self.lease_expires_at = None
        return EventKind.CANCELLED if self.status is JobStatus.CANCELLED else EventKind.RESCUED

    def failed_attempt(self, error: str, at: datetime) -> None:
        self.last_error = error
        # As jsonb_build_object writes it on PostgreSQL: its keys in jsonb's order, the time as
        # a timestamptz's JSON in UTC (the library's sessions' time zone).
        self.errors.append(
            {"at": timestamptz_json(at), "error": error, "attempt": self.attempts,
             "worker_id": self.worker_id}
        )  # fmt: skip
        del self.errors[:-MAX_KEPT_ERRORS]

    def give_back(self, now: datetime) -> EventKind:
        """A release: pending again, due now, the attempt given back; or cancelled, if the job
        was asked to stop. Returns the event to record."""
        self.attempts, self.run_at = max(self.attempts - 1, 0), now
        self.lease_token = self.lease_expires_at = None
        if self.cancel_requested_at is None:
            self.status = JobStatus.PENDING
            return EventKind.RELEASED
        self.status, self.finished_at = JobStatus.CANCELLED, now
        return EventKind.CANCELLED


class QueueListener:
    """`MemoryStore.listen`: a worker's wake-ups and cancel requests."""

    def __init__(
        self,
        registry: set[QueueListener],
        queues: Sequence[str],
        wake: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None,
        on_controls: Callable[[str], None] | None = None,
    ) -> None:
        # `registry`: the store's set of listeners, which this one leaves when it closes.
        self._registry, self._queues, self._wake = registry, set(queues), wake
        self._on_cancel = on_cancel
        self._on_controls = on_controls

    def notify(self, queue: str) -> None:
        if queue in self._queues:
            self._wake(queue)

    def cancel(self, token: UUID) -> None:
        if self._on_cancel is not None:
            self._on_cancel(token)

    def controls_changed(self, queue: str) -> None:
        if self._on_controls is not None:
            self._on_controls(queue)

    async def alive(self, timeout: float) -> bool:
        return self in self._registry  # dropped by a simulated outage (`memory._outage`)

    async def close(self) -> None:
        self._registry.discard(self)

    def terminate(self) -> None:
        self._registry.discard(self)


class OutcomeListener:
    """`MemoryStore.listen_for_outcomes`."""

    def __init__(self, registry: set[OutcomeListener], on_finished: Callable[[int], None]) -> None:
        self._registry = registry  # the store's set of them, left on closing
        self.on_finished = on_finished

    async def alive(self, timeout: float) -> bool:
        return self in self._registry  # dropped by a simulated outage (`memory._outage`)

    async def close(self) -> None:
        self._registry.discard(self)

    def terminate(self) -> None:
        self._registry.discard(self)


@dataclass(slots=True)
class ScheduleRow:
    """One schedule, as the PostgreSQL table holds it, and its ticks by time."""

    declared: DeclaredSchedule
    defined_at: datetime
    last_tick_at: datetime | None = None
    last_job_id: int | None = None
    waiting_tick_at: datetime | None = None

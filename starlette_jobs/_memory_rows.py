"""The rows and subscriptions of the in-memory store (`_memory.py`): one job as the PostgreSQL
table holds it, its events, and the listeners its notifications go to."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ._records import EventKind, JobEvent, JobRecord, JobStatus

if TYPE_CHECKING:
    from ._memory import MemoryStore


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
    events: list[JobEvent] = field(default_factory=list)

    def record(self) -> JobRecord:
        return JobRecord.from_row(
            {
                **{name: getattr(self, name) for name in self.__dataclass_fields__},
                "status": self.status.value,
                "errors": json.dumps(self.errors),
            }
        )

    def log(self, kind: EventKind, at: datetime, *, error: str | None = None) -> None:
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
            )
        )

    def history(self) -> list[JobEvent]:
        enqueued = JobEvent(
            job_id=self.id,
            kind=EventKind.ENQUEUED,
            at=self.created_at,
            status=JobStatus.PENDING,
            attempt=0,
        )
        return [enqueued, *self.events]

    def failed_attempt(self, error: str, at: datetime) -> None:
        self.last_error = error
        entry = {"attempt": self.attempts, "error": error, "at": at.isoformat()}
        self.errors.append({**entry, "worker_id": self.worker_id})

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
        store: MemoryStore,
        queues: Sequence[str],
        wake: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None,
    ) -> None:
        self._store, self._queues, self._wake = store, set(queues), wake
        self._on_cancel = on_cancel

    def notify(self, queue: str) -> None:
        if queue in self._queues:
            self._wake(queue)

    def cancel(self, token: UUID) -> None:
        if self._on_cancel is not None:
            self._on_cancel(token)

    async def alive(self, timeout: float) -> bool:
        return True

    async def close(self) -> None:
        self._store._listeners.discard(self)

    def terminate(self) -> None:
        self._store._listeners.discard(self)


class OutcomeListener:
    """`MemoryStore.listen_for_outcomes`."""

    def __init__(self, store: MemoryStore, on_finished: Callable[[int], None]) -> None:
        self._store = store
        self.on_finished = on_finished

    async def alive(self, timeout: float) -> bool:
        return True

    async def close(self) -> None:
        self._store._outcome_listeners.discard(self)

    def terminate(self) -> None:
        self._store._outcome_listeners.discard(self)

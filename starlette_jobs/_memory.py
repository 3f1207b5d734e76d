"""The in-memory store: `Jobs("memory://")`, for tests that want no database.

It keeps the PostgreSQL store's semantics (claim order, leases and their expiry, the fence of
every write by lease token, retries, unique keys, release, retention, counts), held to them by
the same contract suite. It lives in one process and one event loop: every method runs to its
end without awaiting, so no two of them interleave, as PostgreSQL's row locks would ensure.

What only PostgreSQL does, it refuses with `MemoryStoreUnsupportedError` rather than pretend:
joining a caller's transaction (`connection=`), migrations of a real schema aside. Several
processes cannot share it: `starlette-jobs worker` needs PostgreSQL.

`Jobs("memory://")` gets a store of its own; `Jobs("memory://name")` shares one with every
other `Jobs` of the process that names it (a producer and a worker in one test, say).
"""

from __future__ import annotations

import itertools
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from ._errors import MemoryStoreUnsupportedError, UniqueKeyTakenError
from ._records import Claim, JobRecord, JobStatus, NewJobs, Outcome

SCHEME = "memory://"
_FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
_LIVE = (JobStatus.PENDING, JobStatus.RUNNING)

# Stores shared by name in this process, while a `Jobs` holds them.
_named: weakref.WeakValueDictionary[str, MemoryStore] = weakref.WeakValueDictionary()


def is_memory_dsn(dsn: str) -> bool:
    return dsn.startswith(SCHEME)


def memory_store(dsn: str) -> MemoryStore:
    """The store `dsn` ("memory://" or "memory://name") names."""
    name = dsn[len(SCHEME) :]
    if not name:
        return MemoryStore()
    store = _named.get(name)
    if store is None:
        store = _named[name] = MemoryStore()
    return store


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class _Row:
    """One job, as the PostgreSQL table holds it."""

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

    def record(self) -> JobRecord:
        return JobRecord.from_row(
            {
                **{name: getattr(self, name) for name in self.__dataclass_fields__},
                "status": self.status.value,
                "errors": json.dumps(self.errors),
            }
        )

    def failed_attempt(self, error: str, at: datetime) -> None:
        self.last_error = error
        entry = {"attempt": self.attempts, "error": error, "at": at.isoformat()}
        self.errors.append({**entry, "worker_id": self.worker_id})

    def give_back(self, now: datetime) -> None:
        """Pending again, due now, the attempt given back (a release)."""
        self.status, self.attempts, self.run_at = JobStatus.PENDING, max(self.attempts - 1, 0), now
        self.lease_token = self.lease_expires_at = None


class _Listener:
    def __init__(self, store: MemoryStore, queues: Sequence[str], wake: Callable[[str], None]):
        self._store, self._queues, self._wake = store, set(queues), wake

    def notify(self, queue: str) -> None:
        if queue in self._queues:
            self._wake(queue)

    async def alive(self, timeout: float) -> bool:
        return True

    async def close(self) -> None:
        self._store._listeners.discard(self)

    def terminate(self) -> None:
        self._store._listeners.discard(self)


class MemoryStore:
    """The `Store` protocol on a dict; see the module's docstring."""

    def __init__(self) -> None:
        self._rows: dict[int, _Row] = {}
        self._ids = itertools.count(1)
        self._listeners: set[_Listener] = set()

    @property
    def name(self) -> str:
        return "memory"

    async def migrate(self) -> list[str]:
        return []

    async def check_schema(self, *, complete: bool) -> None:
        return None

    # -- producers -----------------------------------------------------------------------------

    async def insert_jobs(self, new: NewJobs, connection: Any | None = None) -> list[int]:
        if connection is not None:
            raise MemoryStoreUnsupportedError(
                "the in-memory store cannot join a PostgreSQL transaction (connection=): "
                "test that code on PostgreSQL (starlette_jobs.testing's `jobs_database`)"
            )
        if new.unique_key is not None:
            holder = self._live_holder(new.unique_key)
            if holder is not None:
                return [holder.id]
        now = _now()
        run_at = new.run_at or now + timedelta(seconds=new.delay or 0.0)
        ids = []
        for payload in new.payloads:
            row = _Row(
                id=next(self._ids),
                name=new.name,
                queue=new.queue,
                # As jsonb would: a JSON text in its canonical form.
                payload=json.dumps(json.loads(payload)),
                priority=new.priority,
                run_at=run_at,
                max_attempts=new.max_attempts,
                trace_context=new.trace_context,
                unique_key=new.unique_key,
                created_at=now,
            )
            self._rows[row.id] = row
            ids.append(row.id)
        if new.notify:
            self._notify(new.queue)
        return ids

    def _live_holder(self, unique_key: str) -> _Row | None:
        return next(
            (r for r in self._rows.values() if r.unique_key == unique_key and r.status in _LIVE),
            None,
        )

    def _notify(self, queue: str) -> None:
        for listener in list(self._listeners):
            listener.notify(queue)

    # -- workers -------------------------------------------------------------------------------

    async def claim_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        now = _now()
        due = sorted(
            (
                r
                for r in self._rows.values()
                if r.queue == queue and r.status is JobStatus.PENDING and r.run_at <= now
            ),
            key=lambda r: (-r.priority, r.run_at, r.id),
        )[:limit]
        claims = []
        for row in due:
            row.status, row.attempts, row.worker_id = JobStatus.RUNNING, row.attempts + 1, worker_id
            row.lease_token = uuid4()
            row.lease_expires_at = now + timedelta(seconds=lease_seconds)
            row.started_at = now
            claims.append(
                Claim(
                    id=row.id,
                    name=row.name,
                    queue=row.queue,
                    payload=row.payload,
                    attempts=row.attempts,
                    max_attempts=row.max_attempts,
                    lease_token=row.lease_token,
                    trace_context=row.trace_context,
                )
            )
        return claims

    def _held(self, job_id: int, token: UUID) -> _Row | None:
        row = self._rows.get(job_id)
        return row if row is not None and row.lease_token == token else None

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        now = _now()
        written = set()
        for outcome in outcomes:
            row = self._held(outcome.id, outcome.lease_token)
            if row is None:
                continue
            row.status = outcome.status
            if outcome.status is JobStatus.PENDING:
                row.run_at = now + timedelta(seconds=outcome.retry_delay or 0.0)
                row.finished_at = None
            else:
                row.finished_at = now
            if outcome.error is not None:
                row.failed_attempt(outcome.error, now)
            row.result = outcome.result
            row.lease_token = row.lease_expires_at = None
            written.add(row.id)
        return written

    async def extend_leases(
        self, held: Sequence[tuple[int, UUID]], lease_seconds: float
    ) -> dict[UUID, bool]:
        renewed = {}
        for job_id, token in held:
            row = self._held(job_id, token)
            if row is not None:
                row.lease_expires_at = _now() + timedelta(seconds=lease_seconds)
                renewed[token] = True
        return renewed

    async def release_jobs(self, held: Sequence[tuple[int, UUID]]) -> set[int]:
        released = set()
        for job_id, token in held:
            row = self._held(job_id, token)
            if row is not None:
                row.give_back(_now())
                released.add(job_id)
        return released

    async def release_unknown_claims(
        self, queue: str, worker_id: str, known: Sequence[UUID]
    ) -> list[int]:
        known_tokens = set(known)
        rows = [
            r
            for r in self._running()
            if r.queue == queue and r.worker_id == worker_id and r.lease_token not in known_tokens
        ]
        for row in rows:
            row.give_back(_now())
        return sorted(row.id for row in rows)

    def _running(self) -> list[_Row]:
        return [r for r in self._rows.values() if r.status is JobStatus.RUNNING]

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        now = _now()
        expired = sorted(
            (r for r in self._running() if r.lease_expires_at and r.lease_expires_at < now),
            key=lambda r: (r.lease_expires_at, r.id),
        )[:limit]
        rescued = []
        for row in expired:
            exhausted = row.attempts >= row.max_attempts
            row.status = JobStatus.FAILED if exhausted else JobStatus.PENDING
            row.finished_at = now if exhausted else None
            row.run_at = now
            row.failed_attempt(
                f"lease expired: worker {row.worker_id or '?'} stopped renewing it "
                "(crashed or stalled)",
                now,
            )
            row.lease_token = row.lease_expires_at = None
            rescued.append((row.id, row.queue, row.status))
        return rescued

    async def prune_finished(self, retention_seconds: float, limit: int) -> int:
        cutoff = _now() - timedelta(seconds=retention_seconds)
        old = sorted(
            (
                r
                for r in self._rows.values()
                if r.status in _FINISHED and r.finished_at and r.finished_at < cutoff
            ),
            key=lambda r: (r.finished_at, r.id),
        )[:limit]
        for row in old:
            del self._rows[row.id]
        return len(old)

    async def count_unfinished(self, queues: Sequence[str], horizon_seconds: float | None) -> int:
        horizon = None if horizon_seconds is None else _now() + timedelta(seconds=horizon_seconds)
        return sum(
            1
            for r in self._rows.values()
            if r.queue in queues
            and (
                r.status is JobStatus.RUNNING
                or (r.status is JobStatus.PENDING and (horizon is None or r.run_at <= horizon))
            )
        )

    async def listen(self, queues: Sequence[str], on_notify: Callable[[str], None]) -> _Listener:
        listener = _Listener(self, queues, on_notify)
        self._listeners.add(listener)
        return listener

    async def expire_connections(self) -> None:
        return None

    # -- operators and users ---------------------------------------------------------------------

    async def get_job(self, job_id: int) -> JobRecord | None:
        row = self._rows.get(job_id)
        return None if row is None else row.record()

    async def list_jobs(
        self, status: JobStatus | None, queue: str | None, limit: int
    ) -> list[JobRecord]:
        rows = [
            r
            for r in sorted(self._rows.values(), key=lambda r: -r.id)
            if status in (None, r.status) and queue in (None, r.queue)
        ]
        return [row.record() for row in rows[:limit]]

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        for row in self._rows.values():
            if queue in (None, row.queue):
                counts[row.status] += 1
        return counts

    async def job_status(self, job_id: int) -> JobStatus | None:
        row = self._rows.get(job_id)
        return None if row is None else row.status

    async def cancel_job(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status is not JobStatus.PENDING:
            return False
        row.status, row.finished_at = JobStatus.CANCELLED, _now()
        return True

    async def retry_job(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
            return False
        if row.unique_key is not None and self._live_holder(row.unique_key) is not None:
            raise UniqueKeyTakenError(
                f"job {job_id} cannot be retried: another pending or running job holds its "
                "unique key; retry it once that job has finished"
            )
        row.status, row.attempts, row.run_at = JobStatus.PENDING, 0, _now()
        row.finished_at = row.result = None
        self._notify(row.queue)
        return True

    async def release_job(self, job_id: int) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status is not JobStatus.RUNNING:
            return False
        row.give_back(_now())
        self._notify(row.queue)
        return True

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        rows = [r for r in self._running() if r.worker_id == worker_id]
        for row in rows:
            row.give_back(_now())
        for queue in {row.queue for row in rows}:
            self._notify(queue)
        return sorted(row.id for row in rows)

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        self._listeners.clear()

    def terminate(self) -> None:
        self._listeners.clear()

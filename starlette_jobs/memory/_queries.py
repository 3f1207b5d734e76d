"""What operators and users ask of the in-memory store (`jobs.get`, `list`, `count_by_status`,
`cancel`, `peek`, `events`, `retry`, `release`): the protocol's "operators and users" part,
beside the producers' and the workers' in `_store.py`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime

from .._errors import UniqueKeyTakenError
from .._records import FINISHED, EventKind, JobEvent, JobRecord, JobStatus
from ._rows import Row
from ._tables import utc_now
from ._workflows import MemoryWorkflows


class MemoryQueries(MemoryWorkflows):
    """`MemoryWorkflows` (whose dependents a cancel or a retry tells) with the protocol's
    queries and operators' changes."""

    async def get_job(self, job_id: int) -> JobRecord | None:
        row = self._rows.get(job_id)
        return None if row is None else row.record()

    async def list_jobs(
        self,
        status: JobStatus | None,
        queue: str | None,
        limit: int,
        name: str | None = None,
        before: int | None = None,
        trace_id: str | None = None,
        correlation_id: str | None = None,
        finished_after: datetime | None = None,
        after: int | None = None,
        brief: bool = False,  # nothing to save in memory: whole records
    ) -> list[JobRecord]:
        rows = [
            r
            for r in sorted(self._rows.values(), key=lambda r: -r.id)
            if status in (None, r.status)
            and queue in (None, r.queue)
            and name in (None, r.name)
            and (before is None or r.id < before)
            and (after is None or r.id > after)
            and (finished_after is None or finished_at_or_after(r, finished_after))
        ]
        records = (row.record() for row in rows)
        if trace_id is not None or correlation_id is not None:
            records = (
                record
                for record in records
                if trace_id in (None, record.trace_id)
                and correlation_id in (None, record.correlation_id)
            )
        return list(itertools.islice(records, limit))

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        for row in self._rows.values():
            if queue in (None, row.queue):
                counts[row.status] += 1
        return counts

    async def job_status(self, job_id: int) -> JobStatus | None:
        row = self._rows.get(job_id)
        return None if row is None else row.status

    async def cancel_job(self, job_id: int, by: str | None = None) -> JobStatus | None:
        row = self._rows.get(job_id)
        now = utc_now()
        if row is None:
            return None
        if row.status in (JobStatus.PENDING, JobStatus.WAITING):
            row.status, row.finished_at = JobStatus.CANCELLED, now
            self._changed(row, EventKind.CANCELLED, now, by=by)
            if row.dependents is not None:
                self._tell_dependents(row, now)
            return row.status
        if row.status is JobStatus.RUNNING and row.cancel_requested_at is None:
            row.cancel_requested_at = now
            self._changed(row, EventKind.CANCEL_REQUESTED, now, by=by)
            for listener in list(self._listeners):
                assert row.lease_token is not None
                listener.cancel(row.lease_token)
            return row.status
        return None

    async def peek_jobs(self, queue: str, limit: int, exclude: Sequence[int]) -> list[JobRecord]:
        return [row.record() for row in self._due(queue, limit, set(exclude))]

    async def job_events(self, job_id: int) -> list[JobEvent]:
        row = self._rows.get(job_id)
        return [] if row is None else row.history()

    async def retry_job(self, job_id: int, by: str | None = None) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
            return False
        if row.unique_key is not None and self._live_holder(row.unique_key) is not None:
            raise UniqueKeyTakenError(
                f"job {job_id} cannot be retried: another pending or running job holds its "
                "unique key; retry it once that job has finished"
            )
        if self._upstream_failed_beyond_allowed(row):
            return False  # it would run without them: their retry first, as on PostgreSQL
        now = utc_now()
        row.status, row.attempts, row.run_at = JobStatus.PENDING, 0, now
        row.finished_at = row.result = row.progress = row.cancel_requested_at = None
        row.outcome_wanted = row.settled = False
        if row.upstream is not None and row.allowed_failures is not None:
            # A step whose upstream has not all finished (cancelled while it waited) waits again.
            row.upstream_left, row.upstream_failed = self._upstream_counts(row)
            if row.upstream_left:
                row.status = JobStatus.WAITING
        self._changed(row, EventKind.RETRIED, now, by=by)
        if row.status is JobStatus.PENDING:
            self._notify(row.queue)
        if row.dependents is not None:
            self._reopen(row.dependents, now)
        return True

    async def release_job(self, job_id: int, by: str | None = None) -> bool:
        row = self._rows.get(job_id)
        if row is None or row.status is not JobStatus.RUNNING:
            return False
        if self._give_back(row, by) is EventKind.RELEASED:
            self._notify(row.queue)
        return True

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        rows = [r for r in self._running() if r.worker_id == worker_id]
        for row in rows:
            self._give_back(row)
        for queue in {row.queue for row in rows if row.status is JobStatus.PENDING}:
            self._notify(queue)
        return sorted(row.id for row in rows)


def finished_at_or_after(row: Row, bound: datetime) -> bool:
    """Whether the job finished at or after `bound` (an unfinished one did not)."""
    return row.status in FINISHED and row.finished_at is not None and row.finished_at >= bound

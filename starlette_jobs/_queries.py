"""`JobQueries`: what users ask of their jobs (get, list, count, events, peek, cancel, retry,
release), over whatever `Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from ._count_records import DEFAULT_COUNT_CAP, StatusCounts
from ._errors import JobNotFoundError, unavailable_as_error
from ._job import JobId
from ._records import JobEvent, JobRecord, JobStatus
from ._row_ids import row_id_of
from ._storable import filter_text, storable
from ._trace_ids import trace_id_filter
from .store._protocol import Store


class JobQueries:
    """The part of `Jobs` that looks at and changes jobs; `Jobs` supplies `store`."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def get(self, job_id: JobId) -> JobRecord | None:
        """The job with this id, or None (also for what no job id can be: a negative number,
        one past 64 bits, text that is not a number)."""
        row_id = row_id_of(job_id)
        if row_id is None:
            return None
        with unavailable_as_error(f"get job {row_id}"):
            return await self._ready_store.get_job(row_id)

    async def list(
        self,
        *,
        status: JobStatus | str | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 100,
        before: JobId | None = None,
        trace_id: str | None = None,
        correlation_id: str | None = None,
        finished_after: datetime | None = None,
        after: JobId | None = None,
    ) -> builtins.list[JobRecord]:
        """Jobs, most recent first, optionally of one status, one queue and one job name,
        enqueued in one trace (`trace_id`, 32 hex digits) or one request (`correlation_id`).
        `before`: the next page, after one whose last (oldest) job had this id. `after`: only
        jobs with ids above this one (with `before`, a window of ids: what a filter that no
        index serves reads at most, as the dashboard's list does).
        `finished_after`: only the jobs that finished (succeeded, failed or were cancelled) at
        or after this time, timezone-aware ("the failed jobs of the last hour":
        `status="failed", finished_after=now - timedelta(hours=1)`); still in order of id.

        The trace and correlation filters use no index: on a large table, a rare id costs a
        scan of the ids below `before` (docs/dashboard.md gives the figures).

        Raises:
            ValueError: a `before` or `after` that is no job id, a `trace_id` that is no trace id, a
                `finished_after` without a timezone.
        """
        return await self._list(
            status=status, queue=queue, name=name, limit=limit, before=before,
            trace_id=trace_id, correlation_id=correlation_id, finished_after=finished_after,
            after=after, brief=False,
        )  # fmt: skip

    async def _list(
        self,
        *,
        status: JobStatus | str | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 100,
        before: JobId | None = None,
        trace_id: str | None = None,
        correlation_id: str | None = None,
        finished_after: datetime | None = None,
        after: JobId | None = None,
        brief: bool,
    ) -> builtins.list[JobRecord]:
        """`list`; `brief`: without the large fields (`Store.list_jobs`), for the dashboard's
        job list, which shows a line of each job."""
        below = None if before is None else row_id_of(before)
        if before is not None and below is None:
            raise ValueError(f"before must be a job id, got {before!r}")
        above = None if after is None else row_id_of(after)
        if after is not None and above is None:
            raise ValueError(f"after must be a job id, got {after!r}")
        trace = trace_id_filter(trace_id)
        check_time_bound(finished_after)
        filter_text(queue, "queue")
        filter_text(name, "name")
        filter_text(correlation_id, "correlation_id")
        with unavailable_as_error("list jobs"):
            return await self._ready_store.list_jobs(
                None if status is None else JobStatus(status), queue, limit, name, below,
                trace, correlation_id, finished_after, above, brief=brief,
            )  # fmt: skip

    async def count_by_status(self, *, queue: str | None = None) -> dict[JobStatus, int]:
        """How many jobs there are in each status (every status present, zeros included)."""
        filter_text(queue, "queue")
        with unavailable_as_error("count jobs"):
            return await self._ready_store.count_by_status(queue)

    async def status_counts(
        self, *, queue: str | None = None, cap: int = DEFAULT_COUNT_CAP
    ) -> StatusCounts:
        """How many jobs there are in each status, of one queue or of all, read at a cost that
        does not grow with the finished jobs (the dashboard's overview, `starlette-jobs status`).
        Pending, running and waiting jobs are counted exactly; each finished status up to
        `cap`, past which it reads "10,000+" (`StatusCounts.capped`). `count_by_status` counts
        every job exactly instead, at a cost that grows with the finished jobs kept.

        ```python
        counts = await jobs.status_counts(queue="emails")
        print(counts.shown("pending"), counts.shown("succeeded"))  # 12 10,000+
        ```
        """
        if cap < 1:
            raise ValueError(f"cap must be at least 1, got {cap!r}")
        filter_text(queue, "queue")
        with unavailable_as_error("count jobs"):
            return await self._ready_store.status_counts(queue, cap)

    async def cancel(self, job_id: JobId, *, by: str | None = None) -> bool:
        """Cancels a job. A pending one is cancelled at once. A running one is asked to stop:
        the worker holding it, wherever it runs, cancels the attempt at once, and the job ends
        `cancelled`, not retried; what the job returns when it catches the cancellation is
        kept as its result (see docs/cancelling.md). Returns False if the job has finished, or
        was asked to stop already.

        Args:
            job_id: the job.
            by: who asks (a user's name, an email): written in the job's event
                (`JobEvent.by`), the audit trail of who changed what. None: no one named.

        Raises:
            JobNotFoundError: no job has this id.
        """

        who = who_asked(by)

        async def cancel_row(row_id: int) -> bool:
            return await self._ready_store.cancel_job(row_id, who) is not None

        return await self._change(job_id, "cancel", cancel_row)

    async def events(self, job_id: JobId) -> builtins.list[JobEvent]:
        """The job's history, oldest first: enqueued, claimed, attempt failed, succeeded, ...
        Each event was written by the statement that made the change it records (see
        docs/events.md). Empty if no job has this id (or it was pruned).
        """
        row_id = row_id_of(job_id)
        if row_id is None:
            return []
        with unavailable_as_error(f"read the events of job {row_id}"):
            return await self._ready_store.job_events(row_id)

    async def peek(
        self, queue: str = "default", limit: int = 10, *, exclude: Iterable[JobId] = ()
    ) -> builtins.list[JobRecord]:
        """The jobs the next claim of `queue` would take, in claim order (highest priority,
        then the longest due), leaving out the ids in `exclude`; it locks and writes nothing.
        A job another transaction is claiming at this moment may still be listed."""
        if type(limit) is not int or not 1 <= limit <= _MAX_PEEK:
            raise ValueError(f"limit must be an integer from 1 to {_MAX_PEEK}, got {limit!r}")
        left_out = [row_id for job_id in exclude if (row_id := row_id_of(job_id)) is not None]
        filter_text(queue, "queue")
        with unavailable_as_error(f"peek at queue {queue!r}"):
            return await self._ready_store.peek_jobs(queue, limit, left_out)

    async def retry(self, job_id: JobId, *, by: str | None = None) -> bool:
        """Runs a failed or cancelled job again, from its first attempt. Returns False if the
        job is in another status, or is a workflow's step more of whose upstream failed than
        it allows (retry that step first; docs/workflows.md). `by`: who asks, written in the
        job's `retried` event (`JobEvent.by`), as for `cancel`.

        Raises:
            JobNotFoundError: no job has this id.
            UniqueKeyTakenError: another live job holds this job's unique key.
        """
        who = who_asked(by)
        return await self._change(
            job_id, "retry", lambda row_id: self._ready_store.retry_job(row_id, who)
        )

    async def release(self, job_id: JobId, *, by: str | None = None) -> bool:
        """Hands a running job back to pending at once, its attempt given back, without waiting
        for its lease to expire: for a job stuck on a worker you know is gone. Returns False if
        the job is not running.

        If its worker is in fact alive, that worker's result is refused (the job may then run
        twice), and it cancels its copy at its next lease renewal. `by`: who asks, written in
        the job's event (`JobEvent.by`), as for `cancel`.

        Raises:
            JobNotFoundError: no job has this id.
        """
        who = who_asked(by)
        return await self._change(
            job_id, "release", lambda row_id: self._ready_store.release_job(row_id, who)
        )

    async def release_worker_jobs(self, worker_id: str) -> builtins.list[JobId]:
        """`release` for every job a worker is running (see `JobRecord.worker_id`, and a worker's
        start-up log line); returns their ids. For a worker that crashed or was stopped hard."""
        with unavailable_as_error(f"release the jobs of worker {worker_id!r}"):
            return await self._ready_store.release_worker_jobs(worker_id)

    async def _change(
        self, job_id: JobId, action: str, change: Callable[[int], Awaitable[bool]]
    ) -> bool:
        row_id = row_id_of(job_id)
        if row_id is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        with unavailable_as_error(f"{action} job {row_id}"):
            if await change(row_id):
                return True
            if await self._ready_store.job_status(row_id) is None:
                raise JobNotFoundError(f"no job with id {row_id}")
        return False

    async def migrate(self) -> builtins.list[str]:
        """Applies the migrations this database lacks; returns their names."""
        with unavailable_as_error("migrate"):
            return await self._ready_store.migrate()


_MAX_PEEK = 10_000


def who_asked(by: str | None) -> str | None:
    """Who asked, as the events keep it: a NUL character (which PostgreSQL cannot store) or a
    lone surrogate written as an escape, on both stores alike, rather than the change refused."""
    return None if by is None else storable(by)


def check_time_bound(bound: object) -> None:
    """Refuses a `finished_after` that is no timezone-aware datetime: a naive one would be
    read in the server's zone on PostgreSQL and in none in memory.

    Raises:
        ValueError: what it refuses.
    """
    if bound is None:
        return
    if not isinstance(bound, datetime) or bound.utcoffset() is None:
        raise ValueError(f"finished_after must be a timezone-aware datetime, got {bound!r}")

"""The PostgreSQL store: the `Store` protocol as the named queries of sql/queries.sql (see
`_migrations.py`), run over the connections of `_connections.py`.

The driver's errors stop here: what means that the database is unavailable is raised as
`DatabaseUnavailableError` (see `_driver_errors.unavailable`), by the lanes, `_read` and `_write`
that every statement goes through, and by the connections opened here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

from .._attempt_records import Claim, Outcome, PruneCursor, Pruned, Renewal, Unfinished
from .._errors import IdempotencyKeyReusedError, JobDefinitionError, UniqueKeyTakenError
from .._records import JobEvent, JobRecord, JobStatus, NewJobs
from ._added_steps import AddedStepStatements
from ._brief import brief_reads
from ._bulk import BulkStatements
from ._completions import CompletionStatements
from ._controls import ControlledStore
from ._counts import CountStatements
from ._depths import DepthStatements
from ._driver_errors import UniqueViolationError, raise_as_store_error
from ._history import job_history
from ._lanes import Executor, Lane
from ._registry import WorkerRegistry
from ._releases import ReleaseStatements
from ._schedules import ScheduleStatements
from ._since import list_finished_after
from ._throughput import ThroughputStatements
from ._transactions import JoinedTransaction
from ._workflows import WorkflowStatements

_UNIQUE_KEY_TRIES = 5


class PostgresStore(
    ReleaseStatements,
    BulkStatements,
    WorkerRegistry,
    ScheduleStatements,
    ControlledStore,
    WorkflowStatements,
    CompletionStatements,
    AddedStepStatements,
    DepthStatements,
    CountStatements,
    ThroughputStatements,
):
    """The `Store` on PostgreSQL: typed methods over asyncpg connections, one per named query."""

    async def insert_jobs(self, new: NewJobs, connection: Executor | None = None) -> list[int]:
        """Inserts the jobs and returns their ids, in order. With `connection`, in its
        transaction; otherwise on the producer connection, or the pool when it is busy."""
        executor: Lane | JoinedTransaction = self._producer
        if connection is not None:
            executor = JoinedTransaction(connection)
            if self.schema is not None:
                await self._check_caller_schema(executor)
        keyed = new.unique_key is not None or new.idempotency_key is not None
        if len(new.payloads) == 1 and not keyed:
            if new.delay is None and new.run_at is None:
                job_id: int = await executor.fetchval(
                    self._q["insert_job_now"],
                    new.name, new.queue, new.payloads[0], new.priority, new.max_attempts,
                    new.trace_context,
                )  # fmt: skip
                return [job_id]
            job_id = await executor.fetchval(
                self._q["insert_job"],
                new.name, new.queue, new.payloads[0], new.priority, new.delay, new.run_at,
                new.max_attempts, new.trace_context, new.notify,
            )  # fmt: skip
            return [job_id]
        if len(new.payloads) == 1:
            for _ in range(_UNIQUE_KEY_TRIES):
                rows = await executor.fetch(
                    self._q["insert_unique_job"],
                    new.name, new.queue, new.payloads[0], new.priority, new.delay, new.run_at,
                    new.max_attempts, new.trace_context, new.unique_key, new.notify,
                    new.idempotency_key,
                )  # fmt: skip
                if rows:
                    job_id, _, arguments_differ = rows[0]
                    if arguments_differ and new.idempotency_key is not None:
                        raise IdempotencyKeyReusedError(new.name, job_id, new.idempotency_key)
                    return [job_id]
                # The key's holder committed after this statement's snapshot was taken, so
                # neither the insert nor the look-up saw it: a new statement will.
            raise RuntimeError(
                f"key {new.unique_key or new.idempotency_key!r}: could neither insert nor find "
                "the job holding it (is the connection's transaction REPEATABLE READ or "
                "SERIALIZABLE?)"
            )
        ids = await executor.fetchval(
            self._q["insert_jobs"],
            new.name, new.queue, f"[{','.join(new.payloads)}]", new.priority, new.delay, new.run_at,
            new.max_attempts, new.trace_context, new.notify,
        )  # fmt: skip
        return list(ids)

    async def _check_caller_schema(self, caller: JoinedTransaction) -> None:
        """Refuses the caller's connection (`configure(connection=...)`) unless its tables are
        this store's schema's. The store's own connections are placed there by their
        `search_path`; the caller's is the caller's to set, and changing it inside their
        transaction would change their own statements too. One more statement per enqueue,
        only with a schema."""
        found = await caller.fetchval(self._q["current_schema"])
        if found != self.schema:
            raise JobDefinitionError(
                f"connection=: its search_path puts tables in schema {found!r}, and this Jobs "
                f"keeps its jobs in schema {self.schema!r}; open that connection with "
                f"server_settings={{'search_path': '{self.schema}'}} (or SET search_path), "
                "or enqueue without connection="
            )

    async def reserve_ids(self, new: NewJobs) -> tuple[list[int], bool]:
        keyed_payload = new.payloads[0] if new.idempotency_key is not None else None
        rows = await self._producer.fetch(
            self._q["reserve_job_ids"],
            len(new.payloads), new.name, new.unique_key, new.idempotency_key, keyed_payload,
        )  # fmt: skip
        if rows and rows[0]["arguments_differ"] and new.idempotency_key is not None:
            raise IdempotencyKeyReusedError(new.name, rows[0][0], new.idempotency_key)
        return [row[0] for row in rows], bool(rows) and rows[0][1]

    async def insert_reserved(self, batch: Sequence[NewJobs]) -> set[int]:
        query, args = self._q["insert_reserved_jobs"], _reserved_columns(batch)
        if not any(new.unique_key or new.idempotency_key for new in batch):
            # Fresh ids and no key: nothing can conflict.
            return {row[0] for row in await self._producer.fetch(query, *args)}
        try:  # a key may have been taken meanwhile: all or nothing
            async with self._shared.transaction() as connection:
                rows = await connection.fetch(query, *args)
                if len(rows) < len(args[0]):
                    raise UniqueKeyTakenError("a key of the batch is taken")  # rolls back
        except UniqueKeyTakenError:
            return set()
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)
        return {row[0] for row in rows}

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        rows = await self._claimer.fetch(
            self._q["claim_batch"], queue, limit, worker_id, lease_seconds, names
        )
        # By position: the statement's RETURNING lists `Claim`'s fields in order. `Claim(**row)`
        # would first build a dict of each record, which cost 0.7 us of the worker's time a job.
        return [Claim(*row) for row in rows]

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        """Writes the outcomes whose lease is still held; returns the ids written."""
        # In id order, the order the statement then locks the rows in: two workers' outcome
        # statements over the same rows (a lease taken over) cannot deadlock. A workflow's
        # cancel and a bulk action never wait for a row lock: they skip the rows held.
        outcomes = sorted(outcomes, key=attrgetter("id"))
        succeeded = JobStatus.SUCCEEDED
        if all(o.status is succeeded and o.error is None and o.progress is None for o in outcomes):
            # The common batch: the statement made for it sends three arrays, not seven. Without
            # a workflow's step in it, the server need not even set up the steps' part.
            written = [o.id for o in outcomes], [o.lease_token for o in outcomes]
            results = [o.result for o in outcomes]
            if any(o.of_workflow for o in outcomes):  # the events: of the steps it releases
                statement = self._q["record_successes"]
                rows = await self._writer.fetch(statement, *written, results, self.record_events)
            else:
                statement = self._q["record_plain_successes"]
                rows = await self._writer.fetch(statement, *written, results)
            return {row[0] for row in rows}
        rows = await self._writer.fetch(
            self._q["record_outcomes"],
            [o.id for o in outcomes],
            [o.lease_token for o in outcomes],
            [o.status for o in outcomes],
            [o.retry_delay for o in outcomes],
            [o.error for o in outcomes],
            [o.result for o in outcomes],
            [o.progress for o in outcomes],
            self.record_events,
        )
        if rows and rows[0][1]:
            # Steps it cancelled (a step they waited for failed) have steps waiting for them.
            await self._settle_after_commit()
        return {row[0] for row in rows}

    async def locked_jobs(self, ids: Sequence[int]) -> set[int]:
        rows = await self._writer.fetch(self._q["locked_jobs"], list(ids))
        return {row[0] for row in rows}

    async def extend_leases(
        self, held: Sequence[tuple[int, UUID]], lease_seconds: float
    ) -> dict[UUID, Renewal]:
        """Renews the leases still held; returns, for each token that still holds its job,
        whether its lease was renewed (not if the row was locked by another transaction: to
        be tried again next round) and whether a cancel was requested. A token left out has
        lost its job."""
        ids, tokens = zip(*held, strict=True)
        rows = await self._leases.fetch(self._q["extend_leases"], ids, tokens, lease_seconds)
        return {token: Renewal(renewed, cancel) for token, renewed, cancel in rows}

    async def record_progress(self, progress: Sequence[tuple[int, UUID, str]]) -> set[int]:
        ids, tokens, texts = zip(*progress, strict=True)
        rows = await self._worker_write("fetch", self._q["record_progress"], ids, tokens, texts)
        return {row[0] for row in rows}

    async def prune_finished(
        self, retention_seconds: float, limit: int, after: PruneCursor | None = None
    ) -> Pruned:
        finished_at, job_id = (None, None) if after is None else after
        row = await self._worker_write(
            "fetchrow", self._q["prune_finished"], retention_seconds, limit, finished_at, job_id
        )
        if row["kept"]:  # committed now: another round's deletes of their steps are seen
            await self._worker_write("execute", self._q["forget_empty_workflows"], row["kept"])
        more = row["looked_at"] == limit  # else it looked at the last old job
        return Pruned(row["deleted"], (row["last_finished_at"], row["last_id"]) if more else None)

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        rows = await self._worker_write(
            "fetch", self._q["rescue_expired"], limit, self.record_events
        )
        return [(row[0], row[1], JobStatus(row[2])) for row in rows]

    async def get_job(self, job_id: int) -> JobRecord | None:
        row = await self._read("fetchrow", self._q["get_job"], job_id)
        return None if row is None else JobRecord._from_row(row)

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
        brief: bool = False,
    ) -> list[JobRecord]:
        filters = (status, queue, limit, name, before, trace_id, correlation_id, after)
        q = brief_reads(self._q) if brief else self._q
        if finished_after is not None:
            return await list_finished_after(self._read, q, filters, finished_after)
        rows = await self._read("fetch", q["list_jobs"], *filters)
        return [JobRecord._from_row(row) for row in rows]

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        if queue is None:
            rows = await self._read("fetch", self._q["count_by_status"])
        else:
            rows = await self._read("fetch", self._q["count_by_status_of_queue"], queue)
        for status, jobs in rows:
            counts[JobStatus(status)] = jobs
        return counts

    async def count_unfinished(
        self,
        queues: Sequence[str],
        horizon_seconds: float | None,
        retry_horizon_seconds: float | None,
        names: Sequence[str] | None = None,
    ) -> Unfinished:
        row = await self._read(
            "fetchrow", self._q["count_unfinished"], list(queues), horizon_seconds,
            retry_horizon_seconds, names,
        )  # fmt: skip
        return Unfinished(row["waited"], row["scheduled"], row["retries"], row["unknown"])

    async def cancel_job(self, job_id: int, by: str | None = None) -> JobStatus | None:
        row = await self._write("fetchrow", self._q["cancel_job"], job_id, self.record_events, by)
        if row is None:
            return None
        if row["owed"]:  # a workflow's step: the steps waiting for it are told
            await self._settle_after_commit()
        return JobStatus(row[0])

    async def peek_jobs(self, queue: str, limit: int, exclude: Sequence[int]) -> list[JobRecord]:
        rows = await self._read("fetch", self._q["peek_jobs"], queue, limit, list(exclude))
        return [JobRecord._from_row(row) for row in rows]

    async def job_events(self, job_id: int) -> list[JobEvent]:
        rows = await self._read("fetch", self._q["job_events"], job_id)
        return job_history(rows)

    async def want_outcome(self, job_id: int) -> JobStatus | None:
        status = await self._write("fetchval", self._q["want_outcome"], job_id)
        return None if status is None else JobStatus(status)

    async def retry_job(self, job_id: int, by: str | None = None) -> bool:
        try:
            # With the steps its failure cancelled (a workflow's), in one transaction.
            return await self._retry_with_dependents(job_id, by)
        except UniqueViolationError:
            raise UniqueKeyTakenError(
                f"job {job_id} cannot be retried: another pending or running job holds its "
                "unique key; retry it once that job has finished"
            ) from None

    async def job_status(self, job_id: int) -> JobStatus | None:
        status = await self._read("fetchval", self._q["job_status"], job_id)
        return None if status is None else JobStatus(status)


_RESERVED_FIELDS = (
    *("name", "queue", "priority", "delay", "run_at", "max_attempts", "trace_context"),
    *("unique_key", "idempotency_key", "notify"),
)


def _reserved_columns(batch: Sequence[NewJobs]) -> list[Any]:
    """The parameters of `insert_reserved_jobs`: a column per field, a row per job."""
    rows = [(new, i, text) for new in batch for i, text in zip(new.ids, new.payloads, strict=True)]
    columns = [[getattr(n, field) for n, _, _ in rows] for field in _RESERVED_FIELDS]
    payloads = f"[{','.join(text for _, _, text in rows)}]"
    return [[i for _, i, _ in rows], *columns[:2], payloads, *columns[2:]]

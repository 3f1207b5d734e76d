"""Workflows on PostgreSQL (docs/workflows.md): a workflow written in one statement, the steps
waiting for others told by `settle_steps` when the statement that finished a step could not
tell them, and what a step and `jobs.workflow` read. Releasing a step on its last upstream's
outcome is part of `record_outcomes` (sql/queries.sql). `_store.PostgresStore` is built on it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from .._errors import DatabaseTooSlowError, DatabaseUnavailableError
from .._records import JobRecord, JobStatus
from .._workflow_records import (
    EnqueuedWorkflow,
    NewWorkflow,
    UpstreamStep,
    WorkflowRecord,
    WorkflowSummary,
    workflow_record,
)
from ._brief import brief_reads
from ._connected import ConnectedStore
from ._driver_errors import UniqueViolationError, raise_as_store_error
from ._lanes import Executor, Lane
from ._transactions import JoinedTransaction

logger = logging.getLogger("starlette_jobs.store")

# How many finished steps one `settle_steps` statement tells the dependents of.
SETTLE_BATCH = 1000
# A workflow's cancel that skipped steps locked elsewhere tries again after this pause,
# doubled each time up to the last: a worker's outcome statement holds them for milliseconds.
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 0.5


class WorkflowStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's workflow methods."""

    async def insert_workflow(
        self, new: NewWorkflow, connection: Executor | None = None
    ) -> EnqueuedWorkflow:
        executor: Lane | JoinedTransaction = self._producer
        if connection is not None:
            executor = JoinedTransaction(connection)
            if self.schema is not None:
                await self._check_caller_schema(executor)
        (row,) = await executor.fetch(self._q["insert_workflow"], *_workflow_arguments(new))
        ids = dict(zip(new.steps, row["ids"], strict=True))
        return EnqueuedWorkflow(row["workflow_id"], ids)

    async def _check_caller_schema(self, caller: JoinedTransaction) -> None:
        raise NotImplementedError  # PostgresStore's

    async def settle_steps(self, limit: int = SETTLE_BATCH) -> int:
        """Tells the dependents of the finished steps that have not told them, `limit` steps a
        statement, and of the steps that cancels in turn, until none is owed but those whose
        dependents another transaction holds locked; returns how many it told."""
        settled, after = 0, 0
        while True:
            row = await self._worker_write(
                "fetchrow", self._q["settle_steps"], limit, self.record_events, after
            )
            settled += int(row["settled"])
            if row["cascade"]:
                after = 0  # the steps it cancelled owe their own dependents, wherever they are
            elif row["scanned"] < limit:
                return settled
            else:  # a full batch, some of it perhaps held: on past it
                after = row["last"]

    async def _settle_after_commit(self) -> None:
        """`settle_steps` after a statement that committed cancelled steps with dependents of
        their own (the cascade goes on). Its caller's statement is written whatever becomes of
        this one: a failure here is logged, not raised, lest the caller take its committed
        write for one that failed (a worker would think its outcome unwritten, its lease
        lost). The upkeep's `settle_steps` tells those dependents within a round."""
        try:
            await self.settle_steps()
        except DatabaseUnavailableError as error:
            logger.warning(
                "the steps waiting for cancelled steps are told by the next upkeep round: %s",
                error,
            )
        except Exception:  # a defect, shown whole; still not the committed write's failure
            logger.exception("telling the steps waiting for cancelled steps failed")

    async def _retry_with_dependents(self, job_id: int, by: str | None = None) -> bool:
        """`retry_job`, and, for a workflow's step, the steps waiting for it counted again:
        those its failure cancelled wait again, down the graph; all in one transaction.

        Raises:
            UniqueViolationError: a live job holds the job's unique key.
        """
        try:
            async with self._shared.transaction() as connection:
                await connection.execute(self._q["lock_steps"], [job_id])
                row = await connection.fetchrow(
                    self._q["retry_job"], job_id, self.record_events, by
                )
                if row is None:
                    return False
                if row["dependents"] is not None:
                    await self._reopen(connection, list(row["dependents"]))
                return True
        except UniqueViolationError:
            raise
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def _reopen(self, connection: Any, step_ids: list[int]) -> None:
        """The steps waiting for a step retried count their upstream again (`reopen_steps`);
        those that were cancelled and wait again pass it on to theirs."""
        while step_ids:
            await connection.execute(self._q["lock_steps"], step_ids)
            rows = await connection.fetch(self._q["reopen_steps"], step_ids, self.record_events)
            step_ids = sorted(
                {i for row in rows if row["reopened"] for i in row["dependents"] or ()}
            )

    async def cancel_workflow(self, workflow_id: int) -> list[tuple[int, JobStatus]]:
        """Rounds of `cancel_workflow` until one skips no step locked elsewhere (a worker
        writing its outcome, an operator's session), a short while apart; a step held past the
        statement timeout ends it with `DatabaseTooSlowError`, the others cancelled."""
        changed: list[tuple[int, JobStatus]] = []
        deadline = time.monotonic() + self.statement_timeout
        pause = _FIRST_PAUSE
        while True:
            row = await self._cancel_workflow_round(workflow_id)
            changed += zip(row["ids"] or (), map(JobStatus, row["statuses"] or ()), strict=True)
            if not row["skipped"]:
                return sorted(changed)
            if time.monotonic() + pause > deadline:
                raise DatabaseTooSlowError(
                    f"{row['skipped']} step(s) of workflow {workflow_id} stayed locked by "
                    "another transaction; the others were cancelled, and cancelling again "
                    "goes on with those"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LAST_PAUSE)

    async def _cancel_workflow_round(self, workflow_id: int) -> Any:
        try:
            async with self._shared.transaction() as connection:
                # After a running step's addition of steps (which holds this lock), so that
                # the steps it added are in this statement's snapshot, and cancelled too.
                await connection.execute(self._q["lock_workflow"], workflow_id)
                return await connection.fetchrow(
                    self._q["cancel_workflow"], workflow_id, self.record_events
                )
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def upstream_results(self, job_id: int) -> list[UpstreamStep]:
        rows = await self._read("fetch", self._q["upstream_results"], job_id)
        return [UpstreamStep(row[0], JobStatus(row[1]), row[2]) for row in rows]

    async def get_workflow(self, workflow_id: int, brief: bool = False) -> WorkflowRecord | None:
        found = await self._read("fetchrow", self._q["get_workflow"], workflow_id)
        if found is None:
            return None
        q = brief_reads(self._q) if brief else self._q
        rows = await self._read("fetch", q["workflow_steps"], workflow_id)
        upstream = {row["id"]: list(row["upstream"] or ()) for row in rows}
        jobs = [JobRecord._from_row(row) for row in rows]
        return workflow_record(
            found["id"], found["name"], found["created_at"], jobs, lambda job: upstream[job.id]
        )

    async def list_workflows(self, limit: int, before: int | None) -> list[WorkflowSummary]:
        rows = await self._read("fetch", self._q["list_workflows"], limit, before)
        return [
            WorkflowSummary(
                id=row["id"],
                name=row["name"],
                created_at=row["created_at"],
                steps=_counted(row["statuses"], row["counts"]),
            )
            for row in rows
        ]

    async def workflow_of(self, job_id: int) -> int | None:
        workflow_id: int | None = await self._read("fetchval", self._q["workflow_of"], job_id)
        return workflow_id


def _workflow_arguments(new: NewWorkflow) -> tuple[Any, ...]:
    """The parameters of `insert_workflow`: a few arrays of the steps' size, none of objects."""
    waiting = sorted(new.upstream)
    waited: list[int] = []  # what each step that waits waits for, end to end
    owners: list[int] = []  # which step waits, for each of those
    first, last = [], []
    for step in waiting:
        upstream = new.upstream[step]
        first.append(len(waited) + 1)
        waited += upstream
        owners += [step] * len(upstream)
        last.append(len(waited))
    # Each step's dependents, grouped by the step they wait for in step order (a stable sort
    # of the owners by what they wait for), and the bounds of each step's group.
    counts = [0] * (len(new.steps) + 1)
    for up in waited:
        counts[up + 1] += 1
    bounds = list(accumulate(counts))
    flat = [owners[i] for i in sorted(range(len(waited)), key=waited.__getitem__)]
    # A queue is woken when a step of it is pending: one that waits for none.
    pending = Counter(new.job_of)
    pending.subtract(new.job_of[step] for step in waiting)
    woken = sorted({new.jobs[job].queue for job, count in pending.items() if count > 0})
    digits = list(map(str, range(max(len(waited), len(new.steps)) + 1)))  # every number below
    return (
        new.name,
        new.trace_context,
        ",".join(new.steps),
        f"[{','.join(new.payloads)}]",
        [job.name for job in new.jobs],
        [job.queue for job in new.jobs],
        [job.priority for job in new.jobs],
        [job.max_attempts for job in new.jobs],
        _numbers(new.job_of, digits),
        [step + 1 for step in waiting],
        [new.allowed_failures[step] for step in waiting],
        first,
        last,
        _numbers(waited, digits),
        _numbers(flat, digits),
        _numbers(bounds, digits),
        woken,
        len(new.steps),
    )


def _numbers(numbers: Sequence[int], digits: list[str]) -> str:
    """A list of numbers as `insert_workflow` takes the long ones: text, parsed in one call.
    `digits[n]` is `str(n)`, made once for the four lists."""
    return ",".join(map(digits.__getitem__, numbers))


def _counted(statuses: list[str] | None, counts: list[int] | None) -> dict[JobStatus, int]:
    """A workflow's steps by status (two NULL arrays: a workflow with no step left)."""
    return dict(zip(map(JobStatus, statuses or ()), counts or (), strict=True))

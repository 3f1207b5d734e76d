"""Workflows on PostgreSQL (docs/workflows.md): a workflow written in one statement, the steps
waiting for others told by `settle_steps` when the statement that finished a step could not
tell them, and what a step and `jobs.workflow` read. Releasing a step on its last upstream's
outcome is part of `record_outcomes` (sql/queries.sql). `_store.PostgresStore` is built on it."""

from __future__ import annotations

from typing import Any

from .._records import JobRecord, JobStatus
from .._workflow_records import (
    EnqueuedWorkflow,
    NewWorkflow,
    UpstreamStep,
    WorkflowRecord,
    workflow_record,
)
from ._connected import ConnectedStore
from ._driver_errors import UniqueViolationError, raise_as_store_error
from ._lanes import Executor, Lane
from ._transactions import JoinedTransaction

# How many finished steps one `settle_steps` statement tells the dependents of.
SETTLE_BATCH = 1000


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
        steps = new.steps
        edges = [(up + 1, down + 1) for down, s in enumerate(steps) for up in s.upstream]
        (row,) = await executor.fetch(
            self._q["insert_workflow"],
            new.name,
            new.trace_context,
            [s.step for s in steps],
            [s.name for s in steps],
            [s.queue for s in steps],
            f"[{','.join(s.payload for s in steps)}]",
            [s.priority for s in steps],
            [s.max_attempts for s in steps],
            [s.allowed_failures for s in steps],
            [up for up, _ in edges],
            [down for _, down in edges],
        )
        ids = dict(zip((s.step for s in steps), row["ids"], strict=True))
        return EnqueuedWorkflow(row["workflow_id"], ids)

    async def _check_caller_schema(self, caller: JoinedTransaction) -> None:
        raise NotImplementedError  # PostgresStore's

    async def settle_steps(self, limit: int = SETTLE_BATCH) -> int:
        """Tells the dependents of up to `limit` finished steps that have not told them, and of
        the steps that cancels in turn, until none is owed; returns how many it told."""
        settled = 0
        while True:
            row = await self._worker_write(
                "fetchrow", self._q["settle_steps"], limit, self.record_events
            )
            settled += int(row["settled"])
            if not row["cascade"] and row["settled"] < limit:
                return settled

    async def _retry_with_dependents(self, job_id: int) -> bool:
        """`retry_job`, and, for a workflow's step, the steps waiting for it counted again:
        those its failure cancelled wait again, down the graph; all in one transaction.

        Raises:
            UniqueViolationError: a live job holds the job's unique key.
        """
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                row = await connection.fetchrow(self._q["retry_job"], job_id, self.record_events)
                if row is None:
                    return False
                if row["dependents"] is not None:
                    await self._reopen(connection, list(row["dependents"]))
                return True
        except UniqueViolationError:
            raise
        except Exception as error:
            raise_as_store_error(error)

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
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                # After a running step's addition of steps (which holds this lock), so that
                # the steps it added are in this statement's snapshot, and cancelled too.
                await connection.execute(self._q["lock_workflow"], workflow_id)
                rows = await connection.fetch(
                    self._q["cancel_workflow"], workflow_id, self.record_events
                )
        except Exception as error:
            raise_as_store_error(error)
        return [(row[0], JobStatus(row[1])) for row in rows]

    async def upstream_results(self, job_id: int) -> list[UpstreamStep]:
        rows = await self._read("fetch", self._q["upstream_results"], job_id)
        return [UpstreamStep(row[0], JobStatus(row[1]), row[2]) for row in rows]

    async def get_workflow(self, workflow_id: int) -> WorkflowRecord | None:
        found = await self._read("fetchrow", self._q["get_workflow"], workflow_id)
        if found is None:
            return None
        rows = await self._read("fetch", self._q["workflow_steps"], workflow_id)
        upstream = {row["id"]: list(row["upstream"] or ()) for row in rows}
        jobs = [JobRecord._from_row(row) for row in rows]
        return workflow_record(
            found["id"], found["name"], found["created_at"], jobs, lambda job: upstream[job.id]
        )

    async def workflow_of(self, job_id: int) -> int | None:
        workflow_id: int | None = await self._read("fetchval", self._q["workflow_of"], job_id)
        return workflow_id

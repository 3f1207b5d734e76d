"""A job's success written by the job itself (`current_job().complete_in`,
docs/transactions.md), in memory: at once, fenced by the lease token as on PostgreSQL.

It cannot join a transaction: the job's own writes go to a database the in-memory store knows
nothing of, and a completion written here before that transaction commits would stand if it
rolled back (the job succeeded, its work undone). So a connection is refused, as `insert_jobs`
refuses one; without one, the completion is written at once, which is what PostgreSQL does too.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from .._attempt_records import Outcome
from .._errors import LeaseLostError, MemoryStoreUnsupportedError
from .._records import JobStatus
from ._tables import utc_now
from ._workflows import MemoryWorkflows


class MemoryCompletions(MemoryWorkflows):
    """`MemoryWorkflows` with the protocol's `complete_job`."""

    async def complete_job(
        self, job_id: int, lease_token: UUID, result: str | None, connection: Any | None = None
    ) -> None:
        if connection is not None:
            raise MemoryStoreUnsupportedError(
                "the in-memory store cannot join a PostgreSQL transaction "
                "(current_job().complete_in(connection, ...)): pass None to complete the job "
                "at once, or test that code on PostgreSQL (starlette_jobs.testing's "
                "`jobs_database`)"
            )
        row = self._held(job_id, lease_token)
        if row is None or row.status is not JobStatus.RUNNING:
            raise LeaseLostError(
                f"job {job_id}: its success was not written: this attempt no longer holds the "
                "job (its lease expired and it was rescued, it was released, or it was "
                "completed already)"
            )
        now = utc_now()
        success = Outcome(
            id=job_id, lease_token=lease_token, status=JobStatus.SUCCEEDED, retry_delay=None,
            error=None, result=result,
        )  # fmt: skip
        self._changed(row, row.end(success, now), now)
        if row.dependents is not None:
            self._tell_dependents(row, now)

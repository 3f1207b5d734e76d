"""A job's success written in its own transaction (`current_job().complete_in`,
docs/transactions.md): the `complete_job` statement of sql/queries.sql, run on the caller's
connection (an asyncpg connection, or a SQLAlchemy session or connection on asyncpg, as
`configure(connection=...)` takes them), so that the job's writes and its success commit
together or not at all. `_store.PostgresStore` is built on it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from .._errors import LeaseLostError
from ._connected import ConnectedStore
from ._transactions import JoinedTransaction, driver_connection


class CompletionStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's `complete_job`."""

    async def complete_job(
        self, job_id: int, lease_token: UUID, result: str | None, connection: Any | None = None
    ) -> None:
        query, events = self._q["complete_job"], self.record_events
        if connection is None:
            # No transaction of the caller's: written at once, as the worker's outcome would be.
            rows = await self._worker_write("fetch", query, job_id, lease_token, result, events)
        else:
            caller = JoinedTransaction(await driver_connection(connection))
            if self.schema is not None:
                await self._check_caller_schema(caller)
            rows = await caller.fetch(query, job_id, lease_token, result, events)
        if not rows:
            raise LeaseLostError(
                f"job {job_id}: its success was not written: this attempt no longer holds the "
                "job (its lease expired and it was rescued, it was released, or it was "
                "completed already); whatever this transaction wrote must not commit"
            )

    async def _check_caller_schema(self, caller: JoinedTransaction) -> None:
        raise NotImplementedError  # PostgresStore's

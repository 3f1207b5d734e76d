"""Bulk actions on PostgreSQL (docs/dashboard.md, "Bulk actions"): the record of one, and its
batches, each one statement that changes up to a batch of jobs, writes their events and advances
the record (sql/queries.sql: `bulk_retry_batch`, `bulk_cancel_batch`). `_store.PostgresStore` is
built on it."""

from __future__ import annotations

from .._bulk_records import BulkFilter, BulkRecord
from ._driver_errors import LockNotAvailableError, UniqueViolationError, raise_as_store_error
from ._workflows import WorkflowStatements

# A batch that meets a unique key taken by a job enqueued while it ran is tried again this many
# times: its statement leaves out the keys live jobs hold, so the next try passes that one.
_UNIQUE_KEY_TRIES = 3


class BulkStatements(WorkflowStatements):
    """`WorkflowStatements` (a retried step reopens the steps waiting for it, a cancelled one
    tells them) with the protocol's bulk actions."""

    async def begin_bulk(self, action: str, filter: BulkFilter, by: str | None) -> BulkRecord:
        row = await self._write(
            "fetchrow",
            self._q["begin_bulk"],
            action,
            by,
            filter.queue,
            None if filter.status is None else filter.status.value,
            filter.name,
            filter.statuses(action),
            filter.finished_after,
        )
        return BulkRecord._from_row(row)

    async def bulk_batch(self, bulk_id: int, limit: int) -> BulkRecord | None:
        record = await self.get_bulk(bulk_id)
        if record is None or record.finished:
            return None
        if record.action == "cancel":
            row = await self._write(
                "fetchrow", self._q["bulk_cancel_batch"], bulk_id, limit, self.record_events
            )
            if row is not None and row["owed"]:
                await self._settle_after_commit()
            return None if row is None else BulkRecord._from_row(row)
        for attempt in range(_UNIQUE_KEY_TRIES):
            try:
                return await self._retry_batch(bulk_id, limit)
            except UniqueViolationError:
                if attempt == _UNIQUE_KEY_TRIES - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _retry_batch(self, bulk_id: int, limit: int) -> BulkRecord | None:
        """A batch of a bulk retry and the steps it reopens, in one transaction."""
        try:
            async with self._shared.transaction() as connection:
                row = await connection.fetchrow(
                    self._q["bulk_retry_batch"], bulk_id, limit, self.record_events
                )
                if row is None:
                    return None
                if row["waiting_steps"] is not None:
                    await connection.execute(
                        self._q["recount_retried_steps"],
                        row["waiting_steps"],
                        self.record_events,
                        row["by_whom"],
                    )
                if row["dependents"] is not None:
                    await connection.execute(self._q["brief_lock_waits"])
                    await self._reopen(connection, sorted(set(row["dependents"])))
                return BulkRecord._from_row(row)
        except LockNotAvailableError:
            # A step to reopen stayed held elsewhere for 200 ms: the batch is rolled back, not
            # made to wait longer with its rows held (a deadlock with that step's outcome).
            # `run_bulk` pauses, as after a batch that skipped rows, and runs it again.
            return await self.get_bulk(bulk_id)
        except UniqueViolationError:
            raise
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def get_bulk(self, bulk_id: int) -> BulkRecord | None:
        row = await self._read("fetchrow", self._q["get_bulk"], bulk_id)
        return None if row is None else BulkRecord._from_row(row)

    async def list_bulks(self, limit: int) -> list[BulkRecord]:
        rows = await self._read("fetch", self._q["list_bulks"], limit)
        return [BulkRecord._from_row(row) for row in rows]

    async def prune_bulks(self, retention_seconds: float) -> int:
        deleted: int = await self._write("fetchval", self._q["prune_bulks"], retention_seconds)
        return deleted

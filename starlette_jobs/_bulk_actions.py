"""`BulkActing`: retrying or cancelling every job of a filter, in batches on the server, with one
record of who asked and how far it has got (docs/dashboard.md, "Bulk actions"), over whatever
`Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

import asyncio
import builtins
from datetime import datetime

from ._bulk_records import BULK_ACTIONS, BulkAction, BulkFilter, BulkRecord
from ._errors import DatabaseTooSlowError, unavailable_as_error
from ._options import check_queue_name
from ._queries import check_time_bound, who_asked
from ._records import JobStatus
from ._row_ids import row_id_of
from ._storable import filter_text
from .store._connectivity import STATEMENT_TIMEOUT
from .store._protocol import Store

_MAX_BATCH = 10_000
# A batch that changed nothing, having skipped only jobs another transaction holds (PostgreSQL
# locks a batch's jobs without waiting: docs/dashboard.md), is run again after this pause,
# doubled each time up to the last.
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 1.0


class BulkActing:
    """The part of `Jobs` that runs bulk actions; `Jobs` supplies the store."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def begin_bulk(
        self,
        action: BulkAction,
        *,
        queue: str,
        status: JobStatus | str | None = None,
        name: str | None = None,
        by: str | None = None,
        finished_after: datetime | None = None,
    ) -> BulkRecord:
        """Records a bulk action over the jobs of `queue` (of `status` and `name`, if given)
        that it applies to: "retry" the failed and cancelled ones, "cancel" the pending, waiting
        and running ones. Nothing changes yet: `run_bulk(record.id)` runs it. The record is the
        action's audit record (who, what, which jobs, when) and its progress.

        Args:
            action: "retry" or "cancel".
            queue: the queue (a bulk action is always over one queue).
            status: only the jobs of this status (among those the action applies to).
            name: only the jobs of this name.
            by: who asks, written in the record and in each job's event.
            finished_after: only the jobs that finished at or after this time (timezone-aware),
                kept in the record: a run on applies the same bound. A retry only: a cancel
                acts on unfinished jobs, which no such bound matches.

        Example:
            >>> bulk = await jobs.begin_bulk("retry", queue="emails", status="failed", by="ada")
            >>> await jobs.run_bulk(bulk.id)
        """
        if action not in BULK_ACTIONS:
            raise ValueError(f"action must be 'retry' or 'cancel', got {action!r}")
        check_time_bound(finished_after)
        if action == "cancel" and finished_after is not None:
            raise ValueError("a bulk cancel acts on unfinished jobs: finished_after matches none")
        filter_text(name, "name")
        filter = BulkFilter(
            check_queue_name(queue),
            None if status is None else JobStatus(status),
            name,
            finished_after,
        )
        with unavailable_as_error(f"begin a bulk {action} on queue {queue!r}"):
            return await self._ready_store.begin_bulk(action, filter, who_asked(by))

    async def run_bulk(self, bulk_id: int, *, batch_size: int = 500) -> BulkRecord | None:
        """Runs the bulk action to its end, `batch_size` jobs at a time by id, each batch one
        statement that changes its jobs, writes their events and advances the record; returns
        the record at the end (None if there is no such record). A record left unfinished (the
        process running it stopped) runs on from where its last batch ended.

        Jobs that another transaction holds are skipped and tried again a moment later;
        held for longer than a statement may wait for a lock (10 s), they stop the run with
        `DatabaseUnavailableError`, the rest of the batches done: running it again goes on.
        """
        if type(batch_size) is not int or not 1 <= batch_size <= _MAX_BATCH:
            raise ValueError(f"batch_size must be an integer from 1 to 10000, got {batch_size!r}")
        if (found := row_id_of(bulk_id)) is None:  # no record can have it
            return None
        bulk_id, store = found, self._ready_store
        pause, before = _FIRST_PAUSE, None
        loop = asyncio.get_running_loop()
        moved = loop.time()
        with unavailable_as_error(f"run bulk action {bulk_id}"):
            while True:
                record = await store.bulk_batch(bulk_id, batch_size)
                if record is None:  # finished, here or by another process
                    return await store.get_bulk(bulk_id)
                if record.finished:
                    return record
                if (record.done, record.last_id) != before:
                    pause, before, moved = _FIRST_PAUSE, (record.done, record.last_id), loop.time()
                    continue
                # It skipped only jobs locked elsewhere: they are tried again shortly, for as
                # long as a statement may wait for a lock.
                if loop.time() - moved > STATEMENT_TIMEOUT:
                    raise DatabaseTooSlowError(
                        f"jobs stayed locked by another transaction for {STATEMENT_TIMEOUT:g} s; "
                        f"{record.done} of {record.matched} done, and running it again goes on"
                    )
                await asyncio.sleep(pause)
                pause = min(pause * 2, _LAST_PAUSE)

    async def get_bulk(self, bulk_id: int) -> BulkRecord | None:
        """The record of a bulk action, or None."""
        if (found := row_id_of(bulk_id)) is None:  # no record can have it
            return None
        with unavailable_as_error(f"read bulk action {found}"):
            return await self._ready_store.get_bulk(found)

    async def list_bulks(self, limit: int = 20) -> builtins.list[BulkRecord]:
        """The latest bulk actions' records, latest first.

        Raises:
            ValueError: a `limit` outside 1 to 1,000.
        """
        if type(limit) is not int or not 1 <= limit <= 1000:
            raise ValueError(f"limit must be an integer from 1 to 1000, got {limit!r}")
        with unavailable_as_error("list bulk actions"):
            return await self._ready_store.list_bulks(limit)

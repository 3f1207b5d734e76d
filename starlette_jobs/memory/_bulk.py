"""Bulk actions in the in-memory store (docs/dashboard.md, "Bulk actions"), as the PostgreSQL
store runs them: a record, and batches by id that each change their jobs (through the same
changes as `retry_job` and `cancel_job`) and advance it. `_store.MemoryStore` is built on it."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from .._bulk_records import BulkFilter, BulkRecord
from .._errors import UniqueKeyTakenError
from .._records import JobStatus
from ._queries import MemoryQueries, finished_at_or_after
from ._rows import Row
from ._tables import utc_now


class MemoryBulk(MemoryQueries):
    """`MemoryQueries` (whose retry and cancel each job of a batch goes through) with the
    protocol's bulk actions."""

    async def begin_bulk(self, action: str, filter: BulkFilter, by: str | None) -> BulkRecord:
        bulks = self.data.bulks
        record = BulkRecord(
            id=next(self.data.bulk_ids),
            action=action,
            by=by,
            queue=filter.queue,
            status=filter.status,
            name=filter.name,
            started_at=utc_now(),
            finished_at=None,
            matched=sum(1 for _ in self._matching(action, filter, 0, None, None)),
            done=0,
            last_id=0,
            upper_id=max(self._rows, default=0),
            finished_after=filter.finished_after,
        )
        bulks[record.id] = record
        return record

    async def bulk_batch(self, bulk_id: int, limit: int) -> BulkRecord | None:
        record = self.data.bulks.get(bulk_id)
        if record is None or record.finished:
            return None
        picked = sorted(
            self._matching(
                record.action, record.filter, record.last_id, record.upper_id, record.started_at
            ),
            key=lambda row: row.id,
        )[:limit]
        # Of the batch's jobs with one unique key, a retry takes the latest, as on PostgreSQL.
        latest: dict[str | None, int] = {r.unique_key: r.id for r in picked if r.unique_key}
        done = 0
        for row in picked:
            if record.action == "retry" and latest.get(row.unique_key, row.id) != row.id:
                continue
            try:
                if record.action == "retry":
                    done += await self.retry_job(row.id, record.by)
                else:
                    done += await self.cancel_job(row.id, record.by) is not None
            except UniqueKeyTakenError:
                continue  # left as it is, as the PostgreSQL store's statement leaves it
        record = dataclasses.replace(
            record,
            done=record.done + done,
            last_id=picked[-1].id if picked else record.last_id,
            finished_at=utc_now() if len(picked) < limit else None,
        )
        self.data.bulks[bulk_id] = record
        return record

    def _matching(
        self,
        action: str,
        filter: BulkFilter,
        after: int,
        upper: int | None,
        started: datetime | None,
    ) -> list[Row]:
        statuses = {JobStatus(status) for status in filter.statuses(action)}
        return [
            row
            for row in self._rows.values()
            if row.queue == filter.queue
            and row.status in statuses
            and filter.name in (None, row.name)
            and (filter.finished_after is None or finished_at_or_after(row, filter.finished_after))
            and row.id > after
            and (upper is None or row.id <= upper)
            # A running job asked to stop already: a cancel leaves it, as on PostgreSQL.
            and not (action == "cancel" and row.cancel_requested_at is not None)
            # A step more of whose upstream failed than it allows: left, as `retry_job` leaves
            # it (the retry of that step reopens one it cancelled).
            and not (action == "retry" and self._upstream_failed_beyond_allowed(row))
            # One that failed after a retry began was not counted: left out, as on PostgreSQL.
            and not (
                action == "retry"
                and started is not None
                and (row.finished_at is None or row.finished_at > started)
            )
        ]

    async def get_bulk(self, bulk_id: int) -> BulkRecord | None:
        return self.data.bulks.get(bulk_id)

    async def list_bulks(self, limit: int) -> list[BulkRecord]:
        return sorted(self.data.bulks.values(), key=lambda r: -r.id)[:limit]

    async def prune_bulks(self, retention_seconds: float) -> int:
        cutoff = utc_now() - timedelta(seconds=retention_seconds)
        old = [
            record.id
            for record in self.data.bulks.values()
            if record.finished_at is not None and record.finished_at < cutoff
        ]
        for bulk_id in old:
            del self.data.bulks[bulk_id]
        return len(old)

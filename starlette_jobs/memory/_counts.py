"""The jobs of each status in the in-memory store (`jobs.status_counts`), capped as the
PostgreSQL store caps them. `_store.MemoryStore` is built on it."""

from __future__ import annotations

from .._count_records import StatusCounts, capped_counts
from .._records import FINISHED, JobStatus
from ._tables import MemoryTables


class MemoryCounts(MemoryTables):
    """`MemoryTables` with the protocol's `status_counts`."""

    async def status_counts(self, queue: str | None, cap: int) -> StatusCounts:
        counted = dict.fromkeys(JobStatus, 0)
        for row in self._rows.values():
            if queue in (None, row.queue):
                counted[row.status] += 1
        # What PostgreSQL reads of a finished status: at most cap + 1 rows.
        for status in FINISHED:
            counted[status] = min(counted[status], cap + 1)
        return capped_counts(counted, cap)

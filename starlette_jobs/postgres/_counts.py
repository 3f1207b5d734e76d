"""The jobs of each status in the PostgreSQL store (`jobs.status_counts`): the unfinished ones
counted through the partial indexes of their status, the finished ones up to a cap through
`starlette_jobs_status_idx`, so that the read does not grow with the finished jobs.
`_store.PostgresStore` is built on it."""

from __future__ import annotations

from .._count_records import StatusCounts, capped_counts
from .._records import JobStatus
from ._connected import ConnectedStore


class CountStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's `status_counts`."""

    async def status_counts(self, queue: str | None, cap: int) -> StatusCounts:
        if queue is None:
            rows = await self._read("fetch", self._q["status_counts_all"], cap)
        else:
            rows = await self._read("fetch", self._q["status_counts"], queue, cap)
        return capped_counts({JobStatus(r["status"]): r["jobs"] for r in rows}, cap)

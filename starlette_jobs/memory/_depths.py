"""The queues' depths in the in-memory store, for the gauges (docs/metrics.md).
`_store.MemoryStore` is built on it."""

from __future__ import annotations

from .._metric_records import QueueDepth
from .._records import JobStatus
from ._tables import MemoryTables, utc_now


class MemoryDepths(MemoryTables):
    """`MemoryTables` with the protocol's `queue_depths`."""

    async def queue_depths(self) -> list[QueueDepth]:
        now = utc_now()
        pending: dict[str, int] = {}
        due: dict[str, int] = {}
        running: dict[str, int] = {}
        oldest: dict[str, float] = {}
        for row in self._rows.values():
            if row.status is JobStatus.RUNNING:
                running[row.queue] = running.get(row.queue, 0) + 1
            elif row.status is JobStatus.PENDING:
                pending[row.queue] = pending.get(row.queue, 0) + 1
                if row.run_at <= now:
                    due[row.queue] = due.get(row.queue, 0) + 1
                    waited = (now - row.run_at).total_seconds()
                    oldest[row.queue] = max(oldest.get(row.queue, 0.0), waited)
        return [
            QueueDepth(
                queue,
                pending.get(queue, 0),
                due.get(queue, 0),
                running.get(queue, 0),
                oldest.get(queue, 0.0),
            )
            for queue in sorted(pending.keys() | running.keys())
        ]

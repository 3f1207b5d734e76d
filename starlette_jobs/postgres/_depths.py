"""The queues' depths in the PostgreSQL store, for the gauges (docs/metrics.md): one read of the
unfinished jobs through the indexes of pending and running jobs, never the finished ones.
`_store.PostgresStore` is built on it."""

from __future__ import annotations

from .._metric_records import QueueDepth
from ._connected import ConnectedStore


class DepthStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's `queue_depths`."""

    async def queue_depths(self) -> list[QueueDepth]:
        rows = await self._read("fetch", self._q["queue_depths"])
        return [
            QueueDepth(
                row["queue"], row["pending"], row["due"], row["running"], row["oldest_due_age"]
            )
            for row in rows
        ]

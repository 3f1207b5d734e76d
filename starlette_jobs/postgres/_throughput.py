"""The workers' counts of the attempts they ended, per queue and minute, in the PostgreSQL store
(`jobs.throughput`, docs/dashboard.md): one additive upsert per worker every few seconds into a
table of a few rows per queue, never a read of the jobs. `_store.PostgresStore` is built on it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._throughput_records import THROUGHPUT_KEPT_MINUTES, ThroughputMinute
from ._connected import ConnectedStore


class ThroughputStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's `add_throughput` and `throughput`."""

    async def add_throughput(self, minutes: Sequence[ThroughputMinute]) -> None:
        if not minutes:
            return
        ordered = sorted(minutes, key=lambda row: (row.queue, row.minute))
        await self._worker_write(
            "execute",
            self._q["add_throughput"],
            [row.queue for row in ordered],
            [row.minute for row in ordered],
            [row.succeeded for row in ordered],
            [row.failed for row in ordered],
            [row.retried for row in ordered],
            THROUGHPUT_KEPT_MINUTES,
        )

    async def throughput(self, since: datetime, queue: str | None) -> list[ThroughputMinute]:
        rows = await self._read("fetch", self._q["throughput"], since, queue)
        return [
            ThroughputMinute(
                row["queue"], row["minute"], row["succeeded"], row["failed"], row["retried"]
            )
            for row in rows
        ]

"""The workers' counts of the attempts they ended, per queue and minute, in the in-memory store
(`jobs.throughput`), kept and pruned as the PostgreSQL store keeps them.
`_store.MemoryStore` is built on it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .._throughput_records import THROUGHPUT_KEPT_MINUTES, ThroughputMinute
from ._tables import MemoryTables, utc_now


class MemoryThroughput(MemoryTables):
    """`MemoryTables` with the protocol's `add_throughput` and `throughput`."""

    async def add_throughput(self, minutes: Sequence[ThroughputMinute]) -> None:
        kept = self.data.throughput
        oldest = utc_now() - timedelta(minutes=THROUGHPUT_KEPT_MINUTES)
        for key in [key for key in kept if key[1] < oldest]:
            del kept[key]
        for row in minutes:
            if row.minute < oldest:
                continue
            counts = kept.setdefault((row.queue, row.minute), [0, 0, 0])
            counts[0] += row.succeeded
            counts[1] += row.failed
            counts[2] += row.retried

    async def throughput(self, since: datetime, queue: str | None) -> list[ThroughputMinute]:
        return [
            ThroughputMinute(name, minute, *counts)
            for (name, minute), counts in sorted(self.data.throughput.items())
            if minute >= since and queue in (None, name)
        ]

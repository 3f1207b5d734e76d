"""The part of the `Store` protocol that keeps the workers' counts of the attempts they ended,
per queue and minute (`jobs.throughput`, docs/dashboard.md): a small table each worker adds to
every few seconds, never a read of the jobs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from .._throughput_records import ThroughputMinute


class ThroughputStore(Protocol):
    """Counts of the attempts ended, per queue and minute, kept for an hour."""

    async def add_throughput(self, minutes: Sequence[ThroughputMinute]) -> None:
        """Adds each row's counts to those kept for its queue and minute (another worker's
        included), in one statement, and deletes the minutes older than
        `THROUGHPUT_KEPT_MINUTES` (rows that old are not added)."""
        ...

    async def throughput(self, since: datetime, queue: str | None) -> list[ThroughputMinute]:
        """The kept minutes from `since` on, of `queue` or of every queue, by queue then
        minute; a minute in which nothing ended has no row."""
        ...

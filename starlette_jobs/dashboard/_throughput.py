"""The overview's throughput: per queue, the jobs finished and failed over the last minutes and
a bar per minute, from `jobs.throughput` (the workers' counts per queue and minute, one read of a
table of a few rows per queue whatever the size of the jobs' table: docs/dashboard.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .._jobs import Jobs
from .._throughput_records import ThroughputMinute, minute_start

WINDOW_MINUTES = 15
"""The minutes the overview counts and draws, the current one included."""

BAR_HEIGHT = 24
"""Pixels of the tallest minute's bar; the others are scaled to it."""

BAR_WIDTH = 4
"""Pixels per minute, a one-pixel gap included."""


@dataclass(frozen=True, slots=True)
class MinuteBar:
    """One minute of a queue as the overview draws it: a bar of the jobs finished, the failed
    ones in red at its foot."""

    minute: datetime
    finished: int
    failed: int
    retried: int
    x: int
    height: int
    failed_height: int


@dataclass(frozen=True, slots=True)
class QueueThroughput:
    """A queue's last `WINDOW_MINUTES` minutes, oldest first, a minute with nothing included."""

    minutes: list[MinuteBar]

    @property
    def finished(self) -> int:
        return sum(bar.finished for bar in self.minutes)

    @property
    def failed(self) -> int:
        return sum(bar.failed for bar in self.minutes)

    @property
    def retried(self) -> int:
        return sum(bar.retried for bar in self.minutes)

    @property
    def width(self) -> int:
        return BAR_WIDTH * len(self.minutes)

    @property
    def bar_width(self) -> int:
        return BAR_WIDTH - 1


def queue_throughput(
    rows: Iterable[ThroughputMinute], now: datetime, minutes: int = WINDOW_MINUTES
) -> QueueThroughput:
    """The bars of one queue's rows over the `minutes` up to `now`'s."""
    by_minute = {row.minute: row for row in rows}
    last = minute_start(now)
    window = [last - timedelta(minutes=ago) for ago in reversed(range(minutes))]
    found = [by_minute.get(minute) for minute in window]
    tallest = max((row.finished for row in found if row is not None), default=0)
    bars = []
    for index, (minute, row) in enumerate(zip(window, found, strict=True)):
        finished = 0 if row is None else row.finished
        failed = 0 if row is None else row.failed
        bars.append(
            MinuteBar(
                minute=minute,
                finished=finished,
                failed=failed,
                retried=0 if row is None else row.retried,
                x=index * BAR_WIDTH,
                height=_scaled(finished, tallest),
                failed_height=_scaled(failed, tallest),
            )
        )
    return QueueThroughput(bars)


def _scaled(count: int, tallest: int) -> int:
    """Pixels for `count`: at least one for any, so that a minute with a job shows."""
    if count == 0:
        return 0
    return max(1, round(BAR_HEIGHT * count / tallest))


async def recent_throughput(
    jobs: Jobs, queues: Iterable[str], now: datetime
) -> dict[str, QueueThroughput]:
    """Each queue's throughput over the last `WINDOW_MINUTES`, from one read of every queue."""
    rows = await jobs.throughput(WINDOW_MINUTES)
    by_queue: dict[str, list[ThroughputMinute]] = {}
    for row in rows:
        by_queue.setdefault(row.queue, []).append(row)
    return {queue: queue_throughput(by_queue.get(queue, []), now) for queue in queues}

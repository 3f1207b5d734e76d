"""What the worker counts of the attempts it ends, per queue and minute, for `jobs.throughput`
and the dashboard's overview (docs/dashboard.md, "Throughput").

Counting the jobs that finished in the last minutes would read as many rows as finished (at
5,000 jobs/s, 1.5 M in five minutes). Instead `ThroughputCounter.ended` adds one to a dict of
this process as each attempt ends (the whole cost on the worker's path: no clock is read, the
current minute is kept by a timer at each minute's start), and `flush` adds
those counts to the store's (`Store.add_throughput`, one statement) every `FLUSH_SECONDS`, at
the end of a drain and at shutdown. What is counted is what this worker ended: an attempt
whose outcome the fence refused (its lease was lost) is counted all the same, and a job the
upkeep fails after its worker died is not; cancelled attempts are not counted.
"""

from __future__ import annotations

import asyncio
import logging
from time import time

from .._failures import FailureLog
from .._records import JobStatus
from .._throughput_records import THROUGHPUT_KEPT_MINUTES, ThroughputMinute, minute_of
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

FLUSH_SECONDS = 10.0
"""How often a worker adds its counts to the store's: what the overview may lag by."""

_SUCCEEDED, _FAILED, _RETRIED = JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.PENDING

Counts = dict[tuple[str, int], list[int]]
"""Attempts ended by (queue, minute since the epoch): succeeded, failed, retried."""


def _current_minute() -> int:
    return int(time()) // 60


class ThroughputCounter:
    """Counts the attempts this worker ends, and adds them to the store's; see the module."""

    def __init__(self, store: Store, interval: float = FLUSH_SECONDS) -> None:
        self._store = store
        self._interval = interval
        self._counts: Counts = {}
        self._minute = _current_minute()
        self._task: asyncio.Task[None] | None = None
        self._tick: asyncio.TimerHandle | None = None
        self._failures = FailureLog(logger, "writing the throughput counts")

    def ended(self, queue: str, status: JobStatus) -> None:
        """One attempt of `queue` ended now with `status` (a retry's is PENDING; a cancelled
        one is not counted): a dict lookup and an increment, nothing else."""
        key = (queue, self._minute)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0, 0, 0]
        # `is`: hashing or comparing the enum costs more than the rest.
        if status is _SUCCEEDED:
            counts[0] += 1
        elif status is _FAILED:
            counts[1] += 1
        elif status is _RETRIED:
            counts[2] += 1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs throughput")
        self._next_minute()

    def _next_minute(self) -> None:
        """Takes the minute now, and comes back at the next one's start (read again then, so
        the timer's drift does not add up)."""
        now = time()
        self._minute = int(now) // 60
        self._tick = asyncio.get_running_loop().call_later(60 - now % 60, self._next_minute)

    async def stop(self, timeout: float | None) -> None:
        """Stops the periodic flush, then flushes what is left within `timeout` seconds (None:
        not at all). What a failed last flush held is lost, and logged."""
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if timeout is None:
            return
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except Exception as error:  # shutdown goes on: these are counts, not jobs
            logger.warning("throughput: the last counts were not written (%s)", error)

    async def flush(self) -> None:
        """Adds the counts so far to the store's in one statement. If the statement fails,
        they are kept for the next flush (counted twice if the failure hid a commit)."""
        counts, self._counts = self._counts, {}
        rows = _rows(counts, _current_minute() - THROUGHPUT_KEPT_MINUTES)
        if not rows:
            return
        try:
            await self._store.add_throughput(rows)
        except BaseException:
            for key, added in counts.items():
                kept = self._counts.setdefault(key, [0, 0, 0])
                for column, count in enumerate(added):
                    kept[column] += count
            raise

    async def flush_logged(self) -> None:
        """`flush`, its failure logged rather than raised: the counts wait for the next."""
        try:
            await self.flush()
        except Exception as error:
            self._failures.failed(error)
        else:
            self._failures.succeeded()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.flush_logged()


def _rows(counts: Counts, oldest: int) -> list[ThroughputMinute]:
    """One row per queue and minute, sorted; minutes older than `oldest` (the store would not
    keep them) and those with only cancelled attempts left out."""
    return [
        ThroughputMinute(queue, minute_of(minute), *added)
        for (queue, minute), added in sorted(counts.items())
        if minute >= oldest and any(added)
    ]

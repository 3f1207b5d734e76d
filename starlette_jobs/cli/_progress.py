"""`worker --burst`'s progress on a terminal: one line, redrawn in place, of the jobs done out of
those there were to do when it started, by how they ended. Only when stdout is a terminal: a
log or a pipe gets nothing from here (the worker's log lines go to stderr as always).

What is done is read from the database, not counted in this process: the jobs of the worker's
queues that finished since it started, whichever worker ran them. Each redraw counts the
queues' jobs by status (`jobs.count_by_status`, one query a queue), once a second."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from .._errors import DatabaseUnavailableError
from .._jobs import Jobs
from .._records import JobStatus

logger = logging.getLogger("starlette_jobs.cli")

ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
TO_DO = (JobStatus.PENDING, JobStatus.RUNNING)
BAR_WIDTH = 30
INTERVAL = 1.0
_CLEAR_TO_END = "\x1b[K"


@dataclass(frozen=True, slots=True)
class Progress:
    """The jobs there were to do at the start, and how many of the queues' jobs ended since."""

    total: int
    ended: Mapping[JobStatus, int]

    @classmethod
    def between(cls, start: Mapping[JobStatus, int], now: Mapping[JobStatus, int]) -> Progress:
        """From two counts by status: pending and running at the start are the jobs to do;
        those that ended since are the growth of each ended status (never below zero: retention
        may prune finished jobs meanwhile)."""
        total = sum(start.get(status, 0) for status in TO_DO)
        ended = {s: max(now.get(s, 0) - start.get(s, 0), 0) for s in ENDED}
        return cls(total, ended)

    @property
    def done(self) -> int:
        return sum(self.ended.values())

    def line(self) -> str:
        """`[#######-----]  7/12 jobs: 6 succeeded, 1 failed, 0 cancelled`. Jobs enqueued
        while it runs count too: the total grows to what is done, the bar is then full."""
        total = max(self.total, self.done)
        filled = BAR_WIDTH if total == 0 else BAR_WIDTH * self.done // total
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        by_status = ", ".join(f"{self.ended.get(s, 0)} {s.value}" for s in ENDED)
        return f"[{bar}] {self.done}/{total} jobs: {by_status}"


async def count(jobs: Jobs, queues: Sequence[str]) -> dict[JobStatus, int]:
    """The jobs of these queues by status."""
    counts = dict.fromkeys(JobStatus, 0)
    for queue in queues:
        for status, jobs_in in (await jobs.count_by_status(queue=queue)).items():
            counts[status] += jobs_in
    return counts


@contextlib.asynccontextmanager
async def burst_progress(jobs: Jobs, out: TextIO) -> AsyncIterator[None]:
    """Around a burst worker's `async with jobs`: when `out` is a terminal, counts the jobs to
    do before the worker starts (through a `Jobs` of its own, with no worker, on the same
    database), draws the line once a second while the block runs, and once more after it, when
    the worker has written its last outcomes. Otherwise nothing."""
    if not out.isatty():
        yield
        return
    queues = list(jobs.config.queues)
    async with jobs.replace(queues={}) as counter:
        try:
            start = await count(counter, queues)
        except DatabaseUnavailableError as error:  # the worker meets it too, and says so
            logger.warning("burst progress: the jobs to do could not be counted: %s", error)
            yield
            return
        finished = asyncio.Event()
        drawing = asyncio.create_task(_redraw(counter, queues, start, out, finished))
        try:
            yield
        finally:
            finished.set()
            await drawing


async def _redraw(
    jobs: Jobs,
    queues: Sequence[str],
    start: Mapping[JobStatus, int],
    out: TextIO,
    finished: asyncio.Event,
) -> None:
    progress = Progress.between(start, start)
    while True:
        _draw(out, progress)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished.wait(), INTERVAL)
        # A count that fails (the database restarting) skips a redraw: the bar never stops
        # the burst.
        with contextlib.suppress(DatabaseUnavailableError):
            progress = Progress.between(start, await count(jobs, queues))
        if finished.is_set():
            break
    _draw(out, progress)
    out.write("\n")
    out.flush()


def _draw(out: TextIO, progress: Progress) -> None:
    out.write("\r" + progress.line() + _CLEAR_TO_END)
    out.flush()

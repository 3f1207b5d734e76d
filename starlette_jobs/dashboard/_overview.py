"""The overview: one row per queue, read through `Jobs`.

Each row costs one `status_counts(queue=)`, whose read does not grow with the table (the
unfinished jobs counted exactly, each finished status up to a cap: docs/dashboard.md), one
`queue_controls` and one `peek`; the throughput of every queue, one `throughput` (a table of a few
rows per queue)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from .._count_records import DEFAULT_COUNT_CAP, StatusCounts
from .._jobs import Jobs
from .._records import JobStatus
from ._throughput import QueueThroughput, recent_throughput

COUNT_CAP = DEFAULT_COUNT_CAP
"""How far each finished status is counted ("10,000+" past it)."""


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """What the overview shows of one queue."""

    name: str
    counts: StatusCounts
    paused: bool
    global_limit: int | None
    """At most this many of its jobs run at once across the workers; None: no such limit."""
    next_due_at: datetime | None
    """When the job the next claim would take became due (None: nothing is due)."""
    throughput: QueueThroughput | None = None
    """The jobs finished and failed over the last minutes, per minute."""

    @property
    def running(self) -> int:
        return self.counts[JobStatus.RUNNING]


async def queue_names(jobs: Jobs, chosen: Iterable[str] | None) -> list[str]:
    """The queues to show: those chosen, else those this `Jobs` declares, the live workers work,
    and those with jobs no live worker can run."""
    if chosen is not None:
        return list(chosen)
    names = set(jobs.config.queues)
    names.update(queue for worker in await jobs.workers() for queue in worker.queues)
    names.update(stuck.queue for stuck in await jobs.unrunnable_jobs())
    return sorted(names)


async def queue_overview(jobs: Jobs, queue: str, now: datetime) -> QueueOverview:
    counts, controls, next_jobs = await asyncio.gather(
        jobs.status_counts(queue=queue, cap=COUNT_CAP),
        jobs.queue_controls(queue),
        jobs.peek(queue, 1),
    )
    due = [record.run_at for record in next_jobs if record.run_at <= now]
    return QueueOverview(
        name=queue,
        counts=counts,
        paused=controls.paused,
        global_limit=controls.limits.global_limit,
        next_due_at=due[0] if due else None,
    )


async def overview(jobs: Jobs, queues: Iterable[str], now: datetime) -> list[QueueOverview]:
    names = list(queues)
    rows, throughput = await asyncio.gather(
        asyncio.gather(*(queue_overview(jobs, queue, now) for queue in names)),
        recent_throughput(jobs, names, now),
    )
    return [dataclasses.replace(row, throughput=throughput[row.name]) for row in rows]

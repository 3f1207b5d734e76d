"""The overview: one row per queue, read through `Jobs`.

Each row costs one `count_by_status(queue=)`, which counts the queue's rows (a scan that grows
with the table: 82 ms at 1,000,000 finished jobs, issue 22), one `queue_controls` and one
`peek`. Counts that do not grow with the table are a follow-up."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from .._jobs import Jobs
from .._records import JobStatus


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """What the overview shows of one queue."""

    name: str
    counts: dict[JobStatus, int]
    paused: bool
    global_limit: int | None
    """At most this many of its jobs run at once across the workers; None: no such limit."""
    next_due_at: datetime | None
    """When the job the next claim would take became due (None: nothing is due)."""

    @property
    def running(self) -> int:
        return self.counts.get(JobStatus.RUNNING, 0)


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
        jobs.count_by_status(queue=queue), jobs.queue_controls(queue), jobs.peek(queue, 1)
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
    return list(await asyncio.gather(*(queue_overview(jobs, queue, now) for queue in queues)))

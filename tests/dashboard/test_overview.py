"""The overview's rows: which queues it shows, and what it reads of each, through `Jobs` (on the
in-memory store; the pages' tests run them on PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette_jobs import Jobs, JobStatus, Queue, job
from starlette_jobs.dashboard._overview import overview, queue_names


@job(queue="overview-a")
async def tick() -> None: ...


async def test_the_queues_are_those_declared_worked_and_stuck() -> None:
    async with Jobs("memory://", queues={"overview-b": 1}) as jobs:
        await tick.enqueue()  # on a queue no worker works
        assert await queue_names(jobs, None) == ["overview-a", "overview-b"]
        assert await queue_names(jobs, ["chosen"]) == ["chosen"]


async def test_a_queue_row_counts_and_dates_its_due_job() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        await tick.enqueue()
        await tick.configure(delay=3600).enqueue()
        await jobs.pause("overview-a")
        now = datetime.now(UTC) + timedelta(seconds=1)
        (row,) = await overview(jobs, ["overview-a"], now)
    assert row.counts[JobStatus.PENDING] == 2
    assert (row.paused, row.running, row.global_limit) == (True, 0, None)
    assert row.next_due_at is not None
    assert now - row.next_due_at < timedelta(seconds=30)


async def test_nothing_due_leaves_the_age_empty_and_the_limit_is_the_workers() -> None:
    async with Jobs("memory://", queues={"overview-a": Queue(1, global_limit=3)}) as jobs:
        await tick.configure(delay=3600).enqueue()
        (row,) = await overview(jobs, ["overview-a"], datetime.now(UTC))
    assert row.next_due_at is None
    assert row.global_limit == 3

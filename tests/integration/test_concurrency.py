"""Per-queue concurrency is a hard bound, and the worker fills it."""

from __future__ import annotations

import asyncio
from collections import Counter

from starlette_jobs import JobStatus, Retry, job
from tests.conftest import StartJobs

running: Counter[str] = Counter()
peak: Counter[str] = Counter()


async def occupy(queue: str) -> None:
    running[queue] += 1
    peak[queue] = max(peak[queue], running[queue])
    try:
        # Hold the slot long enough for the worker to try to start more.
        await asyncio.sleep(0.02)
    finally:
        running[queue] -= 1


@job(queue="two", retry=Retry.none())
async def on_two(n: int) -> None:
    await occupy("two")


@job(queue="three", retry=Retry.none())
async def on_three(n: int) -> None:
    await occupy("three")


async def test_two_queues_never_exceed_their_limits_and_reach_them(start_jobs: StartJobs) -> None:
    running.clear()
    peak.clear()
    async with start_jobs(queues={"two": 2, "three": 3}, batch_size=100) as jobs:
        await on_two.enqueue_many([{"n": n} for n in range(40)])
        await on_three.enqueue_many([{"n": n} for n in range(60)])
        await jobs.drain(timeout=30)
        counts = await jobs.count_by_status()
    assert counts[JobStatus.SUCCEEDED] == 100
    assert peak == {"two": 2, "three": 3}


async def test_a_batch_never_claims_more_than_the_free_slots(start_jobs: StartJobs) -> None:
    """Two workers of concurrency 1 and a batch size of 100: each holds at most one job."""
    running.clear()
    peak.clear()
    async with start_jobs(queues={}) as producer:
        await on_two.enqueue_many([{"n": n} for n in range(10)])
        async with start_jobs(queues={"two": 1}) as first, start_jobs(queues={"two": 1}) as second:
            await asyncio.gather(first.drain(timeout=30), second.drain(timeout=30))
        counts = await producer.count_by_status()
    # A claim that took more than its free slot would run several jobs at once on one worker.
    assert peak["two"] <= 2
    assert counts[JobStatus.SUCCEEDED] == 10

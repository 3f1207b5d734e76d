"""Shutdown: running jobs get the grace period; the rest go back to pending, attempt given back."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from starlette_jobs import JobStatus, Retry, job
from tests.conftest import StartJobs

started: asyncio.Queue[int]


@pytest.fixture(autouse=True)
def _fresh_queue() -> None:
    global started
    started = asyncio.Queue()


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def quick(n: int) -> None:
    started.put_nowait(n)
    await asyncio.sleep(0.05)


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def endless(n: int) -> None:
    started.put_nowait(n)
    await asyncio.Event().wait()


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def stubborn(n: int) -> None:
    """Ignores cancellation once: it must not hold up shutdown beyond the grace period."""
    started.put_nowait(n)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.sleep(2)


async def wait_started(count: int) -> None:
    for _ in range(count):
        await asyncio.wait_for(started.get(), timeout=10)


async def statuses(connection: asyncpg.Connection[Any]) -> list[tuple[str, int]]:
    rows = await connection.fetch("SELECT status, attempts FROM starlette_jobs ORDER BY id")
    return [(row[0], row[1]) for row in rows]


async def test_jobs_that_finish_within_the_grace_period_succeed(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(shutdown_grace=10) as jobs:
        for n in range(3):
            await quick.enqueue(n=n)
        await wait_started(3)
        assert jobs.worker_id is not None
    assert await statuses(connection) == [("succeeded", 1)] * 3


async def test_jobs_that_outlast_the_grace_period_go_back_to_pending_with_the_attempt_given_back(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    loop = asyncio.get_running_loop()
    async with start_jobs(shutdown_grace=0.2):
        ids = [await endless.enqueue(n=n) for n in range(3)]
        done = await quick.enqueue(n=99)
        await wait_started(4)
        stopping = loop.time()
    assert loop.time() - stopping < 2.0  # the grace period, not the jobs' length
    rows = dict(await connection.fetch("SELECT id, status FROM starlette_jobs"))
    assert [rows[i] for i in ids] == ["pending"] * 3
    assert rows[done] == "succeeded"
    attempts = await connection.fetch(
        "SELECT attempts, lease_token FROM starlette_jobs WHERE id = ANY($1)", ids
    )
    assert [(a, t) for a, t in attempts] == [(0, None)] * 3
    assert JobStatus.RUNNING.value not in rows.values()


async def test_a_job_that_ignores_cancellation_does_not_hold_up_shutdown(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    loop = asyncio.get_running_loop()
    async with start_jobs(shutdown_grace=0.1):
        await stubborn.enqueue(n=1)
        await wait_started(1)
        stopping = loop.time()
    assert loop.time() - stopping < 1.5
    assert await statuses(connection) == [("pending", 0)]


async def test_released_jobs_run_in_the_next_worker(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(shutdown_grace=0):
        await endless.enqueue(n=1)
        await wait_started(1)
    await connection.execute("UPDATE starlette_jobs SET name = $1", quick.name)
    async with start_jobs() as jobs:
        await jobs.drain(timeout=10)
    assert await statuses(connection) == [("succeeded", 1)]

"""A job that comes back to the worker that still runs a stale copy of it.

After `jobs.release(id)` (or a rescue while the worker was frozen) the same worker may claim the
job again while its first copy still runs. Everything the worker tracks belongs to the attempt's
lease token, so the stale copy is cancelled, the new copy's lease is renewed, the stale copy
still counts against the queue's concurrency, and a clean shutdown leaves nothing `running`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus
from tests.conftest import StartJobs
from tests.integration.holding import Runs, held_open, reset


@pytest.fixture
def runs() -> Runs:
    return reset()


async def test_a_released_job_claimed_again_by_its_worker_runs_once_to_the_end(
    start_jobs: StartJobs, runs: Runs
) -> None:
    lease = 1.5
    async with start_jobs(queues={"default": 2}, lease_duration=lease) as jobs:
        job_id = await held_open.enqueue(key="a")
        await runs.wait_for("start", "a", 0)
        assert await jobs.release(job_id)
        await runs.wait_for("start", "a", 1)  # the same worker, with a slot free, took it again
        # The stale copy is cancelled at the next lease renewal, not left to run.
        await runs.wait_for("cancelled", "a", 0)
        # The new copy's lease is renewed: it outlives two leases without being rescued.
        await asyncio.sleep(2 * lease)
        runs.gate("a", 1).set()
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.errors) == (JobStatus.SUCCEEDED, 1, [])
    assert record.result == "a run 1, attempt 1"
    assert runs.count("start", "a") == 2


async def test_a_stale_copy_still_counts_against_the_queues_concurrency(
    start_jobs: StartJobs, runs: Runs
) -> None:
    async with start_jobs(queues={"default": 2}, lease_duration=3) as jobs:
        job_id = await held_open.enqueue(key="a")
        await runs.wait_for("start", "a", 0)
        assert await jobs.release(job_id)
        await runs.wait_for("start", "a", 1)
        other = await held_open.enqueue(key="b")
        # Two bodies run (the stale copy and the new one): "b" waits for a free slot, which
        # the stale copy gives up when it is cancelled at the next lease renewal.
        await runs.wait_for("start", "b", 0)
        assert ("cancelled", "a", 0) in runs.events
        runs.gate("a", 1).set()
        runs.gate("b", 0).set()
        await jobs.drain(timeout=10)
        records = [await jobs.get(job_id), await jobs.get(other)]
    assert runs.peak == 2
    assert [(r.status, r.attempts) for r in records if r] == [(JobStatus.SUCCEEDED, 1)] * 2


async def test_a_clean_shutdown_after_a_release_leaves_no_job_running(
    database_dsn: str, connection: asyncpg.Connection[Any], runs: Runs
) -> None:
    async with Jobs(
        database_dsn, queues={"default": 2}, poll_interval=0.2, shutdown_grace=0.2
    ) as jobs:
        job_id = await held_open.enqueue(key="a")
        await runs.wait_for("start", "a", 0)
        assert await jobs.release(job_id)
        await runs.wait_for("start", "a", 1)
        # The stale copy ends first; its outcome is refused by the fence.
        runs.gate("a", 0).set()
        await runs.wait_for("done", "a", 0)
    # The new copy ran into the shutdown grace and was released.
    row = await connection.fetchrow(
        "SELECT status, attempts, lease_token FROM starlette_jobs WHERE id = $1", job_id
    )
    assert row is not None
    assert tuple(row) == ("pending", 0, None)
    assert runs.events[-1] == ("cancelled", "a", 1)

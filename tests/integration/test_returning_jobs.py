"""A job that comes back to the worker that still runs a stale copy of it.

After `jobs.release(id)` (or a rescue while the worker was frozen) the same worker may claim the
job again while its first copy still runs. Everything the worker tracks belongs to the attempt's
lease token, so the stale copy is cancelled, the new copy's lease is renewed, the stale copy
still counts against the queue's concurrency, and a clean shutdown leaves nothing `running`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus, Retry, current_job, job
from tests.conftest import StartJobs


@dataclass
class Runs:
    """What the job bodies of one test did, in order, and how many ran at once at most."""

    events: list[tuple[str, str, int]] = field(default_factory=list)
    happenings: dict[tuple[str, str, int], asyncio.Event] = field(default_factory=dict)
    gates: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)
    running: int = 0
    peak: int = 0

    def record(self, event: str, key: str, run: int) -> None:
        self.events.append((event, key, run))
        self.happened(event, key, run).set()

    def happened(self, event: str, key: str, run: int) -> asyncio.Event:
        return self.happenings.setdefault((event, key, run), asyncio.Event())

    def gate(self, key: str, run: int) -> asyncio.Event:
        return self.gates.setdefault((key, run), asyncio.Event())

    def count(self, event: str, key: str) -> int:
        return sum(1 for e, k, _ in self.events if (e, k) == (event, key))


runs = Runs()


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    global runs
    runs = Runs()


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def held_open(key: str) -> str:
    """Runs until the test opens this run's gate; the n-th run of `key` is run n."""
    run = runs.count("start", key)
    runs.running += 1
    runs.peak = max(runs.peak, runs.running)
    runs.record("start", key, run)
    try:
        await runs.gate(key, run).wait()
    except asyncio.CancelledError:
        runs.record("cancelled", key, run)
        raise
    finally:
        runs.running -= 1
    runs.record("done", key, run)
    me = current_job()
    assert me is not None
    return f"{key} run {run}, attempt {me.attempt}"


async def happened(event: str, key: str, run: int) -> None:
    async with asyncio.timeout(10):
        await runs.happened(event, key, run).wait()


async def started(key: str, run: int) -> None:
    await happened("start", key, run)


async def test_a_released_job_claimed_again_by_its_worker_runs_once_to_the_end(
    start_jobs: StartJobs,
) -> None:
    lease = 1.5
    async with start_jobs(queues={"default": 2}, lease_duration=lease) as jobs:
        job_id = await held_open.enqueue(key="a")
        await started("a", 0)
        assert await jobs.release(job_id)
        await started("a", 1)  # the same worker, with a slot free, took it again
        # The stale copy is cancelled at the next lease renewal, not left to run.
        await happened("cancelled", "a", 0)
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
    start_jobs: StartJobs,
) -> None:
    async with start_jobs(queues={"default": 2}, lease_duration=3) as jobs:
        job_id = await held_open.enqueue(key="a")
        await started("a", 0)
        assert await jobs.release(job_id)
        await started("a", 1)
        other = await held_open.enqueue(key="b")
        # Two bodies run (the stale copy and the new one): "b" waits for a free slot, which
        # the stale copy gives up when it is cancelled at the next lease renewal.
        await started("b", 0)
        assert ("cancelled", "a", 0) in runs.events
        runs.gate("a", 1).set()
        runs.gate("b", 0).set()
        await jobs.drain(timeout=10)
        records = [await jobs.get(job_id), await jobs.get(other)]
    assert runs.peak == 2
    assert [(r.status, r.attempts) for r in records if r] == [(JobStatus.SUCCEEDED, 1)] * 2


async def test_a_clean_shutdown_after_a_release_leaves_no_job_running(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    async with Jobs(
        database_dsn, queues={"default": 2}, poll_interval=0.2, shutdown_grace=0.2
    ) as jobs:
        job_id = await held_open.enqueue(key="a")
        await started("a", 0)
        assert await jobs.release(job_id)
        await started("a", 1)
        # The stale copy ends first; its outcome is refused by the fence.
        runs.gate("a", 0).set()
        await happened("done", "a", 0)
    # The new copy ran into the shutdown grace and was released.
    row = await connection.fetchrow(
        "SELECT status, attempts, lease_token FROM starlette_jobs WHERE id = $1", job_id
    )
    assert row is not None
    assert tuple(row) == ("pending", 0, None)
    assert runs.events[-1] == ("cancelled", "a", 1)

"""Leases: the fence on every write after the claim, heartbeats, and rescue of expired leases."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from starlette_jobs import JobStatus, Retry, job
from tests.conftest import StartJobs
from tests.records import outcome

finished: list[int] = []


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def slow(seconds: float) -> None:
    await asyncio.sleep(seconds)
    finished.append(1)


async def test_a_worker_that_lost_its_lease_cannot_overwrite_the_newer_attempt(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}) as jobs:
        store = jobs._ready_store
        job_id = await slow.enqueue(seconds=0)
        [stale] = await store.claim_batch("default", 10, "stalled-worker", 0.01)
        await asyncio.sleep(0.05)  # let the short lease run out in database time
        assert [row[0] for row in await store.rescue_expired(10)] == [job_id]
        [fresh] = await store.claim_batch("default", 10, "healthy-worker", 30)
        assert (fresh.id, fresh.attempts) == (stale.id, 2)

        late = outcome(stale, JobStatus.SUCCEEDED)
        assert await store.record_outcomes([late]) == set()
        assert await store.extend_leases([(stale.id, stale.lease_token)], 30) == {}
        assert await store.release_jobs([(stale.id, stale.lease_token)]) == set()
        row = await connection.fetchrow("SELECT * FROM starlette_jobs WHERE id = $1", job_id)
        assert row is not None
        assert (row["status"], row["worker_id"], row["attempts"]) == (
            "running",
            "healthy-worker",
            2,
        )

        done = outcome(fresh, JobStatus.SUCCEEDED)
        assert await store.record_outcomes([done]) == {job_id}
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status == JobStatus.SUCCEEDED
    assert "lease expired: worker stalled-worker" in record.errors[0]["error"]


async def test_jobs_of_a_dead_worker_are_rescued_and_run_by_another(
    start_jobs: StartJobs,
) -> None:
    finished.clear()
    async with start_jobs(queues={}) as producer:
        ids = [await slow.enqueue(seconds=0) for _ in range(3)]
        # A worker claims them and dies: nobody renews the lease.
        await producer._ready_store.claim_batch("default", 10, "dead-worker", 0.2)
        async with start_jobs(lease_duration=0.3) as rescuer:
            await rescuer.drain(timeout=10)
        records = [await producer.get(i) for i in ids]
    assert [(r.status, r.attempts) for r in records if r] == [(JobStatus.SUCCEEDED, 2)] * 3
    assert len(finished) == 3


async def test_a_rescued_job_with_no_attempt_left_fails(start_jobs: StartJobs) -> None:
    @job(retry=Retry.none())
    async def once() -> None: ...

    async with start_jobs(queues={}) as producer:
        job_id = await once.enqueue()
        await producer._ready_store.claim_batch("default", 10, "dead-worker", 0.01)
        await asyncio.sleep(0.05)
        await producer._ready_store.rescue_expired(10)
        record = await producer.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.FAILED, 1)
    assert record.finished_at is not None


async def test_heartbeats_keep_a_long_job_from_being_rescued(start_jobs: StartJobs) -> None:
    """The job runs for several lease durations while a second worker watches for expiry."""
    finished.clear()
    async with start_jobs(lease_duration=0.3) as worker, start_jobs(lease_duration=0.3) as other:
        job_id = await slow.enqueue(seconds=1.2)
        await asyncio.gather(worker.drain(timeout=10), other.drain(timeout=10))
        record = await worker.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.errors) == (JobStatus.SUCCEEDED, 1, [])
    assert finished == [1]

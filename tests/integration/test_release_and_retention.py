"""Operator calls on jobs stuck on a worker (`release`, `release_worker_jobs`), and retention."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from starlette_jobs import JobDefinitionError, JobNotFoundError, Jobs, JobStatus, Retry, job
from tests.conftest import StartJobs, eventually, on_postgres
from tests.records import new_jobs

gate = asyncio.Event()


@pytest.fixture(autouse=True)
def _new_gate() -> None:
    global gate
    gate = asyncio.Event()  # an event belongs to one loop, and each test has its own


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def blocked(n: int) -> int:
    await gate.wait()
    return n


@job(queue="other", retry=Retry.fixed(max_attempts=3, delay=0))
async def blocked_elsewhere(n: int) -> int:
    await gate.wait()
    return n


async def running_ids(jobs: Jobs, expected: int) -> list[int]:
    async with asyncio.timeout(10):
        while len(running := await jobs.list(status=JobStatus.RUNNING)) < expected:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return sorted(record.id for record in running)


async def test_release_hands_a_running_job_back_and_fences_off_its_worker(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs(queues={"default": 1}, lease_duration=0.6) as worker:
        job_id = await blocked.enqueue(n=1)
        await running_ids(worker, 1)
        async with start_jobs(queues={}) as operator:
            assert await operator.release(job_id) is True
            released = await operator.get(job_id)
            assert released is not None
            assert (released.status, released.attempts) == (JobStatus.PENDING, 0)
            with pytest.raises(JobNotFoundError):
                await operator.release(10**12)
        # The worker claims it again (and its heartbeat cancels the stale copy); the new copy
        # runs to the end this time.
        await running_ids(worker, 1)
        gate.set()
        await worker.drain(timeout=10)
        done = await worker.get(job_id)
    assert done is not None
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempts == 1, "the released attempt was given back"
    assert done.result == 1


async def test_release_is_false_for_a_job_that_is_not_running(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:
        job_id = await blocked.enqueue(n=1)
        assert await jobs.release(job_id) is False
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


async def test_release_worker_jobs_releases_every_job_of_that_worker_only(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    settings: dict[str, Any] = {"poll_interval": 0.2, "lease_duration": 0.6}
    async with (
        Jobs(database_dsn, queues={"default": 3}, **settings) as first,
        Jobs(database_dsn, queues={"other": 1}, **settings) as second,
    ):
        ids = [await blocked.enqueue(n=n) for n in range(3)]
        elsewhere = await blocked_elsewhere.enqueue(n=9)
        assert await running_ids(first, 4) == [*ids, elsewhere]
        token_elsewhere = await connection.fetchval(
            "SELECT lease_token FROM starlette_jobs WHERE id = $1", elsewhere
        )
        assert first.worker_id is not None
        assert await first.release_worker_jobs(first.worker_id) == ids
        assert await first.release_worker_jobs("no-such-worker") == []
        assert token_elsewhere == await connection.fetchval(
            "SELECT lease_token FROM starlette_jobs WHERE id = $1", elsewhere
        ), "another worker's job was touched"
        assert await running_ids(first, 4) == [*ids, elsewhere]  # claimed again
        gate.set()
        await first.drain(timeout=10)
        await second.drain(timeout=10)
        records = [await first.get(job_id) for job_id in [*ids, elsewhere]]
    for record in records:
        assert record is not None
        assert (record.status, record.attempts, record.errors) == (JobStatus.SUCCEEDED, 1, [])


@job(retry=Retry.none())
async def quick(n: int) -> int:
    return n


async def test_workers_delete_finished_jobs_older_than_the_retention(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={"default": 5}, retention=3600, lease_duration=0.3) as jobs:
        old = [await quick.enqueue(n=n) for n in range(5)]
        recent = [await quick.enqueue(n=n) for n in range(5, 8)]
        waiting = await quick.configure(delay=3600).enqueue(n=99)
        await jobs.drain(timeout=10, include_scheduled=False)
        # Age five of the finished jobs past the retention, as if they finished two hours ago.
        await connection.execute(
            "UPDATE starlette_jobs SET finished_at = now() - interval '2 hours' "
            "WHERE id = ANY($1::bigint[])",
            old,
        )
        async with asyncio.timeout(10):
            while await connection.fetchval(  # noqa: ASYNC110 - the upkeep round has no event
                "SELECT count(*) FROM starlette_jobs WHERE id = ANY($1::bigint[])", old
            ):
                await asyncio.sleep(0.05)
        left = await connection.fetchval("SELECT array_agg(id ORDER BY id) FROM starlette_jobs")
    assert left == [*recent, waiting]


async def test_retention_none_keeps_every_job(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={"default": 5}, retention=None, lease_duration=0.3) as jobs:
        await quick.enqueue(n=1)
        await jobs.drain(timeout=10)
        await connection.execute(
            "UPDATE starlette_jobs SET finished_at = now() - interval '1 year'"
        )
        # Proof that upkeep rounds ran since: two jobs of a dead worker rescued one after the
        # other (each round rescues, then prunes).
        for n in (2, 3):
            store = on_postgres(jobs)
            [job_id] = await store.insert_jobs(new_jobs(name=quick.name, queue=f"dead-{n}"))
            await store.claim_batch(f"dead-{n}", 1, "dead-worker", 0.01)

            async def rescued(job_id: int = job_id) -> bool:
                status: str = await connection.fetchval(
                    "SELECT status FROM starlette_jobs WHERE id = $1", job_id
                )
                return status == "pending"

            await eventually(rescued, f"the rescue of job {job_id}")
        succeeded = "SELECT count(*) FROM starlette_jobs WHERE status = 'succeeded'"
        assert await connection.fetchval(succeeded) == 1
    with pytest.raises(JobDefinitionError, match="retention must be a positive number"):
        Jobs(retention=0)

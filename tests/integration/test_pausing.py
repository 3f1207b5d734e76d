"""A paused queue and the commands that wait for jobs to run (`jobs.drain`, `worker --burst`,
`run_enqueued`), on PostgreSQL and memory alike: they do not wait for a resume that may never
come; they run the other queues' jobs, leave the paused queue's pending, and say so."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus, Queue, job


async def status(jobs: Jobs, job_id: int) -> JobStatus:
    record = await jobs.get(job_id)
    assert record is not None
    return record.status


@job(queue="pausing-held")
async def held(n: int) -> int:
    return n


@job(queue="pausing-free")
async def free(n: int) -> int:
    return n


async def test_a_drain_leaves_a_paused_queues_jobs_pending_and_runs_the_others(
    jobs_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="starlette_jobs.worker")
    # Paused before the worker starts: a pause made while it runs may let a claim already on
    # its way take a job (docs/limits.md), which is not what this test is about.
    # `admin` stays open throughout: it holds a memory store's data.
    async with Jobs(jobs_dsn, queues={}) as admin:
        await admin.pause("pausing-held")
        waiting = await admin.enqueue(held, n=1)
        ran = await admin.enqueue(free, n=2)
        async with Jobs(jobs_dsn, queues={"pausing-held": 2, "pausing-free": 2}) as jobs:
            # Would run out its timeout (and raise) if it waited for the paused queue.
            await jobs.drain(timeout=30)
            assert await status(jobs, ran) is JobStatus.SUCCEEDED
            assert await status(jobs, waiting) is JobStatus.PENDING
            assert "queue(s) pausing-held paused" in caplog.text

            await jobs.resume("pausing-held")
            await jobs.drain(timeout=30)
            assert await status(jobs, waiting) is JobStatus.SUCCEEDED


@job(queue="pausing-stopped")
async def stopped(n: int) -> int:
    return n


async def test_a_limit_an_operator_wrote_by_hand_does_not_deafen_the_workers_to_a_resume(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """An operator "stops" a limited queue in SQL (global_limit = 0, which `Queue` refuses):
    the workers must still hear pause and resume of their other queues."""
    queues: dict[str, int | Queue] = {"pausing-stopped": Queue(global_limit=2), "pausing-free": 2}
    async with Jobs(database_dsn, queues=queues, poll_interval=0.05) as jobs:
        await connection.execute(
            "UPDATE starlette_jobs_queues SET global_limit = 0 WHERE name = 'pausing-stopped'"
        )
        await jobs.pause("pausing-free")
        await jobs.resume("pausing-free")
        job_id = await free.enqueue(n=3)
        assert await jobs.result(free, job_id, timeout=10) == 3
        # The queue the row stopped reads as paused (claims nothing), and says why.
        assert (await jobs.queue_controls("pausing-stopped")).paused

"""`jobs.cancel` on a job that a worker process runs: the process is told at once (NOTIFY), its
job ends `cancelled` with what it returned, and it is not run again. A job whose worker was
SIGKILLed ends `cancelled` when another worker rescues it."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import asyncpg

from starlette_jobs import EventKind, Jobs, JobStatus
from tests.conftest import on_postgres
from tests.processes.conftest import StartWorker
from tests.processes.support import count, eventually, read_run_log, wait_until
from tests.processes.worker_app import long_sleep


async def finished_at(
    jobs: Jobs, connection: asyncpg.Connection[Any], job_id: int
) -> asyncio.Future[float]:
    """A future set to the time (time.monotonic) the job's outcome is written: the statement
    that finishes it notifies whoever asked (`want_outcome`)."""
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def on_notify(_connection: object, _pid: int, _channel: str, payload: object) -> None:
        if payload == str(job_id) and not done.done():
            done.set_result(time.monotonic())

    await connection.add_listener("starlette_jobs.outcomes", on_notify)
    assert await on_postgres(jobs).want_outcome(job_id) is JobStatus.RUNNING
    return done


async def test_a_job_cancelled_in_a_worker_process_ends_cancelled_within_a_second(
    database_dsn: str, start_worker: StartWorker, run_log: Path, connection: asyncpg.Connection[Any]
) -> None:
    worker = start_worker(dsn=database_dsn)
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await long_sleep.enqueue(n=1, seconds=60)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        done = await finished_at(jobs, connection, job_id)
        asked = time.monotonic()
        assert await jobs.cancel(job_id)
        async with asyncio.timeout(5):
            latency = await done - asked
        record = await jobs.get(job_id)
        events = await jobs.events(job_id)
        # Not run again: the worker stays up, and the job never starts a second time.
        worker.send(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        after = await jobs.get(job_id)
    print(f"cancelled in the worker process {latency * 1000:.0f} ms after jobs.cancel")
    assert latency < 1
    assert record is not None
    assert (record.status, record.attempts, record.errors) == (JobStatus.CANCELLED, 1, [])
    assert record.result["pid"] == worker.pid
    assert 0 < record.result["slept"] < 60
    assert [e.kind for e in events][-2:] == [EventKind.CANCEL_REQUESTED, EventKind.CANCELLED]
    assert after == record
    runs = read_run_log(run_log)
    assert (count(runs, "start")[1], count(runs, "cancelled")[1], count(runs, "done")[1]) == (
        1, 1, 0,
    )  # fmt: skip


async def test_a_job_cancelled_after_its_worker_was_killed_ends_cancelled_at_rescue(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    lease = 2.0
    killed = start_worker("--lease-duration", str(lease), dsn=database_dsn)
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await long_sleep.enqueue(n=1, seconds=60)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        killed.send(signal.SIGKILL)
        assert await asyncio.to_thread(killed.wait) == -signal.SIGKILL
        assert await jobs.cancel(job_id)  # asked; nobody is there to hear it
        record = await jobs.get(job_id)
        assert record is not None
        assert record.status is JobStatus.RUNNING

        rescuer = start_worker("--lease-duration", str(lease), dsn=database_dsn)

        async def cancelled() -> bool:
            found = await jobs.get(job_id)
            return found is not None and found.status is JobStatus.CANCELLED

        await eventually(cancelled, 3 * lease, "the rescue to cancel the job")
        record = await jobs.get(job_id)
        events = await jobs.events(job_id)
        rescuer.send(signal.SIGTERM)
        assert await asyncio.to_thread(rescuer.wait) == 0, rescuer.output
    assert record is not None
    assert (record.status, record.attempts, record.result) == (JobStatus.CANCELLED, 1, None)
    assert [e.kind for e in events][-2:] == [EventKind.CANCEL_REQUESTED, EventKind.CANCELLED]
    # The job did not run again: its only start was on the killed worker.
    starts = [e for e in read_run_log(run_log) if e.kind == "start"]
    assert [(e.n, e.pid) for e in starts] == [(1, killed.pid)]

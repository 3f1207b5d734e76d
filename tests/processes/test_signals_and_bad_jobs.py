"""SIGTERM with long jobs, jobs that hang or ignore cancellation, and poison jobs, in worker
processes started by the CLI."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import asyncpg

from starlette_jobs import Jobs, JobStatus
from tests.processes.conftest import StartWorker
from tests.processes.support import count, eventually, read_run_log, wait_until
from tests.processes.worker_app import hang, poison, poison_in_thread, stubborn, work


async def test_sigterm_gives_running_jobs_the_grace_period_and_releases_the_rest(
    database_dsn: str, start_worker: StartWorker, run_log: Path, connection: asyncpg.Connection
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        quick = [await work.enqueue(n=n, seconds=0.5) for n in (1, 2)]
        long = [await work.enqueue(n=n, seconds=60) for n in (3, 4)]
        waiting = [await work.enqueue(n=n, seconds=60) for n in range(5, 11)]
        worker = start_worker("--queue", "default=4", "--shutdown-grace", "1", dsn=database_dsn)
        await asyncio.to_thread(
            wait_until, lambda: len(count(read_run_log(run_log), "start")) == 4, what="4 starts"
        )
        signalled = time.time()
        worker.send(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        took = time.time() - signalled
        statuses = {i: await jobs.get(i) for i in quick + long + waiting}

    assert took < 5, f"exit took {took:.1f} s: the grace period is 1 s, the jobs 60 s"
    assert all(event.at < signalled for event in read_run_log(run_log) if event.kind == "start")
    for job_id, record in statuses.items():
        assert record is not None
        if job_id in quick:
            assert record.status is JobStatus.SUCCEEDED
        else:
            assert (record.status, record.attempts) == (JobStatus.PENDING, 0)
        if job_id in waiting:
            assert record.started_at is None, "claimed after the signal"
    assert await connection.fetchval(
        "SELECT count(*) FROM starlette_jobs WHERE status = 'running'"
    ) == 0  # fmt: skip


async def test_a_hanging_job_times_out_and_is_retried_by_its_policy(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await hang.enqueue(n=1)
        worker = start_worker(dsn=database_dsn)

        async def failed() -> bool:
            record = await jobs.get(job_id)
            return record is not None and record.status is JobStatus.FAILED

        await eventually(failed, 20, "the job to fail")
        worker.send(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.FAILED, 2)
    assert len(record.errors) == 2
    assert all("job timed out after 0.5 s" in error["error"] for error in record.errors)
    assert count(read_run_log(run_log), "start")[1] == 2


async def test_a_job_that_ignores_cancellation_does_not_hold_up_the_exit(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await stubborn.enqueue(n=1)
        worker = start_worker("--shutdown-grace", "1", dsn=database_dsn)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        signalled = time.monotonic()
        worker.send(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        took = time.monotonic() - signalled
        record = await jobs.get(job_id)
    assert took < 5, f"exit took {took:.1f} s with a 1 s grace period"
    assert count(read_run_log(run_log), "ignored-cancel")[1] >= 1
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


POISONS = ["system-exit", "keyboard-interrupt", "base-exception", "generator-exit",
           "self-cancel", "inner-cancel"]  # fmt: skip


async def test_poison_jobs_fail_with_a_clear_error_and_the_worker_carries_on(
    database_dsn: str, start_worker: StartWorker, connection: asyncpg.Connection
) -> None:
    insert = (
        "INSERT INTO starlette_jobs (name, queue, payload, max_attempts) "
        "VALUES ($1, 'default', $2::jsonb, 1) RETURNING id"
    )
    async with Jobs(database_dsn, queues={}) as jobs:
        unknown = await connection.fetchval(insert, "no.such.job", "{}")
        bad_payload = await connection.fetchval(
            insert, work.name, json.dumps({"n": "not a number"})
        )
        poisoned = {kind: await poison.enqueue(n=i, kind=kind) for i, kind in enumerate(POISONS)}
        in_thread = await poison_in_thread.enqueue(n=99)
        healthy = await work.enqueue(n=100)
        # No grace: the job no worker declares fails at once (else it waits for one).
        worker = start_worker("--burst", "--unknown-job-grace", "0", dsn=database_dsn)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        records = {
            job_id: await jobs.get(job_id)
            for job_id in [unknown, bad_payload, in_thread, healthy, *poisoned.values()]
        }

    def failure(job_id: int) -> str:
        record = records[job_id]
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.FAILED, 1), record
        assert record.last_error is not None
        return record.last_error

    assert "no job named 'no.such.job' is registered" in failure(unknown)
    assert "JobArgumentsError" in failure(bad_payload)
    assert "Input should be a valid integer" in failure(bad_payload)
    assert "SystemExit: 3" in failure(poisoned["system-exit"])
    assert "KeyboardInterrupt" in failure(poisoned["keyboard-interrupt"])
    assert "Custom: not an Exception" in failure(poisoned["base-exception"])
    assert "GeneratorExit" in failure(poisoned["generator-exit"])
    assert "CancelledError" in failure(poisoned["self-cancel"])
    assert "CancelledError" in failure(poisoned["inner-cancel"])
    assert "SystemExit: 4" in failure(in_thread)
    healthy_record = records[healthy]
    assert healthy_record is not None
    assert healthy_record.status is JobStatus.SUCCEEDED

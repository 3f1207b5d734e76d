"""Faults the worker must outlive: values PostgreSQL refuses, SQL errors, lost leases."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Job, JobRecord, JobStatus, Retry, current_job, job
from tests.conftest import StartJobs, eventually


@job(retry=Retry.none())
async def fails_with_nul() -> None:
    raise ValueError("bad byte \x00 in here")


@job(retry=Retry.none())
async def returns_nul() -> str:
    return "text with \x00"


@job(retry=Retry.none())
async def fine(n: int) -> int:
    return n


async def test_values_postgres_cannot_store_do_not_stop_outcomes_being_written(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs() as jobs:
        bad_error = await fails_with_nul.enqueue()
        bad_result = await returns_nul.enqueue()
        good = [await fine.enqueue(n=n) for n in range(5)]
        await jobs.drain(timeout=10)
        records = {i: await jobs.get(i) for i in [bad_error, bad_result, *good]}
    failed = records[bad_error]
    assert failed is not None
    assert failed.status == JobStatus.FAILED
    assert "bad byte \\x00 in here" in (failed.last_error or "")
    succeeded = records[bad_result]
    assert succeeded is not None
    assert (succeeded.status, succeeded.result) == (JobStatus.SUCCEEDED, None)
    assert [records[i].status for i in good] == [JobStatus.SUCCEEDED] * 5  # type: ignore[union-attr]


async def test_the_claim_loop_outlives_sql_errors_and_resumes(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    async def failed_claims() -> bool:
        failures = [r for r in caplog.records if "claiming from queue" in r.getMessage()]
        return len(failures) >= 2

    # The second failure of a kind is logged at DEBUG (the first at ERROR, with its traceback).
    caplog.set_level(logging.DEBUG, logger="starlette_jobs.worker")
    async with start_jobs(poll_interval=0.05) as jobs:
        await jobs.drain(timeout=5)
        # Every claim now fails with "relation does not exist", not a connection error.
        await connection.execute("ALTER TABLE starlette_jobs RENAME TO starlette_jobs_away")
        await eventually(failed_claims, "two failed claims")
        await connection.execute("ALTER TABLE starlette_jobs_away RENAME TO starlette_jobs")
        job_id = await fine.enqueue(n=1)
        await jobs.drain(timeout=15)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status == JobStatus.SUCCEEDED


async def test_shutdown_keeps_the_outcome_of_a_job_that_finished_while_being_cancelled(
    start_jobs: StartJobs,
) -> None:
    started = asyncio.Event()

    @job(retry=Retry.none())
    async def finishes_anyway() -> str:
        started.set()
        # It chooses to finish its work instead of giving up when cancelled.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return "done"

    async with start_jobs(shutdown_grace=0.1) as jobs:
        job_id = await finishes_anyway.enqueue()
        await asyncio.wait_for(started.wait(), timeout=10)
    async with start_jobs(queues={}) as reader:
        record = await reader.get(job_id)
    assert record is not None
    assert (record.status, record.result, record.attempts) == (JobStatus.SUCCEEDED, "done", 1)
    assert jobs.worker_id is None


async def test_a_worker_that_loses_a_lease_cancels_its_own_attempt(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @job(retry=Retry.none())
    async def long_job() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with start_jobs(lease_duration=0.3) as jobs:
        job_id = await long_job.enqueue()
        await asyncio.wait_for(started.wait(), timeout=10)
        # Another worker now holds the job (as after a rescue and a new claim), with a lease of
        # its own that it renews: the 0.3 s one this worker took would expire while a loaded
        # machine runs the rest of the test, and its rescue would rightly fail the job.
        other_token = uuid.uuid4()
        await connection.execute(
            "UPDATE starlette_jobs SET lease_token = $1, worker_id = 'other',"
            " lease_expires_at = now() + interval '1 hour' WHERE id = $2",
            other_token,
            job_id,
        )
        await asyncio.wait_for(cancelled.wait(), timeout=5)
        assert jobs._worker is not None
        assert jobs._worker.running_count() == 0
    row = await connection.fetchrow("SELECT * FROM starlette_jobs WHERE id = $1", job_id)
    assert row is not None
    assert (row["status"], row["worker_id"], row["lease_token"]) == (
        "running",
        "other",
        other_token,
    )


async def refuse_poison_in(connection: asyncpg.Connection[Any], column: str) -> None:
    """A trigger that refuses to write a job whose `column` holds the text "poison"."""
    assert column in ("result", "progress")  # a column name, not a value: formatted in
    await connection.execute(
        f"""
        CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.{column}::text LIKE '%poison%' THEN
                RAISE EXCEPTION 'this {column} is not allowed';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_poison BEFORE UPDATE ON starlette_jobs
            FOR EACH ROW EXECUTE FUNCTION refuse_poison();
        """
    )


async def run_ok_poison_ok(
    start_jobs: StartJobs, job_: Job[..., Any], **worker_settings: Any
) -> list[JobRecord]:
    """Runs `job_` on "ok-1", "poison" and "ok-2" in a worker of its own; their records."""
    async with start_jobs(queues={}) as producer:
        ids = await job_.enqueue_many([{"value": v} for v in ("ok-1", "poison", "ok-2")])
        async with start_jobs(**worker_settings) as worker:
            await worker.drain(timeout=10)
        records = [await producer.get(i) for i in ids]
    return [record for record in records if record is not None]


@job(retry=Retry.none())
async def returns(value: str) -> str:
    return value


async def test_a_row_the_database_refuses_is_written_without_its_result_and_others_are_not_held_up(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    # A trigger of the user's (an audit rule, a constraint) refuses one outcome outright.
    await refuse_poison_in(connection, "result")
    records = await run_ok_poison_ok(start_jobs, returns)
    assert [(r.status, r.result) for r in records] == [
        (JobStatus.SUCCEEDED, "ok-1"),
        (JobStatus.SUCCEEDED, None),
        (JobStatus.SUCCEEDED, "ok-2"),
    ]


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def reports(value: str) -> str:
    me = current_job()
    assert me is not None
    me.report_progress(value)  # goes with the outcome: the job ends before it is written
    return value


async def test_an_outcome_refused_for_its_progress_is_written_without_it_and_runs_once(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    # The stripped outcome must drop every value the database may refuse, progress included:
    # else it is refused again, the lease expires and the job that succeeded runs again.
    await refuse_poison_in(connection, "progress")
    records = await run_ok_poison_ok(start_jobs, reports, lease_duration=3)
    assert [(r.status, r.attempts, r.result, r.progress) for r in records] == [
        (JobStatus.SUCCEEDED, 1, "ok-1", "ok-1"),
        (JobStatus.SUCCEEDED, 1, None, None),
        (JobStatus.SUCCEEDED, 1, "ok-2", "ok-2"),
    ]

"""A job that completes in its own transaction and whose worker is SIGKILLed right after the
commit, before the worker hears of it: the job is `succeeded` in the table, so no rescue runs it
again, and the row it wrote exists once (docs/transactions.md)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import asyncpg

from starlette_jobs import EventKind, Jobs, JobStatus
from tests.processes.complete_app import charge
from tests.processes.conftest import StartWorker
from tests.processes.support import count, read_run_log

APP = "tests.processes.complete_app:jobs"


async def test_a_job_killed_after_its_commit_is_not_run_again(
    database_dsn: str,
    start_worker: StartWorker,
    run_log: Path,
    connection: asyncpg.Connection[Any],
) -> None:
    await connection.execute("CREATE TABLE charges (n int NOT NULL, pid int NOT NULL)")
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await charge.enqueue(n=1)
        first = start_worker("--lease-duration", "1", dsn=database_dsn, app=APP)
        assert await asyncio.to_thread(first.wait, 30) == -signal.SIGKILL, first.output
        record = await jobs.get(job_id)
        assert record is not None
        # Written by the job's own transaction: the dead worker wrote no outcome.
        assert (record.status, record.result) == (JobStatus.SUCCEEDED, "charged 1")

        # A second worker drains the queue: it would wait for a job left running, rescue it
        # once its lease (1 s) ran out, and run it again.
        second = start_worker("--lease-duration", "1", "--burst", dsn=database_dsn, app=APP)
        assert await asyncio.to_thread(second.wait, 30) == 0, second.output
        record = await jobs.get(job_id)
        kinds = [event.kind for event in await jobs.events(job_id)]

    assert record is not None
    assert (record.status, record.attempts, record.result) == (
        JobStatus.SUCCEEDED, 1, "charged 1",
    )  # fmt: skip
    assert kinds == [EventKind.ENQUEUED, EventKind.CLAIMED, EventKind.SUCCEEDED]
    events = read_run_log(run_log)
    assert count(events, "start") == {1: 1}
    assert count(events, "committed") == {1: 1}
    rows = await connection.fetch("SELECT n, pid FROM charges")
    assert [(row["n"], row["pid"]) for row in rows] == [(1, events[0].pid)]

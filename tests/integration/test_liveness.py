"""A worker whose liveness connection is ended (an operator's `pg_terminate_backend`, or a cut
network) stops its attempts at once, since other workers may take their jobs now, takes its
lock again, and gives the jobs back: they run again (docs/workers.md, liveness)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from starlette_jobs import JobStatus, job
from tests.conftest import StartJobs, eventually

started: list[int] = []
stopped: list[int] = []
_go_on = asyncio.Event()


@job(queue="liveness")
async def watched(n: int) -> str:
    started.append(n)
    try:
        await _go_on.wait()
    except asyncio.CancelledError:
        stopped.append(n)
        raise
    return "done"


TERMINATE_LIVENESS = """
    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = 'starlette_jobs liveness'
"""


async def test_a_worker_that_loses_its_liveness_connection_stops_its_attempts_at_once(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    started.clear()
    stopped.clear()
    _go_on.clear()
    async with start_jobs(queues={"liveness": 2}, lease_duration=60) as jobs:
        job_id = await watched.enqueue(n=1)
        await eventually(lambda: _true(started == [1]), "the job to start")
        assert await connection.fetchval(TERMINATE_LIVENESS) == 1

        # Within a liveness round (a second): the attempt is stopped, the job given back
        # (its attempt with it) and claimed again, not left for its 60 s lease.
        await eventually(lambda: _true(started == [1, 1]), "the job to run again", timeout=5)
        assert stopped == [1]
        _go_on.set()
        assert await jobs.result(watched, job_id, timeout=5) == "done"
        record = await jobs.get(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 1)
        # It holds its lock again: the others do not take it for dead.
        assert [worker.id for worker in await jobs.workers()] == [jobs.worker_id]
        assert (
            await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'starlette_jobs liveness'"
            )
            == 1
        )


async def _true(value: bool) -> bool:
    return value

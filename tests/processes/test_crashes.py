"""Worker processes that die or freeze mid-job: nothing is lost, and the lease fence decides
which attempt's outcome counts."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import asyncpg

from starlette_jobs import Jobs, JobStatus
from starlette_jobs.postgres._migrations import queries
from tests.processes.conftest import StartWorker
from tests.processes.support import count, eventually, read_run_log, wait_until
from tests.processes.worker_app import work

_FINISHED = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


async def test_sigkill_mid_batch_loses_nothing_and_reruns_only_the_jobs_in_flight(
    database_dsn: str, start_worker: StartWorker, run_log: Path, connection: asyncpg.Connection
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        ids = await work.enqueue_many([{"n": n, "seconds": 0.05} for n in range(300)])
        first = start_worker("--queue", "default=20", "--lease-duration", "2", dsn=database_dsn)
        await asyncio.to_thread(
            wait_until, lambda: sum(count(read_run_log(run_log), "done").values()) >= 60,
            what="the first worker to finish 60 jobs",
        )  # fmt: skip
        first.send(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
        started_before_kill = count(read_run_log(run_log), "start")
        # The dead worker changes nothing any more: its running rows are the jobs in flight,
        # those it was running and those whose outcome it had not written yet.
        in_flight = {
            int(n)
            for (n,) in await connection.fetch(
                "SELECT payload->>'n' FROM starlette_jobs WHERE status = 'running'"
            )
        }
        assert in_flight

        second = start_worker(
            "--queue", "default=20", "--lease-duration", "2", "--burst", dsn=database_dsn
        )
        assert await asyncio.to_thread(second.wait) == 0, second.output
        records = [await jobs.get(job_id) for job_id in ids]

    assert all(r is not None and r.status is JobStatus.SUCCEEDED for r in records)
    events = read_run_log(run_log)
    starts = count(events, "start")
    ran_twice = {n for n, times in starts.items() if times > 1}
    print(f"{len(in_flight)} job(s) in flight at the kill, {len(ran_twice)} ran twice")
    assert sorted(starts) == list(range(300))
    # Exactly the jobs in flight run again, and each only once more. A job claimed just before the
    # kill may not have started yet: then its only run is on the second worker.
    assert ran_twice <= in_flight
    for n in range(300):
        expected = started_before_kill[n] + 1 if n in in_flight else 1
        assert starts[n] == expected, (n, n in in_flight, started_before_kill[n])
    for record in records:
        assert record is not None
        n = record.arguments["n"]
        assert record.attempts == (2 if n in in_flight else 1)
        if n in in_flight:
            # Rescued as its worker's liveness lock was freed, or (had that not been seen
            # first) at its lease's expiry.
            error = record.errors[0]["error"]
            assert "died: its liveness connection closed" in error or "lease expired" in error


async def test_a_stalled_worker_is_fenced_off_and_keeps_working_when_it_resumes(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        stalled = start_worker("--lease-duration", "1", dsn=database_dsn)
        await asyncio.to_thread(stalled.wait_for, "started on queues")
        job_id = await work.enqueue(n=1, seconds=2.5)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        stalled.send(signal.SIGSTOP)
        await asyncio.sleep(2)  # twice the lease: it expires while the process is frozen

        rescuer = start_worker("--lease-duration", "1", "--burst", dsn=database_dsn)
        assert await asyncio.to_thread(rescuer.wait) == 0, rescuer.output
        taken_over = await jobs.get(job_id)
        assert taken_over is not None
        assert taken_over.status is JobStatus.SUCCEEDED
        assert taken_over.result == rescuer.pid
        assert taken_over.attempts == 2

        stalled.send(signal.SIGCONT)
        # Its attempt's time is up: either its heartbeat finds the lease gone and cancels the
        # attempt, or the attempt ends first and the fence refuses its outcome. Both are logged.
        await asyncio.to_thread(stalled.wait_for, "no longer holds its lease")
        assert await jobs.get(job_id) == taken_over

        # Still a healthy worker: it runs the next job.
        next_id = await work.enqueue(n=2)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "done")[2] == 1, what="next job"
        )
        stalled.send(signal.SIGTERM)
        assert await asyncio.to_thread(stalled.wait) == 0, stalled.output
        after = await jobs.get(next_id)
    assert after is not None
    assert after.status is JobStatus.SUCCEEDED
    assert after.result == stalled.pid


async def test_a_job_rescued_while_its_worker_was_frozen_comes_back_to_it_and_runs_to_the_end(
    database_dsn: str, start_worker: StartWorker, run_log: Path, connection: asyncpg.Connection
) -> None:
    # When it wakes, the worker claims the job again (it has a free slot) while its stale copy
    # still runs: its bookkeeping must keep the two attempts apart. Keyed by job id, the stale
    # copy's end deleted the new copy's entry, whose lease then went unrenewed and was rescued.
    async with Jobs(database_dsn, queues={}) as jobs:
        worker = start_worker("--queue", "default=2", "--lease-duration", "1", dsn=database_dsn)
        await asyncio.to_thread(worker.wait_for, "started on queues")
        job_id = await work.enqueue(n=1, seconds=2.5)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        worker.send(signal.SIGSTOP)

        async def lease_expired() -> bool:
            return bool(
                await connection.fetchval(
                    "SELECT lease_expires_at < now() FROM starlette_jobs WHERE id = $1", job_id
                )
            )

        await eventually(lease_expired, timeout=10, what="the frozen worker's lease to expire")
        # The rescue any other worker would do, then the wake-up that comes with new work: the
        # frozen worker claims the job again as soon as it runs.
        rescued = await connection.fetch(queries()["rescue_expired"], 100, True)
        assert [row["id"] for row in rescued] == [job_id]
        await connection.execute("SELECT pg_notify('starlette_jobs:default', '')")
        worker.send(signal.SIGCONT)

        async def finished() -> bool:
            record = await jobs.get(job_id)
            return record is not None and record.status in _FINISHED

        await eventually(finished, timeout=30, what="the job to finish")
        worker.send(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait) == 0, worker.output
        record = await jobs.get(job_id)
        left_running = await connection.fetchval(
            "SELECT count(*) FROM starlette_jobs WHERE status = 'running'"
        )

    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 2), record.errors
    assert len(record.errors) == 1
    assert "lease expired" in record.errors[0]["error"]
    assert record.result == worker.pid
    # The new copy's lease was renewed while it ran: no further rescue, no third start.
    assert count(read_run_log(run_log), "start")[1] == 2, worker.output
    assert left_running == 0

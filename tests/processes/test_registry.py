"""The worker registry across processes (docs/workers.md): three worker processes list each
other with their queues and job names, through `jobs.workers()` and `starlette-jobs workers`; a
SIGKILLed one is gone within seconds, a SIGTERMed one at once. Liveness: a SIGKILLed worker's
jobs run elsewhere within seconds, whatever its lease; a SIGSTOPped one's only at lease expiry."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs.cli._main import main
from tests.processes.conftest import StartWorker
from tests.processes.support import count, eventually, read_run_log, wait_until
from tests.processes.worker_app import long_sleep, work

# A heartbeat every second. A killed worker's row goes with its liveness lock, at the next
# liveness round of a live worker (every second); had that failed, three missed heartbeats.
LEASE = "3"


async def test_three_workers_list_each_other_and_a_killed_one_is_gone_within_seconds(
    database_dsn: str, start_worker: StartWorker, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = [
        start_worker("--queue", "default=2", "--lease-duration", LEASE, dsn=database_dsn),
        start_worker("--queue", "default=2", "--lease-duration", LEASE, dsn=database_dsn),
        start_worker("--queue", "other=3", "--lease-duration", LEASE, dsn=database_dsn),
    ]
    for process in fleet:
        await asyncio.to_thread(process.wait_for, "started on queues")
    async with Jobs(database_dsn, queues={}) as jobs:
        workers = {worker.pid: worker for worker in await jobs.workers()}
        assert set(workers) == {process.pid for process in fleet}
        assert [workers[process.pid].queues for process in fleet] == [
            ("default",),
            ("default",),
            ("other",),
        ]
        for worker in workers.values():
            # The job names its code declares (tests/processes/worker_app.py), whatever queue.
            assert {
                "tests.processes.worker_app.work",
                "tests.processes.worker_app.other_work",
            } <= set(worker.job_names), worker.job_names
            assert worker.id.split(":")[1] == str(worker.pid)  # host:pid:random

        # The CLI lists the same fleet.
        assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn, "--json"]) == 0
        listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {row["pid"] for row in listed} == set(workers)
        assert all(isinstance(row["job_names"], list) for row in listed)
        assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn]) == 0
        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[:5] == ["ID", "HOST", "PID", "QUEUES", "JOBS"]
        assert len(rows) == 3

        killed, stopped, survivor = fleet
        killed.send(signal.SIGKILL)
        assert await asyncio.to_thread(killed.wait) == -signal.SIGKILL
        began = time.monotonic()

        async def killed_is_gone() -> bool:
            return killed.pid not in {worker.pid for worker in await jobs.workers()}

        await eventually(killed_is_gone, timeout=10, what="the killed worker's row deleted")
        print(f"killed worker's row gone {time.monotonic() - began:.1f} s after SIGKILL")

        stopped.send(signal.SIGTERM)
        assert await asyncio.to_thread(stopped.wait) == 0, stopped.output
        # A clean stop deletes its own row before the process exits.
        assert [worker.pid for worker in await jobs.workers()] == [survivor.pid]


# -- liveness ----------------------------------------------------------------------------------


async def test_a_killed_workers_jobs_are_pending_within_seconds_and_run_elsewhere(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    # A lease of a minute: only the released liveness lock can bring the jobs back this soon.
    doomed = start_worker("--queue", "default=5", "--lease-duration", "60", dsn=database_dsn)
    await asyncio.to_thread(doomed.wait_for, "started on queues")
    async with Jobs(database_dsn, queues={}) as jobs:
        ids = await long_sleep.enqueue_many([{"n": n, "seconds": 3600} for n in range(3)])
        await asyncio.to_thread(
            wait_until, lambda: len(count(read_run_log(run_log), "start")) == 3, what="3 starts"
        )
        rescuer = start_worker("--queue", "default=5", "--lease-duration", "60", dsn=database_dsn)
        await asyncio.to_thread(rescuer.wait_for, "started on queues")

        doomed.send(signal.SIGKILL)
        killed_at = time.monotonic()
        assert await asyncio.to_thread(doomed.wait) == -signal.SIGKILL

        async def all_taken_from_the_dead() -> bool:
            records = [await jobs.get(job_id) for job_id in ids]
            return all(
                r is not None and (r.status is JobStatus.PENDING or r.attempts == 2)
                for r in records
            )

        await eventually(all_taken_from_the_dead, timeout=5, what="the jobs back from the dead")
        rescued_after = time.monotonic() - killed_at
        print(f"jobs of the SIGKILLed worker back within {rescued_after:.2f} s (lease 60 s)")
        assert rescued_after < 5

        def started_on_rescuer() -> bool:
            events = read_run_log(run_log)
            return {e.n for e in events if e.kind == "start" and e.pid == rescuer.pid} == {0, 1, 2}

        await asyncio.to_thread(wait_until, started_on_rescuer, 10, "the jobs run elsewhere")
        for job_id in ids:
            record = await jobs.get(job_id)
            assert record is not None
            assert record.errors[0]["error"] == (
                f"worker {record.errors[0]['worker_id']} died: its liveness connection closed"
            )
            assert [worker.pid for worker in await jobs.workers()] == [rescuer.pid]


async def test_a_frozen_worker_is_rescued_only_at_lease_expiry_and_its_late_outcome_refused(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    frozen = start_worker("--queue", "default=2", "--lease-duration", "3", dsn=database_dsn)
    rescuer = start_worker("--queue", "other=2", "--lease-duration", "3", dsn=database_dsn)
    for process in (frozen, rescuer):
        await asyncio.to_thread(process.wait_for, "started on queues")
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await work.enqueue(n=1, seconds=1.0)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 1, what="job start"
        )
        frozen.send(signal.SIGSTOP)  # its connections stay open: its liveness lock is held
        frozen_at = time.monotonic()

        async def rescued() -> bool:
            record = await jobs.get(job_id)
            return record is not None and record.status is not JobStatus.RUNNING

        await eventually(rescued, timeout=15, what="the frozen worker's job rescued")
        waited = time.monotonic() - frozen_at
        print(f"frozen worker's job rescued after {waited:.2f} s (lease 3 s)")
        assert waited > 1.5  # not at the first liveness round: at its lease's expiry
        record = await jobs.get(job_id)
        assert record is not None
        assert record.status is JobStatus.PENDING  # no worker of its queue left to run it
        assert "lease expired" in record.errors[0]["error"]

        frozen.send(signal.SIGCONT)
        # Its attempt finishes (or is stopped at its next renewal): the fence refuses it.
        await asyncio.to_thread(frozen.wait_for, "no longer holds its lease")
        # Then it claims the job again and runs it to the end, under a new lease.
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1] == 2, what="rerun"
        )
        await eventually(
            lambda: _status_is(jobs, job_id, JobStatus.SUCCEEDED), timeout=10, what="success"
        )
        final = await jobs.get(job_id)
    assert final is not None
    assert final.attempts == 2


async def _status_is(jobs: Jobs, job_id: int, status: JobStatus) -> bool:
    record = await jobs.get(job_id)
    return record is not None and record.status is status

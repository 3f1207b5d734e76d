"""The worker registry across processes (docs/workers.md): three worker processes list each
other with their queues and job names, through `jobs.workers()` and `starlette-jobs workers`; a
SIGKILLed one is gone within seconds, a SIGTERMed one at once."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from starlette_jobs import Jobs
from starlette_jobs.cli._main import main
from tests.processes.conftest import StartWorker
from tests.processes.support import eventually

# A heartbeat every second: a killed worker misses three by about 3 s, and the upkeep of a live
# one (also every second) deletes its row.
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

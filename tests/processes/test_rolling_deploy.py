"""Deploy-aware claiming across processes (docs/workers.md, "Rolling deploys"): a job that only
the new code declares waits while only old workers run, is shown as unrunnable, and runs once on
the first new worker, with no failure recorded."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs.cli._main import main
from tests.processes.conftest import StartWorker
from tests.processes.deploy_app import invoice
from tests.processes.support import count, read_run_log
from tests.processes.worker_app import work

DEPLOY_APP = "tests.processes.deploy_app:jobs"


async def test_a_job_only_the_new_code_declares_waits_for_a_new_worker_and_runs_once_there(
    database_dsn: str,
    start_worker: StartWorker,
    run_log: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old = start_worker("--queue", "default=4", dsn=database_dsn)
    await asyncio.to_thread(old.wait_for, "started on queues")
    async with Jobs(database_dsn, queues={}) as jobs:
        # Enqueued by a web process already on the new code, while only the old worker runs.
        new_job = await invoice.enqueue(n=1)
        # A job the old worker knows, enqueued after: once it has run, the old worker has
        # claimed past the new one.
        known = await work.enqueue(n=2)
        assert (await jobs.wait(known, timeout=30)).status is JobStatus.SUCCEEDED

        waiting = await jobs.get(new_job)
        assert waiting is not None
        assert (waiting.status, waiting.attempts, waiting.errors) == (JobStatus.PENDING, 0, [])
        [unrunnable] = await jobs.unrunnable_jobs()
        assert (unrunnable.queue, unrunnable.name, unrunnable.pending) == (
            "default", invoice.name, 1
        )  # fmt: skip
        # The operator sees it too.
        assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn, "--json"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [line["unrunnable"]["name"] for line in lines if "unrunnable" in line] == [
            invoice.name
        ]

        new = start_worker("--queue", "default=4", dsn=database_dsn, app=DEPLOY_APP)
        record = await jobs.wait(new_job, timeout=30)
        assert (record.status, record.attempts, record.errors) == (JobStatus.SUCCEEDED, 1, [])
        assert record.result == new.pid  # the job returns the pid of the process that ran it
        assert await jobs.unrunnable_jobs() == []
        events = [event.kind.value for event in await jobs.events(new_job)]
        assert events == ["enqueued", "claimed", "succeeded"], events

    runs = read_run_log(run_log)
    assert count(runs, "start")[1] == 1
    assert [event.pid for event in runs if event.n == 1] == [new.pid, new.pid]  # start, done
    for process in (old, new):
        process.send(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait) == 0, process.output

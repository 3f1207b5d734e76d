"""PostgreSQL restarting, or unreachable at start-up and for a while: the worker process and the
app stay up, calls during the outage fail fast with `DatabaseUnavailableError`, and every job
that was accepted finishes."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus
from tests.processes.cluster import Cluster
from tests.processes.conftest import StartWorker
from tests.processes.support import count, eventually, read_run_log, wait_until
from tests.processes.worker_app import other_work, work

T = TypeVar("T")


async def once_reachable(call: Callable[[], Awaitable[T]], timeout: float = 30) -> T:
    """`call()`, tried again every 0.1 s while it raises DatabaseUnavailableError."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                return await call()
            except DatabaseUnavailableError:
                await asyncio.sleep(0.1)


async def all_succeeded(jobs: Jobs, expected: int) -> None:
    async def check() -> bool:
        counts = await once_reachable(jobs.count_by_status)
        return counts[JobStatus.SUCCEEDED] >= expected

    await eventually(check, 60, f"{expected} jobs to succeed")


async def test_a_postgres_restart_mid_drain_loses_nothing_and_listen_comes_back(
    cluster: Cluster, start_worker: StartWorker, run_log: Path
) -> None:
    # A 30 s poll: only a working LISTEN connection makes a job start within a second.
    worker = start_worker(
        "--poll-interval", "30", "--lease-duration", "2", dsn=cluster.dsn
    )  # fmt: skip
    await asyncio.to_thread(worker.wait_for, "started on queues")
    async with Jobs(cluster.dsn, queues={}) as app:
        ids = await work.enqueue_many([{"n": n, "seconds": 0.05} for n in range(600)])
        await asyncio.to_thread(
            wait_until, lambda: len(count(read_run_log(run_log), "done")) >= 100,
            what="100 jobs done",
        )  # fmt: skip
        await asyncio.to_thread(cluster.restart)
        await all_succeeded(app, 600)
        assert worker.process.poll() is None, "the worker process died"

        await asyncio.sleep(1.5)  # two lease upkeep rounds: LISTEN is open again
        enqueued = time.time()
        await work.enqueue(n=1000)
        await asyncio.to_thread(
            wait_until, lambda: count(read_run_log(run_log), "start")[1000] == 1, timeout=10,
            what="the job after the restart to start",
        )  # fmt: skip
        started = next(e.at for e in read_run_log(run_log) if e.n == 1000)
        records = [await app.get(job_id) for job_id in ids]

    assert started - enqueued < 1, "no NOTIFY after the restart: LISTEN was not re-established"
    assert all(r is not None and r.status is JobStatus.SUCCEEDED for r in records)
    starts = count(read_run_log(run_log), "start")
    print(f"{sum(1 for times in starts.values() if times > 1)} job(s) ran twice")


async def test_unreachable_at_start_and_for_a_while(
    cluster: Cluster, start_worker: StartWorker, run_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUN_LOG", str(run_log))  # the jobs this process runs write there too
    await asyncio.to_thread(cluster.stop)

    # Fail fast, when asked to.
    began = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match="unreachable at start"):
        async with Jobs(cluster.dsn, require_database=True):
            pass
    assert time.monotonic() - began < 5

    # By default the app starts, and calls fail fast with a clear error instead of hanging.
    # Its own worker runs the queue "other"; the worker process runs "default".
    async with Jobs(cluster.dsn, queues={"other": 5}, lease_duration=2) as app:
        began = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="PostgreSQL"):
            await work.enqueue(n=1)
        assert time.monotonic() - began < 5
        worker = start_worker("--lease-duration", "2", dsn=cluster.dsn)
        await asyncio.sleep(1)
        assert worker.process.poll() is None, "the worker process gave up:\n" + worker.output

        await asyncio.to_thread(cluster.start)
        before = [
            await once_reachable(functools.partial(work.enqueue, n=n, seconds=0.1))
            for n in range(50)
        ]
        await asyncio.to_thread(
            wait_until, lambda: len(count(read_run_log(run_log), "start")) >= 10,
            what="10 jobs started",
        )  # fmt: skip

        await asyncio.to_thread(cluster.stop)
        began = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="could not enqueue"):
            await work.enqueue(n=999)
        assert time.monotonic() - began < 5
        await asyncio.sleep(1)
        await asyncio.to_thread(cluster.start)

        after = [await once_reachable(functools.partial(work.enqueue, n=n)) for n in range(50, 60)]
        after += [await other_work.enqueue(n=n) for n in range(60, 70)]
        await all_succeeded(app, 70)
        records = [await app.get(job_id) for job_id in before + after]
        assert worker.process.poll() is None, "the worker process died:\n" + worker.output

    assert all(r is not None and r.status is JobStatus.SUCCEEDED for r in records)
    pids = {e.pid for e in read_run_log(run_log)}
    # Both workers that started during the outage ran jobs once it ended.
    assert pids == {worker.pid, os.getpid()}

"""Cancelling a running job, and progress reported from inside one, end to end in one process:
`Jobs` started on PostgreSQL and, where nothing PostgreSQL-only is involved, on the in-memory
store too. Across processes (a worker elsewhere, a worker SIGKILLed): processes/test_cancel.py.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from starlette_jobs import EventKind, Jobs, JobStatus, Retry, current_job, job
from starlette_jobs.worker._progress import PROGRESS_INTERVAL
from tests.conftest import eventually, on_postgres

StartOn = Callable[..., Any]


class Signals:
    """What the jobs of one test signal and wait for (events are bound to the test's loop)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finish = asyncio.Event()
        self.thread_started = threading.Event()
        self.runs = 0


signals: list[Signals] = []


@pytest.fixture
def sig() -> Signals:
    signals.append(Signals())
    return signals[-1]


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def crunch(rows: int) -> dict[str, int]:
    """Processes rows until cancelled; returns how many it did: partial statistics."""
    me, now = current_job(), signals[-1]
    assert me is not None
    now.runs += 1
    done = 0
    try:
        for _ in range(rows):
            if done == 10:
                now.started.set()
            done += 1
            me.report_progress({"done": done, "of": rows})
            await asyncio.sleep(0.001)
    except asyncio.CancelledError:
        return {"done": done, "of": rows}
    return {"done": done, "of": rows}


@job(retry=Retry.fixed(max_attempts=3, delay=0))
def crunch_in_thread(rows: int) -> dict[str, int]:
    me, now = current_job(), signals[-1]
    assert me is not None
    now.runs += 1
    now.thread_started.set()
    done = 0
    while done < rows and not me.cancel_requested:
        done += 1
        if done % 1000 == 0:
            me.report_progress(done)
    return {"done": done}


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def finishes_what_it_started() -> str:
    """Ignores the cancellation: it finishes its work when the test says so."""
    now = signals[-1]
    now.runs += 1
    now.started.set()
    try:
        await now.finish.wait()
    except asyncio.CancelledError:
        await now.finish.wait()
        return "finished anyway"
    return "finished"


@pytest.fixture(params=["postgres", "memory"])
def dsn(request: pytest.FixtureRequest) -> str:
    fixture = "database_dsn" if request.param == "postgres" else "jobs_memory"
    value: str = request.getfixturevalue(fixture)
    return value


@asynccontextmanager
async def started(dsn: str, **settings: Any) -> AsyncIterator[Jobs]:
    settings.setdefault("poll_interval", 0.2)
    async with Jobs(dsn, **settings) as jobs:
        yield jobs


async def status_is(jobs: Jobs, job_id: int, status: JobStatus) -> bool:
    record = await jobs.get(job_id)
    return record is not None and record.status is status


async def test_a_running_async_job_cancelled_keeps_its_partial_result_and_is_not_retried(
    dsn: str, sig: Signals
) -> None:
    async with started(dsn) as jobs:
        job_id = await crunch.enqueue(rows=1_000_000)
        await sig.started.wait()
        asked = time.monotonic()
        assert await jobs.cancel(job_id)
        await eventually(lambda: status_is(jobs, job_id, JobStatus.CANCELLED), "cancelled")
        latency = time.monotonic() - asked
        await jobs.drain()
        record = await jobs.get(job_id)
        events = await jobs.events(job_id)
    print(f"{dsn.split(':')[0]}: cancelled {latency * 1000:.0f} ms after jobs.cancel")
    assert latency < 1
    assert record is not None
    assert (record.status, record.attempts, sig.runs) == (JobStatus.CANCELLED, 1, 1)
    assert record.result["of"] == 1_000_000
    assert 10 <= record.result["done"] < 1_000_000
    assert record.progress == record.result  # the last progress reported went with the outcome
    assert record.cancel_requested_at is not None
    assert [e.kind for e in events][-2:] == [EventKind.CANCEL_REQUESTED, EventKind.CANCELLED]
    assert events[-1].status is JobStatus.CANCELLED


async def test_a_sync_job_sees_the_request_and_returns_what_it_did(dsn: str, sig: Signals) -> None:
    async with started(dsn) as jobs:
        job_id = await crunch_in_thread.enqueue(rows=10**12)
        await asyncio.to_thread(sig.thread_started.wait, 10)
        assert await jobs.cancel(job_id)
        await jobs.drain()
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, sig.runs) == (JobStatus.CANCELLED, 1, 1)
    assert 0 < record.result["done"] < 10**12


async def test_a_job_that_ignores_the_request_runs_to_its_end_and_is_cancelled_then(
    dsn: str, sig: Signals
) -> None:
    async with started(dsn) as jobs:
        job_id = await finishes_what_it_started.enqueue()
        await sig.started.wait()
        assert await jobs.cancel(job_id)
        assert not await jobs.cancel(job_id)  # asked already
        record = await jobs.get(job_id)
        assert record is not None
        assert (record.status, record.cancel_requested_at is not None) == (JobStatus.RUNNING, True)
        sig.finish.set()
        await jobs.drain()
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result, sig.runs) == (JobStatus.CANCELLED, "finished anyway", 1)


async def test_progress_is_readable_while_the_job_runs(dsn: str, sig: Signals) -> None:
    async with started(dsn) as jobs:
        job_id = await crunch.enqueue(rows=1_000_000)
        await sig.started.wait()

        async def progressing() -> bool:
            record = await jobs.get(job_id)
            return (
                record is not None
                and record.progress is not None
                and (record.progress["done"] > 10)
            )

        await eventually(progressing, "progress on the record")
        assert await jobs.cancel(job_id)
        await jobs.drain()


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def reports_too_much(size: int) -> str:
    """Reports a progress of `size` characters; says how `report_progress` took it."""
    me = current_job()
    assert me is not None
    signals[-1].runs += 1
    try:
        me.report_progress("x" * size)
    except ValueError as error:
        me.report_progress({"stage": "told"})
        return str(error)
    return "accepted"


async def test_progress_over_the_limit_is_refused_in_the_job_and_the_job_runs_once(
    dsn: str, sig: Signals
) -> None:
    # 64 KiB of JSON, the documented limit, on both stores: PostgreSQL would take far more
    # (up to jsonb's 256 MiB), the in-memory store anything, and a test there must fail where
    # production would.
    async with started(dsn) as jobs:
        job_id = await reports_too_much.enqueue(size=64 * 1024)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, sig.runs) == (JobStatus.SUCCEEDED, 1, 1)
    assert record.result == (
        f"job {job_id}: progress not storable: 65,538 bytes of JSON, over the limit of 65,536 bytes"
    )
    assert record.progress == {"stage": "told"}


async def test_a_cancel_whose_notification_was_lost_arrives_with_the_lease_renewal(
    database_dsn: str, connection: asyncpg.Connection[Any], sig: Signals
) -> None:
    lease = 1.5
    async with started(database_dsn, lease_duration=lease) as jobs:
        job_id = await crunch.enqueue(rows=1_000_000)
        await sig.started.wait()
        # What `jobs.cancel` writes, without its NOTIFY: as if the notification were lost.
        await connection.execute(
            "UPDATE starlette_jobs SET cancel_requested_at = now() WHERE id = $1", job_id
        )
        asked = time.monotonic()
        await eventually(lambda: status_is(jobs, job_id, JobStatus.CANCELLED), "cancelled")
        latency = time.monotonic() - asked
        record = await jobs.get(job_id)
    print(f"cancelled {latency * 1000:.0f} ms after the request, by the heartbeat")
    assert latency < lease  # the next renewal, a third of a lease later at most (and a write)
    assert record is not None
    assert (record.status, record.attempts, sig.runs) == (JobStatus.CANCELLED, 1, 1)
    assert 10 <= record.result["done"] < 1_000_000


# -- progress coalescing, counted on PostgreSQL ----------------------------------------------


@job(queue="progress")
async def report_in_a_tight_loop(n: int, seconds: float) -> int:
    """Reports progress as fast as it can for `seconds`; returns how many times it did."""
    me = current_job()
    assert me is not None
    reports = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        reports += 1
        me.report_progress({"n": n, "reports": reports})
        # A turn of the loop every few reports: fifty jobs that yielded every 100 (1 ms apiece,
        # 6 ms under coverage on a slow machine) left the writer one turn in a third of a
        # second, and a single statement in the whole run, which proves no bound.
        if reports % 10 == 0:
            await asyncio.sleep(0)
    return reports


async def test_progress_writes_are_coalesced_to_one_statement_per_interval(
    database_dsn: str,
) -> None:
    count, seconds = 50, 3.0
    async with Jobs(database_dsn, queues={"progress": count}, poll_interval=0.2) as jobs:
        store = on_postgres(jobs)
        statements: list[tuple[float, int]] = []
        record_progress = store.record_progress

        async def counted(progress: Sequence[tuple[int, UUID, str]]) -> set[int]:
            statements.append((time.monotonic(), len(progress)))
            return await record_progress(progress)

        store.record_progress = counted  # type: ignore[method-assign]
        ids = await report_in_a_tight_loop.enqueue_many(
            [{"n": n, "seconds": seconds} for n in range(count)]
        )
        began = time.monotonic()
        await jobs.drain(timeout=60)
        elapsed = time.monotonic() - began
        records = [await jobs.get(job_id) for job_id in ids]
    reports = sum(r.result for r in records if r is not None)
    print(
        f"{reports} progress reports by {count} jobs in {elapsed:.2f} s: "
        f"{len(statements)} record_progress statements, "
        f"{max(rows for _, rows in statements)} rows at most in one"
    )
    assert reports > 100 * len(statements)
    assert len(statements) <= elapsed / PROGRESS_INTERVAL + 2
    assert len(statements) >= 2, "the jobs ran for 6 intervals: progress was written at least twice"
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(statements)]
    assert min(gaps) >= PROGRESS_INTERVAL * 0.9
    # The final progress of each job is on its record: the value it reported last.
    for record in records:
        assert record is not None
        assert record.status is JobStatus.SUCCEEDED
        assert record.progress == {"n": record.arguments["n"], "reports": record.result}

"""The outage contract, on PostgreSQL and memory alike: while the database is unavailable, a
producer's `enqueue` raises `DatabaseUnavailableError`; the worker keeps what it has (an outcome
it could not write, the jobs it holds) and goes on trying; once the database is back, work
resumes and every job enqueued before and after runs exactly once.

The outage is a real one on PostgreSQL (the test's database takes no connection and has none:
tests/outages.py), and the in-memory store's switch on memory (`simulate_outage`), so the
switch is held to what a real outage does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus, Retry, job
from starlette_jobs.testing import simulate_outage
from tests.conftest import eventually
from tests.outages import database_refusing_connections

Outage = Callable[[Jobs], AbstractAsyncContextManager[None]]

runs: list[int] = []
held: dict[str, asyncio.Event] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    runs.clear()
    held.clear()


@job(queue="outage", retry=Retry.none())
async def counted(n: int, hold: bool = False) -> int:
    """Notes its run; with `hold`, runs until the test lets it end."""
    runs.append(n)
    if hold:
        held.setdefault("started", asyncio.Event()).set()
        await held.setdefault("gate", asyncio.Event()).wait()
    return n


@pytest.fixture
def outage(jobs_dsn: str, request: pytest.FixtureRequest) -> Outage:
    """`async with outage(jobs):` the database of `jobs` is unavailable within the block."""
    if jobs_dsn.startswith("memory://"):

        @asynccontextmanager
        async def simulated(jobs: Jobs) -> AsyncIterator[None]:
            with simulate_outage(jobs):
                yield

        return simulated
    server_dsn: str = request.getfixturevalue("server_dsn")
    return lambda jobs: database_refusing_connections(server_dsn, jobs_dsn)


async def test_through_an_outage_producers_are_told_and_no_job_is_lost_or_run_twice(
    jobs_dsn: str, outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="starlette_jobs.worker")

    async def outcome_kept_for_later() -> bool:
        return any(m.startswith("could not record") for m in caplog.messages)

    async with Jobs(jobs_dsn, queues={"outage": 4}, poll_interval=0.05) as jobs:
        running = await counted.enqueue(n=0, hold=True)
        await asyncio.wait_for(held.setdefault("started", asyncio.Event()).wait(), 10)
        before = [await counted.enqueue(n=n) for n in range(1, 10)]
        async with outage(jobs):
            with pytest.raises(DatabaseUnavailableError):
                await counted.enqueue(n=-1)
            # The running job ends while the database is away: the worker keeps its outcome
            # (and its lease) until it can write it, with those of the jobs before that it
            # had no time to write.
            held.setdefault("gate", asyncio.Event()).set()
            await eventually(outcome_kept_for_later, "the worker to meet the outage")
        after = [await counted.enqueue(n=n) for n in range(10, 20)]
        for job_id in [running, *before, *after]:
            record = await jobs.wait(job_id, timeout=30)
            assert record.status is JobStatus.SUCCEEDED, record
        assert len(await jobs.list(queue="outage")) == 20  # the refused enqueue wrote nothing
    assert sorted(runs) == list(range(20))  # each once: none lost, none run twice

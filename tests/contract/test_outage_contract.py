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
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus, Retry, job
from starlette_jobs.testing import simulate_outage
from starlette_jobs.web import database_unavailable_handler
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
        return any(m.startswith("recording job outcomes failed") for m in caplog.messages)

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


FAILED = re.compile(r"(.+) failed, retrying")
REPEATED = re.compile(r"(.+) failed again, retrying")
BACK = re.compile(r"(.+) works again, after \d+ failed tr(y|ies)")


def _duties(caplog: pytest.LogCaptureFixture, said: re.Pattern[str]) -> list[str]:
    """The duties whose lines match `said`, one entry per line."""
    return [m.group(1) for m in map(said.match, caplog.messages) if m is not None]


async def test_each_part_of_the_worker_tells_an_outage_once_and_its_end_once(
    jobs_dsn: str, outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    """Every part of the worker tries again every second or so while the database is away; an
    outage of an hour must not be thousands of warnings, in which its start and end are lost."""
    caplog.set_level(logging.DEBUG, logger="starlette_jobs.worker")

    async def tried_again_and_again() -> bool:
        tries = Counter(_duties(caplog, FAILED) + _duties(caplog, REPEATED))
        return sum(tries.values()) >= 6 and max(tries.values()) >= 3

    def told_failed() -> Counter[str]:
        """Each part's lines at WARNING or above that say it failed."""
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        return Counter(m.group(1) for m in map(FAILED.match, lines) if m is not None)

    async with Jobs(jobs_dsn, queues={"outage": 2}, poll_interval=0.05, lease_duration=3) as jobs:
        async with outage(jobs):
            await eventually(tried_again_and_again, "the worker to fail, again and again")
        told = told_failed()
        assert told, "no part of the worker said the database was away"
        assert all(count == 1 for count in told.values()), told

        async def each_part_back() -> bool:
            return set(told) <= set(_duties(caplog, BACK))

        await eventually(each_part_back, "each part that failed to say it works again")
        job_id = await counted.enqueue(n=1)
        assert (await jobs.wait(job_id, timeout=30)).status is JobStatus.SUCCEEDED
    assert told_failed() == told  # and no part said it again after the outage
    assert all(count == 1 for count in Counter(_duties(caplog, BACK)).values())


async def test_a_request_that_meets_the_outage_answers_503_with_the_handler(
    jobs_dsn: str, outage: Outage
) -> None:
    """A handler's plain `enqueue` during the outage: a bare 500 without the handler, a 503
    the client may try again after `Retry-After` with it; and once the database is back, the
    same request goes through."""

    async def signup(request: Request) -> Response:
        return JSONResponse({"id": await counted.enqueue(n=1)}, status_code=202)

    bare = Starlette(routes=[Route("/signup", signup, methods=["POST"])])
    handled = Starlette(
        routes=[Route("/signup", signup, methods=["POST"])],
        exception_handlers={DatabaseUnavailableError: database_unavailable_handler},
    )
    async with Jobs(jobs_dsn, queues={}) as jobs:
        async with outage(jobs):
            async with client_of(bare) as client:
                assert (await client.post("/signup")).status_code == 500
            async with client_of(handled) as client:
                refused = await client.post("/signup")
        assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
        assert "unavailable" in refused.json()["detail"]
        async with client_of(handled) as client:
            accepted = await client.post("/signup")
        assert accepted.status_code == 202
        assert [r.id for r in await jobs.list()] == [accepted.json()["id"]]


def client_of(app: Starlette) -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx2.AsyncClient(transport=transport, base_url="http://test")

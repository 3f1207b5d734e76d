"""`_sse`: a job's updates as server-sent events: status first, then a `progress` event for a
change of progress alone, `end` once it finished, woken by the database rather than by polling;
an early end when `Jobs` stops; a clear error without sse-starlette. Served by uvicorn and read
by a real HTTP client: test_example_fastapi.py."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import asyncpg
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from starlette_jobs import JobId, JobRecord, Jobs, Retry, current_job, job
from starlette_jobs.web import job_status_router, public_fields
from starlette_jobs.web._sse import job_updates
from tests.conftest import StartJobs

started = asyncio.Event()
may_report = asyncio.Event()
may_finish = asyncio.Event()


@pytest.fixture(autouse=True)
def _fresh_events() -> None:
    global started, may_report, may_finish
    started, may_report, may_finish = asyncio.Event(), asyncio.Event(), asyncio.Event()


@job(queue="sse")
async def stepwise(steps: int) -> str:
    me = current_job()
    assert me is not None
    started.set()
    await may_report.wait()
    me.report_progress({"done": 1, "of": steps})
    await may_finish.wait()
    return "done"


@job(queue="sse")
async def quick() -> int:
    return 42


@job(queue="sse", retry=Retry.fixed(max_attempts=3, delay=0.2))
async def third_time_lucky() -> str:
    me = current_job()
    assert me is not None
    if me.attempt < 3:
        raise ConnectionError(f"attempt {me.attempt} timed out")
    return "done"


async def next_update(
    updates: AsyncIterator[tuple[str, Mapping[str, Any]]],
) -> tuple[str, Mapping[str, Any]]:
    async with asyncio.timeout(10):
        return await anext(updates)


async def test_updates_go_status_then_progress_then_end(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"sse": 1}) as jobs:
        job_id = await stepwise.enqueue(steps=4)
        record = await jobs.get(job_id)
        assert record is not None
        updates = job_updates(jobs, record, public_fields, 0.05)
        kind, fields = await next_update(updates)
        assert kind == "status"  # pending, or running already
        while fields["status"] != "running":
            kind, fields = await next_update(updates)
            assert kind == "status"
        assert fields["progress"] is None
        may_report.set()
        kind, fields = await next_update(updates)
        assert (kind, fields["status"], fields["progress"]) == (
            "progress",
            "running",
            {"done": 1, "of": 4},
        )
        may_finish.set()
        kind, fields = await next_update(updates)
        assert (kind, fields["status"], fields["result"]) == ("end", "succeeded", "done")
        with pytest.raises(StopAsyncIteration):
            await anext(updates)


async def test_each_attempt_streams_its_status_even_between_two_looks(jobs_dsn: str) -> None:
    """Two retries 0.2 s apart, well within one look (1 s): every state the job went through
    is streamed, from its history, in order, before the end."""
    async with Jobs(jobs_dsn, queues={"sse": 1}, poll_interval=0.1) as jobs:
        job_id = await third_time_lucky.enqueue()
        record = await jobs.get(job_id)
        assert record is not None
        async with asyncio.timeout(20):
            updates = [u async for u in job_updates(jobs, record, public_fields, 1.0)]
    statuses = [(f["status"], f["attempts"]) for kind, f in updates if kind == "status"]
    assert [s for s in statuses if s != ("pending", 0)] == [
        ("running", 1),
        ("pending", 1),
        ("running", 2),
        ("pending", 2),
        ("running", 3),
    ]
    kind, fields = updates[-1]
    assert (kind, fields["status"], fields["attempts"], fields["result"]) == (
        "end",
        "succeeded",
        3,
        "done",
    )


async def test_the_end_is_announced_at_once_not_at_the_next_look(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"sse": 1}) as jobs:
        job_id = await stepwise.enqueue(steps=1)
        await started.wait()
        may_report.set()
        record = await jobs.get(job_id)
        assert record is not None
        # An hour between two looks: only the database's announcement can end this in time. A
        # stop event as the route passes one, never set: the first of the two wakes it.
        updates = job_updates(jobs, record, public_fields, 3600, anyio.Event())
        assert (await next_update(updates))[0] == "status"
        may_finish.set()
        kind, fields = await next_update(updates)
        assert (kind, fields["status"]) == ("end", "succeeded")


async def test_a_job_not_due_yet_is_not_looked_at_until_it_is(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"sse": 1}) as jobs:
        job_id = await quick.configure(delay=600).enqueue()
        record = await jobs.get(job_id)
        assert record is not None
        looks = 0
        get = jobs.get

        async def counted(job_id: JobId) -> JobRecord | None:
            nonlocal looks
            looks += 1
            return await get(job_id)

        jobs.get = counted  # type: ignore[method-assign]
        updates = job_updates(jobs, record, public_fields, 0.01)
        assert (await next_update(updates))[0] == "status"
        following = asyncio.create_task(next_update(updates))
        await asyncio.sleep(0.3)  # thirty progress intervals
        assert await jobs.cancel(job_id)
        kind, fields = await following
    assert (kind, fields["status"], looks) == ("end", "cancelled", 0)


async def test_a_finished_job_gets_one_end_event(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"sse": 1}) as jobs:
        job_id = await quick.enqueue()
        record = await jobs.wait(job_id, timeout=10)
        updates = [update async for update in job_updates(jobs, record, public_fields, 0.05)]
    assert [(kind, fields["result"]) for kind, fields in updates] == [("end", 42)]


async def test_updates_end_early_when_jobs_stops(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:  # no worker: the job stays pending
        job_id = await quick.enqueue()
        record = await jobs.get(job_id)
        assert record is not None
        updates = job_updates(jobs, record, public_fields, 3600)
        assert (await next_update(updates))[0] == "status"
        following = asyncio.create_task(anext(updates, None))
    async with asyncio.timeout(10):
        assert await following is None  # not an error: the client connects again


async def test_updates_end_at_once_when_told_to_stop(start_jobs: StartJobs) -> None:
    """What a server shutting down does (sse-starlette sets the event): the stream ends whole,
    without waiting for the next look at the job, an hour away."""
    async with start_jobs(queues={}) as jobs:
        job_id = await quick.configure(delay=600).enqueue()
        record = await jobs.get(job_id)
        assert record is not None
        stop = anyio.Event()
        updates = job_updates(jobs, record, public_fields, 3600, stop)
        assert (await next_update(updates))[0] == "status"
        following = asyncio.create_task(anext(updates, None))
        await asyncio.sleep(0)  # it waits for the job now
        stop.set()
        async with asyncio.timeout(5):
            assert await following is None


async def test_updates_end_when_the_job_is_deleted(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}) as jobs:  # no worker: the job stays pending
        job_id = await quick.enqueue()
        record = await jobs.get(job_id)
        assert record is not None
        updates = job_updates(jobs, record, public_fields, 0.05)
        assert (await next_update(updates))[0] == "status"
        await connection.execute("DELETE FROM starlette_jobs WHERE id = $1", job_id)
        async with asyncio.timeout(10):
            assert [update async for update in updates] == []


def test_the_events_route_streams_until_the_end_and_answers_404_for_no_job(
    database_dsn: str,
) -> None:
    jobs = Jobs(database_dsn, queues={"sse": 1}, poll_interval=0.2)
    app = Starlette(routes=[Mount("/jobs", app=job_status_router())], lifespan=jobs.lifespan)
    with TestClient(app) as client:
        job_id = client.portal.call(quick.enqueue)  # type: ignore[union-attr]
        stream = client.get(f"/jobs/{job_id}/events")  # read to its end: the job ends
        missing = client.get("/jobs/123456/events")
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-store"
    events = [line for line in stream.text.splitlines() if line.startswith("event:")]
    assert events[0] == "event: status"
    assert events[-1] == "event: end"
    assert '"result":42' in stream.text.rsplit("event: end", 1)[1]
    assert missing.status_code == 404


def test_without_sse_starlette_the_router_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sse_starlette", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "starlette_jobs.web._sse")
    with pytest.raises(ImportError, match=r"starlette-jobs\[sse\]"):
        job_status_router()
    assert job_status_router(events=False).routes  # the status route needs nothing more
    monkeypatch.undo()
    importlib.import_module("starlette_jobs.web._sse")

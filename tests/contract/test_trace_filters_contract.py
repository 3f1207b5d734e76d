"""A job's trace id and correlation id, on both stores: what `jobs.get` shows of the trace and
the request that enqueued it, and `jobs.list` (the dashboard's list, `starlette-jobs list`)
filtered by either, paged like any list."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from starlette_jobs import Jobs, job
from starlette_jobs._correlation import correlation_scope

provider = TracerProvider()


@job(name="traced.send", queue="traced")
async def send(n: int) -> None:
    pass


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, queues={}, tracer_provider=provider) as started:
        yield started


@contextmanager
def request(correlation: str) -> Iterator[str]:
    """A request being served: its span current, its correlation id set; yields its trace id."""
    with (
        correlation_scope(correlation),
        provider.get_tracer("tests").start_as_current_span("GET /signup") as span,
    ):
        yield format(span.get_span_context().trace_id, "032x")


async def test_a_job_shows_the_trace_and_request_that_enqueued_it(jobs: Jobs) -> None:
    with request("req-1") as trace_id:
        traced = await send.enqueue(1)
    outside = await send.enqueue(2)  # its send span starts a trace of its own

    record = await jobs.get(traced)
    assert record is not None
    assert (record.trace_id, record.correlation_id) == (trace_id, "req-1")
    assert record.to_dict()["trace_id"] == trace_id
    alone = await jobs.get(outside)
    assert alone is not None
    assert alone.trace_id not in (None, trace_id)
    assert alone.correlation_id is None


async def test_a_job_enqueued_outside_any_trace_or_request_has_neither(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}, tracer_provider=NoOpTracerProvider()) as untraced:
        record = await untraced.get(await send.enqueue(3))
    assert record is not None
    assert (record.trace_id, record.correlation_id) == (None, None)


async def test_the_list_filters_by_trace_and_by_correlation_id(jobs: Jobs) -> None:
    with request("req-a") as trace_a:
        first_a = [await send.enqueue(n) for n in range(3)]
    with request("req-b") as trace_b:
        only_b = await send.enqueue(9)
    with request("req-a") as trace_c:  # the same correlation id, another trace
        second_a = await send.enqueue(4)
    await send.enqueue(5)

    assert [r.id for r in await jobs.list(trace_id=trace_a)] == first_a[::-1]
    assert [r.id for r in await jobs.list(trace_id=trace_b.upper())] == [only_b]
    assert [r.id for r in await jobs.list(correlation_id="req-a")] == [second_a, *first_a[::-1]]
    assert [r.id for r in await jobs.list(trace_id=trace_c, correlation_id="req-a")] == [second_a]
    assert await jobs.list(trace_id=trace_b, correlation_id="req-a") == []
    assert await jobs.list(trace_id=trace_a, queue="elsewhere") == []
    assert await jobs.list(correlation_id="req-z") == []


async def test_a_filtered_list_is_paged_by_the_last_id_seen(jobs: Jobs) -> None:
    with request("req-paged") as trace_id:
        ids = [await send.enqueue(n) for n in range(5)]
        await send.enqueue(99)
    await send.enqueue(100)  # between the pages' ids, of another request

    pages: list[list[int]] = []
    before: int | None = None
    while page := await jobs.list(trace_id=trace_id, limit=2, before=before):
        pages.append([r.id for r in page if r.arguments["n"] != 99])
        before = page[-1].id
    assert [i for page in pages for i in page] == ids[::-1]


@pytest.mark.parametrize("trace_id", ["abc", "0" * 32, "g" * 32, "1" * 33])
async def test_what_is_no_trace_id_is_refused(jobs: Jobs, trace_id: str) -> None:
    with pytest.raises(ValueError, match="a trace id is 32 hex digits"):
        await jobs.list(trace_id=trace_id)

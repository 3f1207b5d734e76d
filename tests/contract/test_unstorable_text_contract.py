"""Text PostgreSQL cannot take (a NUL character, a lone surrogate) given to `Jobs`' filters and
audit names: the same answer on both stores, never the driver's error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs._records import EventKind
from tests.records import new_jobs

GARBAGE = ["a\x00b", "a\udc80b"]

FILTERS: dict[str, Callable[[Jobs, str], Awaitable[Any]]] = {
    "list(queue=)": lambda jobs, text: jobs.list(queue=text),
    "list(name=)": lambda jobs, text: jobs.list(name=text),
    "list(correlation_id=)": lambda jobs, text: jobs.list(correlation_id=text),
    "count_by_status": lambda jobs, text: jobs.count_by_status(queue=text),
    "status_counts": lambda jobs, text: jobs.status_counts(queue=text),
    "peek": lambda jobs, text: jobs.peek(text),
    "throughput": lambda jobs, text: jobs.throughput(queue=text),
    "begin_bulk(name=)": lambda jobs, text: jobs.begin_bulk("retry", queue="q", name=text),
}


@pytest.fixture
async def jobs(postgres_dsn: str | None) -> Jobs:
    return Jobs(postgres_dsn or "memory://", queues={})


@pytest.mark.parametrize("text", GARBAGE, ids=["nul", "surrogate"])
async def test_a_filter_no_job_could_match_is_a_value_error_naming_why(
    jobs: Jobs, text: str
) -> None:
    async with jobs:
        for call, ask in FILTERS.items():
            with pytest.raises(ValueError, match="PostgreSQL cannot store") as raised:
                await ask(jobs, text)
            assert type(raised.value) is ValueError, call


async def test_who_asked_is_kept_with_what_postgres_cannot_store_escaped(jobs: Jobs) -> None:
    async with jobs:
        store = jobs._ready_store
        first, second = await store.insert_jobs(new_jobs(2))
        assert await jobs.cancel(first, by="ada\x00lovelace") is True
        assert await jobs.cancel(second, by="grace\udc80") is True
        assert await jobs.retry(second, by="ken\x00") is True
        trail = [(e.kind, e.by) for e in await jobs.events(first)]
        assert trail[-1] == (EventKind.CANCELLED, "ada\\x00lovelace")
        assert [(e.kind, e.by) for e in await jobs.events(second)][-2:] == [
            (EventKind.CANCELLED, "grace\\udc80"),
            (EventKind.RETRIED, "ken\\x00"),
        ]
        record = await jobs.get(second)
        assert record is not None
        assert record.status is JobStatus.PENDING

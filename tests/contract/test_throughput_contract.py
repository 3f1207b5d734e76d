"""`jobs.throughput` (the dashboard's overview) on both stores: the workers' counts of the
attempts they ended, added up per queue and minute, kept for an hour; after a drain they equal
what ran, and two workers on one database add up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from starlette_jobs import Jobs, Retry, ThroughputMinute, job
from starlette_jobs._throughput_records import minute_start
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._protocol import Store


@job(queue="rate")
async def sends() -> None:
    pass


@job(queue="rate", retry=Retry.fixed(max_attempts=2, delay=0))
async def bounces() -> None:
    raise RuntimeError("the mail server said no")


def _minute(ago: int) -> datetime:
    return minute_start(datetime.now(UTC)) - timedelta(minutes=ago)


def _totals(minutes: list[ThroughputMinute], queue: str) -> tuple[int, int, int]:
    kept = [row for row in minutes if row.queue == queue]
    return (
        sum(row.succeeded for row in kept),
        sum(row.failed for row in kept),
        sum(row.retried for row in kept),
    )


async def test_counts_added_for_the_same_minute_add_up(store: Store) -> None:
    now, before = _minute(0), _minute(1)
    await store.add_throughput(
        [ThroughputMinute("mail", now, 3, 1, 2), ThroughputMinute("sms", before, 1, 0, 0)]
    )
    # Another worker's counts of the same minute, and of a minute not seen yet.
    await store.add_throughput(
        [ThroughputMinute("mail", now, 4, 0, 1), ThroughputMinute("mail", before, 2, 0, 0)]
    )
    assert await store.throughput(_minute(5), None) == [
        ThroughputMinute("mail", before, 2, 0, 0),
        ThroughputMinute("mail", now, 7, 1, 3),
        ThroughputMinute("sms", before, 1, 0, 0),
    ]
    assert await store.throughput(now, "mail") == [ThroughputMinute("mail", now, 7, 1, 3)]
    assert await store.throughput(_minute(5), "nothing-here") == []
    await store.add_throughput([])  # nothing counted: nothing written


async def _keep_directly(store: Store, row: ThroughputMinute) -> None:
    """A row as an hour-old flush left it (add_throughput refuses rows that old)."""
    if isinstance(store, MemoryStore):
        store.data.throughput[(row.queue, row.minute)] = [row.succeeded, row.failed, row.retried]
    else:
        assert isinstance(store, PostgresStore)
        await store.pool.execute(
            "INSERT INTO starlette_jobs_throughput VALUES ($1, $2, $3, $4, $5)",
            row.queue, row.minute, row.succeeded, row.failed, row.retried,
        )  # fmt: skip


async def test_minutes_older_than_an_hour_are_neither_added_nor_kept(store: Store) -> None:
    await _keep_directly(store, ThroughputMinute("mail", _minute(90), 5, 0, 0))
    assert len(await store.throughput(_minute(120), None)) == 1
    await store.add_throughput(
        [
            ThroughputMinute("mail", _minute(61), 9, 0, 0),
            ThroughputMinute("mail", _minute(0), 1, 0, 0),
        ]
    )
    # The next flush deleted the old row, and did not add the one older than an hour.
    assert await store.throughput(_minute(120), None) == [
        ThroughputMinute("mail", _minute(0), 1, 0, 0)
    ]


async def test_after_a_drain_the_counts_equal_what_ran(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={"rate": 4}) as jobs:
        for _ in range(5):
            await sends.enqueue()
        for _ in range(3):
            await bounces.enqueue()
        await jobs.drain(timeout=30)
        minutes = await jobs.throughput(5)
        # Each bounce: a first attempt that left a retry, then a last one that failed.
        assert _totals(minutes, "rate") == (5, 3, 3)
        assert sum(row.finished for row in minutes) == 8
        assert await jobs.throughput(queue="other") == []


async def test_two_workers_on_one_database_add_up(jobs_dsn: str) -> None:
    async with (
        Jobs(jobs_dsn, queues={"rate": 2}) as first,
        Jobs(jobs_dsn, queues={"rate": 2}) as second,
    ):
        for _ in range(20):
            await sends.enqueue()
        # Each drain waits for the other worker's jobs too, then writes what its worker ran.
        await asyncio.gather(first.drain(timeout=30), second.drain(timeout=30))
        assert _totals(await first.throughput(5), "rate") == (20, 0, 0)


@pytest.mark.parametrize("minutes", [0, 61])
async def test_minutes_out_of_what_is_kept_are_refused(jobs_dsn: str, minutes: int) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        with pytest.raises(ValueError, match="minutes must be 1 to 60"):
            await jobs.throughput(minutes)

"""Retention (`_retention`) on the in-memory store: rounds that delete while batches come back
full, within their time budget, and a task that runs the next round at once while behind. Both
stores, a backlog of 50,000 jobs: contract/test_retention_contract.py; on PostgreSQL with a
worker: integration/test_release_and_retention.py."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._attempt_records import PruneCursor, Pruned
from starlette_jobs._bulk_records import BulkFilter
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker import _retention
from starlette_jobs.worker._retention import BATCH, Retention
from tests.records import new_jobs, outcome


async def finished(store: MemoryStore, count: int) -> list[int]:
    await store.insert_jobs(new_jobs(count))
    claims = await store.claim_batch("default", count, "w", 30)
    await store.record_outcomes([outcome(c, JobStatus.SUCCEEDED) for c in claims])
    return [c.id for c in claims]


class CountingPrunes(MemoryStore):
    """Reports `backlog` old jobs, deleted a batch at a time; keeps each call's size and time."""

    def __init__(self, backlog: int) -> None:
        super().__init__()
        self.backlog = backlog
        self.batches: list[int] = []
        self.times: list[float] = []
        self.done = asyncio.Event()

    async def prune_finished(
        self, retention_seconds: float, limit: int, after: PruneCursor | None = None
    ) -> Pruned:
        deleted = min(limit, self.backlog)
        self.backlog -= deleted
        self.batches.append(deleted)
        self.times.append(asyncio.get_running_loop().time())
        if not self.backlog:
            self.done.set()
        # A full batch may have more after it; a short one looked at the last old job.
        return Pruned(deleted, (datetime.now(UTC), len(self.batches)) if deleted == limit else None)


async def test_without_retention_nothing_is_deleted_and_no_task_runs() -> None:
    store = CountingPrunes(10)
    retention = Retention(store, 0.01, None)
    assert await retention.prune_round() is False
    retention.start()
    await retention.stop()
    assert store.batches == []


async def test_jobs_finished_longer_ago_than_the_retention_are_deleted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    await finished(store, 2)
    await store.insert_jobs(new_jobs(1))  # pending: never pruned
    await asyncio.sleep(0.02)  # the store's clock: both finished more than 0.01 s ago
    with caplog.at_level(logging.INFO, logger="starlette_jobs.worker"):
        assert await Retention(store, 1, 0.01).prune_round() is False
    assert [r.status for r in await store.list_jobs(None, None, 10)] == [JobStatus.PENDING]
    assert caplog.messages[-1].startswith("deleted 2 job(s) finished more than 0 s ago in ")


async def test_a_round_stops_at_the_first_short_batch() -> None:
    store = CountingPrunes(2500)
    assert await Retention(store, 1, 60).prune_round() is False
    assert store.batches == [BATCH, BATCH, 500]


async def test_a_round_works_off_a_backlog_past_the_old_cap_of_20_batches() -> None:
    store = CountingPrunes(50_000)
    assert await Retention(store, 1, 60).prune_round() is False
    assert store.backlog == 0
    assert store.batches == [BATCH] * 50 + [0]


async def test_a_round_out_of_time_says_it_left_rows_behind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_retention, "ROUND_SECONDS", 0.0)
    store = CountingPrunes(2500)
    with caplog.at_level(logging.INFO, logger="starlette_jobs.worker"):
        assert await Retention(store, 1, 60).prune_round() is True
    assert store.batches == [BATCH]
    assert caplog.messages[-1].endswith(", more to delete")


async def test_while_behind_the_next_round_follows_at_once_not_an_interval_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_retention, "ROUND_SECONDS", 0.0)  # one batch per round
    interval = 0.5
    store = CountingPrunes(5 * BATCH)
    retention = Retention(store, interval, 60)
    retention.start()
    try:
        async with asyncio.timeout(10):
            await store.done.wait()
    finally:
        await retention.stop()
    assert store.batches == [BATCH] * 5
    # Five rounds: with an interval between each, the last would start 2 s after the first.
    assert store.times[-1] - store.times[0] < interval


async def test_the_task_keeps_going_after_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0
    two_rounds = asyncio.Event()

    class Failing(MemoryStore):
        async def prune_finished(
            self, retention_seconds: float, limit: int, after: PruneCursor | None = None
        ) -> Pruned:
            nonlocal calls
            calls += 1
            if calls == 2:
                two_rounds.set()
            raise DatabaseUnavailableError("reset by peer")

    retention = Retention(Failing(), 0.01, 60)
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        retention.start()
        try:
            async with asyncio.timeout(5):
                await two_rounds.wait()
        finally:
            await retention.stop()
    assert "retention failed, retrying: reset by peer" in caplog.messages


async def test_a_round_prunes_the_records_of_bulk_actions_finished_as_long_ago() -> None:
    store = MemoryStore()
    await finished(store, 1)
    bulk = await store.begin_bulk("retry", BulkFilter("default"), "ada")
    assert await store.bulk_batch(bulk.id, 10) is not None
    unfinished = await store.begin_bulk("cancel", BulkFilter("default"), "ada")
    await asyncio.sleep(0.02)  # the store's clock: the first finished more than 0.01 s ago
    await Retention(store, 1, 0.01).prune_round()
    assert [record.id for record in await store.list_bulks(10)] == [unfinished.id]

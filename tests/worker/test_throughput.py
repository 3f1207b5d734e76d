"""The worker's counts of the attempts it ends (`worker/_throughput.py`): per queue and minute,
added to the store's by one flush, kept for the next when the store is unavailable, written
when the worker stops. Through workers and `jobs.throughput`: the contract suite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus, ThroughputMinute
from starlette_jobs._throughput_records import minute_start
from starlette_jobs.memory._outage import SimulatedOutage
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._throughput import ThroughputCounter


def _since() -> datetime:
    return minute_start(datetime.now(UTC)) - timedelta(minutes=5)


def _totals(rows: list[ThroughputMinute]) -> dict[str, tuple[int, int, int]]:
    totals: dict[str, tuple[int, int, int]] = {}
    for row in rows:
        s, f, r = totals.get(row.queue, (0, 0, 0))
        totals[row.queue] = (s + row.succeeded, f + row.failed, r + row.retried)
    return totals


async def test_a_flush_adds_each_queues_attempts_by_outcome() -> None:
    store = MemoryStore()
    counter = ThroughputCounter(store)
    for status in [JobStatus.SUCCEEDED] * 3 + [JobStatus.FAILED, JobStatus.PENDING]:
        counter.ended("mail", status)
    counter.ended("sms", JobStatus.SUCCEEDED)
    counter.ended("sms", JobStatus.CANCELLED)  # not counted
    await counter.flush()
    assert _totals(await store.throughput(_since(), None)) == {
        "mail": (3, 1, 1),
        "sms": (1, 0, 0),
    }
    # What was flushed is not added again.
    counter.ended("mail", JobStatus.SUCCEEDED)
    await counter.flush()
    await counter.flush()
    assert _totals(await store.throughput(_since(), "mail")) == {"mail": (4, 1, 1)}


async def test_counts_a_flush_could_not_write_go_with_the_next() -> None:
    store = MemoryStore()
    counter = ThroughputCounter(store)
    counter.ended("mail", JobStatus.SUCCEEDED)
    with SimulatedOutage(store.data, calls=1, seconds=None):
        with pytest.raises(DatabaseUnavailableError):
            await counter.flush()
        counter.ended("mail", JobStatus.SUCCEEDED)
        await counter.flush()
    assert _totals(await store.throughput(_since(), None)) == {"mail": (2, 0, 0)}


async def test_stopping_writes_what_is_left_once() -> None:
    store = MemoryStore()
    counter = ThroughputCounter(store)
    counter.start()
    counter.ended("mail", JobStatus.FAILED)
    await counter.stop(timeout=5)
    assert _totals(await store.throughput(_since(), None)) == {"mail": (0, 1, 0)}
    # A start that failed stops without writing.
    counter.ended("mail", JobStatus.FAILED)
    await counter.stop(timeout=None)
    assert _totals(await store.throughput(_since(), None)) == {"mail": (0, 1, 0)}


async def test_a_failed_last_flush_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    counter = ThroughputCounter(store)
    counter.ended("mail", JobStatus.SUCCEEDED)
    with SimulatedOutage(store.data, calls=None, seconds=None):
        await counter.stop(timeout=5)
        await counter.flush_logged()
    assert "throughput" in caplog.text
    assert await store.throughput(_since(), None) == []


async def test_each_attempt_counts_in_the_minute_it_ended() -> None:
    store = MemoryStore()
    counter = ThroughputCounter(store)
    counter.start()  # keeps the current minute from now on
    try:
        before = minute_start(datetime.now(UTC))
        counter.ended("mail", JobStatus.SUCCEEDED)
        [row] = await _flushed(counter, store)
        assert before <= row.minute <= minute_start(datetime.now(UTC))
        # An attempt counted as of more than an hour ago (a worker frozen that long) is
        # dropped at the flush: the store would not keep it.
        counter._minute -= 61
        counter.ended("mail", JobStatus.SUCCEEDED)
        assert _totals(await _flushed(counter, store)) == {"mail": (1, 0, 0)}
    finally:
        await counter.stop(timeout=None)


async def _flushed(counter: ThroughputCounter, store: MemoryStore) -> list[ThroughputMinute]:
    await counter.flush()
    return await store.throughput(_since(), None)

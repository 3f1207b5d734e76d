"""Coalesced progress writes (`_progress`), on the in-memory store: only the latest value of each
attempt is written, in one statement per interval at most, fenced by the lease; what an attempt
reported last is handed to its outcome. Counted on PostgreSQL under load:
integration/test_progress_and_cancel.py."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from uuid import UUID

import pytest

from starlette_jobs import DatabaseUnavailableError
from starlette_jobs._attempt_records import Claim
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker import _progress as progress_module
from starlette_jobs.worker._progress import PROGRESS_INTERVAL, ProgressWriter
from tests.conftest import eventually
from tests.records import new_jobs


class CountingStore(MemoryStore):
    """Notes every `record_progress` batch; `fail` batches raise as an outage would, and
    `gate`, when set, holds each statement until it opens."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__()
        self.batches: list[list[tuple[int, UUID, str]]] = []
        self.times: list[float] = []
        self.fail = fail
        self.gate: asyncio.Event | None = None

    async def record_progress(self, progress: Sequence[tuple[int, UUID, str]]) -> set[int]:
        self.batches.append(list(progress))
        self.times.append(asyncio.get_running_loop().time())
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise DatabaseUnavailableError("connection reset by peer")
        return await super().record_progress(progress)


async def claimed(store: MemoryStore, count: int) -> list[Claim]:
    await store.insert_jobs(new_jobs(count))
    return await store.claim_batch("default", count, "w", 30)


async def progress_of(store: MemoryStore, job_id: int) -> object:
    record = await store.get_job(job_id)
    assert record is not None
    return record.progress


def test_the_interval_is_half_a_second() -> None:
    assert PROGRESS_INTERVAL == 0.5


async def test_only_the_latest_value_of_each_attempt_is_written_in_one_statement() -> None:
    store = CountingStore()
    claims = await claimed(store, 3)
    writer = ProgressWriter(store, interval=60)
    for step in range(1000):
        for claim in claims:
            writer.report(claim.id, claim.lease_token, str(step))
    writer.start()
    await eventually(lambda: _true(store.batches), "the first statement")
    assert len(store.batches) == 1
    assert sorted(store.batches[0]) == sorted((c.id, c.lease_token, "999") for c in claims)
    for claim in claims:
        assert await progress_of(store, claim.id) == 999
    await writer.stop()


async def test_values_reported_meanwhile_wait_for_the_interval_then_go_in_one_statement() -> None:
    store = CountingStore()
    [first, second] = await claimed(store, 2)
    writer = ProgressWriter(store, interval=0.2)
    writer.start()
    writer.report(first.id, first.lease_token, '"a"')
    await eventually(lambda: _true(store.batches), "the first statement")
    for n in range(100):
        writer.report(first.id, first.lease_token, str(n))
        writer.report(second.id, second.lease_token, str(-n))
        await asyncio.sleep(0)
    await eventually(lambda: _true(len(store.batches) == 2), "the second statement")
    assert store.times[1] - store.times[0] >= 0.2
    assert sorted(store.batches[1]) == sorted(
        [(first.id, first.lease_token, "99"), (second.id, second.lease_token, "-99")]
    )
    await writer.stop()
    assert writer.statements == 2


async def test_values_that_add_up_past_the_bound_are_written_over_several_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each value within its bound, but a thousand jobs reporting large values at once would
    # make a statement slow enough to be taken for an outage, and retried for ever.
    monkeypatch.setattr(progress_module, "MAX_STATEMENT_LENGTH", 2000)
    store = CountingStore()
    claims = await claimed(store, 5)
    writer = ProgressWriter(store, interval=0.01)
    large = '"' + "x" * 898 + '"'
    for claim in claims:
        writer.report(claim.id, claim.lease_token, large)
    writer.start()
    last = claims[-1]
    await eventually(lambda: _progress_is(store, last.id, "x" * 898), "the last value")
    for claim in claims:
        assert await progress_of(store, claim.id) == "x" * 898
    assert [[row[0] for row in batch] for batch in store.batches] == [
        [claims[0].id, claims[1].id],
        [claims[2].id, claims[3].id],
        [claims[4].id],
    ]
    await writer.stop()


async def test_take_hands_over_the_last_value_not_written_and_nothing_is_written_after() -> None:
    store = CountingStore()
    [claim] = await claimed(store, 1)
    writer = ProgressWriter(store, interval=60)
    writer.report(claim.id, claim.lease_token, "0.5")
    assert writer.take(claim.lease_token) == "0.5"
    assert writer.take(claim.lease_token) is None
    writer.start()
    writer.report(claim.id, claim.lease_token, "0.6")
    assert writer.take(claim.lease_token) == "0.6"
    await asyncio.sleep(0.05)  # the writer had its turn: nothing to write
    assert store.batches == []
    await writer.stop()


async def test_take_during_the_statement_hands_over_the_value_in_flight() -> None:
    """The outcome may be written before that statement: it must carry the value itself."""
    store = CountingStore()
    store.gate = asyncio.Event()
    [claim] = await claimed(store, 1)
    writer = ProgressWriter(store, interval=60)
    writer.start()
    writer.report(claim.id, claim.lease_token, '{"done": 10}')
    await eventually(lambda: _true(store.batches), "the statement")
    assert writer.take(claim.lease_token) == '{"done": 10}'
    store.gate.set()
    await writer.stop()


async def test_a_value_whose_lease_moved_on_is_dropped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = CountingStore()
    [kept, released] = await claimed(store, 2)
    assert await store.release_job(released.id)
    writer = ProgressWriter(store, interval=60)
    writer.start()
    with caplog.at_level(logging.INFO, "starlette_jobs"):
        writer.report(kept.id, kept.lease_token, "1")
        writer.report(released.id, released.lease_token, "1")
        await eventually(lambda: _true(store.batches), "the statement")
        await eventually(lambda: _true(writer._in_flight == {}), "the statement to end")
    assert await progress_of(store, kept.id) == 1
    assert await progress_of(store, released.id) is None
    assert caplog.records == []
    await writer.stop()


async def test_after_a_database_error_the_values_are_kept_and_written_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = CountingStore(fail=1)
    [claim] = await claimed(store, 1)
    writer = ProgressWriter(store, interval=0.01)
    writer.start()
    writer.report(claim.id, claim.lease_token, "1")
    await eventually(lambda: _progress_is(store, claim.id, 1), "the value written after the error")
    assert [batch[0][2] for batch in store.batches] == ["1", "1"]
    assert "recording job progress failed, retrying: connection reset by peer" in caplog.messages
    await writer.stop()


async def test_a_value_reported_during_a_failed_statement_replaces_the_one_kept() -> None:
    store = CountingStore(fail=1)
    store.gate = asyncio.Event()
    [claim] = await claimed(store, 1)
    writer = ProgressWriter(store, interval=0.01)
    writer.start()
    writer.report(claim.id, claim.lease_token, "1")
    await eventually(lambda: _true(store.batches), "the statement that fails")
    writer.report(claim.id, claim.lease_token, "2")
    store.gate.set()
    await eventually(lambda: _progress_is(store, claim.id, 2), "the newer value")
    assert [batch[0][2] for batch in store.batches] == ["1", "2"]
    await writer.stop()


async def test_values_reported_from_threads_wake_the_writer() -> None:
    store = CountingStore()
    claims = await claimed(store, 4)
    writer = ProgressWriter(store, interval=0.05)
    writer.start()

    def report_from_a_thread(claim: Claim) -> None:
        for n in range(10_000):
            writer.report(claim.id, claim.lease_token, str(n))

    threads = [threading.Thread(target=report_from_a_thread, args=(c,)) for c in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join)
    for claim in claims:
        await eventually(lambda c=claim: _progress_is(store, c.id, 9999), "the last values")  # type: ignore[misc]
    await writer.stop()


async def test_a_report_after_the_loop_closed_is_ignored() -> None:
    """A sync job's thread can outlive its worker and its event loop."""
    store = CountingStore()
    [claim] = await claimed(store, 1)
    writer = ProgressWriter(store)

    def in_a_loop_of_its_own() -> None:
        async def main() -> None:
            writer.start()
            await writer.stop()

        asyncio.run(main())

    await asyncio.to_thread(in_a_loop_of_its_own)
    await asyncio.to_thread(writer.report, claim.id, claim.lease_token, "1")
    assert writer.take(claim.lease_token) == "1"


async def _true(value: object) -> bool:
    return bool(value)


async def _progress_is(store: MemoryStore, job_id: int, value: object) -> bool:
    return await progress_of(store, job_id) == value

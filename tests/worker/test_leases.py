"""The heartbeat (`_leases.LeaseKeeper`) on the in-memory store: it renews the leases it is
told to hold, and says which attempts lost their job. Lease renewal on PostgreSQL, under row
locks and outages, is in integration/test_lease_renewal.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID

import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._attempt_records import Renewal
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._leases import Held, LeaseKeeper
from tests.records import new_jobs, outcome


async def claimed(store: MemoryStore, count: int, lease: float = 30) -> Held:
    await store.insert_jobs(new_jobs(count))
    return [(c.id, c.lease_token) for c in await store.claim_batch("default", count, "w", lease)]


async def test_the_leases_held_are_renewed_for_another_lease_duration() -> None:
    store = MemoryStore()
    held = await claimed(store, 2, lease=0.01)
    lost: list[tuple[int, UUID]] = []
    keeper = LeaseKeeper(store, 60, lambda: held, lambda *lost_one: lost.append(lost_one))
    await asyncio.sleep(0.03)  # the store's clock: the short leases have run out
    await keeper.renew()
    assert lost == []
    assert await store.rescue_expired(10) == []  # renewed for a minute: nothing to rescue


async def test_an_attempt_whose_job_was_taken_back_is_reported_lost() -> None:
    store = MemoryStore()
    held = await claimed(store, 3)
    lost: list[tuple[int, UUID]] = []
    keeper = LeaseKeeper(store, 30, lambda: held, lambda *lost_one: lost.append(lost_one))
    assert await store.release_job(held[1][0])  # an operator released it
    await keeper.renew()
    assert lost == [held[1]]


async def test_an_outcome_written_during_the_renewal_is_no_loss() -> None:
    store = MemoryStore()
    held = await claimed(store, 2)
    still_held = list(held)

    class Finishing(MemoryStore):
        async def extend_leases(
            self, held: Sequence[tuple[int, UUID]], lease_seconds: float
        ) -> dict[UUID, Renewal]:
            # The first attempt ends, its outcome written, while the renewal is in flight.
            job_id, token = still_held.pop(0)
            claim = type("Leased", (), {"id": job_id, "lease_token": token})()
            assert await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
            return await store.extend_leases(held, lease_seconds)

    lost: list[tuple[int, UUID]] = []
    keeper = LeaseKeeper(Finishing(), 30, lambda: list(still_held), lambda *one: lost.append(one))
    await keeper.renew()
    assert lost == []


async def test_with_nothing_held_the_store_is_not_asked() -> None:
    class Refusing(MemoryStore):
        async def extend_leases(
            self, held: Sequence[tuple[int, UUID]], lease_seconds: float
        ) -> dict[UUID, Renewal]:
            raise AssertionError("asked to renew no lease")

    await LeaseKeeper(Refusing(), 30, list, lambda *_: None).renew()


async def test_a_lease_not_renewed_this_round_is_a_warning_not_a_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    held = await claimed(store, 1)

    class Locked(MemoryStore):
        async def extend_leases(
            self, held: Sequence[tuple[int, UUID]], lease_seconds: float
        ) -> dict[UUID, Renewal]:
            # The row is locked elsewhere.
            return {token: Renewal(renewed=False, cancel_requested=False) for _, token in held}

    lost: list[tuple[int, UUID]] = []
    keeper = LeaseKeeper(Locked(), 30, lambda: held, lambda *one: lost.append(one))
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await keeper.renew()
    assert lost == []
    assert f"job {held[0][0]}: lease not renewed this round" in caplog.text


async def test_once_started_it_finds_a_lost_lease_on_its_own_and_stops_when_told() -> None:
    store = MemoryStore()
    held = await claimed(store, 1)
    lost = asyncio.Event()
    keeper = LeaseKeeper(store, 0.3, lambda: held, lambda *_: lost.set())
    keeper.start()
    try:
        assert await store.release_job(held[0][0])
        async with asyncio.timeout(5):
            await lost.wait()
    finally:
        await keeper.stop()
    record = await store.get_job(held[0][0])
    assert record is not None
    assert record.run_at <= datetime.now(UTC)


async def test_a_failed_renewal_is_retried_rather_than_ending_the_heartbeat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    held = await claimed(store, 1)
    calls = 0
    renewed_after_failures = asyncio.Event()

    class Flaky(MemoryStore):
        async def extend_leases(
            self, held: Sequence[tuple[int, UUID]], lease_seconds: float
        ) -> dict[UUID, Renewal]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise DatabaseUnavailableError("connection reset")
            if calls == 2:
                raise RuntimeError("something else")
            renewed_after_failures.set()
            return await store.extend_leases(held, lease_seconds)

    keeper = LeaseKeeper(Flaky(), 60, lambda: held, lambda *_: None)
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        keeper.start()
        try:
            async with asyncio.timeout(5):  # backoff from 0.1 s, not the 20 s interval
                await renewed_after_failures.wait()
        finally:
            await keeper.stop()
    assert "renewing leases failed, retrying: connection reset" in caplog.text
    assert "renewing leases failed, retrying" in caplog.messages


async def test_stopping_a_keeper_never_started_does_nothing() -> None:
    await LeaseKeeper(MemoryStore(), 30, list, lambda *_: None).stop()


async def test_a_cancel_request_is_delivered_by_the_renewal_too() -> None:
    """The fallback, should the request's notification have been lost."""
    store = MemoryStore()
    held = await claimed(store, 2)
    asked: list[UUID] = []
    keeper = LeaseKeeper(store, 30, lambda: held, lambda *_: None, asked.append)
    await keeper.renew()
    assert asked == []
    assert await store.cancel_job(held[1][0]) is JobStatus.RUNNING
    await keeper.renew()
    assert asked == [held[1][1]]

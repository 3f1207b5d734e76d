"""Bulk actions on PostgreSQL (`postgres/_bulk.py`) where only PostgreSQL can tell: a batch
locks its jobs without waiting, so a job another transaction holds neither fails the action
nor deadlocks it with a worker's outcome; a later batch takes it. What both stores share:
contract/test_bulk_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs._bulk_records import BulkFilter
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.locks import race_with_an_outcome
from tests.records import new_jobs, outcome

LEASE = 600.0


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=4)
    yield opened
    await opened.close()


async def test_a_job_an_operator_holds_waits_for_them_and_the_rest_goes_on(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A bulk cancel of 5 jobs, one of them locked by an operator's session: the other 4 are
    cancelled at once (the action used to wait for the lock with the whole batch held, and
    give up after the statement timeout with nothing done); the action stays unfinished, and
    finishes once the operator lets go."""
    async with Jobs(database_dsn, queues={}) as jobs:
        ids = await jobs._ready_store.insert_jobs(new_jobs(5, queue="bulk"))
        record = await jobs.begin_bulk("cancel", queue="bulk", by="ada")
        held = ids[1]
        operator = await asyncpg.connect(database_dsn)
        try:
            async with operator.transaction():
                await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
                running = asyncio.create_task(jobs.run_bulk(record.id, batch_size=2))

                async def the_rest_cancelled() -> bool:
                    cancelled = await connection.fetchval(
                        "SELECT count(*) FROM starlette_jobs WHERE status = 'cancelled'"
                    )
                    return bool(cancelled == 4)

                await eventually(the_rest_cancelled, "the jobs not held to be cancelled")
                during = await jobs.get_bulk(record.id)
                assert during is not None
                assert (during.done, during.finished) == (4, False)
                assert not running.done()
            end = await asyncio.wait_for(running, 10)
        finally:
            await operator.close()
        assert end is not None
        assert (end.matched, end.done, end.finished) == (5, 5, True)
        assert {await jobs._ready_store.job_status(i) for i in ids} == {JobStatus.CANCELLED}


async def test_a_bulk_retry_skips_a_job_held_elsewhere_and_takes_it_later(
    store: PostgresStore, database_dsn: str
) -> None:
    """The retry's side: a failed job an operator holds is left to the next batch, which does
    not start past it."""
    ids = await store.insert_jobs(new_jobs(3, queue="bulk", max_attempts=1))
    claims = await store.claim_batch("bulk", 3, "w", LEASE)
    await store.record_outcomes([outcome(c, JobStatus.FAILED, error="boom") for c in claims])
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    operator = await asyncpg.connect(database_dsn)
    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids[0])
            first = await asyncio.wait_for(store.bulk_batch(record.id, 500), 5)
        assert first is not None
        assert (first.done, first.finished, first.last_id) == (2, False, ids[0] - 1)
        assert await store.job_status(ids[0]) is JobStatus.FAILED
        second = await store.bulk_batch(record.id, 500)
    finally:
        await operator.close()
    assert second is not None
    assert (second.done, second.finished) == (3, True)
    assert {await store.job_status(i) for i in ids} == {JobStatus.PENDING}


async def test_a_bulk_cancel_and_a_worker_finishing_jobs_it_picked_do_not_deadlock(
    store: PostgresStore, connection: asyncpg.Connection[Any], database_dsn: str
) -> None:
    """`R` runs; `A` and `B` are pending, `A` held by an operator's session. The batch used to
    lock `R` (running jobs first), then wait for `A`; meanwhile a worker claimed `B` (pending
    in the batch's snapshot) and wrote the outcomes of `B` and `R` in id order: `B` locked,
    waiting for `R`. Once `A` was let go, the batch waited for `B`: a deadlock, one side aborted
    after PostgreSQL's deadlock timeout. No order of locks fixes it (the batch sees the
    statuses of its snapshot); now the batch never waits for a lock."""
    a, b = await store.insert_jobs(new_jobs(2, queue="bulk"))
    [r] = await store.insert_jobs(new_jobs(1, queue="bulk", priority=10))
    [r_claim] = await store.claim_batch("bulk", 1, "w", LEASE)
    assert r_claim.id == r
    record = await store.begin_bulk("cancel", BulkFilter("bulk"), "ada")
    first, written = await race_with_an_outcome(
        store, connection, database_dsn, lambda: store.bulk_batch(record.id, 500), a, r_claim
    )
    assert first is not None
    assert not first.finished  # `A` was held: left to the next batch
    assert written == {r}
    second = await store.bulk_batch(record.id, 500)
    assert second is not None
    assert second.finished
    assert await store.job_status(a) is JobStatus.CANCELLED
    assert await store.job_status(b) is JobStatus.CANCELLED

"""The queue controls of the PostgreSQL store (`postgres/_controls.py`) where only PostgreSQL can
be wrong: claimers of a limited queue on separate connections at the same moment. What both
stores share: contract/test_controls_contract.py; several processes: processes/test_limits.py."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus, Queue, QueueLimits, job
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.records import new_jobs
from tests.records import outcome as ended

QUEUE = "limited"
LIMIT = 4
HOLD_THE_ROW = "SELECT FROM starlette_jobs_queues WHERE name = $1 FOR NO KEY UPDATE"
WAITING_FOR_A_LOCK = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def test_claimers_at_the_same_moment_never_run_more_than_the_global_limit(
    database_dsn: str,
) -> None:
    """Each claim counts what the claims before it committed. Six claims wait for the queue's
    row together, each statement having read the jobs before the first of them claimed: each
    of them, counting on what it read, would take the whole room."""
    stores = [await PostgresStore.open(database_dsn, min_size=1, max_size=2) for _ in range(6)]
    try:
        await stores[0].declare_queues({QUEUE: QueueLimits(global_limit=LIMIT)})
        await stores[0].insert_jobs(new_jobs(60, queue=QUEUE))
        for store in stores:  # each opens its claim connection now, not while the row is held
            await store.claim_limited_batch("elsewhere", 1, "warm-up", 30.0)
        async with stores[0].pool.acquire() as connection:
            async with connection.transaction():
                await connection.execute(HOLD_THE_ROW, QUEUE)
                claims = [
                    asyncio.create_task(s.claim_limited_batch(QUEUE, 10, f"w{i}", 30.0))
                    for i, s in enumerate(stores)
                ]

                async def all_waiting() -> bool:
                    # Not on the holder's connection: inside its transaction, pg_stat_activity
                    # is read once, and would never show the claims that came to wait after.
                    waiting: int = await stores[1].pool.fetchval(WAITING_FOR_A_LOCK)
                    return waiting == len(stores)

                await eventually(all_waiting, "the six claims waiting for the row", timeout=30)
            claimed = [claim for claimed in await asyncio.gather(*claims) for claim in claimed]
        assert len(claimed) == LIMIT
        counts = await stores[0].count_by_status(QUEUE)
        assert counts[JobStatus.RUNNING] == LIMIT
        for _ in range(5):  # and racing freely, round after round
            rounds = await asyncio.gather(
                *(s.claim_limited_batch(QUEUE, 10, f"w{i}", 30.0) for i, s in enumerate(stores))
            )
            assert (await stores[0].count_by_status(QUEUE))[JobStatus.RUNNING] == LIMIT
            ended_now = [claim for claimed in rounds for claim in claimed] + claimed[:1]
            await stores[0].record_outcomes([ended(c, JobStatus.SUCCEEDED) for c in ended_now])
            claimed = []
    finally:
        for store in stores:
            await store.close()


async def test_a_pause_holds_a_limited_claim_that_takes_the_row_after_it(
    database_dsn: str,
) -> None:
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=3)
    try:
        await store.declare_queues({QUEUE: QueueLimits(global_limit=LIMIT)})
        await store.insert_jobs(new_jobs(5, queue=QUEUE))
        async with store.pool.acquire() as connection, connection.transaction():
            # An operator's pause, not yet committed, holds the row...
            await connection.execute(
                "UPDATE starlette_jobs_queues SET paused = true WHERE name = $1", QUEUE
            )
            claim = asyncio.create_task(store.claim_limited_batch(QUEUE, 10, "w", 30.0))
            await asyncio.sleep(0.2)
            assert not claim.done()  # ...and the claim waits for it to commit
        assert await claim == []
    finally:
        await store.close()


async def test_a_row_no_queue_could_declare_is_told_once_even_with_a_nan_in_it(
    database_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rate period of NaN written by hand stops the queue and is logged once, not at every
    read of the controls (NaN is not equal to itself)."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        await store.declare_queues({QUEUE: QueueLimits(rate_limit=5, rate_period=1.0)})
        async with store.pool.acquire() as connection:
            await connection.execute(
                "UPDATE starlette_jobs_queues SET rate_period = 'NaN' WHERE name = $1", QUEUE
            )
        with caplog.at_level(logging.ERROR, logger="starlette_jobs"):
            for _ in range(3):
                assert (await store.queue_controls([QUEUE]))[QUEUE].paused
        told = [r for r in caplog.records if "no Queue could declare" in r.getMessage()]
        assert len(told) == 1
    finally:
        await store.close()


@job(name="tests.postgres.controls.limited", queue=QUEUE)
async def limited_job() -> None:
    pass


async def test_a_worker_starting_while_an_operator_holds_its_queues_row_starts_at_once(
    database_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator's session holds a limited queue's row as a worker starts: the start waited
    the statement timeout (8 s), took it for an outage ("PostgreSQL is unreachable at start"),
    and every enqueue was refused until the row was free. It starts at once now, with the
    controls stored, and writes its limits once the row is free."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        await store.declare_queues({QUEUE: QueueLimits(global_limit=1)})
    finally:
        await store.close()
    holder = await asyncpg.connect(database_dsn)
    try:
        held = holder.transaction()
        await held.start()
        await holder.execute(HOLD_THE_ROW, QUEUE)
        with caplog.at_level(logging.WARNING, logger="starlette_jobs"):
            async with (
                asyncio.timeout(5),
                Jobs(database_dsn, queues={QUEUE: Queue(2, global_limit=LIMIT)}) as jobs,
            ):
                assert await limited_job.enqueue() > 0
                await held.rollback()

                async def limit_written() -> bool:
                    stored = await jobs._ready_store.queue_controls([QUEUE])
                    return stored[QUEUE].limits.global_limit == LIMIT

                await eventually(limit_written, "the declared limit to be written")
        assert not [m for m in caplog.messages if "unreachable" in m]
        assert any(m.startswith("could not write the limits of queues") for m in caplog.messages)
    finally:
        await holder.close()

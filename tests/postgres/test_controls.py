"""The queue controls of the PostgreSQL store (`postgres/_controls.py`) where only PostgreSQL can
be wrong: claimers of a limited queue on separate connections at the same moment. What both
stores share: contract/test_controls_contract.py; several processes: processes/test_limits.py."""

from __future__ import annotations

import asyncio

from starlette_jobs import JobStatus, QueueLimits
from starlette_jobs.postgres._store import PostgresStore
from tests.records import new_jobs
from tests.records import outcome as ended

QUEUE = "limited"
LIMIT = 4


async def test_claimers_at_the_same_moment_never_run_more_than_the_global_limit(
    database_dsn: str,
) -> None:
    """Each claim counts what the claims before it committed: without taking turns on the
    queue's row, every claimer would count the same running jobs and take the same room."""
    stores = [await PostgresStore.open(database_dsn, min_size=1, max_size=2) for _ in range(6)]
    try:
        await stores[0].declare_queues({QUEUE: QueueLimits(global_limit=LIMIT)})
        await stores[0].insert_jobs(new_jobs(60, queue=QUEUE))
        for _ in range(8):
            rounds = await asyncio.gather(
                *(s.claim_limited_batch(QUEUE, 10, f"w{i}", 30.0) for i, s in enumerate(stores))
            )
            claims = [claim for claimed in rounds for claim in claimed]
            counts = await stores[0].count_by_status(QUEUE)
            assert counts[JobStatus.RUNNING] == LIMIT
            # End some of them, so that the next round has room to fight over.
            await stores[0].record_outcomes([ended(c, JobStatus.SUCCEEDED) for c in claims[:3]])
        counts = await stores[0].count_by_status(QUEUE)
        assert counts[JobStatus.SUCCEEDED] == 3 * 8
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

"""The worker registry of the PostgreSQL store (`postgres/_registry.py`) where only PostgreSQL
can tell: a worker whose liveness lock the server let go (its process died) has its jobs
rescued at once. What both stores share: contract/test_workers_contract.py; several processes:
processes/test_registry.py."""

from __future__ import annotations

from starlette_jobs import JobStatus
from starlette_jobs.postgres._store import PostgresStore
from tests.contract.test_workers_contract import new_worker
from tests.records import new_jobs
from tests.records import outcome as ended


async def test_the_jobs_of_a_worker_whose_liveness_lock_is_free_are_rescued(
    database_dsn: str,
) -> None:
    # PostgreSQL only: in memory, a dead worker's process takes the store along with it.
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        await _rescued(store)
    finally:
        await store.close()


async def _rescued(store: PostgresStore) -> None:
    await store.insert_jobs(new_jobs(2, queue="live", max_attempts=3))
    alive = await store.hold_liveness("alive")
    dead = await store.hold_liveness("dead")
    for worker_id in ("alive", "dead"):
        await store.register_worker(new_worker(worker_id))
    [kept] = await store.claim_batch("live", 1, "alive", 60.0)
    [lost] = await store.claim_batch("live", 1, "dead", 60.0)
    assert await store.rescue_dead_workers(100) == []  # both hold their lock

    await dead.close()  # as the server ends the connection of a killed process
    # Never by itself: a worker whose lock was lost a moment ago stops its attempts itself.
    assert await store.rescue_dead_workers(100, excluding="dead") == []
    assert await store.rescue_dead_workers(100, excluding="alive") == [
        (lost.id, "live", JobStatus.PENDING)
    ]
    assert await store.job_status(kept.id) is JobStatus.RUNNING
    [record] = [job for job in await store.list_jobs(None, "live", 10) if job.id == lost.id]
    assert record.last_error == "worker dead died: its liveness connection closed"
    assert [worker.id for worker in await store.list_workers()] == ["alive"]
    # The dead worker's late outcome is refused: its lease token no longer holds the job.
    assert await store.record_outcomes([ended(lost, JobStatus.SUCCEEDED)]) == set()
    [again] = await store.claim_batch("live", 1, "alive", 60.0)
    assert again.id == lost.id
    assert await store.rescue_dead_workers(100) == []
    await alive.close()

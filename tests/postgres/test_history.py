"""`_history`: on PostgreSQL neither a claim nor a success is written as an event: a claim is
kept in the event that ends its attempt, or read from the job row while it runs and once the
job has succeeded, as is the success; the history tells them as both stores do
(contract/test_store_contract.py, "each attempt is told as claimed")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs import EventKind, JobStatus
from starlette_jobs.postgres._store import PostgresStore
from tests.records import new_jobs
from tests.records import outcome as ended

LEASE = 30.0


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


async def stored_events(store: PostgresStore, job_id: int) -> list[str]:
    rows = await store.pool.fetch(
        "SELECT kind FROM starlette_jobs_events WHERE job_id = $1 ORDER BY id", job_id
    )
    return [row["kind"] for row in rows]


async def test_only_what_the_job_row_cannot_tell_is_stored(store: PostgresStore) -> None:
    """A failed attempt (its claim in the same row); not a claim, nor a success."""
    [job_id] = await store.insert_jobs(new_jobs(max_attempts=2))
    [first] = await store.claim_batch("default", 1, "w1", LEASE)
    assert await stored_events(store, job_id) == []  # the claim wrote the job row alone
    retry = ended(first, JobStatus.PENDING, delay=0.0, error="boom")
    assert await store.record_outcomes([retry]) == {job_id}
    [second] = await store.claim_batch("default", 1, "w2", LEASE)
    assert await store.record_outcomes([ended(second, JobStatus.SUCCEEDED)]) == {job_id}
    assert await stored_events(store, job_id) == ["attempt_failed"]
    assert [e.kind for e in await store.job_events(job_id)] == [
        EventKind.ENQUEUED,
        EventKind.CLAIMED,
        EventKind.ATTEMPT_FAILED,
        EventKind.CLAIMED,
        EventKind.SUCCEEDED,
    ]


async def test_a_claim_written_as_an_event_before_the_upgrade_is_told_once(
    store: PostgresStore,
) -> None:
    """A job claimed by a worker of the code before migration 0017 (which wrote the claim as
    an event row) and finished by one after it (whose success carries the claim too)."""
    [job_id] = await store.insert_jobs(new_jobs())
    [claim] = await store.claim_batch("default", 1, "old", LEASE)
    await store.pool.execute(
        # As that code's claim wrote it: in the claim's statement, so at its start time.
        "INSERT INTO starlette_jobs_events (job_id, at, kind, status, attempt, worker_id)"
        " SELECT id, started_at, 'claimed', 'running', 1, 'old' FROM starlette_jobs WHERE id = $1",
        job_id,
    )
    claimed_then = [e.kind for e in await store.job_events(job_id)]
    assert claimed_then == [EventKind.ENQUEUED, EventKind.CLAIMED]
    assert await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)]) == {job_id}
    events = await store.job_events(job_id)
    assert [(e.kind, e.attempt, e.worker_id) for e in events] == [
        (EventKind.ENQUEUED, 0, None),
        (EventKind.CLAIMED, 1, "old"),
        (EventKind.SUCCEEDED, 1, "old"),
    ]
    # Had that code written the success too, as an event: told once all the same.
    await store.pool.execute(
        "INSERT INTO starlette_jobs_events (job_id, at, kind, status, attempt, worker_id)"
        " SELECT id, finished_at, 'succeeded', 'succeeded', 1, 'old' FROM starlette_jobs"
        " WHERE id = $1",
        job_id,
    )
    assert await store.job_events(job_id) == events

"""Rows an operator edited by hand into values the library never writes: the job's own statement
may fail on them, but one such row never holds up the statements that handle many jobs at once
(a batch of outcomes, a claim, the rescue, the queues' gauges), as docs/reliability.md says."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from starlette_jobs import JobStatus
from starlette_jobs.postgres._store import PostgresStore
from tests.records import new_jobs
from tests.records import outcome as ended


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


async def test_a_failure_is_written_where_the_errors_were_overwritten_with_a_non_array(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """The failure's outcome was refused ("cannot get array length of a non-array"), with the
    other outcomes of its batch, and the job stayed `running`."""
    [garbled, other] = await store.insert_jobs(new_jobs(count=2))
    await connection.execute("UPDATE starlette_jobs SET errors = '{}' WHERE id = $1", garbled)
    claims = await store.claim_batch("default", 2, "w", 30.0)
    outcomes = [ended(claim, JobStatus.FAILED, error="boom") for claim in claims]
    assert await store.record_outcomes(outcomes) == {garbled, other}
    rows = await connection.fetch("SELECT status, errors FROM starlette_jobs ORDER BY id")
    assert [row["status"] for row in rows] == ["failed", "failed"]
    assert '"boom"' in rows[0]["errors"]


async def test_the_rescue_of_expired_leases_is_not_held_up_by_one_garbled_row(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """A crashed worker's jobs were never given back: the rescue failed on the garbled row,
    every round."""
    [garbled, other] = await store.insert_jobs(new_jobs(count=2))
    await store.claim_batch("default", 2, "ghost", 30.0)
    await connection.execute(
        "UPDATE starlette_jobs SET lease_expires_at = now() - interval '1 minute',"
        " errors = CASE WHEN id = $1 THEN '\"text\"'::jsonb ELSE errors END",
        garbled,
    )
    rescued = await store.rescue_expired(10)
    assert sorted(job_id for job_id, _, _ in rescued) == [garbled, other]
    assert await store.job_status(other) is JobStatus.PENDING


async def test_a_row_at_the_largest_attempt_count_does_not_stop_its_queue(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """Its claim overflowed `attempts + 1` ("integer out of range") and failed the claim of the
    whole batch, every time: nothing of the queue ran any more."""
    [garbled, *others] = await store.insert_jobs(new_jobs(count=3))
    await connection.execute(
        "UPDATE starlette_jobs SET attempts = 2147483647, max_attempts = 2147483647 WHERE id = $1",
        garbled,
    )
    claims = await store.claim_batch("default", 3, "w", 30.0)
    assert sorted(claim.id for claim in claims) == sorted([garbled, *others])


async def test_the_queue_gauges_are_read_with_a_pending_job_due_at_minus_infinity(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """The read failed ("cannot subtract infinite timestamps"), and every queue's gauges froze
    at their last value."""
    [garbled, _] = await store.insert_jobs(new_jobs(count=2))
    await connection.execute(
        "UPDATE starlette_jobs SET run_at = '-infinity' WHERE id = $1", garbled
    )
    [depth] = await store.queue_depths()
    assert (depth.queue, depth.pending, depth.due) == ("default", 2, 2)
    assert math.isinf(depth.oldest_due_age)

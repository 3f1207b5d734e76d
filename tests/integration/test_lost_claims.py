"""A claim the client gave up on never costs its jobs a run.

The server gives a worker's statement up before the client stops waiting for it, so a claim
stuck behind a lock cannot commit later behind the worker's back; and a claim that committed
but whose answer was lost is given back, attempt included, before the queue claims again.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus, Retry, job
from starlette_jobs._attempt_records import Claim
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._connectivity import worker_statement_timeout
from starlette_jobs.worker._shutdown import CLOSE_SECONDS
from tests.conftest import StartJobs, eventually

ran: list[int] = []


@job(retry=Retry.none())
async def once(n: int) -> None:
    ran.append(n)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def claims_waiting_on_a_lock(connection: asyncpg.Connection[Any]) -> bool:
    # Told by the claim connection's name: pg_stat_activity keeps a statement's first 1,024
    # bytes only, and the claim's `SKIP LOCKED` comes after its comments (this matched another
    # statement's comment instead, until that comment grew).
    waiting: bool = await connection.fetchval(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND application_name = 'starlette_jobs claims'"
    )
    return waiting


async def test_a_claim_blocked_by_lock_table_at_shutdown_never_commits_later(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    lease, grace = 3.0, 0.5
    async with Jobs(database_dsn, queues={}):
        job_id = await once.enqueue(n=1)
    operator: asyncpg.Connection[Any] = await asyncpg.connect(database_dsn)
    try:
        transaction = operator.transaction()
        await transaction.start()
        await operator.execute("LOCK TABLE starlette_jobs IN ACCESS EXCLUSIVE MODE")
        worker = Jobs(database_dsn, lease_duration=lease, shutdown_grace=grace, poll_interval=0.2)
        await worker.__aenter__()
        await eventually(
            lambda: claims_waiting_on_a_lock(connection), "the claim to wait on the lock"
        )
        began = time.monotonic()
        await worker.__aexit__(None, None, None)
        took = time.monotonic() - began
        await transaction.commit()
    finally:
        await operator.close()

    # A claim that still ran on the server would take the job now.
    async def no_claim_waits() -> bool:
        return not await claims_waiting_on_a_lock(connection)

    await eventually(no_claim_waits, "no claim to wait on a lock")
    row = await connection.fetchrow(
        "SELECT status, attempts, lease_token FROM starlette_jobs WHERE id = $1", job_id
    )
    assert row is not None
    assert tuple(row) == ("pending", 0, None)
    assert ran == []
    assert took < grace + 0.5 + worker_statement_timeout(lease) + CLOSE_SECONDS


async def test_a_claim_whose_answer_was_lost_is_given_back_without_losing_an_attempt(
    start_jobs: StartJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_claim = PostgresStore.claim_batch
    lost: list[list[Claim]] = []

    async def answer_lost_once(self: PostgresStore, *args: Any) -> list[Claim]:
        claims = await real_claim(self, *args)
        if claims and not lost:
            lost.append(claims)
            # Committed on the server; the connection dropped before the answer came back.
            raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")
        return claims

    monkeypatch.setattr(PostgresStore, "claim_batch", answer_lost_once)
    async with start_jobs(queues={}) as producer:
        ids = await once.enqueue_many([{"n": n} for n in range(3)])
        async with start_jobs(lease_duration=2) as worker:
            await worker.drain(timeout=10)
        records = [await producer.get(job_id) for job_id in ids]
    assert [len(batch) for batch in lost] == [3]
    assert [(r.status, r.attempts, r.errors) for r in records if r] == [
        (JobStatus.SUCCEEDED, 1, [])
    ] * 3
    assert sorted(ran) == [0, 1, 2]

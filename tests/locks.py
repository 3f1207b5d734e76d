"""An operator's session holding a row while a cancel and a worker's outcome race for the
others: the deadlocks of tests/postgres/test_bulk.py and test_workflows.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg

from starlette_jobs import JobStatus
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.records import Leased, outcome

LEASE = 600.0


async def waiting_for_locks(connection: asyncpg.Connection[Any]) -> int:
    """How many sessions on the test's database wait for a lock."""
    waiting: int = await connection.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    )
    return waiting


async def race_with_an_outcome(
    store: PostgresStore,
    connection: asyncpg.Connection[Any],
    dsn: str,
    cancel: Callable[[], Coroutine[Any, Any, Any]],
    held: int,
    running: Leased,
) -> tuple[Any, set[int]]:
    """Runs `cancel()` while an operator's session holds `held`; once the cancel waits for
    that lock, or has asked `running` to stop, a worker claims what it can of `running`'s
    queue and writes the outcomes of those and of `running`; then the operator lets go.
    Returns what the cancel and the outcome statement returned."""
    operator = await asyncpg.connect(dsn)
    queue = await connection.fetchval("SELECT queue FROM starlette_jobs WHERE id = $1", held)

    async def cancel_waits_or_went_past() -> bool:
        asked = await connection.fetchval(
            "SELECT cancel_requested_at IS NOT NULL FROM starlette_jobs WHERE id = $1", running.id
        )
        return bool(asked or await waiting_for_locks(connection) >= 1)

    async def outcome_waits_or_is_written() -> bool:
        return writing.done() or await waiting_for_locks(connection) >= 2

    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
            cancelling = asyncio.create_task(cancel())
            await eventually(cancel_waits_or_went_past, "the cancel to wait for the held job")
            claims = await store.claim_batch(queue, 10, "w", LEASE)
            finished = [outcome(c, JobStatus.SUCCEEDED) for c in [*claims, running]]
            writing = asyncio.create_task(store.record_outcomes(finished))
            await eventually(outcome_waits_or_is_written, "the outcome to wait or be written")
        return await asyncio.wait_for(asyncio.gather(cancelling, writing), 15)
    finally:
        await operator.close()

"""Every backend of the app ended by an operator (`pg_terminate_backend`), then a read at once.

PostgreSQL tells an idle connection why it ends (an ErrorResponse, "terminating connection due to
administrator command") and then closes it. asyncpg reads the two apart: the error first, which
an idle protocol cannot place, so it is left in its "consume until sync" state (2) with nothing
waiting; the close one or more turns of the event loop later. A pool connection handed out in
between fails its next statement with `InternalClientError: cannot switch to state 12; another
operation (2) is in progress`, which is no connection error to the store: `jobs.get` raises it as
it is, instead of running the read again on a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus
from tests.faultproxy import FaultProxy
from tests.integration.test_silent_network import step

pytestmark = pytest.mark.slow

TERMINATE_OTHERS = """
    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
OTHERS = """
    SELECT count(*) FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


async def until_gone(connection: asyncpg.Connection[Any]) -> None:
    """Until the server has ended every other backend: by then it has sent each its last words
    (the proxy holds the close back), and a moment later the app has read them."""
    async with asyncio.timeout(5):
        while await connection.fetchval(OTHERS):  # noqa: ASYNC110 - no event to wait on
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # the app's event loop reads what arrived; nothing to wait on


async def test_a_read_right_after_every_backend_was_terminated_returns_the_job(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    outcomes: list[str] = []
    async with Jobs(database_dsn, queues={}) as jobs:
        job_id = await jobs.enqueue(step, n=1)
        for _ in range(10):
            # Several idle pool connections, all with the statement prepared.
            await asyncio.gather(*(jobs.get(job_id) for _ in range(4)))
            await connection.fetchval(TERMINATE_OTHERS)
            try:
                record = await jobs.get(job_id)
                outcomes.append("ok" if record is not None else "None")
            except Exception as error:
                outcomes.append(f"{type(error).__name__}: {error}")
    print("\n".join(outcomes))
    assert outcomes == ["ok"] * 10


async def test_a_read_on_a_connection_told_it_ends_but_not_yet_closed_returns_the_job(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    # The window between the server's last word and its close, held open for a second: what
    # happens by chance above, every time here.
    fault_proxy.set_close_delay(1.0)
    async with Jobs(fault_proxy.dsn, queues={}) as jobs:
        job_id = await jobs.enqueue(step, n=1)
        await asyncio.gather(*(jobs.get(job_id) for _ in range(4)))
        assert await connection.fetchval(TERMINATE_OTHERS) > 0
        await until_gone(connection)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.PENDING


async def test_an_enqueue_on_a_connection_told_it_ends_raises_nothing_foreign(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    """The producer's own connection (not the pool's) in the same window."""
    fault_proxy.set_close_delay(1.0)
    async with Jobs(fault_proxy.dsn, queues={}) as jobs:
        await jobs.enqueue(step, n=1)
        assert await connection.fetchval(TERMINATE_OTHERS) > 0
        await until_gone(connection)
        # Allowed to fail, in the library's words (nothing was written); nothing else.
        with contextlib.suppress(DatabaseUnavailableError):
            await jobs.enqueue(step, n=2)
        await jobs.enqueue(step, n=3)  # and the next one works
    rows = await connection.fetch("SELECT payload->>'n' AS n FROM starlette_jobs ORDER BY id")
    assert [row["n"] for row in rows][-1] == "3"


async def test_plain_asyncpg_pool_fails_the_same_way(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    """asyncpg's own behaviour, without starlette-jobs: what the store has to cope with."""
    fault_proxy.set_close_delay(1.0)
    pool = await asyncpg.create_pool(fault_proxy.dsn, min_size=1, max_size=1)
    try:
        assert await pool.fetchval("SELECT 1") == 1
        await connection.fetchval(TERMINATE_OTHERS)
        await until_gone(connection)
        with pytest.raises(asyncpg.InternalClientError, match=r"another operation \(2\)"):
            await pool.fetchval("SELECT 1")
    finally:
        pool.terminate()

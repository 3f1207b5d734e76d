"""A job's success in its own transaction on PostgreSQL (`postgres/_completions.py`): what only a
real transaction shows. The completion rolls back with it (the job raised after completing, or
completed twice in it), a SQLAlchemy `AsyncSession` works as an asyncpg connection does, and a
transaction whose completion the fence refused writes nothing of its own either."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from starlette_jobs import (
    EventKind,
    JobDefinitionError,
    Jobs,
    JobStatus,
    LeaseLostError,
    Retry,
    RunningJob,
    current_job,
    job,
)
from starlette_jobs.postgres._store import PostgresStore
from tests.records import new_jobs

database: dict[str, str] = {}
engines: list[AsyncEngine] = []
broken: set[int] = set()


@pytest.fixture(autouse=True)
async def _app_tables(database_dsn: str) -> AsyncIterator[None]:
    database["dsn"] = database_dsn
    broken.clear()
    connection = await asyncpg.connect(database_dsn)
    await connection.execute("CREATE TABLE charges (order_id int NOT NULL)")
    await connection.close()
    url = database_dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    engines[:] = [create_async_engine(url)]
    yield
    await engines[0].dispose()


def me() -> RunningJob:
    running = current_job()
    assert running is not None
    return running


@job(name="owntx.pg.charge", retry=Retry.fixed(max_attempts=3, delay=0))
async def charge(order_id: int) -> int:
    connection = await asyncpg.connect(database["dsn"])
    try:
        async with connection.transaction():
            await connection.execute("INSERT INTO charges (order_id) VALUES ($1)", order_id)
            await me().complete_in(connection, charge, order_id * 100)
            if order_id in broken:
                broken.discard(order_id)  # the next attempt gets through
                raise RuntimeError("failed after completing, before the commit")
    finally:
        await connection.close()
    return order_id * 100


@job(name="owntx.pg.twice", retry=Retry.none())
async def twice(order_id: int) -> int:
    connection = await asyncpg.connect(database["dsn"])
    try:
        async with connection.transaction():
            await connection.execute("INSERT INTO charges (order_id) VALUES ($1)", order_id)
            await me().complete_in(connection, twice, 1)
            await me().complete_in(connection, twice, 2)
    finally:
        await connection.close()
    return 0


@job(name="owntx.pg.forgiving", retry=Retry.none())
async def charge_or_give_up(order_id: int) -> str:
    """Catches the error that rolled its transaction back, completion and all, and returns."""
    connection = await asyncpg.connect(database["dsn"])
    try:
        async with connection.transaction():
            await connection.execute("INSERT INTO charges (order_id) VALUES ($1)", order_id)
            await me().complete_in(connection, charge_or_give_up, "charged")
            raise RuntimeError("the card was declined after all")
    except RuntimeError:
        return "gave up"
    finally:
        await connection.close()


@job(name="owntx.pg.session")
async def charge_in_session(order_id: int) -> str:
    async with AsyncSession(engines[0]) as session, session.begin():
        await session.execute(text("INSERT INTO charges (order_id) VALUES (:id)"), {"id": order_id})
        await me().complete_in(session, charge_in_session, f"charged {order_id}")
    return "returned"


async def charges(connection: asyncpg.Connection[Any]) -> list[int]:
    return [row[0] for row in await connection.fetch("SELECT order_id FROM charges")]


async def test_a_job_that_raises_before_its_transaction_commits_fails_that_attempt(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    broken.add(4)
    async with Jobs(database_dsn, poll_interval=0.05) as jobs:
        job_id = await charge.enqueue(order_id=4)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
        kinds = [event.kind for event in await jobs.events(job_id)]
    assert record is not None
    assert (record.status, record.attempts, record.result) == (JobStatus.SUCCEEDED, 2, 400)
    assert "failed after completing, before the commit" in (record.errors[0]["error"] or "")
    assert kinds.count(EventKind.ATTEMPT_FAILED) == 1
    assert kinds.count(EventKind.SUCCEEDED) == 1
    assert await charges(connection) == [4]  # the first attempt's row rolled back


async def test_a_job_that_returns_after_its_completion_rolled_back_ends_with_what_it_returned(
    database_dsn: str, connection: asyncpg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    # The commit did not happen, so the attempt counts as any other: it returned, it succeeded,
    # at once; not left running until its lease (60 s) ran out and run again.
    async with Jobs(database_dsn, poll_interval=0.05, lease_duration=60) as jobs:
        job_id = await charge_or_give_up.enqueue(order_id=5)
        settled = await charge.enqueue(order_id=6)  # a completion that commits, beside it
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
        other = await jobs.get(settled)
    assert record is not None
    assert (record.status, record.attempts, record.result) == (JobStatus.SUCCEEDED, 1, "gave up")
    assert other is not None
    assert (other.status, other.result) == (JobStatus.SUCCEEDED, 600)  # what committed
    assert await charges(connection) == [6]
    assert "not recorded" not in caplog.text  # the fence refusing the second write is expected


async def test_completing_twice_in_one_transaction_fails_it_whole(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    async with Jobs(database_dsn, poll_interval=0.05) as jobs:
        job_id = await twice.enqueue(order_id=9)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.FAILED, None)
    assert "LeaseLostError" in (record.last_error or "")
    assert await charges(connection) == []


async def test_a_sqlalchemy_session_completes_with_its_writes(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    async with Jobs(database_dsn, poll_interval=0.05) as jobs:
        job_id = await charge_in_session.enqueue(order_id=2)
        assert await jobs.result(charge_in_session, job_id, timeout=10) == "charged 2"
    assert await charges(connection) == [2]


async def test_a_refused_completion_fails_the_callers_transaction(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """On the store: the fence refuses a stale token in the caller's session, and the session's
    own insert goes with it."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        [job_id] = await store.insert_jobs(new_jobs())
        (claim,) = await store.claim_batch("default", 1, "w", 30)
        assert await store.release_job(job_id)
        with pytest.raises(LeaseLostError):
            await insert_and_complete(store, job_id, claim.lease_token)
        assert await charges(connection) == []
        record = await store.get_job(job_id)
        assert record is not None
        assert record.status is JobStatus.PENDING
    finally:
        await store.close()


async def insert_and_complete(store: PostgresStore, job_id: int, token: UUID) -> None:
    async with AsyncSession(engines[0]) as session, session.begin():
        await session.execute(text("INSERT INTO charges (order_id) VALUES (1)"))
        await store.complete_job(job_id, token, "1", session)


async def test_a_connection_in_another_schema_is_refused(database_dsn: str) -> None:
    """With `Jobs(schema=...)`, the caller's connection must place its tables in that schema,
    as for `configure(connection=...)`: its completion would otherwise go to other tables."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2, schema="elsewhere")
    caller = await asyncpg.connect(database_dsn)
    try:
        await store.migrate()
        with pytest.raises(JobDefinitionError, match="search_path"):
            async with caller.transaction():
                await store.complete_job(1, uuid4(), None, caller)
    finally:
        await caller.close()
        await store.close()

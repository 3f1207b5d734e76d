"""Enqueueing in the caller's transaction (`_transactions.py`): a job enqueued with
`connection=` an asyncpg connection, or a real SQLAlchemy `AsyncSession` or `AsyncConnection` on
asyncpg, commits or rolls back with it; anything else is refused before a row is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from starlette_jobs import JobDefinitionError, Jobs, JobStatus, MemoryStoreUnsupportedError, job
from tests.conftest import StartJobs

ran: list[str] = []


@job
async def welcome(email: str) -> None:
    ran.append(email)


@pytest.fixture
async def engine(database_dsn: str) -> AsyncIterator[AsyncEngine]:
    """A SQLAlchemy engine on the test database, through asyncpg, with a table of the app's."""
    url = database_dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    created = create_async_engine(url)
    async with created.begin() as connection:
        await connection.execute(text("CREATE TABLE users (email text PRIMARY KEY)"))
    yield created
    await created.dispose()


async def rows(connection: asyncpg.Connection[Any]) -> list[tuple[str, Any]]:
    """The users and the jobs' arguments, as another connection sees them."""
    users = await connection.fetch("SELECT email FROM users ORDER BY email")
    jobs = await connection.fetch("SELECT payload::text FROM starlette_jobs ORDER BY id")
    return [("user", row[0]) for row in users] + [("job", row[0]) for row in jobs]


async def sign_up(session: AsyncSession, email: str) -> int:
    """What a handler does: its own write, then the job, in the session's transaction."""
    await session.execute(text("INSERT INTO users (email) VALUES (:email)"), {"email": email})
    return await welcome.configure(connection=session).enqueue(email=email)


async def sign_up_and_fail(engine: AsyncEngine, email: str) -> None:
    async with AsyncSession(engine) as session, session.begin():
        await sign_up(session, email)
        raise RuntimeError("boom")


async def test_a_job_enqueued_in_a_session_commits_with_it_and_runs(
    start_jobs: StartJobs, engine: AsyncEngine, connection: asyncpg.Connection[Any]
) -> None:
    ran.clear()
    async with start_jobs() as jobs:
        async with AsyncSession(engine) as session, session.begin():
            job_id = await sign_up(session, "ada@example.com")
            # Not visible outside the transaction before it commits.
            assert await rows(connection) == []
        assert await rows(connection) == [
            ("user", "ada@example.com"),
            ("job", '{"email": "ada@example.com"}'),
        ]
        await jobs.drain()
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED
    assert ran == ["ada@example.com"]


async def test_a_job_enqueued_in_a_session_that_rolls_back_is_never_written(
    start_jobs: StartJobs, engine: AsyncEngine, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}) as jobs:
        async with AsyncSession(engine) as session:
            job_id = await sign_up(session, "ada@example.com")
            await session.rollback()
        assert await rows(connection) == []
        assert await jobs.get(job_id) is None
        with pytest.raises(RuntimeError, match="boom"):
            await sign_up_and_fail(engine, "bob@example.com")
        assert await rows(connection) == []


async def test_a_job_enqueued_before_the_sessions_first_statement_still_rolls_back(
    start_jobs: StartJobs, engine: AsyncEngine, connection: asyncpg.Connection[Any]
) -> None:
    # SQLAlchemy's asyncpg adapter sends BEGIN lazily, before its own first statement: an
    # insert that came first would have committed on its own.
    async with start_jobs(queues={}):
        async with AsyncSession(engine) as session:
            await welcome.configure(connection=session).enqueue(email="ada@example.com")
            await session.execute(text("INSERT INTO users VALUES ('ada@example.com')"))
            await session.rollback()
        assert await rows(connection) == []
        async with AsyncSession(engine) as session:
            await welcome.configure(connection=session).enqueue(email="bob@example.com")
            await session.commit()
        assert await rows(connection) == [("job", '{"email": "bob@example.com"}')]


async def test_a_sqlalchemy_connection_joins_its_transaction_too(
    start_jobs: StartJobs, engine: AsyncEngine, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}):
        async with engine.connect() as sqlalchemy_connection:
            await welcome.configure(connection=sqlalchemy_connection).enqueue(email="gone")
            await sqlalchemy_connection.rollback()
            await welcome.configure(connection=sqlalchemy_connection).enqueue(email="kept")
            await sqlalchemy_connection.commit()
        assert await rows(connection) == [("job", '{"email": "kept"}')]


async def enqueue_and_fail(own: asyncpg.Connection[Any]) -> None:
    async with own.transaction():
        await welcome.configure(connection=own).enqueue(email="gone")
        raise RuntimeError("boom")


async def test_an_asyncpg_connection_commits_or_rolls_back_the_job(
    start_jobs: StartJobs, database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    await connection.execute("CREATE TABLE users (email text PRIMARY KEY)")
    own = await asyncpg.connect(database_dsn)
    try:
        async with start_jobs(queues={}):
            with pytest.raises(RuntimeError, match="boom"):
                await enqueue_and_fail(own)
            async with own.transaction():
                await welcome.configure(connection=own).enqueue(email="kept")
    finally:
        await own.close()
    assert await rows(connection) == [("job", '{"email": "kept"}')]


async def test_a_connection_used_by_two_enqueues_at_once_is_the_callers_mistake_not_an_outage(
    start_jobs: StartJobs, database_dsn: str
) -> None:
    """The driver refuses a second statement on a connection while one runs: a producer that
    enqueues twice at once on its own connection hears so, not that the database is unavailable
    (which it would take as "try again later", forever: a route would answer 503)."""
    own = await asyncpg.connect(database_dsn)
    try:
        async with start_jobs(queues={}), own.transaction():
            joined = welcome.configure(connection=own)
            outcomes = await asyncio.gather(
                joined.enqueue(email="a"), joined.enqueue(email="b"), return_exceptions=True
            )
    finally:
        await own.close()
    refused = [error for error in outcomes if isinstance(error, BaseException)]
    assert refused, outcomes
    assert all(type(error) is asyncpg.InterfaceError for error in refused), refused
    assert "another operation is in progress" in str(refused[0])


async def test_errors_of_the_callers_own_transaction_are_theirs_to_see_as_they_are(
    start_jobs: StartJobs, database_dsn: str
) -> None:
    """A read-only transaction of the caller's, or a search_path of theirs that does not reach
    the tables: neither is the database unavailable (a 503 and a retry that cannot succeed)
    nor a schema to migrate (the tables are there): the driver's error, as their own
    statements would get it."""
    own = await asyncpg.connect(database_dsn)
    try:
        async with start_jobs(queues={}):
            async with own.transaction(readonly=True):
                with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                    await welcome.configure(connection=own).enqueue(email="read only")
            await own.execute("CREATE SCHEMA IF NOT EXISTS elsewhere")
            async with own.transaction():
                await own.execute("SET LOCAL search_path = elsewhere")
                with pytest.raises(asyncpg.UndefinedTableError):
                    await welcome.configure(connection=own).enqueue(email="elsewhere")
    finally:
        await own.execute("DROP SCHEMA IF EXISTS elsewhere")
        await own.close()


class _OtherDriverConnection:
    """What a SQLAlchemy AsyncConnection on psycopg shows of itself (psycopg is not
    installed here): only its dialect's driver is looked at before it is refused."""

    sync_connection = None

    class dialect:  # an attribute, as SQLAlchemy's is
        driver = "psycopg"

    async def get_raw_connection(self) -> Any:
        raise AssertionError("a connection of another driver is never used")


async def test_anything_else_is_refused_before_a_row_is_written(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}):
        with pytest.raises(JobDefinitionError, match="uses the psycopg driver"):
            await welcome.configure(connection=_OtherDriverConnection()).enqueue(email="a")
        with pytest.raises(JobDefinitionError, match="got str"):
            await welcome.configure(connection="postgresql://").enqueue(email="a")  # type: ignore[arg-type]
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 0


async def test_the_memory_store_refuses_a_session_clearly(
    jobs_memory: str, engine: AsyncEngine
) -> None:
    async with Jobs(jobs_memory, queues={}), AsyncSession(engine) as session:
        with pytest.raises(MemoryStoreUnsupportedError, match="connection="):
            await welcome.configure(connection=session).enqueue(email="a")


async def test_a_delay_in_an_old_transaction_counts_from_the_enqueue_not_the_transactions_start(
    start_jobs: StartJobs, database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """PostgreSQL's `now()` is when the transaction began: a delay counted from it would run the
    job early by the transaction's age, and `created_at` would be before the enqueue call."""
    caller: asyncpg.Connection[Any] = await asyncpg.connect(database_dsn)
    try:
        async with start_jobs(queues={}), caller.transaction():
            await caller.execute("SELECT pg_sleep(1.5)")  # the transaction grows old
            before = datetime.now(UTC)
            ids = [
                await welcome.configure(connection=caller).enqueue(email="now@example.com"),
                await welcome.configure(connection=caller, delay=5).enqueue(email="d@x.org"),
                await welcome.configure(connection=caller, delay=5, unique_key="k").enqueue(
                    email="unique@example.com"
                ),
                *await welcome.configure(connection=caller, delay=5).enqueue_many(
                    [{"email": "many1@example.com"}, {"email": "many2@example.com"}]
                ),
            ]
            after = datetime.now(UTC)
    finally:
        await caller.close()
    rows = await connection.fetch(
        "SELECT created_at, run_at FROM starlette_jobs WHERE id = ANY($1::bigint[]) ORDER BY id",
        ids,
    )
    # The server's clock and this process's are the same machine's; a little slack for rounding.
    slack = timedelta(seconds=0.05)
    for created_at, _ in rows:
        assert before - slack <= created_at <= after + slack
    assert rows[0]["run_at"] == rows[0]["created_at"]
    for created_at, run_at in rows[1:]:
        assert run_at - created_at == timedelta(seconds=5)

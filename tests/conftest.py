"""Fixtures: a real PostgreSQL (DATABASE_URL, else the embedded one), one database per test.

The databases come from the plugin the library ships for its users (`starlette_jobs.testing`):
a template database is migrated once per session, and each test gets a clone of it, so tests
are isolated and cheap. Async tests run on asyncio through anyio's pytest plugin
(anyio_mode = auto).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from starlette_jobs import Jobs
from starlette_jobs._schedules import _registry as schedules_registry
from starlette_jobs.postgres._store import PostgresStore
from tests.faultproxy import fault_proxy as fault_proxy  # a fixture, for every test

pytest_plugins = ["starlette_jobs.testing"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _forget_schedules_declared_by_the_test() -> Iterator[None]:
    """A `@periodic` declared by a test (or a docs page) would be ticked by every later test's
    worker: each test leaves the registry of schedules as it found it."""
    before = dict(schedules_registry)
    yield
    schedules_registry.clear()
    schedules_registry.update(before)


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A fresh directory for an embedded PostgreSQL's data. Not under pytest's `tmp_path`:
    pytest makes its root private to root again whenever a session starts, and the embedded
    server runs as another user, who must reach the directory."""
    with tempfile.TemporaryDirectory(prefix="starlette-jobs-test-") as scratch:
        yield Path(scratch)


def with_database(dsn: str, database: str) -> str:
    """The same server URL, pointing at another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


@pytest.fixture(scope="session")
def server_dsn(jobs_server: str) -> str:
    """An admin URL of the server the tests use (any database on it): the plugin's."""
    return jobs_server


@pytest.fixture
def database_dsn(jobs_database: str) -> str:
    """A fresh, migrated database of its own for this test: the plugin's `jobs_database`."""
    return jobs_database


@pytest.fixture(params=["postgres", "memory"])
def jobs_dsn(request: pytest.FixtureRequest) -> str:
    """A fresh migrated database, or a fresh in-memory store: a test taking it runs on both."""
    fixture = "database_dsn" if request.param == "postgres" else "jobs_memory"
    dsn: str = request.getfixturevalue(fixture)
    return dsn


@pytest.fixture
async def connection(database_dsn: str) -> AsyncIterator[asyncpg.Connection[Any]]:
    """A plain connection to the test database, to look at rows the way an operator would."""
    conn: asyncpg.Connection[Any] = await asyncpg.connect(database_dsn)
    yield conn
    await conn.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10) -> None:
    """Waits until `check()` is true, looking every 50 ms: for a state in the database that no
    event of ours announces (a backend waiting on a lock, say). Fails after `timeout` s."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if await check():
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"still waiting for {what} after {timeout} s") from None


def on_postgres(jobs: Jobs) -> PostgresStore:
    """The PostgreSQL store of a started `Jobs`, for a test that reaches below the protocol."""
    store = jobs._ready_store
    assert isinstance(store, PostgresStore)
    return store


StartJobs = Callable[..., AbstractAsyncContextManager[Jobs]]


@pytest.fixture
def start_jobs(database_dsn: str) -> StartJobs:
    """`async with start_jobs(queues=..., ...) as jobs:` a Jobs on the test database.

    Short poll and lease settings keep tests quick; each test can override them.
    """

    @asynccontextmanager
    async def start(**settings: Any) -> AsyncIterator[Jobs]:
        settings.setdefault("poll_interval", 0.2)
        async with Jobs(database_dsn, **settings) as jobs:
            yield jobs

    return start
